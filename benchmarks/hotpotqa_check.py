"""Third-set check: plan-and-execute and its leads on a set no choice was made on.

``end_to_end.py`` measured plan-and-execute and its variants on MuSiQue and 2Wiki
compositional. This script asks whether what it found holds on HotpotQA (distractor dev, the
first ``--n`` questions over the pooled paragraphs of the whole file): single-step,
plan-and-execute (:data:`BASELINE`), the variants of it that led on the dev sets
(:data:`LEADS`: two passages a plan step, the last step quoting its evidence, MER; the one
that passed, MER, is the default pipeline now), the default without MER
(:data:`WITHOUT_MER`) and the router in front of the default
(``adaptive``, the shipped head: single-step or the default per question), with the
end-to-end benchmark's settings and the 1.5B model. It then pools each lead's paired
difference against the baseline over the three sets, the two dev sets' questions read from
the run files named in ``end_to_end.json``.

Resumable (run files under ``<cache>/hotpotqa_check_runs`` and the LLM cache); writes
``benchmarks/results/hotpotqa_check.{json,md}``, keeping the markdown's analysis block::

    .venv/bin/python benchmarks/hotpotqa_check.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import end_to_end as e2e
from _common import DEFAULT_DATA, REPO, analysis_block, machine, write_results

from rag_complexity_agents.agents.context import derive_components
from rag_complexity_agents.config import default_home
from rag_complexity_agents.eval.datasets import load_records, resolve_dataset
from rag_complexity_agents.eval.harness import EvalComponents, evaluate, run_fingerprint
from rag_complexity_agents.eval.report import summarize
from rag_complexity_agents.eval.runner import read_run
from rag_complexity_agents.models.cache import open_llm_cache

DATASET = "hotpotqa"
#: The loop the leads vary: plan-and-execute without MER (the default before MER passed).
BASELINE = "plan_execute"
#: Its variants that led on the dev sets.
LEADS = ("plan_execute_2_passages", "plan_execute_quote", "plan_execute_mer")
#: Variants of the default measured against it (``--baseline plan_execute_mer``).
CANDIDATES = (
    "plan_execute_mer_chain_quote",
    "plan_execute_mer_no_reread",
    "plan_execute_mer_resample",
)
#: The default without MER (``--baseline plan_execute_checks``: MER's own difference).
WITHOUT_MER = e2e.DEFAULT_WITHOUT_MER
ROWS = ("single_step", BASELINE, WITHOUT_MER, *LEADS, "adaptive", *CANDIDATES)
DEFAULT_ROWS = ("single_step", BASELINE, *LEADS, "adaptive")
MODEL = "llamacpp:qwen2.5-coder-1.5b"
RESULTS = REPO / "benchmarks" / "results"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--model", default=MODEL, help="chat model of every row")
    parser.add_argument("--n", type=int, default=134, help="questions (a dev set's n)")
    parser.add_argument("--cache", default=str(default_home() / "benchmarks"))
    parser.add_argument("--e2e", default=str(RESULTS / "end_to_end.json"))
    parser.add_argument("--out", default=str(RESULTS / "hotpotqa_check.json"))
    parser.add_argument(
        "--rows",
        default=",".join(DEFAULT_ROWS),
        help="comma-separated rows to run and report, in this order (the baseline always included)",
    )
    parser.add_argument(
        "--baseline",
        default=BASELINE,
        choices=ROWS,
        help="the row every other row is paired against, here and pooled with the dev sets",
    )
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    asked = [name.strip() for name in args.rows.split(",") if name.strip()]
    unknown = sorted(set(asked) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {', '.join(ROWS)}")
    args.rows = tuple(dict.fromkeys(asked if args.baseline in asked else (args.baseline, *asked)))
    return args


def run_rows(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Each row's per-question lines (run first where unfinished)."""
    settings = argparse.Namespace(
        passages=None,
        cache=args.cache,
        graph_k=100,
        concurrency=1,
        data=args.data,
        set=["agents.stop=evidence"],  # the end-to-end benchmark's value (fingerprints)
    )
    base = e2e.make_config(settings, args.model)
    records = load_records(resolve_dataset(DATASET, args.data))
    collection, _ = e2e.build_collection(records, base, label=DATASET, index=True)
    config = base.with_overrides({"collection": collection})
    parts = EvalComponents(config, llm_cache=open_llm_cache(config))
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", args.model)
    lines: dict[str, list[dict[str, Any]]] = {}
    for name in args.rows:
        strategy, overrides = e2e.harness_strategy(name), e2e.row_overrides(name)
        row_config = config.with_overrides(overrides) if overrides else config
        fingerprint = run_fingerprint(row_config, strategy, DATASET)
        out = Path(args.cache) / "hotpotqa_check_runs" / slug / f"{name}__{fingerprint}.jsonl"
        print(f"== {name}: {args.n} questions → {out}", flush=True)
        evaluate(
            row_config,
            strategy,
            DATASET,
            out=out,
            limit=args.n,
            progress=not args.quiet,
            components=derive_components(parts, row_config),
        )
        lines[name] = read_run(out)
    return lines


def _against(
    name: str, baseline: str, lines: dict[str, list[dict[str, Any]]]
) -> dict[str, Any] | None:
    """Row ``name`` against row ``baseline`` (None for the row itself or a row not run)."""
    if name == baseline or baseline not in lines:
        return None
    return e2e.paired(lines[name], lines[baseline])


def dev_lines(
    rows: list[dict[str, Any]], runs: Path, model: str, strategy: str
) -> list[dict[str, Any]]:
    """The per-question lines of ``strategy`` on the end-to-end dev sets (the strong ``rows``
    of ``end_to_end.json``, run files under ``runs``), ids made unique; empty when the table
    has no such row or its run files are not on this machine."""
    files = [
        (row["dataset"], runs / row["run"])
        for row in rows
        if (row["model"], row["strategy"], row["role"]) == (model, strategy, "strong")
    ]
    if not files or not all(path.exists() for _, path in files):
        print(f"no dev-set run files of {strategy} with {model} here: not pooled", flush=True)
        return []
    return [
        {**line, "id": f"{dataset}:{line['id']}"}
        for dataset, path in files
        for line in read_run(path)
    ]


def build_result(
    args: argparse.Namespace, lines: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    rows = []
    for name in args.rows:
        summary = summarize(lines[name], run=name).to_dict()
        rows.append(
            {
                "strategy": name,
                "n": summary["n"],
                "cover_em": summary["answer"]["cover_em"],
                "llm_calls": summary["cost"]["llm_calls"],
                "vs_single_step": _against(name, "single_step", lines),
                "vs_baseline": _against(name, args.baseline, lines),
            }
        )
    tagged = {
        name: [{**x, "id": f"{DATASET}:{x['id']}"} for x in lines[name]] for name in args.rows
    }
    dev = json.loads(Path(args.e2e).read_text(encoding="utf-8"))["rows"]
    runs = Path(args.cache) / "end_to_end_runs"
    base_dev = dev_lines(dev, runs, args.model, args.baseline)
    baseline = [*base_dev, *tagged[args.baseline]]
    pooled = {}
    leads = [name for name in args.rows if name in (*LEADS, *CANDIDATES) and name != args.baseline]
    for lead in leads if base_dev else []:
        if lead_dev := dev_lines(dev, runs, args.model, lead):
            pooled[lead] = e2e.paired([*lead_dev, *tagged[lead]], baseline)
    return {
        "dataset": DATASET,
        "model": args.model,
        "baseline": args.baseline,
        "rows": rows,
        "pooled_vs_baseline": pooled,
        "command": f"benchmarks/hotpotqa_check.py --data {args.data} --n {args.n}"
        + ("" if set(args.rows) == set(DEFAULT_ROWS) else f" --rows {','.join(args.rows)}")
        + ("" if args.baseline == BASELINE else f" --baseline {args.baseline}"),
        "machine": machine(),
        "date": date.today().isoformat(),
    }


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:+.1f}"


def _delta(d: dict[str, Any] | None) -> str:
    if d is None or d["delta"] is None:
        return "–"
    return f"{_pct(d['delta'])} [{_pct(d['ci_low'])}, {_pct(d['ci_high'])}]"


def render_markdown(result: dict[str, Any], analysis: str) -> str:
    baseline = result.get("baseline", BASELINE)
    lines = [
        "# Third-set check: plan-and-execute and its leads on HotpotQA",
        "",
        f"Model `{result['model']}`; HotpotQA distractor dev, first {result['rows'][0]['n']} "
        f"questions, over the pooled paragraphs of the file; the end-to-end benchmark's "
        f"settings; {result['machine']}; {result['date']}. No choice was made on this set.",
        "",
        f"Reproduce (resumable): `{result['command']}`",
        "",
        f"| strategy | n | cover-EM % [95% CI] | Δ vs single-step | Δ vs {baseline} | LLM calls |",
        "|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        em = row["cover_em"]
        lines.append(
            f"| {row['strategy']} | {row['n']} | {em['mean'] * 100:.1f} "
            f"[{em['lo'] * 100:.0f}, {em['hi'] * 100:.0f}] | {_delta(row['vs_single_step'])} | "
            f"{_delta(row['vs_baseline'])} | {row['llm_calls']['mean']:.2f} |"
        )
    lines += [
        "",
        f"Each lead against `{baseline}`, paired over MuSiQue, 2Wiki compositional and "
        "HotpotQA (cover-EM points):",
        "",
        *(
            f"* `{lead}`: **{_delta(d)}** ({d['n']} questions)"
            for lead, d in result["pooled_vs_baseline"].items()
        ),
        "",
        "Δ: cover-EM points on the questions both rows answered, paired bootstrap (2000 "
        "resamples, seed 0).",
        "",
        *analysis_block(analysis),
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    result = build_result(args, run_rows(args))
    write_results(result, Path(args.out), render_markdown)


if __name__ == "__main__":
    main()
