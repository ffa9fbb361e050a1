"""NAR as the retrieval strategies run it: SUNAR's Algorithm 1
(:class:`~.nar.NeighbourhoodAwareReranker`) with its calls timed and a trace built from the
batches it returns, plus the rerank-only baseline (the same loop with no graph)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar

from ..config import NARParams
from ..types import Chunk, ScoredDoc
from .nar import (
    BatchHook,
    ChunkFn,
    NAROutcome,
    NeighbourFn,
    NeighbourhoodAwareReranker,
    PoolName,
    PrefetchFn,
    ScoreFn,
)

_P = ParamSpec("_P")
_T = TypeVar("_T")


class _Stopwatch(Generic[_P, _T]):
    """Calls ``fn`` and records the wall time of every call (ms), in call order."""

    def __init__(self, fn: Callable[_P, _T]) -> None:
        self.fn = fn
        self.calls_ms: list[float] = []

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        tick = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.calls_ms.append((time.perf_counter() - tick) * 1000.0)

    @property
    def total_ms(self) -> float:
        return sum(self.calls_ms)


@dataclass(slots=True)
class BatchTrace:
    """One iteration of Algorithm 1."""

    index: int
    pool: PoolName
    ids: list[str]
    scores: list[float]
    final_scores: list[float]
    neighbours_added: int
    scoring_ms: float
    hook_ms: float
    hook: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "pool": self.pool,
            "ids": list(self.ids),
            "scores": list(self.scores),
            "final_scores": list(self.final_scores),
            "neighbours_added": self.neighbours_added,
            "scoring_ms": round(self.scoring_ms, 3),
            "hook_ms": round(self.hook_ms, 3),
            **({"hook": self.hook} if self.hook else {}),
        }


@dataclass(slots=True)
class NARTrace:
    """Everything NAR did for one query (JSON-serialisable through :meth:`to_dict`)."""

    params: NARParams
    initial_size: int = 0
    batches: list[BatchTrace] = field(default_factory=list)
    scored: int = 0
    scored_first_stage: int = 0
    scored_neighbours: int = 0
    new_documents: int = 0
    backfilled: int = 0
    neighbour_pool_left: int = 0
    neighbour_lookups: int = 0
    scoring_ms: float = 0.0
    hook_ms: float = 0.0
    graph_ms: float = 0.0
    total_ms: float = 0.0

    @property
    def bookkeeping_ms(self) -> float:
        """Wall time not spent in the scorer or the hook (pool updates, graph, sorting)."""
        return max(0.0, self.total_ms - self.scoring_ms - self.hook_ms)

    def to_dict(self, *, batches: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "b": self.params.b,
            "c": self.params.c,
            "neighbours_per_doc": self.params.neighbours_per_doc,
            "initial_size": self.initial_size,
            "scored": self.scored,
            "scored_first_stage": self.scored_first_stage,
            "scored_neighbours": self.scored_neighbours,
            "new_documents": self.new_documents,
            "backfilled": self.backfilled,
            "neighbour_pool_left": self.neighbour_pool_left,
            "neighbour_lookups": self.neighbour_lookups,
            "n_batches": len(self.batches),
            "timing_ms": {
                "scoring": round(self.scoring_ms, 3),
                "hook": round(self.hook_ms, 3),
                "bookkeeping": round(self.bookkeeping_ms, 3),
                "graph": round(self.graph_ms, 3),
                "total": round(self.total_ms, 3),
            },
        }
        if batches:
            out["batches"] = [batch.to_dict() for batch in self.batches]
        return out


@dataclass(slots=True)
class NARResult:
    """R+ followed by the backfill, ranked (``rank`` = 1..n), and the trace."""

    docs: list[ScoredDoc]
    trace: NARTrace


class _Timers:
    """Stopwatches around the callables NAR is given (the hook and prefetch may be absent)."""

    def __init__(
        self,
        score: ScoreFn,
        neighbours: NeighbourFn,
        hook: BatchHook | None,
        prefetch: PrefetchFn | None,
    ) -> None:
        self.score = _Stopwatch(score)
        self.neighbours = _Stopwatch(neighbours)
        self.hook = _Stopwatch(hook) if hook is not None else None
        self.prefetch = _Stopwatch(prefetch) if prefetch is not None else None

    def hook_ms(self, index: int) -> float:
        return self.hook.calls_ms[index] if self.hook is not None else 0.0

    @property
    def graph_ms(self) -> float:
        prefetch_ms = self.prefetch.total_ms if self.prefetch is not None else 0.0
        return self.neighbours.total_ms + prefetch_ms


def _build_trace(
    params: NARParams, initial: Sequence[ScoredDoc], outcome: NAROutcome, timers: _Timers
) -> NARTrace:
    """The trace of one run, from its outcome and the stopwatches (the scorer and the hook
    run once per batch, in batch order); ``total_ms`` is left to the caller."""
    initial_ids = {doc.id for doc in initial}
    scored = [doc for doc in outcome.docs if doc.source != "backfill"]
    batches = [
        BatchTrace(
            index=index,
            pool=batch.pool,
            ids=[doc.id for doc in batch.docs],
            scores=batch.scorer_scores,
            final_scores=[doc.score for doc in batch.docs],
            neighbours_added=batch.neighbours_added,
            scoring_ms=timers.score.calls_ms[index],
            hook_ms=timers.hook_ms(index),
            hook=batch.rescore_info,
        )
        for index, batch in enumerate(outcome.batches)
    ]
    first_stage = sum(doc.source == "first_stage" for doc in scored)
    return NARTrace(
        params=params,
        initial_size=len(initial_ids),
        batches=batches,
        scored=len(scored),
        scored_first_stage=first_stage,
        scored_neighbours=len(scored) - first_stage,
        new_documents=sum(doc.id not in initial_ids for doc in scored),
        backfilled=len(outcome.docs) - len(scored),
        neighbour_pool_left=outcome.neighbour_pool_left,
        neighbour_lookups=len(timers.neighbours.calls_ms),
        scoring_ms=sum(batch.scoring_ms for batch in batches),
        hook_ms=sum(batch.hook_ms for batch in batches),
        graph_ms=timers.graph_ms,
    )


def neighbourhood_aware_rerank(
    query: str,
    initial: Sequence[ScoredDoc],
    *,
    score: ScoreFn,
    neighbours: NeighbourFn,
    chunk_of: ChunkFn,
    params: NARParams | None = None,
    hook: BatchHook | None = None,
    prefetch: PrefetchFn | None = None,
) -> NARResult:
    """Run SUNAR's Algorithm 1 for ``query`` over ``initial`` (R) and trace it.

    :meth:`NeighbourhoodAwareReranker.rerank` with the knobs of ``params`` and ``hook`` as
    the re-scoring step; the callables are timed and the trace is built from the returned
    batches.
    """
    params = params or NARParams()
    start = time.perf_counter()
    timers = _Timers(score, neighbours, hook, prefetch)
    reranker = NeighbourhoodAwareReranker.from_params(
        params,
        timers.score,
        timers.neighbours,
        chunk_of,
        rescore=timers.hook,
        prefetch=timers.prefetch,
    )
    outcome = reranker.rerank(query, initial)
    trace = _build_trace(params, initial, outcome, timers)
    trace.total_ms = (time.perf_counter() - start) * 1000.0
    return NARResult(outcome.docs, trace)


def rerank_only(
    query: str,
    initial: Sequence[ScoredDoc],
    *,
    score: ScoreFn,
    params: NARParams | None = None,
    hook: BatchHook | None = None,
) -> NARResult:
    """The rerank-only baseline: Algorithm 1 with no graph (scores the top c of R, backfills).

    Same batches, budget and hook as NAR, so the two differ only in the neighbour pool.
    """
    flat = (params or NARParams()).model_copy(update={"neighbours_per_doc": 0})

    def no_chunk(doc_id: str) -> Chunk:  # pragma: no cover - never called without neighbours
        raise KeyError(doc_id)

    return neighbourhood_aware_rerank(
        query,
        initial,
        score=score,
        neighbours=lambda doc_id, n: (),
        chunk_of=no_chunk,
        params=flat,
        hook=hook,
    )
