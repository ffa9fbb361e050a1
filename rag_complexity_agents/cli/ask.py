"""``rca ask``: answer one question with a loop (or plain single-step RAG)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from ..config import Config
from ..errors import ConfigError
from .common import ConfigOption, SetOption, build_config, fail_cleanly
from .render import print_single_step, print_trace

LOOP_NAMES = (
    "self_ask",
    "plan_execute",
    "react",
    "searchain",
    "ircot",
    "cot",
    "single_step",
    "no_retrieval",
)
DEFAULT_LOOP = "self_ask"


@fail_cleanly
def ask(
    question: Annotated[str, typer.Argument(help="The question (use '-' to read stdin).")],
    collection: Annotated[str | None, typer.Option("--collection", "-c")] = None,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="auto | llamacpp:<gguf|name> | ollama:<m>")
    ] = None,
    loop: Annotated[
        str,
        typer.Option(
            "--loop",
            help="self_ask (default: Self-Ask + SUNAR + MER) | plan_execute (with "
            "--retrieval first_stage --no-mer: what `make demo` runs) | react | searchain | "
            "ircot | cot | single_step (plain retrieve-then-answer) | no_retrieval.",
        ),
    ] = DEFAULT_LOOP,
    retrieval: Annotated[
        str | None,
        typer.Option(
            "--retrieval",
            "-r",
            help="Retrieval node: none | first_stage | rerank | nar | sunar (agents.retrieval, "
            "default sunar).",
        ),
    ] = None,
    mer: Annotated[
        bool | None,
        typer.Option("--mer/--no-mer", help="Finish with the Meta Evidence Reasoner (agents.mer)."),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", help="Loop steps (agents.max_steps).")
    ] = None,
    b: Annotated[int | None, typer.Option("--b", help="NAR batch size b.")] = None,
    c: Annotated[int | None, typer.Option("--c", help="NAR budget c.")] = None,
    m: Annotated[int | None, typer.Option("--m", help="ASU samples m.")] = None,
    l_: Annotated[int | None, typer.Option("--l", help="MER evidences l.")] = None,
    profile: Annotated[
        str | None,
        typer.Option("--profile", help="cpu (small knobs, default) | paper (agents.profile)."),
    ] = None,
    k: Annotated[
        int | None, typer.Option("--k", help="Passages given to the model (answer.passages).")
    ] = None,
    mode: Annotated[str | None, typer.Option(help="First stage: bm25 | dense | hybrid.")] = None,
    stream: Annotated[
        bool, typer.Option("--stream", help="Show nodes and tokens while the loop runs.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full trace as JSON.")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Answer a question over a collection; prints the answer, the steps and the evidence.

    The default is the Self-Ask loop with SUNAR retrieval (NAR + ASU) and MER. ``--loop
    single_step`` without --retrieval/--mer is the plain single-step RAG of earlier versions.
    """
    from ..components import Components
    from ..corpus.store import CorpusStore
    from ..text import validate_question

    if question == "-":
        question = sys.stdin.read()
    if loop not in LOOP_NAMES:
        raise ConfigError(f"unknown loop {loop!r}; use one of: {', '.join(LOOP_NAMES)}")
    cfg = build_config(
        config,
        set_,
        collection=collection,
        **{
            "models.chat": model,
            "answer.passages": k,
            "retrieval.mode": mode,
            "agents.retrieval": retrieval,
            "agents.mer": mer,
            "agents.max_steps": max_steps,
            "agents.profile": profile,
        },
    )
    question = validate_question(question, max_chars=cfg.max_question_chars)
    plain = loop == "single_step" and retrieval is None and mer is None
    if plain or (loop != "no_retrieval" and cfg.agents.retrieval != "none"):
        CorpusStore.open(cfg.collection, cfg)  # a missing collection fails before any model loads
    if plain:
        _ask_single_step(question, Components(cfg), as_json)
        return
    _ask_loop(question, cfg, loop, {"b": b, "c": c, "m": m, "l": l_}, stream, as_json)


def _ask_single_step(question: str, parts: Any, as_json: bool) -> None:
    from ..agents.single_step import answer_single_step

    cfg = parts.config
    result = answer_single_step(
        question,
        parts.first_stage,
        parts.chat,
        k=cfg.answer.passages,
        passage_chars=cfg.answer.passage_chars,
    )
    if as_json:
        typer.echo(json.dumps({"answer": result.answer, "trace": result.trace}, indent=2))
        return
    print_single_step(question, result.answer, result.trace, lambda i: parts.store.chunk(i).text)


def _ask_loop(
    question: str,
    cfg: Config,
    loop: str,
    knobs: dict[str, int | None],
    stream: bool,
    as_json: bool,
) -> None:
    from ..agents.registry import build_graph
    from ..agents.run import run_graph, stream_graph
    from ..components import Components

    options = {key: value for key, value in knobs.items() if value is not None}
    graph = build_graph(loop, cfg, components=Components(cfg))
    if stream:
        final: dict[str, Any] = {}
        for mode, payload in stream_graph(
            graph, question, stream_mode=("updates", "messages", "values"), options=options
        ):
            if mode == "messages":
                chunk = payload[0]
                typer.secho(str(getattr(chunk, "content", "")), nl=False, dim=True, err=True)
            elif mode == "updates":
                for node in payload or {}:
                    typer.secho(f"\n· {node}", fg=typer.colors.BLUE, err=True)
            elif mode == "values":
                final = payload
        answer, trace = str(final.get("answer", "")), dict(final.get("trace") or {})
    else:
        result = run_graph(graph, question, options=options)
        answer, trace = result.answer, result.trace
    if as_json:
        typer.echo(json.dumps({"answer": answer, "trace": trace}, indent=2))
        return
    print_trace(question, answer, trace)
