"""``rca ask``: answer one question with a pipeline (default: the measured best).

Its knob flags (``--budget``, ``--samples``, …) are derived from the knob table
(:mod:`rag_complexity_agents.config.knobs`), so they mean what the keyword arguments of
``create_rag_agent`` and the ``configurable`` keys mean.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from ..config.knobs import KNOBS, Knob, field_of
from ..config.pipelines import DEFAULT_PIPELINE, PIPELINES
from ..text import validate_question
from .common import ConfigOption, PresetOption, SetOption, build_config, fail_cleanly
from .render import print_trace


def _ask(
    question: Annotated[str, typer.Argument(help="The question (use '-' to read stdin).")],
    pipeline: Annotated[
        str,
        typer.Option(
            "--pipeline",
            "-p",
            help="A registered pipeline (rca info lists them); default: the measured best.",
        ),
    ] = DEFAULT_PIPELINE,
    collection: Annotated[str | None, typer.Option("--collection", "-c")] = None,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="auto | llamacpp:<gguf|name> | ollama:<m>")
    ] = None,
    mode: Annotated[str | None, typer.Option(help="First stage: bm25 | dense | hybrid.")] = None,
    stream: Annotated[
        bool, typer.Option("--stream", help="Show nodes and tokens while the pipeline runs.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full trace as JSON.")] = False,
    html_path: Annotated[
        Path | None,
        typer.Option("--html", help="Also write the run as one self-contained HTML page."),
    ] = None,
    preset: PresetOption = None,
    config: ConfigOption = None,
    set_: SetOption = None,
    **knobs: Any,
) -> None:
    """Answer a question over a collection; prints the answer, the steps and the evidence."""
    # LangGraph and the models load here, not when the CLI starts (`rca --help` stays fast)
    from ..agents.run import run_graph, stream_graph
    from ..agents.wiring import STREAM_STEPS
    from ..api import create_rag_agent
    from ..corpus.store import CorpusStore
    from .html import write_html
    from .html_graph import graph_data

    if question == "-":
        question = sys.stdin.read()
    cfg = build_config(
        config,
        set_,
        preset=preset,
        collection=collection,
        **{"models.chat": model, "retrieval.mode": mode},
    )
    question = validate_question(question, max_chars=cfg.max_question_chars)
    graph = create_rag_agent(pipeline=pipeline, config=cfg, **knobs)  # checks the knobs
    if PIPELINES[pipeline].retrieval != "none":
        CorpusStore.open(cfg.collection, cfg)  # a missing collection fails before any model loads
    if stream:
        final: dict[str, Any] = {}
        for stream_mode, payload in stream_graph(
            graph,
            question,
            stream_mode=("updates", "messages", "values"),
            options={STREAM_STEPS: True},  # every step's tokens, not only the final answer
        ):
            if stream_mode == "messages":
                chunk = payload[0]
                typer.secho(str(getattr(chunk, "content", "")), nl=False, dim=True, err=True)
            elif stream_mode == "updates":
                for node in payload or {}:
                    typer.secho(f"\n· {node}", fg=typer.colors.BLUE, err=True)
            elif stream_mode == "values":
                final = payload
        answer, trace = str(final.get("answer", "")), dict(final.get("trace") or {})
    else:
        result = run_graph(graph, question)
        answer, trace = result.answer, dict(result.trace)
    drawing = graph_data(graph)
    if as_json:
        typer.echo(json.dumps({"answer": answer, "trace": trace, "graph": drawing}, indent=2))
    else:
        print_trace(question, answer, trace)
    if html_path is not None:
        write_html(html_path, question, answer, trace, drawing)


def _knob_option(knob: Knob) -> inspect.Parameter:
    info = field_of(knob)
    symbol = f" Paper symbol: {knob.symbol}." if knob.symbol else ""
    help_text = f"{info.description or ''}{symbol}"
    option: Any
    if knob.name == "mer":
        option = Annotated[bool | None, typer.Option("--mer/--no-mer", help=help_text)]
    elif knob.name == "retrieval":
        option = Annotated[str | None, typer.Option(knob.flag, help=help_text)]
    else:
        option = Annotated[int | None, typer.Option(knob.flag, help=help_text)]
    return inspect.Parameter(
        knob.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=option
    )


def _with_knob_flags(func: Callable[..., None]) -> Callable[..., None]:
    """``func`` with one CLI option per knob of the table, collected into ``**knobs``."""
    names = [knob.name for knob in KNOBS]

    def command(**kwargs: Any) -> None:
        knobs = {name: kwargs.pop(name) for name in names}
        func(**kwargs, **{k: v for k, v in knobs.items() if v is not None})

    signature = inspect.signature(func, eval_str=True)
    params = [p for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD]
    params += [_knob_option(knob) for knob in KNOBS]
    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = func.__doc__
    command.__name__ = "ask"
    return command


ask = fail_cleanly(_with_knob_flags(_ask))
