"""A run as one self-contained HTML page (``rca ask --html``, ``rca render``).

The page holds everything inline (CSS, a few lines of JS, the pipeline graph as an SVG laid
out here) and its Content-Security-Policy forbids any request, so it opens offline and a
trace cannot make it fetch anything. Every string from the trace (model output included) is
escaped. :func:`graph_data` turns a compiled graph into the ``{"nodes", "edges"}`` data that
``rca ask --json`` saves next to the trace, so a saved run renders the same page.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import InputError, RCAError
from .common import fail_cleanly
from .html_graph import GraphData, esc, graph_data, graph_svg, num
from .render import print_trace


def _docs(trace: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    docs = list(trace.get("evidence") or [])
    for step in trace.get("steps") or []:
        docs += (step.get("retrieval") or {}).get("evidence") or []
    docs += (trace.get("mer") or {}).get("evidence") or []
    return [d for d in docs if isinstance(d, Mapping)]


def _titles(trace: Mapping[str, Any]) -> dict[str, str]:
    """Document id → title, from every evidence list of the trace."""
    titles: dict[str, str] = {}
    for doc in _docs(trace):
        titles.setdefault(str(doc.get("id")), str(doc.get("title") or doc.get("id")))
    return titles


def _doc(doc_id: Any, titles: Mapping[str, str]) -> str:
    """A document by its title (its id when the trace has no title for it)."""
    name = titles.get(str(doc_id)) or str(doc_id)[:8]
    return f'<span class="doc" data-doc="{esc(doc_id)}" title="{esc(doc_id)}">{esc(name)}</span>'


def _provenance(doc: Mapping[str, Any], titles: Mapping[str, str]) -> str:
    """Where a passage came from: the first stage (its rank), a graph neighbour of which
    document, or backfill; with the NAR batch that scored it."""
    source = str(doc.get("source") or "?")
    batch = f", batch {esc(doc['batch'])}" if doc.get("batch") is not None else ""
    if source == "neighbour":
        via = _doc(doc["via"], titles) if doc.get("via") else "?"
        return f"graph neighbour of {via}{batch}"
    if source == "first_stage":
        rank = doc.get("first_stage_rank") or doc.get("rank")
        return f"first stage{f', rank {esc(rank)}' if rank is not None else ''}{batch}"
    return f"{esc(source.replace('_', ' '))}{batch}"


def _value(value: Any) -> str:
    """Any trace value as HTML: lists as lists, objects as JSON, numbers rounded."""
    if isinstance(value, list | tuple):
        items = "".join(f"<li>{_value(v)}</li>" for v in value)
        return f"<ul>{items}</ul>" if items else "—"
    if isinstance(value, Mapping):
        return f"<code>{esc(json.dumps(value, ensure_ascii=False, default=str))}</code>"
    return num(value)


def _table(head: Sequence[str], rows: Sequence[str], cls: str = "") -> str:
    cells = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join(rows)
    return f'<table class="{cls}"><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>'


def _evidence(docs: Sequence[Mapping[str, Any]], titles: Mapping[str, str]) -> str:
    if not docs:
        return '<p class="muted">No evidence.</p>'
    by_sub = any("sub_questions" in d for d in docs)
    rows = []
    for number, doc in enumerate(docs, start=1):
        subs = ", ".join(str(int(i) + 1) for i in doc.get("sub_questions") or [])
        rows.append(
            f'<tr class="evidence" data-doc="{esc(doc.get("id"))}"><td>{number}</td>'
            f'<td class="title">{esc(doc.get("title") or doc.get("id"))}</td>'
            f"<td><code>{esc(doc.get('doc_id') or doc.get('id'))}</code></td>"
            f"<td>{_provenance(doc, titles)}</td>"
            + (f"<td>{esc(subs or '—')}</td>" if by_sub else "")
            + f'<td class="n">{num(doc.get("score"))}</td></tr>'
        )
    head = ["#", "Title", "Document", "Provenance", *(["Sub-questions"] if by_sub else []), "Score"]
    return _table(head, rows, "evidence-table")


def _clusters(batch: Mapping[str, Any]) -> str:
    """ASU's clusters of a batch: each cluster's answer with how many samples it holds."""
    answers = [str(a) for a in batch.get("answers") or []]
    clusters = batch.get("clusters") or []
    parts = []
    for i, answer in enumerate(batch.get("cluster_answers") or []):
        members = clusters[i] if i < len(clusters) else []
        sampled = " | ".join(answers[j] for j in members if isinstance(j, int) and j < len(answers))
        parts.append(
            f'<span class="cluster" title="{esc(sampled)}">{esc(answer)}'
            f"{f' ×{len(members)}' if members else ''}</span>"
        )
    return " ".join(parts) or "—"


def _batches(batches: Sequence[Mapping[str, Any]], titles: Mapping[str, str]) -> str:
    if not batches:
        return ""
    pools = {"R": "R (first stage)", "N": "N (neighbours)"}
    rows = []
    for batch in batches:
        docs = ", ".join(_doc(i, titles) for i in batch.get("ids") or [])
        mark = ' class="batch uncertain"' if batch.get("uncertain") else ' class="batch"'
        rows.append(
            f"<tr{mark}><td>batch {esc(batch.get('index'))}</td>"
            f"<td>{esc(pools.get(str(batch.get('pool')), batch.get('pool')))}</td><td>{docs}</td>"
            f'<td class="n">{num(batch.get("s"))}</td>'
            f'<td class="n">{num(batch.get("semantic_entropy"))}</td>'
            f"<td>{_clusters(batch)}</td><td>{'yes' if batch.get('uncertain') else 'no'}</td></tr>"
        )
    head = ["NAR batch", "Pool", "Documents", "ASU s", "Entropy", "ASU clusters", "Uncertain"]
    return _table(head, rows, "batches")


def _round(rnd: Mapping[str, Any], query: Any, titles: Mapping[str, str]) -> str:
    label = f"Round {esc(rnd.get('round'))} · {esc(rnd.get('reason'))}"
    if rnd.get("c"):
        label += f" · budget c={esc(rnd['c'])}"
    label += f" · {num(rnd.get('seconds'))} s"
    if rnd.get("query") != query:
        label += f' · query: <q class="query">{esc(rnd.get("query"))}</q>'
    flags = [f"{esc(rnd.get('unexplored', 0))} documents left unscored"]
    if rnd.get("all_uncertain"):
        flags.append("every batch uncertain")
    retriever = rnd.get("retriever") or {}
    details = (
        f"<details><summary>retriever</summary>{_value(retriever)}</details>" if retriever else ""
    )
    return (
        f'<details class="round" open><summary>{label}</summary>'
        f'<p class="muted">{"; ".join(flags)}</p>{_batches(rnd.get("batches") or [], titles)}'
        f"{details}</details>"
    )


def _retrieval(retrieval: Mapping[str, Any], query: Any, titles: Mapping[str, str]) -> str:
    if not retrieval:
        return ""
    rounds = "".join(_round(r, query, titles) for r in retrieval.get("rounds") or [])
    evidence = retrieval.get("evidence") or []
    return (
        f'<div class="retrieval"><h4>Retrieval ({esc(retrieval.get("strategy"))})</h4>{rounds}'
        f"<h4>Evidence ({len(evidence)})</h4>{_evidence(evidence, titles)}</div>"
    )


_STEP_FIELDS = (
    ("sub_question", "Sub-question"),
    ("query", "Query"),
    ("thought", "Thought"),
    ("action", "Action"),
    ("observation", "Observation"),
    ("answer", "Answer"),
    ("candidates", "Candidates"),
    ("status", "Status"),
)
_STEP_HIDDEN = {"index", "kind", "retrieval", "raw"}


def _step_seconds(step: Mapping[str, Any]) -> float:
    rounds = (step.get("retrieval") or {}).get("rounds") or []
    return sum(float(r.get("seconds") or 0.0) for r in rounds)


def _step(position: int, step: Mapping[str, Any], titles: Mapping[str, str]) -> str:
    label = next(
        (step[k] for k in ("sub_question", "action", "query", "thought") if step.get(k)), ""
    )
    known = {key for key, _ in _STEP_FIELDS}
    rows = [
        f'<dt>{name}</dt><dd class="{key.replace("_", "-")}">{_value(step[key])}</dd>'
        for key, name in _STEP_FIELDS
        if step.get(key) not in (None, "", [])
        and not (key == "query" and step.get(key) == step.get("sub_question"))
    ]
    rows += [
        f"<dt>{esc(key)}</dt><dd>{_value(value)}</dd>"
        for key, value in step.items()
        if key not in known | _STEP_HIDDEN
    ]
    raw = (
        f"<details><summary>model output</summary><pre>{esc(step['raw'])}</pre></details>"
        if step.get("raw")
        else ""
    )
    status = f' <span class="tag">{esc(step["status"])}</span>' if step.get("status") else ""
    retrieval = step.get("retrieval") or {}
    query = step.get("query") or step.get("sub_question")
    return (
        f'<details class="step" open><summary><span class="num">{position}</span> '
        f'<span class="kind">{esc(step.get("kind") or "")}</span> <span class="label">{esc(label)}'
        f'</span> → <b class="step-answer">{esc(step.get("answer") or "…")}</b>{status}'
        f' <span class="muted">{_step_seconds(step):.3f} s retrieving</span></summary>'
        f"<dl>{''.join(rows)}</dl>{raw}{_retrieval(retrieval, query, titles)}</details>"
    )


def _mer(trace: Mapping[str, Any], titles: Mapping[str, str]) -> str:
    mer = trace.get("mer") or {}
    if not mer:
        return '<p class="muted">MER did not run.</p>'
    l_value = mer.get("l") or (trace.get("options") or {}).get("evidence")
    path = [
        f"<tr><td>{i}</td><td>{esc(p[0] if p else '')}</td>"
        f"<td>{esc(p[1] if len(p) > 1 else '')}</td></tr>"
        for i, p in enumerate(mer.get("reasoning_path") or [], start=1)
        if isinstance(p, list | tuple)
    ]
    shown = {"answer", "extraction", "output", "reasoning_path", "evidence", "l"}
    other = "".join(
        f"<dt>{esc(k)}</dt><dd>{_value(v)}</dd>" for k, v in mer.items() if k not in shown
    )
    return (
        f'<p>Answer: <b id="mer-answer">{esc(mer.get("answer") or "—")}</b> '
        f'<span class="muted">(read by {esc(mer.get("extraction"))})</span></p>'
        f'<h4>Reasoning</h4><pre id="mer-reasoning">{esc(mer.get("output"))}</pre>'
        + (
            f"<h4>Reasoning path</h4>{_table(['#', 'Sub-question', 'Answer'], path)}"
            if path
            else ""
        )
        + f"<h4>Evidence{f' (l={esc(l_value)})' if l_value else ''}</h4>"
        + _evidence(mer.get("evidence") or [], titles)
        + (f"<dl>{other}</dl>" if other else "")
    )


def _costs(trace: Mapping[str, Any]) -> str:
    """Per step: retrieval rounds, NAR batches and seconds (tokens when the step records
    them); then the run's totals."""
    steps = [s for s in trace.get("steps") or [] if isinstance(s, Mapping)]
    tokens = any("input_tokens" in s or "output_tokens" in s for s in steps)
    rows = []
    for position, step in enumerate(steps, start=1):
        rounds = (step.get("retrieval") or {}).get("rounds") or []
        batches = sum(len(r.get("batches") or []) for r in rounds)
        cells = [str(position), str(len(rounds)), str(batches), f"{_step_seconds(step):.3f}"]
        if tokens:
            cells.append(f"{num(step.get('input_tokens'))}+{num(step.get('output_tokens'))}")
        rows.append("<tr>" + "".join(f'<td class="n">{c}</td>' for c in cells) + "</tr>")
    head = [
        "Step",
        "Retrieval rounds",
        "NAR batches",
        "Retrieval s",
        *(["Tokens"] if tokens else []),
    ]
    per_step = _table(head, rows, "costs") if rows else ""
    totals = [
        ("LLM calls", trace.get("llm_calls")),
        ("ASU samples", trace.get("asu_samples")),
        ("Retrieval calls", trace.get("retrieval_calls")),
        ("Input tokens", trace.get("input_tokens")),
        ("Output tokens", trace.get("output_tokens")),
        ("Seconds", trace.get("seconds")),
        ("Format failures", trace.get("format_failures")),
    ]
    run = "".join(f"<dt>{name}</dt><dd>{num(value)}</dd>" for name, value in totals)
    return f'<dl class="totals">{run}</dl>{per_step}'


def _header(question: str, answer: str, trace: Mapping[str, Any]) -> str:
    mer = "on" if trace.get("mer_enabled") else "off"
    tags = [
        ("pipeline", trace.get("pipeline")),
        ("loop", trace.get("loop")),
        ("retrieval", trace.get("retrieval")),
        ("MER", mer),
        ("answer from", trace.get("answer_source")),
        ("stopped", trace.get("stop_reason")),
    ]
    chips = "".join(f'<span class="tag">{esc(k)}: {esc(v)}</span>' for k, v in tags)
    return (
        f'<h1 id="question">{esc(question)}</h1>'
        f'<p class="answer">Answer: <b id="answer">{esc(answer)}</b></p><p>{chips}</p>'
    )


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:16px;color:#222}
h1{font-size:20px;margin:4px 0}h2{font-size:17px;border-bottom:1px solid #ccc;margin-top:28px}
h4{margin:10px 0 4px}.answer{font-size:18px}#answer{color:#166534}
.tag{display:inline-block;background:#eef2ff;border-radius:10px;padding:1px 8px;margin:2px}
.muted{color:#666}table{border-collapse:collapse;margin:4px 0;width:100%}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f5}td.n{text-align:right;font-variant-numeric:tabular-nums}
details{margin:6px 0}details.step{border:1px solid #cbd5e1;border-radius:6px;padding:6px 10px}
details.round{margin-left:12px}summary{cursor:pointer}.num{font-weight:bold;color:#1d4ed8}
.kind{color:#666;font-size:12px}dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px}
dt{font-weight:600}dd{margin:0}dd ul,td ul{margin:0;padding-left:18px}
pre{white-space:pre-wrap;background:#f8fafc;border:1px solid #e2e8f0;padding:8px}
tr.uncertain{background:#fff7ed}.cluster{background:#ecfdf5;border-radius:4px;padding:0 4px}
.doc{border-bottom:1px dotted #888}.hl,tr.hl td{background:#fde68a}
#pipeline-graph .node rect{fill:#e0e7ff;stroke:#4f46e5}
#pipeline-graph .endpoint rect{fill:#e5e7eb;stroke:#6b7280}
#pipeline-graph text{font:12px system-ui,sans-serif;text-anchor:middle}
#pipeline-graph .edge{fill:none;stroke:#64748b;stroke-width:1.3}
#pipeline-graph .cond{stroke-dasharray:5 3}.arrowhead{fill:#64748b}
.legend{font-size:12px;color:#666}
"""

_JS = """
function mark(id,on){document.querySelectorAll('[data-doc]').forEach(function(x){
  if(x.getAttribute('data-doc')===id){x.classList.toggle('hl',on)}})}
document.querySelectorAll('[data-doc]').forEach(function(el){
  el.addEventListener('mouseenter',function(){mark(el.getAttribute('data-doc'),true)});
  el.addEventListener('mouseleave',function(){mark(el.getAttribute('data-doc'),false)})});
function openAll(on){document.querySelectorAll('details').forEach(function(d){d.open=on})}
document.getElementById('expand').onclick=function(){openAll(true)};
document.getElementById('collapse').onclick=function(){openAll(false)};
"""

#: Nothing the page refers to may be fetched: only its own inline styles and script run.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


def render_html(
    question: str,
    answer: str,
    trace: Mapping[str, Any],
    graph: Mapping[str, Any] | None,
) -> str:
    """The run as one self-contained HTML page: the pipeline graph, each step (sub-question,
    answer, retrieval rounds with NAR batches and ASU clusters, evidence with provenance),
    MER's reasoning, costs per step and for the run, the notes, the options and the whole
    trace as JSON. ``graph`` is :func:`graph_data` of the pipeline (None: no drawing)."""
    titles = _titles(trace)
    steps = [s for s in trace.get("steps") or [] if isinstance(s, Mapping)]
    step_html = "".join(_step(i, s, titles) for i, s in enumerate(steps, start=1))
    notes = "".join(f"<li>{esc(n)}</li>" for n in trace.get("notes") or [])
    by_step = trace.get("format_failures_by_step") or {}
    options = "".join(
        f"<tr><td>{esc(k)}</td><td>{_value(v)}</td></tr>"
        for k, v in (trace.get("options") or {}).items()
    )
    dump = json.dumps(
        {"answer": answer, "trace": trace, "graph": graph},
        indent=2,
        ensure_ascii=False,
        default=str,
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>rca: {esc(question[:80])}</title><style>{_CSS}</style></head><body>"
        f"{_header(question, answer, trace)}"
        '<p><button id="expand" type="button">expand all</button> '
        '<button id="collapse" type="button">collapse all</button></p>'
        f'<h2>Pipeline graph</h2><div class="graph">{graph_svg(graph)}</div>'
        '<p class="legend">dashed: conditional edge (the node decides where to go)</p>'
        f'<h2>Steps ({len(steps)})</h2><div id="steps">'
        f"{step_html or '<p class=muted>No steps.</p>'}</div>"
        f'<h2>MER</h2><div id="mer">{_mer(trace, titles)}</div>'
        f'<h2>Costs</h2><div id="costs">{_costs(trace)}</div>'
        f'<h2>Notes</h2><ul id="notes">{notes or "<li>none</li>"}</ul>'
        + (f"<p>Format failures by step: {_value(by_step)}</p>" if by_step else "")
        + f"<h2>Options</h2><table>{options}</table>"
        f"<details><summary>Whole run (JSON)</summary><pre>{esc(dump)}</pre></details>"
        f"<script>{_JS}</script></body></html>\n"
    )


# ------------------------------------------------------------------------------ commands


def _one_line(exc: BaseException) -> str:
    return " ".join(str(getattr(exc, "strerror", None) or exc).split())


def write_html(
    path: Path,
    question: str,
    answer: str,
    trace: Mapping[str, Any],
    graph: Mapping[str, Any] | None,
) -> None:
    """Write :func:`render_html` of the run to ``path`` (an unwritable path is an
    :class:`~rag_complexity_agents.errors.InputError`)."""
    try:
        path.write_text(render_html(question, answer, trace, graph), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {_one_line(exc)}") from None
    typer.echo(f"wrote {path}", err=True)


def _pipeline_graph(name: Any) -> GraphData | None:
    """The graph of a registered pipeline, for a saved run without one (None if unknown)."""
    # LangGraph and the loops load only when a saved run lacks its graph
    from ..api import create_rag_agent
    from ..config import Config
    from ..config.pipelines import PIPELINES

    if not isinstance(name, str) or name not in PIPELINES:
        return None
    try:
        return graph_data(create_rag_agent(pipeline=name, config=Config()))
    except RCAError:
        return None


def load_run(path: Path) -> tuple[str, str, dict[str, Any], GraphData | None]:
    """Question, answer, trace and graph of a file saved from ``rca ask --json`` (or an
    ``invoke()`` output); a missing or malformed file is an InputError of one line."""
    usage = "save a run with: rca ask QUESTION --json > FILE"
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file ({usage})") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
            f"{usage}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {_one_line(exc)}") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("trace"), dict):
        raise InputError(f'{path} holds no run (no "trace" object); {usage}')
    trace: dict[str, Any] = payload["trace"]
    question = str(payload.get("question") or trace.get("question") or "")
    answer = str(payload.get("answer") or trace.get("answer") or "")
    graph = payload.get("graph")
    if not isinstance(graph, dict):
        graph = _pipeline_graph(trace.get("pipeline"))
    return question, answer, trace, graph


@fail_cleanly
def render(
    path: Annotated[Path, typer.Argument(help="A run saved with: rca ask QUESTION --json > FILE")],
    html_path: Annotated[
        Path | None,
        typer.Option("--html", help="Write the run as one self-contained HTML page."),
    ] = None,
) -> None:
    """Show a saved run: printed as rca ask prints it, or as an offline HTML page (--html)."""
    question, answer, trace, graph = load_run(path)
    if html_path is None:
        print_trace(question, answer, trace)
        return
    write_html(html_path, question, answer, trace, graph)
