"""End-to-end benchmark: every available strategy on MuSiQue and 2WikiMultiHopQA.

Corpus: all paragraphs of ``musique_dev_ctx.jsonl`` and ``2wikimultihopqa_dev_ctx.jsonl``
pooled and deduplicated by (title, text) into one collection (one chunk per paragraph,
indexed text ``title + "\\n" + text``), built once in a cache directory outside the
repository. Every question of both datasets retrieves from the same pool. Relevance for the
evidence metrics = the gold supporting paragraphs.

Strategies (issue 9): no retrieval, single-step, Self-Ask, Self-Ask + NAR, Self-Ask + SUNAR,
Self-Ask + SUNAR + MER, ReAct + SUNAR, SearChain + SUNAR. Only the ones registered in
``rag_complexity_agents.eval.strategies`` run; the others are listed as pending in the
results. The loops register under the names of :data:`PLAN`.

Every (dataset, strategy) pair is one resumable run file of the harness (``rca eval run``),
so the command can be stopped at any time and rerun to continue, or rerun with a larger
``--limit`` to add questions; LLM calls are cached on disk. Run from the repository root::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/end_to_end.py \\
        --data ../shared/data --model llamacpp:qwen2.5-0.5b --limit 20 \\
        --limit-for no_retrieval=50 --limit-for single_step=50

The same command runs unchanged against an Ollama model (``--model ollama:qwen2.5:7b``).
Writes ``benchmarks/results/end_to_end.json`` (``{"model", "rows": [{"dataset",
"strategy", "n", "cover_em", "em", "f1", "llm_calls", "retrieval_calls",
"seconds_per_question", ...}]}``) and ``end_to_end.md``; text between the
``<!-- analysis:start -->`` / ``<!-- analysis:end -->`` markers of an existing markdown file
is kept. ``--smoke`` pools only the selected questions' paragraphs (a few seconds to index)
and is meant for checking the wiring with ``--limit 2`` and ``--out`` elsewhere.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import ANALYSIS_END, ANALYSIS_START, REPO, machine, read_analysis

from rag_complexity_agents.config import Config, default_home
from rag_complexity_agents.corpus.store import CorpusStore
from rag_complexity_agents.errors import RCAError
from rag_complexity_agents.eval.datasets import (
    QARecord,
    build_pooled_corpus,
    load_records,
    resolve_dataset,
)
from rag_complexity_agents.eval.harness import (
    evaluate,
    open_llm_cache,
    run_fingerprint,
)
from rag_complexity_agents.eval.metrics import Estimate
from rag_complexity_agents.eval.report import summarize
from rag_complexity_agents.eval.runner import read_run
from rag_complexity_agents.eval.strategies import (
    AGENT_STRATEGIES,
    EvalComponents,
    available_strategies,
)
from rag_complexity_agents.profiles import apply_profile

DATASETS: dict[str, str] = {"musique": "musique", "2wikimultihopqa": "2wikimultihopqa"}


@dataclass(frozen=True)
class Planned:
    """A strategy of the issue's list: registry name, label, the settings that cost."""

    name: str
    label: str
    settings: tuple[str, ...]


_RETRIEVAL = ("retrieval.mode", "answer.passages", "answer.passage_chars")
_NAR = (*_RETRIEVAL, "retrieval.first_stage_k", "nar.b", "nar.c", "nar.neighbours_per_doc")
_SUNAR = (*_NAR, "asu.m", "asu.temperature", "asu.max_passage_chars")
_MER = (*_SUNAR, "mer.l", "mer.max_evidence_chars")

#: The issue's strategies in table order (registry name → label, cost/fidelity settings).
PLAN: tuple[Planned, ...] = (
    Planned("no_retrieval", "No retrieval", ("models.max_tokens",)),
    Planned("single_step", "Single-step", _RETRIEVAL),
    Planned("self_ask", "Self-Ask", _RETRIEVAL),
    Planned("self_ask_nar", "Self-Ask + NAR", _NAR),
    Planned("self_ask_sunar", "Self-Ask + SUNAR", _SUNAR),
    Planned("self_ask_sunar_mer", "Self-Ask + SUNAR + MER", _MER),
    Planned("react_sunar", "ReAct + SUNAR", _SUNAR),
    Planned("searchain_sunar", "SearChain + SUNAR", _SUNAR),
)


def settings_of(config: Config, keys: Sequence[str], *, loop: bool) -> dict[str, Any]:
    """The values of ``keys`` the run used (loops see them through the agents' CPU profile)."""
    flat: dict[str, Any] = {}
    dumped = (apply_profile(config) if loop else config).model_dump(mode="json")
    for key in keys:
        node: Any = dumped
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        flat[key] = node
    return flat


# --------------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------------


def build_collection(
    records: Sequence[QARecord], config: Config, *, label: str
) -> tuple[str, dict[str, Any]]:
    """Index the pooled paragraphs of ``records`` (once) and return the collection name."""
    pooled = build_pooled_corpus(records)
    name = f"e2e-{label}-{pooled.fingerprint}"
    store = CorpusStore.open_or_create(name, config)
    if len(store) < len(pooled):
        print(f"indexing {len(pooled)} paragraphs into {store.directory}", flush=True)
        store.ingest(pooled.documents, progress=True)
    info = {
        "collection": name,
        "raw_paragraphs": pooled.raw_paragraphs,
        "distinct_paragraphs": len(pooled),
        "chunks": len(store),
        "chunk_size": config.corpus.chunk_size,
        "graph_k": config.graph.k,
        "datasets": dict(pooled.per_dataset),
    }
    return name, info


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


def _mean(value: Estimate | None, digits: int = 4) -> float | None:
    return None if value is None else round(value.mean, digits)


def _ci(value: Estimate | None) -> list[float] | None:
    return None if value is None else [round(value.lo, 4), round(value.hi, 4)]


def result_row(
    dataset: str, planned: Planned, lines: list[dict[str, Any]], config: Config
) -> dict[str, Any]:
    summary = summarize(lines, run=f"{dataset}/{planned.name}")
    a, c, r = summary.answer, summary.cost, summary.retrieval
    return {
        "dataset": dataset,
        "strategy": planned.name,
        "label": planned.label,
        "n": summary.n,
        "cover_em": _mean(a["cover_em"]),
        "em": _mean(a["em"]),
        "f1": _mean(a["f1"]),
        "acc": _mean(a["acc"]),
        "llm_calls": _mean(c["llm_calls"], 3),
        "retrieval_calls": _mean(c["retrieval_calls"], 3),
        "seconds_per_question": _mean(c["seconds"], 2),
        "cover_em_ci95": _ci(a["cover_em"]),
        "em_ci95": _ci(a["em"]),
        "f1_ci95": _ci(a["f1"]),
        "input_tokens": _mean(c["input_tokens"], 1),
        "output_tokens": _mean(c["output_tokens"], 1),
        "errors": summary.errors,
        "evidence": {key: _mean(value) for key, value in r.items()},
        "cache_hit_rate": summary.cache_hit_rate,
        "settings": settings_of(config, planned.settings, loop=planned.name in AGENT_STRATEGIES),
    }


def _pct(row: dict[str, Any], key: str) -> str:
    value, ci = row.get(key), row.get(f"{key}_ci95")
    if value is None:
        return "–"
    text = f"{value * 100:.1f}"
    return f"{text} [{ci[0] * 100:.0f}, {ci[1] * 100:.0f}]" if ci else text


def render_markdown(result: dict[str, Any], analysis: str) -> str:
    lines = [
        "# End-to-end benchmark: strategies on MuSiQue and 2WikiMultiHopQA",
        "",
        f"Model `{result['model']}`; pooled corpus `{result['corpus']['collection']}` "
        f"({result['corpus']['distinct_paragraphs']} distinct paragraphs of "
        f"{result['corpus']['raw_paragraphs']}); {result['machine']}; {result['date']}.",
        "",
        "Reproduce (resumable; LLM calls are cached):",
        "",
        "```bash",
        result["command"],
        "```",
        "",
        "| dataset | strategy | n | cover-EM % [95% CI] | EM % | F1 % | LLM calls | retrievals "
        "| s/question | evidence R@5 % | settings |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        recall = row["evidence"].get("recall@5")
        settings = ", ".join(f"{k}={v}" for k, v in row["settings"].items())
        lines.append(
            f"| {row['dataset']} | {row['label']} | {row['n']} | {_pct(row, 'cover_em')} | "
            f"{_pct(row, 'em')} | {_pct(row, 'f1')} | {row['llm_calls']} | "
            f"{row['retrieval_calls']} | {row['seconds_per_question']} | "
            f"{'–' if recall is None else f'{recall * 100:.1f}'} | {settings} |"
        )
    if result["pending"]:
        lines += [
            "",
            "Not yet available (not registered in the harness): "
            + ", ".join(f"{p['label']} (`{p['strategy']}`)" for p in result["pending"])
            + ".",
        ]
    lines += [
        "",
        "cover-EM: the normalised gold answer (or an alias) occurs as a whole run of tokens in "
        "the prediction; EM/F1: SQuAD. Intervals: percentile bootstrap over questions. "
        "s/question includes the time LLM-cache hits originally took. Evidence R@5: share "
        "of gold supporting paragraphs among the first five distinct paragraphs the strategy "
        "used.",
        "",
        ANALYSIS_START,
        analysis.strip() or "_Analysis pending: written after the full run._",
        ANALYSIS_END,
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO / ".." / "shared" / "data"))
    parser.add_argument("--model", default="llamacpp:qwen2.5-0.5b", help="chat model spec")
    parser.add_argument("--limit", type=int, default=20, help="questions per dataset")
    parser.add_argument(
        "--limit-for",
        action="append",
        default=[],
        metavar="STRATEGY=N",
        help="another limit for one strategy (repeatable), e.g. single_step=50",
    )
    parser.add_argument("--datasets", default=",".join(DATASETS), help="datasets to run")
    parser.add_argument(
        "--pool",
        default=",".join(DATASETS),
        help="datasets whose paragraphs form the corpus (keep it fixed across runs: the "
        "corpus is part of every run's fingerprint)",
    )
    parser.add_argument(
        "--strategies", default="", help="comma-separated subset of the planned strategies"
    )
    parser.add_argument(
        "--passages", type=int, default=None, help="evidence passages per prompt (answer.passages)"
    )
    parser.add_argument("--graph-k", type=int, default=100, help="neighbours stored per chunk")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="any config override"
    )
    parser.add_argument("--cache", default=str(default_home() / "benchmarks"))
    parser.add_argument("--runs-dir", default=None, help="default: <cache>/end_to_end_runs")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "end_to_end.json"))
    parser.add_argument("--smoke", action="store_true", help="pool only the selected questions")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="answer nothing: tabulate the questions already finished (n may be below --limit)",
    )
    return parser.parse_args(list(argv))


def make_config(args: argparse.Namespace) -> Config:
    overrides: dict[str, Any] = {
        "models.chat": args.model,
        "answer.passages": args.passages,
        "corpus.home": args.cache,
        "corpus.chunk_size": 4096,  # one chunk per paragraph
        "corpus.chunk_overlap": 0,
        "graph.k": args.graph_k,
        "eval.concurrency": args.concurrency,
    }
    for pair in args.set:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set expects KEY=VALUE, got {pair!r}")
        try:
            overrides[key] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[key] = raw
    return Config().with_overrides(overrides)


def run(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, Any]:
    config = make_config(args)
    limits = {name: args.limit for name in (p.name for p in PLAN)}
    for pair in args.limit_for:
        name, _, value = pair.partition("=")
        limits[name] = int(value)
    wanted = [s for s in args.strategies.split(",") if s] or [p.name for p in PLAN]
    registered = {spec.name for spec in available_strategies()}
    plan = [p for p in PLAN if p.name in wanted]
    ready = [p for p in plan if p.name in registered]
    pending = [p for p in plan if p.name not in registered]
    datasets = [d for d in args.datasets.split(",") if d]

    pooled = [d for d in args.pool.split(",") if d]
    records = {
        d: load_records(resolve_dataset(DATASETS.get(d, d), args.data))
        for d in dict.fromkeys([*datasets, *pooled])
    }
    biggest = max(limits[p.name] for p in ready) if ready else 0
    pool = [r for d in pooled for r in (records[d][:biggest] if args.smoke else records[d])]
    name, corpus = build_collection(pool, config, label="smoke" if args.smoke else "pooled")
    config = config.with_overrides({"collection": name})

    runs_dir = Path(args.runs_dir or Path(args.cache) / "end_to_end_runs")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", args.model)
    parts = EvalComponents(config, llm_cache=open_llm_cache(config))
    rows = []
    for dataset in datasets:
        for planned in ready:
            limit = limits[planned.name]
            dataset_file = resolve_dataset(DATASETS.get(dataset, dataset), args.data)
            fingerprint = run_fingerprint(config, planned.name, dataset_file)
            out = runs_dir / slug / f"{dataset}__{planned.name}__{fingerprint}.jsonl"
            if args.report_only:
                if not out.is_file():
                    print(f"== {dataset} × {planned.label}: no run file yet", flush=True)
                    continue
            else:
                print(f"== {dataset} × {planned.label}: {limit} questions → {out}", flush=True)
                evaluate(
                    config,
                    planned.name,
                    dataset_file,
                    out=out,
                    limit=limit,
                    progress=not args.quiet,
                    components=parts,
                )
            wanted_ids = {r.id for r in records[dataset][:limit]}
            lines = [line for line in read_run(out) if line["id"] in wanted_ids]
            if lines:
                rows.append(result_row(dataset, planned, lines, config))
    command = " ".join(
        [
            "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/end_to_end.py",
            *(arg for arg in argv if arg != "--report-only"),
        ]
    )
    return {
        "model": args.model,
        "rows": rows,
        "pending": [{"strategy": p.name, "label": p.label} for p in pending],
        "corpus": corpus,
        "command": command.strip(),
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        result = run(args, argv)
    except RCAError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to continue", file=sys.stderr)
        return 130
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    md_path = out.with_suffix(".md")
    md_path.write_text(render_markdown(result, read_analysis(md_path)), encoding="utf-8")
    print(f"wrote {out} and {md_path}")
    for row in result["rows"]:
        print(
            f"{row['dataset']:16s} {row['label']:24s} n={row['n']:3d} "
            f"cover-EM={row['cover_em']} EM={row['em']} F1={row['f1']} "
            f"calls={row['llm_calls']} s/q={row['seconds_per_question']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
