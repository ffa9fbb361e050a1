"""``rca index`` and ``rca info``: fill a collection, show collections and models."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ..config import Config
from ..config.pipelines import DEFAULT_PIPELINE, PIPELINES
from ..errors import ConfigError, ModelNotAvailable
from .common import ConfigOption, SetOption, build_config, fail_cleanly, quiet_libraries


@fail_cleanly
def index(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="Directory of .txt/.md/.jsonl/.pdf/.html/.docx/.csv files, or one such file."
        ),
    ] = None,
    collection: Annotated[str | None, typer.Option("--collection", "-c")] = None,
    demo: Annotated[bool, typer.Option("--demo", help="Index the bundled demo corpus.")] = False,
    chunk_size: Annotated[int | None, typer.Option(help="Tokens per chunk.")] = None,
    chunk_overlap: Annotated[int | None, typer.Option(help="Overlapping tokens.")] = None,
    graph_k: Annotated[int | None, typer.Option(help="Neighbours stored per chunk.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Add documents to a collection (idempotent; safe to interrupt and rerun)."""
    # a command imports what it runs only: `rca --help` stays fast
    from ..corpus.demo import DEMO_CORPUS
    from ..corpus.documents import iter_documents
    from ..corpus.store import CorpusStore

    if demo == (path is not None):
        raise ConfigError("give either a PATH to index or --demo")
    source = DEMO_CORPUS if demo else path
    assert source is not None
    cfg = build_config(
        config,
        set_,
        collection=collection,
        **{
            "corpus.chunk_size": chunk_size,
            "corpus.chunk_overlap": chunk_overlap,
            "graph.k": graph_k,
        },
    )
    if quiet:
        quiet_libraries()
    # the path and its first file are checked before the embedding model loads
    documents = iter_documents(source)
    first = next(documents, None)
    store = CorpusStore.open_or_create(cfg.collection, cfg)
    batch = documents if first is None else itertools.chain([first], documents)
    report = store.ingest(batch, progress=not quiet)
    typer.echo(
        f"collection {store.name!r}: {report.documents} documents → {report.chunks} chunks; "
        f"added {report.added}, already present {report.skipped}; {report.rows} chunks stored "
        f"in {store.directory}"
    )


@fail_cleanly
def info(
    collection: Annotated[str | None, typer.Option("--collection", "-c")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Show collections (sizes, graph statistics), the models found on this machine and the
    registered pipelines."""
    from dataclasses import asdict

    # a command imports what it runs only: `rca --help` stays fast
    from ..corpus.store import CorpusStore, list_collections
    from ..models.packaged import list_packaged_models

    cfg = build_config(config, set_)
    names = [collection] if collection else list_collections(cfg)
    report: dict[str, Any] = {
        "home": str(cfg.corpus.home),
        "collections": {name: CorpusStore.open(name, cfg).stats() for name in names},
        "models": [asdict(m) for m in list_packaged_models(cfg.models.home)],
        "config": {
            "chat": _chat_spec(cfg),
            "embedding": cfg.models.embedding,
            "scorer": cfg.models.scorer,
            "equivalence": cfg.models.equivalence,
        },
        "pipelines": {name: p.description for name, p in PIPELINES.items()},
        "default_pipeline": DEFAULT_PIPELINE,
    }
    if as_json:
        typer.echo(json.dumps(report, indent=2, default=str))
        return
    typer.secho(f"home: {report['home']}", bold=True)
    if not names:
        typer.echo("no collections yet; create one with: rca index --demo")
    for name, stats in report["collections"].items():
        graph = stats.get("graph", {})
        typer.echo(
            f"collection {name}: {stats['rows']} chunks, {stats['disk_mb']} MB, embedding "
            f"{stats['embedding']}, chunk {stats['chunk_size']}/{stats['chunk_overlap']} tokens"
        )
        if graph:
            typer.echo(f"  graph: {json.dumps(graph, default=str)}")
    typer.secho("models:", bold=True)
    for entry in report["models"]:
        mark = "installed" if entry["installed"] else "missing"
        where = entry["path"] or entry["note"] or entry["install"]
        typer.echo(f"  {entry['name']} ({entry['kind']}): {mark}; {where}")
    typer.echo(f"configured: {json.dumps(report['config'])}")
    typer.secho("pipelines (rca ask --pipeline NAME):", bold=True)
    for name, description in report["pipelines"].items():
        mark = " (default)" if name == DEFAULT_PIPELINE else ""
        typer.echo(f"  {name}{mark}: {description}")


def _chat_spec(cfg: Config) -> str:
    """``models.chat``, with the model ``auto`` picks on this machine ('auto (none
    installed)' when there is none)."""
    from ..models.packaged import best_packaged_chat

    if cfg.models.chat != "auto":
        return cfg.models.chat
    try:
        return f"auto ({best_packaged_chat(cfg.models.home)})"
    except ModelNotAvailable:
        return "auto (none installed)"
