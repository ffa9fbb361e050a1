"""How ``rca ask`` prints a run: the answer, the steps, retrieval with ASU clusters, MER."""

from __future__ import annotations

from typing import Any

import typer


def _titles(trace: dict[str, Any]) -> dict[str, str]:
    titles: dict[str, str] = {}
    for step in trace.get("steps") or []:
        for doc in (step.get("retrieval") or {}).get("evidence") or []:
            titles[str(doc.get("id"))] = str(doc.get("title") or doc.get("id"))
    for doc in (trace.get("mer") or {}).get("evidence") or []:
        titles[str(doc.get("id"))] = str(doc.get("title") or doc.get("id"))
    return titles


#: How a citation names a passage's place in its file (see ``types.CITATION_KEYS``).
_PLACES = (("page", "p. "), ("section", "§ "), ("row", "row "))


def _cited(doc: dict[str, Any]) -> str:
    """A passage's title with its place in the file, e.g. "report, p. 3"."""
    for key, label in _PLACES:
        if doc.get(key) not in (None, ""):
            return f"{doc.get('title')}, {label}{doc[key]}"
    return str(doc.get("title"))


def _provenance(doc: dict[str, Any], titles: dict[str, str]) -> str:
    source = doc.get("source") or "?"
    if source == "neighbour":
        via = doc.get("via")
        via_title = titles.get(str(via), str(via)[:8]) if via else "?"
        return f"neighbour of {via_title}, batch {doc.get('batch')}"
    if source == "first_stage" and doc.get("batch") is not None:
        return f"first stage, batch {doc.get('batch')}"
    return str(source).replace("_", " ")


def print_trace(question: str, answer: str, trace: dict[str, Any]) -> None:
    """A readable view of a loop's trace: steps, retrieval with ASU clusters, MER, costs."""
    titles = _titles(trace)
    typer.secho(f"Q: {question}", bold=True)
    typer.secho(f"A: {answer}", fg=typer.colors.GREEN, bold=True)
    typer.echo(
        f"   (answer from {trace.get('answer_source')}; loop {trace.get('loop')}, retrieval "
        f"{trace.get('retrieval')}, MER {'on' if trace.get('mer_enabled') else 'off'})"
    )
    steps = trace.get("steps") or []
    if steps:
        typer.secho("\nSteps:", bold=True)
    for step in steps:
        label = step.get("action") or step.get("sub_question") or ""
        status = f" [{step['status']}]" if step.get("status") else ""
        typer.echo(f"  {step.get('index', 0) + 1}. {label} → {step.get('answer') or '…'}{status}")
        retrieval = step.get("retrieval") or {}
        for rnd in retrieval.get("rounds") or []:
            line = f"     retrieval round {rnd.get('round')} ({rnd.get('reason')}"
            line += f", c={rnd['c']})" if rnd.get("c") else ")"
            if rnd.get("query") != step.get("sub_question"):
                line += f" query: {rnd.get('query')}"
            typer.echo(line)
            for batch in rnd.get("batches") or []:
                if batch.get("s") is None:
                    continue
                clusters = " | ".join(batch.get("cluster_answers") or []) or "—"
                mark = " uncertain" if batch.get("uncertain") else ""
                typer.echo(
                    f"       ASU batch {batch.get('index')} [{batch.get('pool')}]: "
                    f"s={batch.get('s')}{mark} {{{clusters}}}"
                )
        for number, doc in enumerate(retrieval.get("evidence") or [], start=1):
            typer.echo(
                f"     [{number}] {_cited(doc)} ({_provenance(doc, titles)}, score "
                f"{float(doc.get('score') or 0.0):.3f})"
            )
    mer = trace.get("mer")
    if mer:
        typer.secho("\nMER:", bold=True)
        evidence = "; ".join(_cited(d) for d in mer.get("evidence") or [])
        typer.echo(f"  evidence (l={mer.get('l')}): {evidence or '—'}")
        reasoning = " ".join(str(mer.get("output", "")).split())
        typer.echo(f"  output: {reasoning[:300]}{'…' if len(reasoning) > 300 else ''}")
        typer.echo(f"  answer: {mer.get('answer') or '—'} ({mer.get('extraction')})")
    notes = trace.get("notes") or []
    if notes:
        typer.secho("\nNotes:", bold=True)
        for note in notes:
            typer.echo(f"  - {note}")
    typer.echo(
        f"\nstopped: {trace.get('stop_reason')} · {trace.get('llm_calls')} LLM calls "
        f"({trace.get('asu_samples', 0)} ASU samples) · {trace.get('retrieval_calls')} "
        f"retrievals · {trace.get('input_tokens')}+{trace.get('output_tokens')} tokens · "
        f"{float(trace.get('seconds') or 0.0):.1f} s"
    )
