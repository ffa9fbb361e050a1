"""``rca eval``: the evaluation harness (run, report, corpus, list)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import ConfigError
from .common import (
    ConfigOption,
    DataOption,
    SetOption,
    build_config,
    fail_cleanly,
    quiet_libraries,
)

eval_app = typer.Typer(
    help="Evaluate strategies on QA datasets: run (resumable), report, corpus, list.",
    no_args_is_help=True,
)


@eval_app.command("run")
@fail_cleanly
def eval_run(
    strategy: Annotated[
        str, typer.Option("--strategy", "-s", help="Strategy name (rca eval list) or mod:func.")
    ],
    dataset: Annotated[
        str, typer.Option("--dataset", "-d", help="Dataset short name (rca eval list) or file.")
    ],
    limit: Annotated[int | None, typer.Option(help="Answer at most this many questions.")] = None,
    offset: Annotated[int, typer.Option(help="Skip this many questions first.")] = 0,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Run file (default: <runs_dir>/<dataset>__<strategy>__<hash>)."
        ),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Questions answered in parallel (eval.concurrency).")
    ] = None,
    collection: Annotated[str | None, typer.Option("--collection", "-c")] = None,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="auto | llamacpp:<gguf|name> | ollama:<m>")
    ] = None,
    k: Annotated[
        int | None, typer.Option("--k", help="Passages given to the model (answer.passages).")
    ] = None,
    mode: Annotated[str | None, typer.Option(help="First stage: bm25 | dense | hybrid.")] = None,
    llm_cache: Annotated[
        bool | None,
        typer.Option("--llm-cache/--no-llm-cache", help="Cache LLM calls on disk (default on)."),
    ] = None,
    llm_cache_path: Annotated[
        Path | None, typer.Option("--llm-cache-path", help="SQLite file of the LLM cache.")
    ] = None,
    skip_errors: Annotated[
        bool,
        typer.Option("--skip-errors", help="Do not retry questions that failed in earlier runs."),
    ] = False,
    data: DataOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Run a strategy over a dataset into a JSONL run file; rerun to resume."""
    # a command imports what it runs only: `rca --help` stays fast
    from ..eval.harness import evaluate
    from ..eval.report import summarize, to_markdown
    from ..eval.runner import read_meta, read_run

    cfg = build_config(
        config,
        set_,
        collection=collection,
        **{
            "models.chat": model,
            "answer.passages": k,
            "retrieval.mode": mode,
            "eval.llm_cache": llm_cache,
            "eval.llm_cache_path": str(llm_cache_path) if llm_cache_path else None,
            "eval.data_dir": str(data) if data else None,
        },
    )
    if quiet:
        quiet_libraries()
    try:
        outcome = evaluate(
            cfg,
            strategy,
            dataset,
            out=out,
            offset=offset,
            limit=limit,
            concurrency=concurrency,
            progress=not quiet,
            retry_errors=not skip_errors,
        )
    except KeyboardInterrupt:
        typer.secho(
            "interrupted: finished questions are kept; rerun the same command to resume",
            fg=typer.colors.YELLOW,
            err=True,
        )
        raise typer.Exit(code=130) from None
    summary = outcome.summary
    typer.echo(
        f"{summary.out}: {summary.answered} answered now, {summary.already_done} already done, "
        f"{summary.errors} failed; {'complete' if summary.complete else 'incomplete'}"
    )
    row = summarize(
        read_run(summary.out),
        run=summary.out.name.removesuffix(".jsonl"),
        meta=read_meta(summary.out),
    )
    typer.echo(to_markdown([row]))


@eval_app.command("report")
@fail_cleanly
def eval_report(
    runs: Annotated[list[Path], typer.Argument(help="Run files or directories of run files.")],
    markdown: Annotated[
        Path | None, typer.Option("--md", help="Also write the markdown table here.")
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the JSON here.")] = None,
    ks: Annotated[
        list[int] | None, typer.Option("--k", help="recall@k cut-offs (repeatable; 2 5 10).")
    ] = None,
) -> None:
    """Compare runs: accuracy with 95% intervals, evidence recall/nDCG, cost."""
    # a command imports what it runs only: `rca --help` stays fast
    from ..eval.report import build_report, to_markdown, write_report

    rows = build_report(runs, ks=ks or (2, 5, 10))
    write_report(rows, markdown, json_out)
    typer.echo(to_markdown(rows))


@eval_app.command("corpus")
@fail_cleanly
def eval_corpus(
    datasets: Annotated[list[str], typer.Argument(help="Dataset names or files to pool.")],
    collection: Annotated[str, typer.Option("--collection", "-c", help="Collection to fill.")],
    data: DataOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Pool the paragraphs of datasets (deduplicated) into a collection for retrieval."""
    # a command imports what it runs only: `rca --help` stays fast
    from ..corpus.store import CorpusStore
    from ..eval.datasets import build_pooled_corpus, default_data_dir, iter_records, resolve_dataset

    if quiet:
        quiet_libraries()
    cfg = build_config(config, set_, collection=collection)
    directory = data or cfg.eval.data_dir or default_data_dir()
    records = [r for name in datasets for r in iter_records(resolve_dataset(name, directory))]
    pooled = build_pooled_corpus(records)
    if not pooled.documents:
        raise ConfigError("these datasets ship no paragraphs; nothing to pool")
    store = CorpusStore.open_or_create(cfg.collection, cfg)
    report = store.ingest(pooled.documents, progress=not quiet)
    typer.echo(
        f"collection {store.name!r}: {pooled.raw_paragraphs} paragraphs → {len(pooled)} distinct "
        f"→ {report.chunks} chunks; added {report.added}, already present {report.skipped}"
    )


@eval_app.command("list")
@fail_cleanly
def eval_list(data: DataOption = None, config: ConfigOption = None) -> None:
    """Show the strategies and datasets the harness knows."""
    # a command imports what it runs only: `rca --help` stays fast
    from ..eval.datasets import DATASET_FILES, default_data_dir
    from ..eval.strategies import available_strategies

    cfg = build_config(config, None)
    directory = data or cfg.eval.data_dir or default_data_dir()
    typer.secho("strategies:", bold=True)
    for spec in available_strategies():
        typer.echo(f"  {spec.name}: {spec.description}")
    typer.secho(f"datasets (in {directory}):", bold=True)
    for name, filename in DATASET_FILES.items():
        mark = "" if (directory / filename).is_file() else "  (missing)"
        typer.echo(f"  {name}: {filename}{mark}")
