"""benchmarks/plan_checks.py without a model: which questions a part changes, the plan a
stopped graph ran, and the tallies and table of both variants."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
QUESTION = "Where was the husband of Ada Lovelace born?"


@pytest.fixture(scope="module")
def bench() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("plan_checks")
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.mark.parametrize(
    ("part", "default", "other", "kind"),
    [
        ("plan_checks", ["Q?", "Where was #1 born?"], ["Q?", "Where was #1 born?"], None),
        ("plan_checks", [QUESTION], ["What is the name of it?"], "subject"),
        ("plan_checks", ["Who is the husband of Ada Lovelace?"], ["Who is Ada?"], "relation"),
        ("plan_checks", [QUESTION], ["Who is Ada?", "When did #1 go public?"], "exemplar"),
        ("mer_after_one_step_plan", ["Q?"], ["Q?"], "one-step plan"),
        ("mer_after_one_step_plan", ["Q?", "R #1?"], ["Q?", "R #1?"], None),
        (
            "tidy_plans",
            ["Who is Ada Lovelace?", "Where was the husband of #1 born?"],
            ["Where was the husband of Ada Lovelace born?"],
            "identity step",
        ),
        ("tidy_plans", ["Who is the husband?", QUESTION], [QUESTION], "restated"),
        (
            "tidy_plans",
            ["Who was the husband of Ada Lovelace?", "Where was #1 born?", "When was #2 built?"],
            ["Who was the husband of Ada Lovelace?", "Where was #1 born?"],
            "after the answer",
        ),
        ("tidy_plans", [QUESTION], [QUESTION], None),
    ],
)
def test_changed_by(bench: Any, part: str, default: list[str], other: list[str], kind: Any) -> None:
    assert bench.changed_by(part, default, other, QUESTION) == kind


class _Graph:
    """Yields LangGraph-style updates; counts how many were drawn."""

    def __init__(self, updates: list[dict[str, Any]]) -> None:
        self.updates, self.drawn = updates, 0

    def stream(self, _input: Any, stream_mode: str) -> Iterator[dict[str, Any]]:
        assert stream_mode == "updates"
        for update in self.updates:
            self.drawn += 1
            yield update


def test_first_plan_stops_at_the_plan(bench: Any) -> None:
    graph = _Graph(
        [
            {"start": {"plan": []}},
            {"plan": {"format_hint": True}},  # a format retry: no plan yet
            {"plan": {"plan": ["A?", "B #1?"]}},
            {"retrieve": {}},
        ]
    )
    assert bench.first_plan(graph, QUESTION) == ["A?", "B #1?"]
    assert graph.drawn == 3
    assert bench.first_plan(_Graph([{"start": {}}, {"retrieve": {}}]), QUESTION) == []


def _line(qid: str, right: bool, calls: int) -> dict[str, Any]:
    return {"id": qid, "metrics": {"cover_em": float(right)}, "trace": {"llm_calls": calls}}


def test_summarise_and_the_table(bench: Any) -> None:
    lines = {
        "default": [_line("a", True, 2), _line("b", False, 3), _line("c", True, 4)],
        "other": [_line("a", False, 3), _line("b", False, 3), _line("c", True, 5)],
    }
    kinds = {"a": "subject", "b": "relation", "c": "relation"}
    rows = bench.summarise("plan_checks", lines, kinds, dict.fromkeys("abc", "musique"))
    by_check = {row["check"]: row for row in rows}
    assert by_check["relation"]["default"] == {"n": 2, "right": 1, "llm_calls": 7}
    assert by_check["relation"]["other"] == {"n": 2, "right": 1, "llm_calls": 8}
    assert by_check["subject"]["other"]["right"] == 0
    counts = {"musique": {"questions": 3, "plan_checks": 3, "mer_after_one_step_plan": 0}}
    result = {
        "runs": [{"model": "m", "counts": counts, "rows": rows}],
        "command": "benchmarks/plan_checks.py",
        "machine": "x",
        "date": "d",
    }
    table = bench.render_markdown(result, "")
    assert "| `plan_checks` | relation | musique | 2 | 1 | 1 | 7 | 8 |" in table
    assert "musique: 3 questions, plans changed by the checks 3" in table


def test_a_run_of_some_parts_keeps_the_other_parts_rows(bench: Any) -> None:
    def row(part: str, group: str) -> dict[str, Any]:
        tally = {"n": 1, "right": 0, "llm_calls": 2}
        return {"part": part, "check": "c", "group": group, "default": tally, "other": tally}

    before = {
        "model": "m",
        "counts": {"musique": {"questions": 3, "plan_checks": 1, "tidy_plans": 2}},
        "rows": [
            row("plan_checks", "musique"),
            row("tidy_plans", "musique"),
            row("tidy_plans", "2wikimultihopqa_compositional"),
        ],
    }
    run = {
        "model": "m",
        "counts": {"mixed": {"questions": 4, "tidy_plans": 1}, "musique": {"tidy_plans": 0}},
        "rows": [row("tidy_plans", "mixed one-fact")],
    }
    found = bench.merged(run, ["tidy_plans"], [before, {**before, "model": "other"}])
    assert [(r["part"], r["group"]) for r in found["rows"]] == [
        ("plan_checks", "musique"),  # another part
        ("tidy_plans", "2wikimultihopqa_compositional"),  # a set this run did not ask
        ("tidy_plans", "mixed one-fact"),
    ]
    assert found["counts"] == {
        "musique": {"questions": 3, "plan_checks": 1, "tidy_plans": 0},
        "mixed": {"questions": 4, "tidy_plans": 1},
    }
    assert bench.merged(run, ["tidy_plans"], []) == run
    table = bench.render_markdown(
        {"runs": [found], "command": "c", "machine": "x", "date": "d"}, ""
    )
    assert "musique: 3 questions, plans changed by the checks 1, plans tidied 0" in table
