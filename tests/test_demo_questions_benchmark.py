"""benchmarks/demo_questions.py without a model: tallies by hop count, the paired comparison
and the table, from run-file lines."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from rag_complexity_agents.corpus.demo import load_demo_questions

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("demo_questions")
    finally:
        sys.path.remove(str(BENCHMARKS))


def _lines(right: set[str]) -> list[dict[str, Any]]:
    """Run-file lines of every demo question, right (cover-EM 1) on the ids in ``right``."""
    return [
        {
            "id": q["id"],
            "question": q["question"],
            "gold": q["answers"],
            "prediction": q["answers"][0] if q["id"] in right else "not found",
            "metrics": {"cover_em": float(q["id"] in right), "em": 0.0, "f1": 0.0, "acc": 0.0},
            "error": None,
            "trace": {"llm_calls": 2},
            "wall_seconds": 1.0,
        }
        for q in load_demo_questions()
    ]


def test_rows_count_right_answers_by_hop_count_and_pair_with_single_step(bench: Any) -> None:
    questions = load_demo_questions()
    one_fact = {q["id"] for q in questions if int(q["hops"]) == 1}
    multi_hop = {q["id"] for q in questions if int(q["hops"]) > 1}
    some_multi_hop = set(sorted(multi_hop)[:3])
    lines = {
        "single_step": _lines(one_fact),
        "plan_execute": _lines(one_fact | some_multi_hop),
        bench.DEFAULT_PIPELINE: _lines(some_multi_hop),
    }
    other = bench.model_rows("llamacpp:other", {name: _lines(set()) for name in lines})
    result = bench.build_result([*bench.model_rows("llamacpp:some-model", lines), *other])
    assert result["models"] == ["llamacpp:some-model", "llamacpp:other"]
    assert result["questions"] == {"one-fact": len(one_fact), "multi-hop": len(multi_hop)}
    rows = {row["strategy"]: row for row in result["rows"] if row["model"].endswith("some-model")}
    assert rows["single_step"]["right"] == {"one-fact": len(one_fact), "multi-hop": 0}
    assert rows["plan_execute"]["right"] == {"one-fact": len(one_fact), "multi-hop": 3}
    assert rows["single_step"]["vs_single_step"] is None
    gain = rows["plan_execute"]["vs_single_step"]
    assert gain["n"] == len(questions)
    assert gain["delta"] == pytest.approx(3 / len(questions), abs=1e-4)
    loss = rows[bench.DEFAULT_PIPELINE]["vs_single_step"]["delta"]
    assert loss == pytest.approx((3 - len(one_fact)) / len(questions), abs=1e-4)

    markdown = bench.render_markdown(result, "")
    assert f"({len(one_fact)} one-fact, {len(multi_hop)} multi-hop)" in markdown
    table = [line for line in markdown.splitlines() if "| plan_execute |" in line]
    assert len(table) == 2 and f"| {len(one_fact)} | 3 |" in table[0]
    assert table[1].startswith("| llamacpp:other |") and "| 0 | 0 |" in table[1]
    assert "_Analysis pending._" in markdown
