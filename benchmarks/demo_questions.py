"""What a user meets after ``make demo``: the bundled demo questions over the demo corpus.

The questions of ``corpus/demo/demo_questions.jsonl`` (one-fact and multi-hop; written with
the corpus and used by the tests, so not held out) answered over the ``demo`` collection by
single-step, plan-and-execute and the default pipeline, with the library's default settings
(what ``rca ask`` does), by the model ``auto`` picks (the 1.5B once the ``[qwen15b]`` extra
is installed, as ``make demo`` installs it) and by the 0.5B (``make test``'s, and what a user
without the extra gets). Scores: cover-EM against the questions' answers and aliases,
overall and by hop count, with paired intervals against single-step.

Resumable (harness run files under ``<cache>/demo_questions_runs`` and the LLM cache); writes
``benchmarks/results/demo_questions.{json,md}``, keeping the markdown's analysis block::

    .venv/bin/python benchmarks/demo_questions.py
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import end_to_end as e2e
from _common import REPO, analysis_block, machine, write_results

from rag_complexity_agents.config import Config, default_home
from rag_complexity_agents.config.pipelines import DEFAULT_PIPELINE
from rag_complexity_agents.corpus.demo import DEMO_CORPUS, DEMO_QUESTIONS, load_demo_questions
from rag_complexity_agents.eval.harness import EvalComponents, evaluate, run_fingerprint
from rag_complexity_agents.eval.report import summarize
from rag_complexity_agents.eval.runner import read_run
from rag_complexity_agents.models.cache import open_llm_cache

ROWS = ("single_step", "plan_execute", DEFAULT_PIPELINE)
SMALL_MODEL = "llamacpp:qwen2.5-0.5b"
#: Question kinds by hop count.
KINDS: dict[str, Callable[[int], bool]] = {
    "one-fact": lambda hops: hops == 1,
    "multi-hop": lambda hops: hops > 1,
}
COLLECTION = "demo"
RESULTS = REPO / "benchmarks" / "results"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--models",
        default=f"auto,{SMALL_MODEL}",
        help="comma-separated models.chat values, each running every row (default: what "
        "`auto` picks, the 1.5B once installed, and the 0.5B that `make test` uses)",
    )
    parser.add_argument("--cache", default=str(default_home() / "benchmarks"))
    parser.add_argument("--out", default=str(RESULTS / "demo_questions.json"))
    parser.add_argument("--quiet", action="store_true")
    return parser.parse_args(argv)


def chat_model(config: Config) -> str:
    """``models.chat``, with the packaged model ``auto`` picks on this machine."""
    from rag_complexity_agents.models.packaged import best_packaged_chat

    spec = config.models.chat
    return f"llamacpp:{best_packaged_chat(config.models.home)}" if spec == "auto" else spec


def demo_config(model: str) -> Config:
    """The library's defaults over the demo collection (indexed first when missing)."""
    from rag_complexity_agents.corpus.documents import iter_documents
    from rag_complexity_agents.corpus.store import CorpusStore

    config = Config.from_env().with_overrides({"models.chat": model, "collection": COLLECTION})
    CorpusStore.open_or_create(COLLECTION, config).ingest(
        iter_documents(DEMO_CORPUS), progress=False
    )
    return config


def run_rows(args: argparse.Namespace, config: Config) -> dict[str, list[dict[str, Any]]]:
    """Each row's per-question lines (run first where unfinished)."""
    parts = EvalComponents(config, llm_cache=open_llm_cache(config))
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", chat_model(config))
    lines: dict[str, list[dict[str, Any]]] = {}
    for name in ROWS:
        fingerprint = run_fingerprint(config, name, DEMO_QUESTIONS)
        out = Path(args.cache) / "demo_questions_runs" / slug / f"{name}__{fingerprint}.jsonl"
        print(f"== {name} → {out}", flush=True)
        evaluate(config, name, DEMO_QUESTIONS, out=out, progress=not args.quiet, components=parts)
        lines[name] = read_run(out)
    return lines


def model_rows(model: str, lines: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The rows of one model from its per-question lines."""
    hops = {q["id"]: int(q["hops"]) for q in load_demo_questions()}
    rows = []
    for name in ROWS:
        mine = lines[name]
        summary = summarize(mine, run=name).to_dict()
        rows.append(
            {
                "model": model,
                "strategy": name,
                "n": summary["n"],
                "cover_em": summary["answer"]["cover_em"],
                "right": {
                    kind: sum(bool(x["metrics"]["cover_em"]) for x in mine if test(hops[x["id"]]))
                    for kind, test in KINDS.items()
                },
                "llm_calls": summary["cost"]["llm_calls"],
                "seconds": summary["cost"]["seconds"],
                "load_average": summary["load_average"],
                "format_failures": summary["format_failures"],
                "vs_single_step": None
                if name == "single_step"
                else e2e.paired(mine, lines["single_step"]),
                "answers": {x["id"]: x.get("prediction") for x in mine},
            }
        )
    return rows


def build_result(rows: list[dict[str, Any]]) -> dict[str, Any]:
    hops = [int(q["hops"]) for q in load_demo_questions()]
    return {
        "models": list(dict.fromkeys(row["model"] for row in rows)),
        "questions": {kind: sum(map(test, hops)) for kind, test in KINDS.items()},
        "rows": rows,
        "command": ".venv/bin/python benchmarks/demo_questions.py",
        "machine": machine(),
        "date": date.today().isoformat(),
    }


def _delta(d: dict[str, Any] | None) -> str:
    if d is None or d["delta"] is None:
        return "–"
    return f"{d['delta'] * 100:+.1f} [{d['ci_low'] * 100:+.0f}, {d['ci_high'] * 100:+.0f}]"


def render_markdown(result: dict[str, Any], analysis: str) -> str:
    count = result["questions"]
    lines = [
        "# Demo questions: what a user meets after `make demo`",
        "",
        f"Models {', '.join(f'`{m}`' for m in result['models'])}; the "
        f"{count['one-fact'] + count['multi-hop']} bundled demo "
        f"questions ({count['one-fact']} one-fact, {count['multi-hop']} multi-hop) over the "
        f"`demo` collection, the library's default settings; {result['machine']}; "
        f"{result['date']}. The questions were written with the corpus and are used by the "
        "tests: not held out.",
        "",
        f"Reproduce (resumable): `{result['command']}`",
        "",
        "| model | strategy | n | cover-EM % [95% CI] | one-fact right | multi-hop right "
        "| Δ vs single-step | LLM calls | s/question | load | format failures |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        em = row["cover_em"]
        lines.append(
            f"| {row['model']} | {row['strategy']} | {row['n']} | {em['mean'] * 100:.1f} "
            f"[{em['lo'] * 100:.0f}, {em['hi'] * 100:.0f}] | {row['right']['one-fact']} "
            f"| {row['right']['multi-hop']} | {_delta(row['vs_single_step'])} "
            f"| {row['llm_calls']['mean']:.2f} | {row['seconds']['mean']:.1f} "
            f"| {row['load_average']} | {row['format_failures']} |"
        )
    lines += [
        "",
        "Δ: cover-EM points on the same questions, paired bootstrap (2000 resamples, seed 0). "
        "Seconds are wall time on this machine, LLM-cache hits at their original cost; load: "
        "the mean 1-minute load average while the row's questions ran (2 cores).",
        "",
        *analysis_block(analysis),
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    rows = []
    for spec in (m.strip() for m in args.models.split(",") if m.strip()):
        config = demo_config(spec)
        rows += model_rows(chat_model(config), run_rows(args, config))
    result = build_result(rows)
    write_results(result, Path(args.out), render_markdown)


if __name__ == "__main__":
    main()
