"""benchmarks/end_to_end.py without a model: the plan, row selection and paired comparisons."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rag_complexity_agents.config import Config

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
    assert (strong.model, strong.limit) == ("m-big", 134)
    # the strong model gets the ceilings too, so its loop's loss can be located
    assert [p.strategy for p in plan if p.role == "strong" and p.dataset == "musique"] == [
        "single_step",
        "loop_x",
        "adaptive",
        "gold_evidence",
        "gold_decomposition",
        "gold_bridges",
        *e2e.PEERS,
    ]
    # and the best loop's variants (its parts switched) when it has some
    variant, (loop, _) = next(iter(e2e.VARIANTS.items()))
    with_parts = e2e.build_plan(model="m", strong_model="m-big", best_loops=[loop])
    assert variant in {p.strategy for p in with_parts if p.role == "strong"}
    assert {p.strategy for p in plan if p.role == "ceiling"} == {
        "gold_evidence",
        "gold_decomposition",
        "gold_bridges",
    }
    peers = {p.strategy for p in plan if p.role == "peer"}
    assert any("subquestion" in s for s in peers) and any("react_agent" in s for s in peers)
    # the peers run with the strong model at full size, and with the small one at n = 50
    assert {(p.model, p.role, p.limit) for p in plan if p.strategy in e2e.PEERS} == {
        ("m-small", "peer", 50),
        ("m-big", "strong", 134),
    }
    # the ablation rows too, so each target can be met with either model
    assert {(p.model, p.strategy) for p in plan if p.role == "ablation"} == {
        (m, s) for m in ("m-small", "m-big") for s in e2e.ABLATIONS
    }
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


def test_rows_without_lines_keep_their_comparisons(e2e: Any) -> None:
    carried = {"delta": 0.1, "ci_low": -0.1, "ci_high": 0.3, "n": 4, "metric": "cover_em"}
    rows = [
        {"dataset": "d", "model": "m", "strategy": "single_step", "vs_single_step": carried},
        {"dataset": "d", "model": "m", "strategy": "loop"},
    ]
    e2e.attach_comparisons(rows, {1: _lines([1, 0, 0, 0])}, "loop")
    assert rows[0]["vs_single_step"] is carried  # no lines: left as it was
    assert rows[1]["vs_single_step"]["delta"] is None  # its baseline has no lines to pair


def test_previous_rows_are_keyed_by_row(e2e: Any, tmp_path: Path) -> None:
    out = tmp_path / "end_to_end.json"
    assert e2e.previous_rows(out) == {}
    row = {"run": "m/musique__loop__abc.jsonl", "role": "main", "n": 3}
    row |= {"dataset": "musique", "strategy": "loop", "model": "m"}
    out.write_text(json.dumps({"rows": [row, {**row, "run": None}]}), encoding="utf-8")
    assert e2e.previous_rows(out) == {("musique", "loop", "m", "main"): row}


def test_a_row_carries_over_across_a_setting_added_since(e2e: Any) -> None:
    config = Config()
    planned = e2e.Planned("musique", "plan_execute", "m", "strong", 134)
    listed = e2e.settings_of(config, ["answer.passages", "retrieval.mode"])
    kept = {"run": "m/old.jsonl", "planned_n": 134, "settings": listed}
    # another fingerprint (a setting added since), the same values of the listed settings
    assert e2e.carries_over(kept, planned, "m/new.jsonl", config)
    changed = config.with_overrides({"answer.passages": config.answer.passages + 1})
    assert not e2e.carries_over(kept, planned, "m/new.jsonl", changed)
    assert e2e.carries_over(kept, planned, "m/old.jsonl", changed)  # its own run file
    assert not e2e.carries_over({**kept, "planned_n": 50}, planned, "m/old.jsonl", config)


def test_the_baseline_loop_runs_without_the_plan_checks(e2e: Any) -> None:
    # the named baseline is the loop as it was; its variant with the checks is the default
    # without MER, which the default is paired with
    as_it_was = {"agents.plan_checks": False, "agents.reread_unsupported": False}
    assert e2e.BASELINES["plan_execute"] == as_it_was
    now = {"agents.plan_checks": True, "agents.reread_unsupported": True}
    assert e2e.VARIANTS[e2e.DEFAULT_WITHOUT_MER] == ("plan_execute", now)
    assert e2e.row_overrides(e2e.DEFAULT_WITHOUT_MER) == now
    # the baseline's other variants switch one part of the loop as it was
    quote = {**as_it_was, "agents.quote_evidence": "final"}
    assert e2e.row_overrides("plan_execute_quote") == quote
    # and its NAR row is that loop with NAR, as its label and pooled comparison say
    assert e2e.varied("plan_execute_nar") == "plan_execute"
    assert e2e.row_overrides("plan_execute_nar") == as_it_was
    assert e2e.row_overrides(e2e.DEFAULT_PIPELINE) == {}
    first, second = e2e.DATASETS
    rows = [
        {"dataset": d, "model": "m", "strategy": s}
        for s in ("plan_execute", e2e.DEFAULT_PIPELINE, e2e.DEFAULT_WITHOUT_MER)
        for d in (first, second)
    ]
    lines = {
        i: [{**line, "id": f"{r['dataset']}-{line['id']}"} for line in _lines([1, 0])]
        for i, r in enumerate(rows)
    }
    pooled = e2e.pooled_comparisons(rows, lines, "plan_execute")
    pairs = {(p["strategy"], p["vs"]) for p in pooled}
    assert (e2e.DEFAULT_PIPELINE, e2e.DEFAULT_WITHOUT_MER) in pairs
    assert (e2e.DEFAULT_WITHOUT_MER, "plan_execute") in pairs  # the checks alone


def test_markdown_marks_carried_over_rows(e2e: Any) -> None:
    empty = {"delta": None, "ci_low": None, "ci_high": None, "n": 0, "metric": "cover_em"}
    row = {
        "dataset": "musique",
        "role": "main",
        "label": "Single-step",
        "model": "llamacpp:m",
        "n": 3,
        "planned_n": 3,
        "cover_em": 0.5,
        "cover_em_ci95": [0.1, 0.9],
        "vs_single_step": empty,
        "em": 0.5,
        "f1": 0.5,
        "evidence_recall_at_5": None,
        "llm_calls": 1.0,
        "seconds_per_question": 1.0,
        "load_average": None,
        "format_failures": 0,
        "breaks": 0,
        "errors": 0,
    }
    result = {
        "corpus": {"collection": "c", "distinct_paragraphs": 1, "raw_paragraphs": 1},
        "models": ["llamacpp:m"],
        "machine": "x",
        "date": "d",
        "best_loop": None,
        "command": "cmd",
        "pending": [],
    }
    fresh = e2e.render_markdown({**result, "rows": [row]}, "")
    assert "| 3 |" in fresh and "†" not in fresh
    carried = e2e.render_markdown({**result, "rows": [{**row, "carried_over": True}]}, "")
    assert "| 3† |" in carried and "† Carried over" in carried


def test_pooled_comparisons_pair_both_datasets(e2e: Any) -> None:
    first, second = e2e.DATASETS
    rows = [
        {"dataset": first, "model": "m", "strategy": "single_step"},
        {"dataset": second, "model": "m", "strategy": "single_step"},
        {"dataset": first, "model": "m", "strategy": "self_ask"},
        {"dataset": second, "model": "m", "strategy": "self_ask"},
        {"dataset": first, "model": "m", "strategy": "gold_evidence"},
        {"dataset": second, "model": "m", "strategy": "gold_evidence"},
        {"dataset": first, "model": "m", "strategy": "peer_x"},  # one dataset only: left out
        {"dataset": first, "model": "m", "strategy": "self_ask_nar"},  # a variant: against the loop
        {"dataset": second, "model": "m", "strategy": "self_ask_nar"},
    ]

    def on(dataset: str, scores: list[int]) -> list[dict[str, Any]]:
        return [{**line, "id": f"{dataset}-{line['id']}"} for line in _lines(scores)]

    lines = {
        0: on(first, [0, 0]),
        1: on(second, [0, 0]),
        2: on(first, [1, 0]),
        3: on(second, [1, 1]),
        4: on(first, [1, 1]),
        5: on(second, [1, 1]),
        6: on(first, [1, 1]),
        7: on(first, [0, 0]),
        8: on(second, [1, 1]),
    }
    pooled = e2e.pooled_comparisons(rows, lines, "self_ask")
    assert [(p["strategy"], p["vs"], p["n"], p["delta"]) for p in pooled] == [
        ("self_ask", "single_step", 4, 0.75),
        ("self_ask_nar", "self_ask", 4, -0.25),
    ]
    assert pooled[0]["ci_low"] <= 0.75 <= pooled[0]["ci_high"]
    assert set(pooled[0]) == {"strategy", "vs", "model", "n", "delta", "ci_low", "ci_high"}


def test_bridge_hops_count_planned_bridges_against_the_intermediate_answers(e2e: Any) -> None:
    from rag_complexity_agents.eval.datasets import DecompositionStep, QARecord

    record = QARecord(
        id="q",
        dataset="musique",
        question="Where was the director of Jaws born?",
        answers=("Cincinnati",),
        decomposition=(
            DecompositionStep(question="Jaws >> director", answers=("Steven Spielberg",)),
            DecompositionStep(question="#1 >> place of birth", answers=("Cincinnati",)),
        ),
    )
    steps = [
        {"sub_question": "Who directed Jaws?", "answer": "Spielberg, Steven Spielberg"},
        {"sub_question": "Who wrote Jaws?", "answer": "Peter Benchley"},  # no later step uses it
        {"sub_question": "Where was X born?", "planned": "Where was #1 born?", "answer": "Ohio"},
    ]
    line = {"id": "q", "trace": {"steps": steps}}
    assert e2e.bridge_hops([line], {"q": record}) == {"n": 1, "right": 1}
    assert e2e.bridge_hops([{"id": "q", "trace": {}}], {"q": record}) is None
    gold_hops = [  # a ceiling's trace: the dataset's own sub-questions
        {"sub_question": "Jaws >> director", "answer": "Peter Benchley"},
        {"sub_question": "#1 >> place of birth", "answer": "Cincinnati"},
    ]
    ceiling = {"id": "q", "trace": {"hops": gold_hops}}
    assert e2e.bridge_hops([ceiling], {"q": record}) == {"n": 1, "right": 0}
    no_decomposition = QARecord(id="q", dataset="2wiki", question="?", answers=("x",))
    assert e2e.bridge_hops([line], {"q": no_decomposition}) is None


def test_pooled_items_between_carried_rows_are_carried(e2e: Any, tmp_path: Path) -> None:
    first, second = e2e.DATASETS
    item = {"strategy": "a", "vs": "b", "model": "m", "n": 4, "delta": 0.5}
    item |= {"ci_low": 0.1, "ci_high": 0.9}
    other = {**item, "vs": "c"}
    out = tmp_path / "end_to_end.json"
    rows = [
        {"dataset": d, "model": "m", "strategy": s, "run": f"{d}-{s}", "carried_over": s == "b"}
        for d in (first, second)
        for s in ("a", "b", "c")
    ]
    before = [{**row, "run": "other" if row["strategy"] == "c" else row["run"]} for row in rows]
    out.write_text(json.dumps({"pooled": [item, other], "rows": before}), encoding="utf-8")
    kept = e2e.carried_pooled(rows, [], out)
    # a: the same run file as before; b: carried; c: another run file since (new settings)
    assert kept == [{**item, "carried_over": True}]
    assert e2e.carried_pooled(rows, [item], out) == [item]  # computed again: not duplicated


def test_a_variant_of_the_default_is_paired_with_the_default(e2e: Any) -> None:
    first, second = e2e.DATASETS
    variant = "plan_execute_mer_2_passages"
    assert e2e.VARIANTS[variant][0] == e2e.DEFAULT_PIPELINE
    rows = [
        {"dataset": d, "model": "m", "strategy": s}
        for s in ("plan_execute", e2e.DEFAULT_PIPELINE, variant)
        for d in (first, second)
    ]
    scores = {"plan_execute": [0, 0], e2e.DEFAULT_PIPELINE: [1, 0], variant: [1, 1]}
    lines = {
        i: [
            {**line, "id": f"{row['dataset']}-{line['id']}"}
            for line in _lines(scores[row["strategy"]])
        ]
        for i, row in enumerate(rows)
    }
    pooled = e2e.pooled_comparisons(rows, lines, "plan_execute")
    pairs = {(p["strategy"], p["vs"]): p["delta"] for p in pooled}
    assert pairs[(variant, e2e.DEFAULT_PIPELINE)] == 0.5
    assert (e2e.DEFAULT_PIPELINE, variant) not in pairs  # variants are not the default's peers
