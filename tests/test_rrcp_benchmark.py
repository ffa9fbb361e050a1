"""benchmarks/rrcp.py without a model: LLM scores cached per chat model, rows over a partial
run (the questions scored so far), round-robin scoring order."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rag_complexity_agents.models.cache import LLMCallCache

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SMALL, BIG = "llamacpp:qwen2.5-0.5b", "llamacpp:qwen2.5-coder-1.5b"


@pytest.fixture(scope="module")
def rrcp() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("rrcp")
    finally:
        sys.path.remove(str(BENCHMARKS))


def _args() -> argparse.Namespace:
    return argparse.Namespace(
        n_llm=4, n_baseline=4, llm_k=5, passage_chars=400, tau=0.05, llm_rows=""
    )


def _rows(rrcp: Any) -> dict[str, list[Any]]:
    negatives = [rrcp.Item(f"squad:{i}", "squad", f"q{i}?", ("a",), False) for i in range(4)]
    rows = {}
    for name in ("musique", "hotpotqa"):
        positives = [rrcp.Item(f"{name}:{i}", name, f"q{i}?", ("a",), True) for i in range(4)]
        rows[name] = rrcp.interleave(positives, negatives)
    rows["musique_subq"] = list(negatives)
    return rows


def _store(cache: LLMCallCache, kind: str, key: str, value: Any) -> None:
    cache.put(f"rrcp:{kind}:{key}", value, kind="test", seconds=2.0)


def test_llm_scores_are_cached_per_chat_model(rrcp: Any, tmp_path: Path) -> None:
    cache = LLMCallCache(tmp_path / "scores.sqlite")
    scorer = SimpleNamespace(args=_args())
    small, big = rrcp.LLMScores(SMALL, scorer, cache), rrcp.LLMScores(BIG, scorer, cache)
    item = _rows(rrcp)["musique"][0]
    _store(cache, small.evaluator_kind, item.key, [0.9, 0.1, 0.1, 0.1, 0.1])
    _store(cache, small.baseline_kind, item.key, 0.7)
    assert small.evaluator(item, compute=False).value == [0.9, 0.1, 0.1, 0.1, 0.1]
    assert small.baseline(item, compute=False).value == 0.7
    # the bigger model never reads the small one's scores
    assert big.evaluator(item, compute=False) is None
    assert big.baseline(item, compute=False) is None
    cache.close()


def test_rows_of_a_partial_run_cover_the_scored_prefix(rrcp: Any, tmp_path: Path) -> None:
    cache = LLMCallCache(tmp_path / "scores.sqlite")
    args = _args()
    rows = _rows(rrcp)
    assert set(rrcp.llm_sets(rows, args)) == set(rows)  # every row, musique_subq included
    args.llm_rows = "musique,hotpotqa"  # --llm-rows picks the rows scored and reported
    with pytest.raises(SystemExit, match="no row"):
        rrcp.llm_sets(rows, argparse.Namespace(**{**vars(args), "llm_rows": "nope"}))
    llm = rrcp.LLMScores(BIG, SimpleNamespace(args=args), cache)
    bases = {i.key: {"sims": [[0.5, 0.9]] * 5} for items in rows.values() for i in items}
    order = rrcp.round_robin([e for e, _ in rrcp.llm_sets(rows, args).values()])
    # round robin: the first positive of each dataset, then the shared first negative, ...
    assert [i.key for i in order[:4]] == ["musique:0", "hotpotqa:0", "squad:0", "musique:1"]
    for item in order[:9]:  # stopped early: 6 of the 8 questions of each dataset
        # complex questions: no passage answers them; SQuAD ones: the first passage does
        _store(cache, llm.evaluator_kind, item.key, [0.1] * 5 if item.label else [0.95] + [0.1] * 4)
    out = rrcp.llm_rows(rows, bases, llm, args)
    assert {r["dataset"] for r in out} == {"musique", "hotpotqa"}
    rrcp_rows = [r for r in out if r["method"] == "rrcp"]
    assert len(rrcp_rows) == 2
    for row in rrcp_rows:
        assert (row["evaluator"], row["model"]) == ("llm", BIG)
        assert (row["n_test"], row["n_test_planned"]) == (6, 8)  # both folds, cross-fitted
        assert row["accuracy"] == 1.0 and row["seconds_per_question"] == 2.0
    assert not [r for r in out if r["method"] == "llm_baseline"]  # nothing cached for it
    cache.close()
