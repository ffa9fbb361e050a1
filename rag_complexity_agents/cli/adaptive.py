"""``rca adaptive``: Adaptive-RAG labels, the complexity classifier, routes."""

from __future__ import annotations

import json
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

adaptive_app = typer.Typer(
    help="Adaptive-RAG: auto-label questions (A/B/C), train the complexity classifier, predict.",
    no_args_is_help=True,
)


@adaptive_app.command("label")
@fail_cleanly
def adaptive_label(
    datasets: Annotated[list[str], typer.Argument(help="Dataset short names or JSONL files.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Labelled JSONL to write.")],
    limit: Annotated[int | None, typer.Option(help="Questions per dataset.")] = None,
    offset: Annotated[int, typer.Option(help="Skip this many questions per dataset.")] = 0,
    c_strategy: Annotated[
        str | None, typer.Option("--c-strategy", help="Harness strategy of C (default: config).")
    ] = None,
    runs_dir: Annotated[
        Path | None, typer.Option("--runs-dir", help="Run files (default: the harness's).")
    ] = None,
    collection: Annotated[str | None, typer.Option("--collection", "-c")] = None,
    data: DataOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Run A, B, C through the harness (resumable) and label each question."""
    # a command imports what it runs only: `rca --help` stays fast
    from ..eval.adaptive import collect_labels

    cfg = build_config(
        config,
        set_,
        collection=collection,
        **{"adaptive.c_strategy": c_strategy, "eval.data_dir": str(data) if data else None},
    )
    if quiet:
        quiet_libraries()
    path, counts = collect_labels(
        cfg, datasets, out, limit=limit, offset=offset, runs_dir=runs_dir, progress=not quiet
    )
    typer.echo(f"wrote {path}: " + ", ".join(f"{k}={v}" for k, v in counts.items()))


@adaptive_app.command("train")
@fail_cleanly
def adaptive_train(
    labels: Annotated[Path, typer.Argument(help="Labelled JSONL (question + label A/B/C).")],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Model directory (default: adaptive.model_dir)."),
    ] = None,
    kind: Annotated[str, typer.Option(help="finetuned (encoder) | tfidf (baseline).")] = (
        "finetuned"
    ),
    epochs: Annotated[int | None, typer.Option(help="adaptive.epochs")] = None,
    lr: Annotated[float | None, typer.Option("--lr", help="adaptive.learning_rate")] = None,
    backbone: Annotated[str | None, typer.Option(help="adaptive.backbone")] = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Train the complexity classifier on CPU and save it to a directory."""
    # a command imports what it runs only: `rca --help` stays fast
    from ..complexity.adaptive.classifier import default_model_dir
    from ..complexity.adaptive.labels import read_labelled
    from ..complexity.adaptive.tfidf import TfidfClassifier
    from ..complexity.adaptive.training import train_classifier

    cfg = build_config(
        config,
        set_,
        **{"adaptive.epochs": epochs, "adaptive.learning_rate": lr, "adaptive.backbone": backbone},
    )
    pairs = read_labelled(labels)
    target = out or default_model_dir(cfg)
    if kind == "tfidf":
        TfidfClassifier.train(pairs, seed=cfg.adaptive.seed).save(target, n=len(pairs))
        typer.echo(f"saved the TF-IDF classifier ({len(pairs)} questions) to {target}")
        return
    if kind != "finetuned":
        raise ConfigError(f"unknown --kind {kind!r}; use finetuned or tfidf")
    a = cfg.adaptive
    report = train_classifier(
        pairs,
        target,
        backbone=a.backbone,
        epochs=a.epochs,
        learning_rate=a.learning_rate,
        batch_size=a.batch_size,
        max_length=a.max_length,
        seed=a.seed,
        threads=a.torch_threads,
        progress=True,
    )
    typer.echo(json.dumps(report.to_json(), indent=2))


@adaptive_app.command("predict")
@fail_cleanly
def adaptive_predict(
    questions: Annotated[list[str], typer.Argument(help="Questions to classify.")],
    model_dir: Annotated[
        str | None,
        typer.Option("--classifier", help="auto | llm | heuristic | a model directory."),
    ] = None,
    threshold: Annotated[float | None, typer.Option(help="adaptive.threshold")] = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Complexity label, probabilities and route for each question (JSON lines)."""
    # a command imports what it runs only: `rca --help` stays fast
    from ..complexity.adaptive.classifier import classifier_from_config
    from ..complexity.adaptive.router import route_report
    from ..components import Components

    cfg = build_config(
        config, set_, **{"adaptive.classifier": model_dir, "adaptive.threshold": threshold}
    )
    parts = Components(cfg)
    clf = classifier_from_config(
        cfg, chat_factory=lambda: parts.chat, embedder_factory=lambda: parts.embedder
    )
    for row in route_report(clf, list(questions), cfg.adaptive.threshold):
        typer.echo(json.dumps(row, ensure_ascii=False))
