"""``rca grade``: the GRADE matrix of a run, and multi-hop question generation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .common import ConfigOption, DataOption, SetOption, build_config, fail_cleanly

grade_app = typer.Typer(
    help="GRADE: hops × retrieval-difficulty matrix of a run, and multi-hop QA generation.",
    no_args_is_help=True,
)


@grade_app.command("matrix")
@fail_cleanly
def grade_matrix(
    run: Annotated[Path, typer.Argument(help="A run file of `rca eval run` (JSONL).")],
    dataset: Annotated[
        str | None,
        typer.Option("--dataset", help="Dataset name or file (default: the run's dataset)."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Directory for <run>.json/.md/.png.")
    ] = None,
    data: DataOption = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Error rate per (hops, D_r quartile) cell, Pearson r of D_r with correctness, heatmap."""
    # a command imports what it runs only: `rca --help` stays fast
    from ..complexity.grade.matrix import matrix_markdown, write_report
    from ..eval.grade import matrix_for_run

    cfg = build_config(config, set_)
    matrix, _ = matrix_for_run(run, dataset=dataset, config=cfg, data_dir=data)
    title = f"GRADE matrix: {run.name.removesuffix('.jsonl')}"
    if out is not None:
        paths = write_report(matrix, out, name=run.name.removesuffix(".jsonl"), title=title)
        typer.echo("wrote " + ", ".join(str(p) for p in paths.values()))
    typer.echo(matrix_markdown(matrix, title=title))


@grade_app.command("generate")
@fail_cleanly
def grade_generate(
    docs: Annotated[Path, typer.Argument(help="Directory of .txt/.md/.jsonl files, or a file.")],
    out: Annotated[Path, typer.Option("--out", help="Where to write the QA JSONL.")],
    limit_docs: Annotated[
        int | None, typer.Option("--limit-docs", help="Use only the first N documents.")
    ] = None,
    no_llm_cache: Annotated[
        bool, typer.Option("--no-llm-cache", help="Do not cache LLM steps on disk.")
    ] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Generate validated multi-hop questions (2-5 hops) with D_r from your documents."""
    # a command imports what it runs only: `rca --help` stays fast
    from ..complexity.grade.generate import generate_file

    cfg = build_config(config, set_)
    result = generate_file(
        docs, out, cfg, limit_docs=limit_docs, cache=not no_llm_cache, progress=typer.echo
    )
    typer.echo(json.dumps(result.to_dict(), indent=2, default=str))
    typer.echo(f"wrote {len(result.questions)} questions to {out}")
