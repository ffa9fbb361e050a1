"""benchmarks/end_to_end.py without a model: the plan, row selection and paired comparisons."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def e2e() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("end_to_end")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_plan_orders_roles_and_gives_each_its_model_and_size(e2e: Any) -> None:
    plan = e2e.build_plan(model="m-small", strong_model="m-big", best_loops=["loop_x"])
    roles = [p.role for p in plan]
    assert roles == sorted(roles, key=e2e.ROLE_ORDER.index)  # main, ceiling, strong, ...
    assert [(p.strategy, p.dataset) for p in plan[:2]] == [
        ("single_step", "musique"),
        ("single_step", "2wikimultihopqa_compositional"),
    ]
    by_key = {(p.role, p.strategy, p.dataset): p for p in plan}
    main = by_key[("main", "loop_x", "musique")]
    assert (main.model, main.limit) == ("m-small", 134)
    strong = by_key[("strong", "loop_x", "2wikimultihopqa_compositional")]
    assert (strong.model, strong.limit) == ("m-big", 50)
    assert {p.strategy for p in plan if p.role == "ceiling"} == {
        "gold_evidence",
        "gold_decomposition",
    }
    peers = {p.strategy for p in plan if p.role == "peer"}
    assert any("subquestion" in s for s in peers) and any("react_agent" in s for s in peers)
    assert {p.limit for p in plan if p.role in ("ablation", "peer")} == {50}
    assert {p.dataset for p in plan} == {"musique", "2wikimultihopqa_compositional"}

    # a best loop that is also an ablation row runs once, as a main row
    again = e2e.build_plan(model="m", strong_model=None, best_loops=["self_ask_sunar"])
    assert [p.role for p in again if p.strategy == "self_ask_sunar"] == ["main", "main"]
    assert not any(p.role == "strong" for p in again)


def test_selected_rows_pass_every_filter(e2e: Any) -> None:
    plan = e2e.build_plan(model="m-small", strong_model="m-big", best_loops=["loop_x"])
    args = argparse.Namespace(roles="strong", strategies="single_step", datasets="", models="")
    chosen = e2e.selected(plan, args)
    assert [(p.model, p.dataset) for p in chosen] == [
        ("m-big", "musique"),
        ("m-big", "2wikimultihopqa_compositional"),
    ]
    everything = argparse.Namespace(roles="", strategies="", datasets="", models="")
    assert e2e.selected(plan, everything) == plan


def _lines(scores: list[int]) -> list[dict[str, Any]]:
    return [
        {"id": str(i), "gold": ["yes"], "prediction": "yes" if s else "no"}
        for i, s in enumerate(scores)
    ]


def test_comparisons_pair_rows_of_the_same_dataset_and_model(e2e: Any) -> None:
    rows = [
        {"dataset": "d", "model": "small", "strategy": "single_step"},
        {"dataset": "d", "model": "small", "strategy": "loop"},
        {"dataset": "d", "model": "small", "strategy": "gold_evidence"},
        {"dataset": "d", "model": "big", "strategy": "loop"},
    ]
    lines = {
        0: _lines([0, 0, 0, 0]),
        1: _lines([1, 1, 0, 0]),
        2: _lines([1, 1, 1, 1]),
        3: _lines([1, 1, 1, 0]),
    }
    e2e.attach_comparisons(rows, lines, "loop")
    assert rows[0]["vs_single_step"]["delta"] == 0.0
    assert rows[0]["vs_single_step"]["ci_low"] == rows[0]["vs_single_step"]["ci_high"] == 0.0
    assert rows[1]["vs_single_step"]["delta"] == 0.5 and rows[1]["vs_single_step"]["n"] == 4
    assert "vs_best_loop" not in rows[1]
    assert rows[2]["vs_best_loop"]["delta"] == 0.5
    # no single-step row of the big model yet: the keys are there, the values are None
    assert rows[3]["vs_single_step"] == {
        "metric": "cover_em",
        "delta": None,
        "ci_low": None,
        "ci_high": None,
        "n": 0,
    }
