"""NAR against a plain reference implementation of SUNAR's Algorithm 1 on random inputs.

The reference keeps R as a list and N as a dict and scans both on every step: slow, but
each line is a line of the paper. Both must score the same batches in the same order and
return the same ranking, scores and provenance.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_complexity_agents.retrieval.nar import (
    BatchFeedback,
    NARParams,
    NeighbourhoodAwareReranker,
)
from rag_complexity_agents.retrieval.nar_trace import neighbourhood_aware_rerank
from rag_complexity_agents.types import Chunk, ScoredDoc

IDS = [f"d{i}" for i in range(14)]


@dataclass
class World:
    initial: list[str]
    scores: dict[str, float]
    edges: dict[str, list[str]]
    b: int
    c: int
    k: int
    rescore: bool


@st.composite
def worlds(draw: st.DrawFn) -> World:
    # few distinct scores, so ties between documents and between bringers are common
    score = st.sampled_from([-1.0, 0.0, 0.25, 0.5, 1.0, 2.0])
    return World(
        initial=draw(st.lists(st.sampled_from(IDS), max_size=12)),
        scores={doc_id: draw(score) for doc_id in IDS},
        edges={doc_id: draw(st.lists(st.sampled_from(IDS), max_size=5)) for doc_id in IDS},
        b=draw(st.integers(1, 5)),
        c=draw(st.integers(0, 16)),
        k=draw(st.integers(0, 4)),
        rescore=draw(st.booleans()),
    )


def rescored(score: float, batch_index: int) -> float:
    """A re-scoring step that changes the order across batches (like ASU's 1/s)."""
    return score / (1 + batch_index % 3)


def reference(world: World) -> tuple[list[list[str]], list[tuple[str, float, str, str | None]]]:
    """Algorithm 1 step by step: (the batches scored, [(id, score, source, via)] ranked)."""
    r = list(dict.fromkeys(world.initial))  # R, duplicates dropped
    results: dict[str, tuple[float, str, str | None]] = {}  # R+: id -> (score, source, via)
    n: dict[str, tuple[float, int, str]] = {}  # N: id -> (priority, when it got it, via)
    clock = itertools.count()
    batches: list[list[str]] = []
    from_r = True  # C = R
    while len(results) < world.c:
        r_left = [doc_id for doc_id in r if doc_id not in results]
        if not r_left and not n:
            break
        use_r = bool(r_left) and (from_r or not n)
        size = min(world.b, world.c - len(results))
        if use_r:
            batch = r_left[:size]
        else:  # highest priority first; ties: the one that reached its priority first
            batch = sorted(n, key=lambda doc_id: (-n[doc_id][0], n[doc_id][1]))[:size]
        index = len(batches)
        batches.append(batch)
        scores = {doc_id: world.scores[doc_id] for doc_id in batch}  # SCORE(B)
        if world.rescore:
            scores = {doc_id: rescored(s, index) for doc_id, s in scores.items()}
        for doc_id in batch:  # R+ = R+ ∪ B; R = R \ B; N = N \ B
            source, via = ("first_stage", None) if use_r else ("neighbour", n[doc_id][2])
            results[doc_id] = (scores[doc_id], source, via)
            n.pop(doc_id, None)
        if world.k > 0:  # N = N ∪ (neighbours(B) \ R+), best bringer first
            for bringer in sorted(batch, key=lambda doc_id: -scores[doc_id]):
                for doc_id in world.edges[bringer][: world.k]:
                    if doc_id not in results and (
                        doc_id not in n or n[doc_id][0] < scores[bringer]
                    ):
                        n[doc_id] = (scores[bringer], next(clock), bringer)
        from_r = not use_r  # alternate C
    ranked = sorted(results.items(), key=lambda item: -item[1][0])
    out = [(doc_id, score, source, via) for doc_id, (score, source, via) in ranked]
    floor = min((score for _, score, _, _ in out), default=0.0)
    backfill = [doc_id for doc_id in r if doc_id not in results]
    out += [(doc_id, floor - 1.0 - i, "backfill", None) for i, doc_id in enumerate(backfill)]
    return batches, out


def chunk(doc_id: str) -> Chunk:
    return Chunk(doc_id, f"text of {doc_id}", title=doc_id)


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_nar_matches_the_reference_algorithm(world: World) -> None:
    calls: list[list[str]] = []

    def score(query: str, chunks: Sequence[Chunk]) -> np.ndarray:
        calls.append([c.id for c in chunks])
        return np.array([world.scores[c.id] for c in chunks])

    def neighbours(doc_id: str, n: int) -> list[tuple[str, float]]:
        return [(t, 1.0 - i / 10) for i, t in enumerate(world.edges[doc_id][:n])]

    def rescore(query: str, batch: Sequence[ScoredDoc], batch_index: int) -> BatchFeedback:
        return BatchFeedback(np.array([rescored(d.score, batch_index) for d in batch]))

    initial = [ScoredDoc(chunk(i), 100.0 - r) for r, i in enumerate(world.initial)]
    result = neighbourhood_aware_rerank(
        "q",
        initial,
        score=score,
        neighbours=neighbours,
        chunk_of=chunk,
        params=NARParams(b=world.b, c=world.c, neighbours_per_doc=world.k),
        hook=rescore if world.rescore else None,
    )
    batches, expected = reference(world)
    assert calls == batches == [b.ids for b in result.trace.batches]
    assert [(d.id, d.score, d.source, d.via) for d in result.docs] == expected
    assert [d.rank for d in result.docs] == list(range(1, len(expected) + 1))


@settings(max_examples=50, deadline=None)
@given(worlds())
def test_the_reranker_class_and_the_traced_function_agree(world: World) -> None:
    def score(query: str, chunks: Sequence[Chunk]) -> np.ndarray:
        return np.array([world.scores[c.id] for c in chunks])

    def neighbours(doc_id: str, n: int) -> list[tuple[str, float]]:
        return [(t, 0.5) for t in world.edges[doc_id][:n]]

    def initial() -> list[ScoredDoc]:
        return [ScoredDoc(chunk(i), 100.0 - r) for r, i in enumerate(world.initial)]

    params = NARParams(b=world.b, c=world.c, neighbours_per_doc=world.k)
    outcome = NeighbourhoodAwareReranker.from_params(params, score, neighbours, chunk).rerank(
        "q", initial()
    )
    traced = neighbourhood_aware_rerank(
        "q", initial(), score=score, neighbours=neighbours, chunk_of=chunk, params=params
    )
    assert [d.to_trace() for d in outcome.docs] == [d.to_trace() for d in traced.docs]
    assert [[d.id for d in b.docs] for b in outcome.batches] == [
        b.ids for b in traced.trace.batches
    ]
    assert traced.trace.neighbour_pool_left == outcome.neighbour_pool_left
