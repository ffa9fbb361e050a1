"""benchmarks/hotpotqa_check.py without a model: rows, paired differences and the lead's
difference pooled with the end-to-end dev sets' run files."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
MODEL = "llamacpp:qwen2.5-coder-1.5b"


@pytest.fixture(scope="module")
def check() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("hotpotqa_check")
    finally:
        sys.path.remove(str(BENCHMARKS))


def _lines(right: list[bool]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"q{i}",
            "prediction": "Paris" if ok else "Lyon",
            "gold": ["Paris"],
            "trace": {"llm_calls": 3},
        }
        for i, ok in enumerate(right)
    ]


def _write_run(path: Path, lines: list[dict[str, Any]]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path.name


def test_rows_and_the_leads_pooled_over_three_sets(check: Any, tmp_path: Path) -> None:
    runs = tmp_path / "end_to_end_runs"
    dev = {"plan_execute": [True, False], **{lead: [True, True] for lead in check.LEADS}}
    dev[check.LEADS[-1]] = [False, False]
    rows = []
    for dataset in ("musique", "2wikimultihopqa_compositional"):
        for strategy, right in dev.items():
            name = _write_run(runs / f"{dataset}__{strategy}.jsonl", _lines(right))
            rows.append(
                {
                    "dataset": dataset,
                    "strategy": strategy,
                    "model": MODEL,
                    "role": "strong",
                    "run": name,
                }
            )
    e2e = tmp_path / "end_to_end.json"
    e2e.write_text(json.dumps({"rows": rows}), encoding="utf-8")
    args = argparse.Namespace(
        model=MODEL,
        e2e=str(e2e),
        cache=str(tmp_path),
        data="../shared/data",
        n=3,
        rows=check.DEFAULT_ROWS,
        baseline="plan_execute",
    )
    lines = {
        "single_step": _lines([False, False, False]),
        "plan_execute": _lines([True, False, False]),
        **{lead: _lines([True, True, False]) for lead in check.LEADS},
        "adaptive": _lines([True, False, True]),
    }
    assert set(lines) == set(check.DEFAULT_ROWS)
    result = check.build_result(args, lines)
    by_name = {row["strategy"]: row for row in result["rows"]}
    lead, last = check.LEADS[0], check.LEADS[-1]
    assert by_name[lead]["vs_baseline"]["delta"] == pytest.approx(1 / 3, abs=1e-3)
    assert by_name["plan_execute"]["vs_single_step"]["n"] == 3
    assert by_name["plan_execute"]["vs_baseline"] is None  # a row is not compared with itself
    assert by_name["adaptive"]["vs_single_step"]["delta"] == pytest.approx(2 / 3, abs=1e-3)
    pooled = result["pooled_vs_baseline"]
    assert pooled[lead]["n"] == 2 + 2 + 3  # the ids of the three sets do not collide
    assert pooled[lead]["delta"] == pytest.approx(3 / 7, abs=1e-3)
    assert pooled[last]["delta"] == pytest.approx(-1 / 7, abs=1e-3)
    text = check.render_markdown(result, "")
    assert f"| {lead} | 3 | 66.7" in text
    assert "| single_step | 3 | 0.0 [0, 0] | – |" in text
    assert f"* `{last}`: **-14.3" in text and "(7 questions)" in text
    assert "_Analysis pending._" in text


def test_rows_picks_a_subset_in_order_and_keeps_the_baseline(check: Any) -> None:
    lead = check.LEADS[-1]
    args = check.parse_args(["--rows", f"adaptive,{lead}"])
    assert args.rows == ("plan_execute", "adaptive", lead)
    assert check.parse_args([]).rows == check.DEFAULT_ROWS
    with pytest.raises(SystemExit):
        check.parse_args(["--rows", "plan_execute,no_such_row"])


def test_a_candidate_against_the_default_without_dev_run_files(check: Any, tmp_path: Path) -> None:
    candidate = check.CANDIDATES[-1]
    args = check.parse_args(["--baseline", "plan_execute_mer", "--rows", candidate])
    assert args.rows == ("plan_execute_mer", candidate)
    e2e = tmp_path / "end_to_end.json"
    rows = [
        {"dataset": "musique", "strategy": s, "model": MODEL, "role": "strong", "run": "gone.jsonl"}
        for s in args.rows
    ]
    e2e.write_text(json.dumps({"rows": rows}), encoding="utf-8")
    args.e2e, args.cache, args.n = str(e2e), str(tmp_path), 2
    lines = {"plan_execute_mer": _lines([True, False]), candidate: _lines([True, True])}
    result = check.build_result(args, lines)
    (base, row) = result["rows"]
    assert row["vs_baseline"]["delta"] == pytest.approx(0.5, abs=1e-3)
    assert base["vs_single_step"] is None and result["pooled_vs_baseline"] == {}
    assert "--baseline plan_execute_mer" in result["command"]
    assert "| Δ vs plan_execute_mer |" in check.render_markdown(result, "")
