"""A run as one self-contained HTML page (``rca ask --html``, ``rca render``).

The page holds everything inline (CSS, a few lines of JS, the pipeline graph as an SVG laid
out here) and its Content-Security-Policy forbids any request, so it opens offline and a
trace cannot make it fetch anything. Every string from the trace (model output included) is
escaped. :func:`graph_data` turns a compiled graph into the ``{"nodes", "edges"}`` data that
``rca ask --json`` saves next to the trace, so a saved run renders the same page.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import InputError, RCAError
from .common import fail_cleanly
from .render import print_trace

GraphData = dict[str, list[Any]]
"""A pipeline graph as JSON data: ``nodes`` (names) and ``edges`` (``source``, ``target``,
``conditional``)."""

_NODE_H, _LAYER_GAP, _NODE_GAP, _MARGIN = 30, 60, 24, 16
_ENDPOINTS = {"__start__": "START", "__end__": "END"}


def graph_data(graph: Any) -> GraphData:
    """The nodes and edges of a compiled graph (its ``get_graph()``) as JSON data."""
    drawable = graph.get_graph()
    return {
        "nodes": [str(node) for node in drawable.nodes],
        "edges": [
            {"source": str(e.source), "target": str(e.target), "conditional": bool(e.conditional)}
            for e in drawable.edges
        ],
    }


def _e(value: Any) -> str:
    """``value`` as escaped HTML text (also safe inside quoted attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _e(value if value is not None else "—")
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


# ------------------------------------------------------------------------------ graph drawing


def _edges(graph: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    return [
        (str(e.get("source")), str(e.get("target")), bool(e.get("conditional")))
        for e in graph.get("edges") or []
        if isinstance(e, Mapping)
    ]


def _back_edges(
    nodes: Sequence[str], edges: Sequence[tuple[str, str, bool]]
) -> set[tuple[str, str]]:
    """The edges that close a cycle in a depth-first walk from START (drawn as loops)."""
    successors: dict[str, list[str]] = {node: [] for node in nodes}
    for source, target, _ in edges:
        successors.setdefault(source, []).append(target)
    state: dict[str, int] = {}
    back: set[tuple[str, str]] = set()

    def visit(node: str) -> None:
        state[node] = 1
        for target in successors.get(node, []):
            if state.get(target) == 1:
                back.add((node, target))
            elif target not in state:
                visit(target)
        state[node] = 2

    for node in sorted(successors, key=lambda n: n != "__start__"):
        if node not in state:
            visit(node)
    return back


def _depths(nodes: Sequence[str], forward: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Longest-path layer of each node in the graph without its back edges."""
    depth = dict.fromkeys(nodes, 0)
    for _ in nodes:
        changed = False
        for source, target in forward:
            if depth[target] < depth[source] + 1:
                depth[target], changed = depth[source] + 1, True
        if not changed:
            break
    return depth


def _chains(
    edges: Sequence[tuple[str, str, bool]], back: set[tuple[str, str]], depth: dict[str, int]
) -> dict[tuple[str, str], list[str]]:
    """Each edge (but self-loops) as the chain of nodes it passes, top to bottom: an edge
    spanning several layers gets one point per layer between, which the layout places like
    a node so that the edge goes around the nodes in its way. ``depth`` gains the points."""
    chains: dict[tuple[str, str], list[str]] = {}
    for source, target, _ in edges:
        if source == target:
            continue
        upper, lower = (target, source) if (source, target) in back else (source, target)
        points = [f"\0{source}\0{target}\0{d}" for d in range(depth[upper] + 1, depth[lower])]
        for point, d in zip(points, range(depth[upper] + 1, depth[lower]), strict=True):
            depth[point] = d
        chains[(source, target)] = [upper, *points, lower]
    return chains


def _layers(depth: Mapping[str, int], links: Sequence[tuple[str, str]]) -> list[list[str]]:
    """The nodes by layer, each layer ordered by the mean position of the nodes above that
    link to them (fewer crossings)."""
    names = list(depth)
    layers: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node in names:
        layers[depth[node]].append(node)
    position: dict[str, float] = {}
    for layer in layers:

        def key(node: str) -> float:
            above = [position[a] for a, b in links if b == node and a in position]
            return sum(above) / len(above) if above else float(names.index(node))

        layer.sort(key=key)
        for i, node in enumerate(layer):
            position[node] = i - (len(layer) - 1) / 2
    return layers


def _path(points: Sequence[tuple[float, float]]) -> str:
    head, *rest = points
    return f"M{head[0]:.0f},{head[1]:.0f}" + "".join(f" L{x:.0f},{y:.0f}" for x, y in rest)


def graph_svg(graph: Mapping[str, Any] | None) -> str:
    """The pipeline graph as an inline SVG: layers top to bottom, conditional edges dashed;
    an edge back up a loop leaves its node at the top and enters the other at the bottom."""
    nodes = [str(n) for n in (graph or {}).get("nodes") or []]
    if not nodes:
        return '<p class="muted">The graph is not part of this run\'s data.</p>'
    edges = [e for e in _edges(graph or {}) if e[0] in nodes and e[1] in nodes]
    back = _back_edges(nodes, edges)
    depth = _depths(nodes, [(s, t) for s, t, _ in edges if (s, t) not in back])
    chains = _chains(edges, back, depth)
    layers = _layers(depth, [link for c in chains.values() for link in pairwise(c)])
    widths = {n: max(64, 8 * len(_ENDPOINTS.get(n, n)) + 24) if n in nodes else 12 for n in depth}
    row_widths = [sum(widths[n] for n in layer) + _NODE_GAP * (len(layer) - 1) for layer in layers]
    inner = max(row_widths)
    width, height = inner + 2 * _MARGIN + 32, len(layers) * (_NODE_H + _LAYER_GAP) - _LAYER_GAP
    height += 2 * _MARGIN
    box: dict[str, tuple[float, float, float]] = {}  # centre x, centre y, width
    for row, (layer, row_width) in enumerate(zip(layers, row_widths, strict=True)):
        x = _MARGIN + (inner - row_width) / 2
        y = _MARGIN + row * (_NODE_H + _LAYER_GAP) + _NODE_H / 2
        for node in layer:
            box[node] = (x + widths[node] / 2, y, widths[node])
            x += widths[node] + _NODE_GAP
    parts = [
        f'<svg id="pipeline-graph" role="img" aria-label="pipeline graph" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'class="arrowhead"/></marker></defs>',
    ]
    half = _NODE_H / 2
    for source, target, conditional in edges:
        sx, sy, sw = box[source]
        if source == target:
            r = sx + sw / 2
            d = f"M{r:.0f},{sy - 6:.0f} C{r + 28:.0f},{sy - 22:.0f} {r + 28:.0f},{sy + 22:.0f} "
            d += f"{r:.0f},{sy + 6:.0f}"
        else:
            chain = chains[(source, target)]
            middle = [box[p][:2] for p in chain[1:-1]]
            if (source, target) in back:  # from the top of source up to the bottom of target
                tx, ty, tw = box[target]
                start, end = (sx + sw / 4, sy - half), (tx + tw / 4, ty + half)
                d = _path([start, *[(x + 4, y) for x, y in reversed(middle)], end])
            else:
                tx, ty, _ = box[target]
                d = _path([(sx, sy + half), *middle, (tx, ty - half)])
        style = "edge cond" if conditional else "edge"
        parts.append(
            f'<path class="{style}" d="{d}" marker-end="url(#arrow)">'
            f"<title>{_e(source)} → {_e(target)}</title></path>"
        )
    for node in nodes:
        x, y, w = box[node]
        kind = "endpoint" if node in _ENDPOINTS else "node"
        radius = half if kind == "endpoint" else 6
        parts.append(
            f'<g class="{kind}" data-node="{_e(node)}"><rect x="{x - w / 2:.0f}" '
            f'y="{y - half:.0f}" width="{w:.0f}" height="{_NODE_H}" rx="{radius:.0f}"/>'
            f'<text x="{x:.0f}" y="{y + 4:.0f}">{_e(_ENDPOINTS.get(node, node))}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


# ------------------------------------------------------------------------------ trace parts


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
    return f'<span class="doc" data-doc="{_e(doc_id)}" title="{_e(doc_id)}">{_e(name)}</span>'


def _provenance(doc: Mapping[str, Any], titles: Mapping[str, str]) -> str:
    """Where a passage came from: the first stage (its rank), a graph neighbour of which
    document, or backfill; with the NAR batch that scored it."""
    source = str(doc.get("source") or "?")
    batch = f", batch {_e(doc['batch'])}" if doc.get("batch") is not None else ""
    if source == "neighbour":
        via = _doc(doc["via"], titles) if doc.get("via") else "?"
        return f"graph neighbour of {via}{batch}"
    if source == "first_stage":
        rank = doc.get("first_stage_rank") or doc.get("rank")
        return f"first stage{f', rank {_e(rank)}' if rank is not None else ''}{batch}"
    return f"{_e(source.replace('_', ' '))}{batch}"


def _value(value: Any) -> str:
    """Any trace value as HTML: lists as lists, objects as JSON, numbers rounded."""
    if isinstance(value, list | tuple):
        items = "".join(f"<li>{_value(v)}</li>" for v in value)
        return f"<ul>{items}</ul>" if items else "—"
    if isinstance(value, Mapping):
        return f"<code>{_e(json.dumps(value, ensure_ascii=False, default=str))}</code>"
    return _num(value)


def _table(head: Sequence[str], rows: Sequence[str], cls: str = "") -> str:
    cells = "".join(f"<th>{_e(h)}</th>" for h in head)
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
            f'<tr class="evidence" data-doc="{_e(doc.get("id"))}"><td>{number}</td>'
            f'<td class="title">{_e(doc.get("title") or doc.get("id"))}</td>'
            f"<td><code>{_e(doc.get('doc_id') or doc.get('id'))}</code></td>"
            f"<td>{_provenance(doc, titles)}</td>"
            + (f"<td>{_e(subs or '—')}</td>" if by_sub else "")
            + f'<td class="n">{_num(doc.get("score"))}</td></tr>'
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
            f'<span class="cluster" title="{_e(sampled)}">{_e(answer)}'
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
            f"<tr{mark}><td>batch {_e(batch.get('index'))}</td>"
            f"<td>{_e(pools.get(str(batch.get('pool')), batch.get('pool')))}</td><td>{docs}</td>"
            f'<td class="n">{_num(batch.get("s"))}</td>'
            f'<td class="n">{_num(batch.get("semantic_entropy"))}</td>'
            f"<td>{_clusters(batch)}</td><td>{'yes' if batch.get('uncertain') else 'no'}</td></tr>"
        )
    head = ["NAR batch", "Pool", "Documents", "ASU s", "Entropy", "ASU clusters", "Uncertain"]
    return _table(head, rows, "batches")


def _round(rnd: Mapping[str, Any], query: Any, titles: Mapping[str, str]) -> str:
    label = f"Round {_e(rnd.get('round'))} · {_e(rnd.get('reason'))}"
    if rnd.get("c"):
        label += f" · budget c={_e(rnd['c'])}"
    label += f" · {_num(rnd.get('seconds'))} s"
    if rnd.get("query") != query:
        label += f' · query: <q class="query">{_e(rnd.get("query"))}</q>'
    flags = [f"{_e(rnd.get('unexplored', 0))} documents left unscored"]
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
        f'<div class="retrieval"><h4>Retrieval ({_e(retrieval.get("strategy"))})</h4>{rounds}'
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
        f"<dt>{_e(key)}</dt><dd>{_value(value)}</dd>"
        for key, value in step.items()
        if key not in known | _STEP_HIDDEN
    ]
    raw = (
        f"<details><summary>model output</summary><pre>{_e(step['raw'])}</pre></details>"
        if step.get("raw")
        else ""
    )
    status = f' <span class="tag">{_e(step["status"])}</span>' if step.get("status") else ""
    retrieval = step.get("retrieval") or {}
    query = step.get("query") or step.get("sub_question")
    return (
        f'<details class="step" open><summary><span class="num">{position}</span> '
        f'<span class="kind">{_e(step.get("kind") or "")}</span> <span class="label">{_e(label)}'
        f'</span> → <b class="step-answer">{_e(step.get("answer") or "…")}</b>{status}'
        f' <span class="muted">{_step_seconds(step):.3f} s retrieving</span></summary>'
        f"<dl>{''.join(rows)}</dl>{raw}{_retrieval(retrieval, query, titles)}</details>"
    )


def _mer(trace: Mapping[str, Any], titles: Mapping[str, str]) -> str:
    mer = trace.get("mer") or {}
    if not mer:
        return '<p class="muted">MER did not run.</p>'
    l_value = mer.get("l") or (trace.get("options") or {}).get("evidence")
    path = [
        f"<tr><td>{i}</td><td>{_e(p[0] if p else '')}</td>"
        f"<td>{_e(p[1] if len(p) > 1 else '')}</td></tr>"
        for i, p in enumerate(mer.get("reasoning_path") or [], start=1)
        if isinstance(p, list | tuple)
    ]
    shown = {"answer", "extraction", "output", "reasoning_path", "evidence", "l"}
    other = "".join(
        f"<dt>{_e(k)}</dt><dd>{_value(v)}</dd>" for k, v in mer.items() if k not in shown
    )
    return (
        f'<p>Answer: <b id="mer-answer">{_e(mer.get("answer") or "—")}</b> '
        f'<span class="muted">(read by {_e(mer.get("extraction"))})</span></p>'
        f'<h4>Reasoning</h4><pre id="mer-reasoning">{_e(mer.get("output"))}</pre>'
        + (
            f"<h4>Reasoning path</h4>{_table(['#', 'Sub-question', 'Answer'], path)}"
            if path
            else ""
        )
        + f"<h4>Evidence{f' (l={_e(l_value)})' if l_value else ''}</h4>"
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
            cells.append(f"{_num(step.get('input_tokens'))}+{_num(step.get('output_tokens'))}")
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
    run = "".join(f"<dt>{name}</dt><dd>{_num(value)}</dd>" for name, value in totals)
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
    chips = "".join(f'<span class="tag">{_e(k)}: {_e(v)}</span>' for k, v in tags)
    return (
        f'<h1 id="question">{_e(question)}</h1>'
        f'<p class="answer">Answer: <b id="answer">{_e(answer)}</b></p><p>{chips}</p>'
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
    notes = "".join(f"<li>{_e(n)}</li>" for n in trace.get("notes") or [])
    by_step = trace.get("format_failures_by_step") or {}
    options = "".join(
        f"<tr><td>{_e(k)}</td><td>{_value(v)}</td></tr>"
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
        f"<title>rca: {_e(question[:80])}</title><style>{_CSS}</style></head><body>"
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
        f"<details><summary>Whole run (JSON)</summary><pre>{_e(dump)}</pre></details>"
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
