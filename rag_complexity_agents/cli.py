"""The ``rca`` command line: index, ask, info, eval."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from .config import Config, load_config
from .errors import ConfigError, RCAError

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

app = typer.Typer(
    help="rag_complexity_agents: measurable complex-question answering, offline.",
    no_args_is_help=True,
    add_completion=False,
)

F = TypeVar("F", bound=Callable[..., Any])

ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="TOML config file (default: ./rca.toml if present).")
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override any config key, e.g. --set graph.k=16 (repeatable)."),
]


def _fail_cleanly(func: F) -> F:
    """Turn our own errors into one red line and exit code 2 (no traceback)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except RCAError as exc:
            typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(code=2) from None

    return wrapper  # type: ignore[return-value]


def _parse_set(pairs: list[str] | None) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {pair!r}")
        try:
            overrides[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[key.strip()] = raw
    return overrides


def _config(path: Path | None, pairs: list[str] | None, **flags: Any) -> Config:
    overrides = _parse_set(pairs)
    overrides.update({key: value for key, value in flags.items() if value is not None})
    return load_config(path).with_overrides(overrides)


@app.command()
@_fail_cleanly
def index(
    path: Annotated[
        Path | None,
        typer.Argument(help="Directory of .txt/.md/.jsonl files, or one such file."),
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
    from .corpus.demo import DEMO_CORPUS
    from .corpus.documents import iter_documents
    from .corpus.store import CorpusStore

    if demo == (path is not None):
        raise ConfigError("give either a PATH to index or --demo")
    source = DEMO_CORPUS if demo else path
    assert source is not None
    cfg = _config(
        config,
        set_,
        collection=collection,
        **{
            "corpus.chunk_size": chunk_size,
            "corpus.chunk_overlap": chunk_overlap,
            "graph.k": graph_k,
        },
    )
    store = CorpusStore.open_or_create(cfg.collection, cfg)
    report = store.ingest(iter_documents(source), progress=not quiet)
    typer.echo(
        f"collection {store.name!r}: {report.documents} documents → {report.chunks} chunks; "
        f"added {report.added}, already present {report.skipped}; {report.rows} chunks stored "
        f"in {store.directory}"
    )


LOOP_NAMES = ("self_ask", "react", "searchain", "ircot", "cot", "single_step", "no_retrieval")
DEFAULT_LOOP = "self_ask"


@app.command()
@_fail_cleanly
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
            help="self_ask (default: Self-Ask + SUNAR + MER) | react | searchain | ircot | cot "
            "| single_step (plain retrieve-then-answer) | no_retrieval.",
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
    from .components import Components
    from .text import validate_question

    if question == "-":
        question = sys.stdin.read()
    if loop not in LOOP_NAMES:
        raise ConfigError(f"unknown loop {loop!r}; use one of: {', '.join(LOOP_NAMES)}")
    cfg = _config(
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
    if loop == "single_step" and retrieval is None and mer is None:
        _ask_single_step(question, Components(cfg), as_json)
        return
    _ask_loop(question, cfg, loop, {"b": b, "c": c, "m": m, "l": l_}, stream, as_json)


def _ask_single_step(question: str, parts: Any, as_json: bool) -> None:
    from .agents.single_step import answer_single_step

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
    typer.secho(f"Q: {question}", bold=True)
    typer.secho(f"A: {result.answer}", fg=typer.colors.GREEN, bold=True)
    typer.echo("\nEvidence:")
    for number, doc in enumerate(result.trace["evidence"], start=1):
        text = parts.store.chunk(doc["id"]).text
        snippet = text if len(text) <= 160 else text[:157] + "..."
        typer.echo(f"  [{number}] {doc['title']} (score {doc['score']:.3f}): {snippet}")
    t = result.trace
    typer.echo(
        f"\n{t['llm_calls']} LLM call, {t['input_tokens']}+{t['output_tokens']} tokens, "
        f"{t['seconds']:.1f} s"
    )


def _ask_loop(
    question: str,
    cfg: Config,
    loop: str,
    knobs: dict[str, int | None],
    stream: bool,
    as_json: bool,
) -> None:
    from .agents.registry import build_graph
    from .agents.run import run_graph, stream_graph
    from .components import Components

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


def _titles(trace: dict[str, Any]) -> dict[str, str]:
    titles: dict[str, str] = {}
    for step in trace.get("steps") or []:
        for doc in (step.get("retrieval") or {}).get("evidence") or []:
            titles[str(doc.get("id"))] = str(doc.get("title") or doc.get("id"))
    for doc in (trace.get("mer") or {}).get("evidence") or []:
        titles[str(doc.get("id"))] = str(doc.get("title") or doc.get("id"))
    return titles


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
                f"     [{number}] {doc.get('title')} ({_provenance(doc, titles)}, score "
                f"{float(doc.get('score') or 0.0):.3f})"
            )
    mer = trace.get("mer")
    if mer:
        typer.secho("\nMER:", bold=True)
        evidence = ", ".join(str(d.get("title")) for d in mer.get("evidence") or [])
        typer.echo(f"  evidence (l={mer.get('l')}): {evidence or '—'}")
        reasoning = " ".join(str(mer.get("output", "")).split())
        typer.echo(f"  output: {reasoning[:300]}{'…' if len(reasoning) > 300 else ''}")
        typer.echo(f"  answer: {mer.get('answer') or '—'} ({mer.get('extraction')})")
    typer.echo(
        f"\nstopped: {trace.get('stop_reason')} · {trace.get('llm_calls')} LLM calls "
        f"({trace.get('asu_samples', 0)} ASU samples) · {trace.get('retrieval_calls')} "
        f"retrievals · {trace.get('input_tokens')}+{trace.get('output_tokens')} tokens · "
        f"{float(trace.get('seconds') or 0.0):.1f} s"
    )


@app.command()
@_fail_cleanly
def info(
    collection: Annotated[str | None, typer.Option("--collection", "-c")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Show collections (sizes, graph statistics) and the models found on this machine."""
    from dataclasses import asdict

    from .corpus.store import CorpusStore, list_collections
    from .models.packaged import list_packaged_models

    cfg = _config(config, set_)
    names = [collection] if collection else list_collections(cfg)
    report = {
        "home": str(cfg.corpus.home),
        "collections": {name: CorpusStore.open(name, cfg).stats() for name in names},
        "models": [asdict(m) for m in list_packaged_models(cfg.models.home)],
        "config": {
            "chat": cfg.models.chat,
            "embedding": cfg.models.embedding,
            "scorer": cfg.models.scorer,
            "equivalence": cfg.models.equivalence,
        },
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


# --------------------------------------------------------------------------------------------
# rca eval: the evaluation harness
# --------------------------------------------------------------------------------------------

eval_app = typer.Typer(
    help="Evaluate strategies on QA datasets: run (resumable), report, corpus, list.",
    no_args_is_help=True,
)
app.add_typer(eval_app, name="eval")

DataOption = Annotated[
    Path | None,
    typer.Option("--data", help="Directory of the dataset files (default: eval.data_dir)."),
]


@eval_app.command("run")
@_fail_cleanly
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
    from .eval.harness import evaluate
    from .eval.report import summarize, to_markdown
    from .eval.runner import read_meta, read_run

    cfg = _config(
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
@_fail_cleanly
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
    from .eval.report import build_report, to_markdown, write_report

    rows = build_report(runs, ks=ks or (2, 5, 10))
    write_report(rows, markdown, json_out)
    typer.echo(to_markdown(rows))


@eval_app.command("corpus")
@_fail_cleanly
def eval_corpus(
    datasets: Annotated[list[str], typer.Argument(help="Dataset names or files to pool.")],
    collection: Annotated[str, typer.Option("--collection", "-c", help="Collection to fill.")],
    data: DataOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Pool the paragraphs of datasets (deduplicated) into a collection for retrieval."""
    from .corpus.store import CorpusStore
    from .eval.datasets import build_pooled_corpus, default_data_dir, iter_records, resolve_dataset

    cfg = _config(config, set_, collection=collection)
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
@_fail_cleanly
def eval_list(data: DataOption = None, config: ConfigOption = None) -> None:
    """Show the strategies and datasets the harness knows."""
    from .eval.datasets import DATASET_FILES, default_data_dir
    from .eval.strategies import available_strategies

    cfg = _config(config, None)
    directory = data or cfg.eval.data_dir or default_data_dir()
    typer.secho("strategies:", bold=True)
    for spec in available_strategies():
        typer.echo(f"  {spec.name}: {spec.description}")
    typer.secho(f"datasets (in {directory}):", bold=True)
    for name, filename in DATASET_FILES.items():
        mark = "" if (directory / filename).is_file() else "  (missing)"
        typer.echo(f"  {name}: {filename}{mark}")


# --------------------------------------------------------------------------------------------
# rca rc: retrieval complexity (RRCP)
# --------------------------------------------------------------------------------------------

rc_app = typer.Typer(
    help="Retrieval complexity (RRCP): score a question, calibrate T_ans / T_com.",
    no_args_is_help=True,
)
app.add_typer(rc_app, name="rc")


@rc_app.command("score")
@_fail_cleanly
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
    from .complexity.rrcp import retrieval_complexity

    cfg = _config(
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
@_fail_cleanly
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
    from .complexity.rrcp import METHODS, RetrievalComplexity
    from .complexity.rrcp_calibrate import calibrate_labelled, load_labelled, write_thresholds

    if method not in METHODS:
        raise ConfigError(f"--method must be one of {', '.join(METHODS)}")
    cfg = _config(config, set_, collection=collection, **{"rrcp.evaluator": evaluator})
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


grade_app = typer.Typer(
    help="GRADE: hops × retrieval-difficulty matrix of a run, and multi-hop QA generation.",
    no_args_is_help=True,
)
app.add_typer(grade_app, name="grade")


@grade_app.command("matrix")
@_fail_cleanly
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
    from .complexity.grade.matrix import matrix_for_run, matrix_markdown, write_report

    cfg = _config(config, set_)
    matrix, _ = matrix_for_run(run, dataset=dataset, config=cfg, data_dir=data)
    title = f"GRADE matrix: {run.name.removesuffix('.jsonl')}"
    if out is not None:
        paths = write_report(matrix, out, name=run.name.removesuffix(".jsonl"), title=title)
        typer.echo("wrote " + ", ".join(str(p) for p in paths.values()))
    typer.echo(matrix_markdown(matrix, title=title))


@grade_app.command("generate")
@_fail_cleanly
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
    from .complexity.grade.generate import generate_file

    cfg = _config(config, set_)
    result = generate_file(
        docs, out, cfg, limit_docs=limit_docs, cache=not no_llm_cache, progress=typer.echo
    )
    typer.echo(json.dumps(result.to_dict(), indent=2, default=str))
    typer.echo(f"wrote {len(result.questions)} questions to {out}")


# --------------------------------------------------------------------------------------------
# rca adaptive: Adaptive-RAG labels, classifier, routes
# --------------------------------------------------------------------------------------------

adaptive_app = typer.Typer(
    help="Adaptive-RAG: auto-label questions (A/B/C), train the complexity classifier, predict.",
    no_args_is_help=True,
)
app.add_typer(adaptive_app, name="adaptive")


@adaptive_app.command("label")
@_fail_cleanly
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
    from .complexity.adaptive.labels import collect_labels

    cfg = _config(
        config,
        set_,
        collection=collection,
        **{"adaptive.c_strategy": c_strategy, "eval.data_dir": str(data) if data else None},
    )
    path, counts = collect_labels(
        cfg, datasets, out, limit=limit, offset=offset, runs_dir=runs_dir, progress=not quiet
    )
    typer.echo(f"wrote {path}: " + ", ".join(f"{k}={v}" for k, v in counts.items()))


@adaptive_app.command("train")
@_fail_cleanly
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
    from .complexity.adaptive.classifier import (
        TfidfClassifier,
        default_model_dir,
        train_classifier,
    )
    from .complexity.adaptive.labels import read_labelled

    cfg = _config(
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
@_fail_cleanly
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
    from .complexity.adaptive.classifier import classifier_from_config
    from .complexity.adaptive.router import route_report
    from .components import Components

    cfg = _config(
        config, set_, **{"adaptive.classifier": model_dir, "adaptive.threshold": threshold}
    )
    clf = classifier_from_config(cfg, chat_factory=lambda: Components(cfg).chat)
    for row in route_report(clf, list(questions), cfg.adaptive.threshold):
        typer.echo(json.dumps(row, ensure_ascii=False))


if __name__ == "__main__":
    app()
