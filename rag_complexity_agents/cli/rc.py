"""``rca rc``: retrieval complexity (RRCP) of a question, and threshold calibration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ConfigError
from .common import ConfigOption, SetOption, build_config, fail_cleanly

rc_app = typer.Typer(
    help="Retrieval complexity (RRCP): score a question, calibrate T_ans / T_com.",
    no_args_is_help=True,
)


@rc_app.command("score")
@fail_cleanly
def rc_score(
    question: Annotated[str, typer.Argument(help="The question.")],
    reference: Annotated[
        list[str] | None,
        typer.Option("--reference", "-r", help="A reference answer (repeatable; optional)."),
    ] = None,
    collection: Annotated[str | None, typer.Option("--collection", "-c")] = None,
    evaluator: Annotated[
        str | None, typer.Option(help="llm | lexical | cross-encoder:<dir> (rrcp.evaluator).")
    ] = None,
    k: Annotated[int | None, typer.Option("--k", help="Documents retrieved (rrcp.k).")] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Chat model spec.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print every score as JSON.")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Retrieve, evaluate and classify one question (complex iff Ans = 0 and Com = 1)."""
    # a command imports what it runs only: `rca --help` stays fast
    from ..complexity.rrcp import retrieval_complexity

    cfg = build_config(
        config,
        set_,
        collection=collection,
        **{"rrcp.evaluator": evaluator, "rrcp.k": k, "models.chat": model},
    )
    result = retrieval_complexity(question, reference or [], config=cfg)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    verdict = "complex" if result.complex else "not complex"
    typer.secho(f"{verdict}: Ans={result.Ans} Com={result.Com}", bold=True)
    typer.echo(
        f"  max s_i = {result.max_s:.3f} (T_ans {result.T_ans}), S_D = {result.S_D:.3f} "
        f"(T_com {result.T_com}), evaluator {result.evaluator}"
        + (", reference-free" if result.reference_free else "")
    )
    for doc_id, s, h in zip(result.doc_ids, result.answer_scores, result.entropies, strict=True):
        typer.echo(f"  {doc_id}: s={s:.3f} H/log|Q|={h:.3f}")


@rc_app.command("calibrate")
@fail_cleanly
def rc_calibrate(
    labelled: Annotated[
        Path, typer.Argument(help="JSONL: question, references, complex (and optional scores).")
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="TOML file to write [rrcp] T_ans / T_com into.")
    ] = Path("rca.toml"),
    method: Annotated[str, typer.Option(help="rrcp | ans_only | com_only.")] = "rrcp",
    collection: Annotated[str | None, typer.Option("--collection", "-c")] = None,
    evaluator: Annotated[
        str | None, typer.Option(help="rrcp.evaluator for unscored lines.")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print, do not write.")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Grid-search T_ans / T_com for F1 on labelled questions and save them (config rrcp)."""
    # a command imports what it runs only: `rca --help` stays fast
    from ..complexity.rrcp import METHODS, RetrievalComplexity
    from ..complexity.rrcp_calibrate import calibrate_labelled, load_labelled, write_thresholds

    if method not in METHODS:
        raise ConfigError(f"--method must be one of {', '.join(METHODS)}")
    cfg = build_config(config, set_, collection=collection, **{"rrcp.evaluator": evaluator})
    items = load_labelled(labelled)
    result = calibrate_labelled(
        items,
        lambda: RetrievalComplexity.from_config(cfg),
        method,  # type: ignore[arg-type]
        defaults=(cfg.rrcp.T_ans, cfg.rrcp.T_com),
    )
    typer.echo(
        f"{result.n} questions, method {result.method}: T_ans = {result.T_ans:.4g}, "
        f"T_com = {result.T_com:.4g} (F1 {result.f1:.3f}, accuracy {result.accuracy:.3f})"
    )
    if not dry_run:
        written = write_thresholds(out, result.T_ans, result.T_com)
        typer.echo(f"wrote [rrcp] to {written} (used via --config {written} or ./rca.toml)")
