"""Algorithm 1 (NAR) invariants with a fake scorer and a fake graph: no models involved."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest

from rag_complexity_agents.retrieval.nar import BatchFeedback, NARParams
from rag_complexity_agents.retrieval.nar_trace import neighbourhood_aware_rerank, rerank_only
from rag_complexity_agents.types import Chunk, ScoredDoc


class FakeScorer:
    """Scores from a table; records every call so re-scoring and batch sizes are visible."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.calls: list[list[str]] = []

    def __call__(self, query: str, docs: Sequence[Chunk]) -> np.ndarray:
        self.calls.append([d.id for d in docs])
        return np.array([self.table.get(d.id, 0.0) for d in docs])

    @property
    def scored(self) -> list[str]:
        return [doc_id for call in self.calls for doc_id in call]


class FakeGraph:
    def __init__(self, edges: dict[str, list[str]]) -> None:
        self.edges = edges
        self.lookups: list[tuple[str, int]] = []

    def __call__(self, doc_id: str, n: int) -> list[tuple[str, float]]:
        self.lookups.append((doc_id, n))
        targets = self.edges.get(doc_id, [])[:n]
        return [(t, 0.9 - 0.01 * i) for i, t in enumerate(targets)]


def chunk(doc_id: str) -> Chunk:
    return Chunk(doc_id, f"text of {doc_id}", title=doc_id)


def ranking(ids: Sequence[str]) -> list[ScoredDoc]:
    return [ScoredDoc(chunk(i), 100.0 - r, rank=r + 1) for r, i in enumerate(ids)]


def chain_world(n_first: int = 40, fanout: int = 3) -> tuple[list[ScoredDoc], FakeGraph, dict]:
    """First-stage docs r0..r{n-1}; each r_i has fresh neighbours n{i}_0..n{i}_{fanout-1}."""
    first = [f"r{i}" for i in range(n_first)]
    edges = {f"r{i}": [f"n{i}_{j}" for j in range(fanout)] for i in range(n_first)}
    table = {f"r{i}": 1.0 - i / 100 for i in range(n_first)}
    for i in range(n_first):
        for j in range(fanout):
            table[f"n{i}_{j}"] = 0.5 - i / 1000 - j / 10000
    return ranking(first), FakeGraph(edges), table


def run(initial, graph, table, **params):
    scorer = FakeScorer(table)
    result = neighbourhood_aware_rerank(
        "q",
        initial,
        score=scorer,
        neighbours=graph,
        chunk_of=chunk,
        params=NARParams(**params),
    )
    return result, scorer


def test_budget_and_batch_sizes() -> None:
    initial, graph, table = chain_world()
    result, scorer = run(initial, graph, table, b=4, c=18, neighbours_per_doc=2)
    assert len(scorer.scored) == 18 == result.trace.scored
    assert [len(call) for call in scorer.calls] == [4, 4, 4, 4, 2]  # last batch cut to c
    assert len(result.trace.batches) == 5


def test_alternation_between_first_stage_and_neighbours() -> None:
    initial, graph, table = chain_world()
    result, _ = run(initial, graph, table, b=4, c=24, neighbours_per_doc=2)
    pools = [batch.pool for batch in result.trace.batches]
    assert pools == ["R", "N", "R", "N", "R", "N"]
    for batch in result.trace.batches:
        expected = "first_stage" if batch.pool == "R" else "neighbour"
        assert {d.source for d in result.docs if d.id in batch.ids} == {expected}


def test_no_document_is_scored_twice() -> None:
    # a dense graph: every doc points at every other doc, including first-stage ones
    ids = [f"d{i}" for i in range(12)]
    edges = {i: [j for j in ids if j != i] + ["x1", "x2"] for i in ids}
    edges["x1"] = ids
    table = {i: float(n) for n, i in enumerate(ids)} | {"x1": 5.5, "x2": 0.1}
    result, scorer = run(
        ranking(ids[:8]), FakeGraph(edges), table, b=3, c=100, neighbours_per_doc=20
    )
    assert len(scorer.scored) == len(set(scorer.scored))
    assert set(scorer.scored) == set(ids) | {"x1", "x2"}  # everything reachable, then stop
    assert len(result.docs) == len({d.id for d in result.docs})


def test_a_first_stage_document_reached_as_neighbour_keeps_its_first_stage_rank() -> None:
    edges = {"a": ["z"], "z": []}
    table = {"a": 1.0, "b": 0.2, "c": 0.1, "z": 0.05}
    initial = ranking(["a", "b", "c", "z"])
    result, scorer = run(initial, FakeGraph(edges), table, b=1, c=4)
    assert scorer.scored == ["a", "z", "b", "c"]  # z jumps the queue through the graph
    z = next(d for d in result.docs if d.id == "z")
    assert (z.source, z.via, z.extra["first_stage_rank"]) == ("neighbour", "a", 4)


def test_neighbours_are_prioritised_by_their_bringers_score() -> None:
    initial = ranking(["low", "high", "mid"])  # first-stage order differs from the scores
    edges = {"low": ["n_low"], "high": ["n_high1", "n_high2"], "mid": ["n_mid"]}
    table = {"low": 0.1, "high": 0.9, "mid": 0.5, "n_low": 0.99, "n_mid": 0.0}
    result, scorer = run(initial, FakeGraph(edges), table, b=3, c=7, neighbours_per_doc=2)
    # neighbour batch: high's neighbours (graph order), then mid's; low's waits
    assert scorer.calls[1] == ["n_high1", "n_high2", "n_mid"]
    assert scorer.calls[2] == ["n_low"]  # R is exhausted, so N continues
    by_id = {d.id: d for d in result.docs}
    assert by_id["n_high2"].via == "high" and by_id["n_high2"].extra["priority"] == 0.9


def test_priority_is_raised_when_a_better_bringer_appears() -> None:
    initial = ranking(["a", "b"])
    edges = {"a": ["shared"], "b": ["shared"]}
    table = {"a": 0.2, "b": 0.8, "shared": 0.5}
    result, _ = run(initial, FakeGraph(edges), table, b=2, c=3)
    shared = next(d for d in result.docs if d.id == "shared")
    assert (shared.via, shared.extra["priority"]) == ("b", 0.8)


def test_backfill_follows_the_first_stage_order_below_every_scored_doc() -> None:
    initial, graph, table = chain_world(n_first=20)
    result, _ = run(initial, graph, table, b=4, c=12, neighbours_per_doc=1)
    scored = [d for d in result.docs if d.source != "backfill"]
    backfill = [d for d in result.docs if d.source == "backfill"]
    assert len(scored) == 12
    scored_first = {d.id for d in scored if d.source == "first_stage"}
    expected = [d.id for d in initial if d.id not in scored_first]
    assert [d.id for d in backfill] == expected
    assert max(d.score for d in backfill) < min(d.score for d in scored)
    assert all(d.batch is None and d.extra["first_stage_rank"] >= 1 for d in backfill)
    assert [d.rank for d in result.docs] == list(range(1, len(result.docs) + 1))
    assert [d.score for d in result.docs] == sorted((d.score for d in result.docs), reverse=True)
    assert result.trace.backfilled == len(backfill)


def test_provenance_of_every_returned_document() -> None:
    initial, graph, table = chain_world()
    result, _ = run(initial, graph, table, b=4, c=16, neighbours_per_doc=2)
    first_ids = {d.id for d in initial}
    for doc in result.docs:
        if doc.source == "first_stage":
            assert doc.id in first_ids and doc.batch is not None and doc.via is None
        elif doc.source == "neighbour":
            assert doc.batch is not None and doc.via is not None
            bringer = next(d for d in result.docs if d.id == doc.via)
            assert bringer.batch is not None and bringer.batch < doc.batch
            assert doc.id in graph.edges[doc.via]
        else:
            assert doc.source == "backfill" and doc.id in first_ids
        assert json.dumps(doc.to_trace())
    assert result.trace.new_documents == sum(d.source == "neighbour" for d in result.docs)


def test_edge_cases_empty_ranking_zero_budget_no_neighbours() -> None:
    initial, graph, table = chain_world(n_first=5)
    empty, scorer = run([], graph, table, b=4, c=10)
    assert empty.docs == [] and scorer.calls == []
    zero, scorer = run(initial, graph, table, b=4, c=0)
    assert scorer.calls == [] and [d.source for d in zero.docs] == ["backfill"] * 5
    flat, scorer = run(initial, graph, table, b=2, c=10, neighbours_per_doc=0)
    assert graph.lookups == [] and scorer.scored == [d.id for d in initial]
    assert flat.trace.scored == 5 and flat.trace.backfilled == 0
    duplicates, scorer = run([*initial, *initial], graph, table, b=8, c=8, neighbours_per_doc=0)
    assert scorer.scored == [d.id for d in initial] and len(duplicates.docs) == 5
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        NARParams(b=0)


def test_hook_rescores_batches_and_drives_neighbour_priority() -> None:
    initial = ranking(["a", "b", "c", "d"])
    edges = {"a": ["na"], "b": ["nb"], "c": ["nc"], "d": ["nd"]}
    table = {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6, "na": 0.1, "nb": 0.1, "nc": 0.1}
    seen: list[int] = []

    def penalise_first_batch(query: str, batch: Sequence[ScoredDoc], index: int) -> BatchFeedback:
        seen.append(index)
        factor = 10.0 if index == 0 else 1.0
        return BatchFeedback(np.array([d.score / factor for d in batch]), {"index": index})

    scorer = FakeScorer(table)
    result = neighbourhood_aware_rerank(
        "q",
        initial,
        score=scorer,
        neighbours=FakeGraph(edges),
        chunk_of=chunk,
        params=NARParams(b=2, c=6, neighbours_per_doc=1),
        hook=penalise_first_batch,
    )
    assert seen == [0, 1, 2]
    by_id = {d.id: d for d in result.docs}
    assert by_id["a"].score == pytest.approx(0.09) and by_id["a"].extra["scorer_score"] == 0.9
    # c and d (batch 2) now outrank a and b (batch 0)
    assert [d.id for d in result.docs[:2]] == ["c", "d"]
    assert result.trace.batches[0].hook == {"index": 0}
    assert json.dumps(result.trace.to_dict())


def test_trace_timing_split_and_rerank_only_baseline() -> None:
    initial, graph, table = chain_world()
    result, _ = run(initial, graph, table, b=4, c=20, neighbours_per_doc=3)
    t = result.trace
    assert t.total_ms >= t.scoring_ms >= 0 and t.bookkeeping_ms >= 0
    assert t.bookkeeping_ms == pytest.approx(t.total_ms - t.scoring_ms - t.hook_ms)
    assert t.neighbour_lookups == 20  # one graph look-up per scored document
    data = json.loads(json.dumps(t.to_dict()))
    assert data["scored"] == 20 and len(data["batches"]) == 5

    scorer = FakeScorer(table)
    baseline = rerank_only("q", initial, score=scorer, params=NARParams(b=4, c=20))
    assert scorer.scored == [d.id for d in initial[:20]]
    assert {d.source for d in baseline.docs[:20]} == {"first_stage"}
    assert len(baseline.docs) == len(initial)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_scorer_scores_are_rejected(bad: float) -> None:
    initial, graph, table = chain_world(n_first=6)
    table["r3"] = bad
    with pytest.raises(ValueError, match=r"the scorer returned non-finite scores \(r3="):
        run(initial, graph, table, b=2, c=6)


def test_non_finite_hook_scores_are_rejected() -> None:
    initial, graph, table = chain_world(n_first=4)

    def broken(query: str, batch: Sequence[ScoredDoc], index: int) -> BatchFeedback:
        return BatchFeedback(np.array([float("nan")] * len(batch)))

    with pytest.raises(ValueError, match="the batch hook returned non-finite scores"):
        neighbourhood_aware_rerank(
            "q",
            initial,
            score=FakeScorer(table),
            neighbours=graph,
            chunk_of=chunk,
            params=NARParams(b=2, c=4),
            hook=broken,
        )
