"""Neighbourhood-Aware Retrieval (NAR): SUNAR Algorithm 1 as a pure function.

Inputs are plain data and three callables, so NAR runs (and is tested) without any model:

* ``initial``: the initial ranking R (first-stage list, best first);
* ``score(query, chunks) -> scores``: the scorer (``Scorer.score`` fits);
* ``neighbours(doc_id, n) -> [(doc_id, similarity)]``: the corpus graph G
  (``TopKGraph.neighbours`` fits);
* ``chunk_of(doc_id) -> Chunk``: turns a neighbour id into a scorable chunk;
* optionally ``prefetch(doc_ids, n)``: told once per batch which documents' neighbours are
  read next (``OnDemandGraph.prefetch`` fits: one store call per batch instead of one per
  document). It only warms the graph; the neighbours read, and so the results, are the same.

The loop, for budget c and batch size b::

    R+ = {} ; C = R ; N = {}
    repeat
        B  = score(top min(b, c - |R+|) documents of C)      # never a document twice
        B  = hook(B)                                          # optional, e.g. ASU's 1/s
        R+ = R+ ∪ B ; R = R \\ B ; N = N \\ B
        N  = N ∪ (neighbours(B, G) \\ R+)   priority = score of the document that brought it
        C  = the other pool (R ↔ N); if it is empty, the non-empty one
    until |R+| >= c or R and N are both empty
    return R+ by score, then the unscored rest of R in first-stage order (backfill)

Details the paper leaves open, and the choices made here (those of the reference design,
pyterrier-adaptive ``GAR``):

* A neighbour reached from several scored documents keeps the highest bringer score as its
  priority (and that bringer as ``via``); ties go to the neighbour found first, i.e. the
  earlier batch, then the bringer's graph order (most similar first).
* A first-stage document may also enter N (line 15 only removes R+). Whichever pool scores it
  first wins; the other pool then skips it. Such a document gets ``source="neighbour"`` and
  keeps its first-stage rank in ``extra["first_stage_rank"]``.
* Scores must be finite: a NaN or ±inf from the scorer or the batch hook raises ValueError
  (NaN has no order, so it would corrupt the neighbour pool's priorities and the ranking).
* Backfilled documents get scores strictly below every scored one
  (``min(scored) - 1 - i``) so that a single sort by score keeps the order; their first-stage
  score is kept in ``extra["first_stage_score"]``.

Timing: the trace splits the wall time into ``scoring_ms`` (inside ``score``), ``hook_ms``
(inside the batch hook) and ``bookkeeping_ms`` (everything else: pool updates, graph
look-ups, sorting), so NAR's own overhead can be compared with the scorer's cost.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np

from ..config import NARParams
from ..types import Chunk, ScoredDoc

ScoreFn = Callable[[str, Sequence[Chunk]], np.ndarray]
NeighbourFn = Callable[[str, int], Sequence[tuple[str, float]]]
ChunkFn = Callable[[str], Chunk]
PrefetchFn = Callable[[Sequence[str], int], None]
PoolName = Literal["R", "N"]


@dataclass(slots=True)
class BatchFeedback:
    """What a batch hook returns: new scores for the batch (same order) and trace data."""

    scores: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)


class BatchHook(Protocol):
    """Re-scores one scored batch B before it joins R+ (Algorithm 1, lines 6-9)."""

    def __call__(self, query: str, batch: Sequence[ScoredDoc], batch_index: int) -> BatchFeedback:
        """``batch`` holds the scorer's scores; return the batch's final scores."""
        ...


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


def _require_finite(values: np.ndarray, batch: Sequence[ScoredDoc], source: str) -> None:
    """ValueError naming the documents when ``values`` holds NaN or ±inf."""
    bad = [
        f"{doc.id}={value}"
        for doc, value in zip(batch, values, strict=True)
        if not np.isfinite(value)
    ]
    if bad:
        raise ValueError(
            f"{source} returned non-finite scores ({', '.join(bad)}); NAR ranks by score and "
            "needs finite numbers (check the scorer model and its inputs)"
        )


class _Frontier(NamedTuple):
    """Entry of the neighbour pool N."""

    priority: float
    via: str
    similarity: float


class _NeighbourPool:
    """N: a max-priority queue with lazy deletion and priority increases."""

    def __init__(self) -> None:
        self.entries: dict[str, _Frontier] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._counter = 0

    def __len__(self) -> int:
        return len(self.entries)

    def offer_all(
        self,
        candidates: Iterable[tuple[str, float]],
        priority: float,
        via: str,
        scored: Container[str],
    ) -> int:
        """Offer the unscored ``candidates`` (id, similarity) brought by ``via`` with
        ``priority``: add new ones, raise lower priorities. Returns how many were new."""
        entries, heap, added = self.entries, self._heap, 0
        for doc_id, similarity in candidates:
            if doc_id in scored:
                continue
            current = entries.get(doc_id)
            if current is not None and current.priority >= priority:
                continue
            entries[doc_id] = _Frontier(priority, via, float(similarity))
            heapq.heappush(heap, (-priority, self._counter, doc_id))
            self._counter += 1
            added += current is None
        return added

    def discard(self, doc_id: str) -> None:
        self.entries.pop(doc_id, None)

    def pop(self) -> tuple[str, _Frontier] | None:
        while self._heap:
            neg_priority, _, doc_id = heapq.heappop(self._heap)
            entry = self.entries.get(doc_id)
            if entry is not None and entry.priority == -neg_priority:
                del self.entries[doc_id]
                return doc_id, entry
        return None


def _unique(initial: Iterable[ScoredDoc]) -> list[ScoredDoc]:
    seen: set[str] = set()
    out = []
    for doc in initial:
        if doc.id not in seen:
            seen.add(doc.id)
            out.append(doc)
    return out


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
    """Run SUNAR's Algorithm 1 for ``query`` over the initial ranking ``initial`` (R).

    Returns every scored document (R+) by descending final score, then the first-stage
    documents that were never scored (backfill). Documents reached through the graph that
    were not scored within the budget are not returned. Duplicate ids in ``initial`` keep
    their first occurrence.
    """
    params = params or NARParams()
    start = time.perf_counter()
    trace = NARTrace(params=params)
    ranking = _unique(initial)
    trace.initial_size = len(ranking)
    first_stage = {doc.id: (position, doc) for position, doc in enumerate(ranking)}

    scored: dict[str, ScoredDoc] = {}  # R+, in scoring order
    frontier = _NeighbourPool()  # N
    cursor = 0  # R = ranking[cursor:] minus scored documents
    use_first_stage = True  # C starts as R

    def first_stage_left() -> bool:
        nonlocal cursor
        while cursor < len(ranking) and ranking[cursor].id in scored:
            cursor += 1
        return cursor < len(ranking)

    while len(scored) < params.c:
        has_r, has_n = first_stage_left(), len(frontier) > 0
        if not has_r and not has_n:
            break
        pool: PoolName = "R" if (use_first_stage and has_r) or not has_n else "N"
        size = min(params.b, params.c - len(scored))

        # ---- select B: the top `size` unscored documents of the chosen pool
        batch: list[ScoredDoc] = []
        if pool == "R":
            while len(batch) < size and first_stage_left():
                doc = ranking[cursor]
                cursor += 1
                batch.append(
                    ScoredDoc(
                        doc.chunk,
                        float("nan"),
                        source="first_stage",
                        batch=len(trace.batches),
                        extra={"first_stage_rank": cursor, "first_stage_score": doc.score},
                    )
                )
        else:
            while len(batch) < size:
                popped = frontier.pop()
                if popped is None:
                    break
                doc_id, entry = popped
                if doc_id in scored:
                    continue
                extra: dict[str, Any] = {
                    "priority": entry.priority,
                    "similarity": entry.similarity,
                }
                if doc_id in first_stage:
                    position, original = first_stage[doc_id]
                    extra["first_stage_rank"] = position + 1
                    extra["first_stage_score"] = original.score
                    chunk = original.chunk
                else:
                    chunk = chunk_of(doc_id)
                batch.append(
                    ScoredDoc(
                        chunk,
                        float("nan"),
                        source="neighbour",
                        batch=len(trace.batches),
                        via=entry.via,
                        extra=extra,
                    )
                )
        if not batch:  # pragma: no cover - guarded by has_r / has_n
            break

        # ---- SCORE(B)
        tick = time.perf_counter()
        raw = np.asarray(score(query, [doc.chunk for doc in batch]), dtype=np.float64)
        scoring_ms = (time.perf_counter() - tick) * 1000.0
        if raw.shape != (len(batch),):
            raise ValueError(
                f"the scorer returned shape {raw.shape} for a batch of {len(batch)} documents"
            )
        _require_finite(raw, batch, "the scorer")
        for doc, value in zip(batch, raw, strict=True):
            doc.score = float(value)

        # ---- optional RESCORE(B) (ASU)
        hook_ms, hook_info = 0.0, {}
        final = raw
        if hook is not None:
            tick = time.perf_counter()
            feedback = hook(query, batch, len(trace.batches))
            hook_ms = (time.perf_counter() - tick) * 1000.0
            final = np.asarray(feedback.scores, dtype=np.float64)
            if final.shape != raw.shape:
                raise ValueError(
                    f"the batch hook returned shape {final.shape} for {len(batch)} documents"
                )
            _require_finite(final, batch, "the batch hook")
            hook_info = feedback.info
            for doc, before, after in zip(batch, raw, final, strict=True):
                doc.extra["scorer_score"] = float(before)
                doc.score = float(after)

        # ---- R+ = R+ ∪ B; R = R \ B; N = N \ B
        for doc in batch:
            scored[doc.id] = doc
            frontier.discard(doc.id)

        # ---- N = N ∪ (neighbours(B, G) \ R+), prioritised by the bringer's score
        added = 0
        if params.neighbours_per_doc > 0:
            order = sorted(range(len(batch)), key=lambda i: -batch[i].score)
            tick = time.perf_counter()
            if prefetch is not None:
                prefetch([batch[i].chunk.id for i in order], params.neighbours_per_doc)
            for i in order:
                bringer = batch[i]
                found = neighbours(bringer.chunk.id, params.neighbours_per_doc)
                added += frontier.offer_all(found, bringer.score, bringer.chunk.id, scored)
            trace.neighbour_lookups += len(order)
            trace.graph_ms += (time.perf_counter() - tick) * 1000.0

        trace.batches.append(
            BatchTrace(
                index=len(trace.batches),
                pool=pool,
                ids=[doc.id for doc in batch],
                scores=[float(v) for v in raw],
                final_scores=[float(v) for v in final],
                neighbours_added=added,
                scoring_ms=scoring_ms,
                hook_ms=hook_ms,
                hook=hook_info,
            )
        )
        trace.scoring_ms += scoring_ms
        trace.hook_ms += hook_ms
        use_first_stage = pool == "N"  # alternate C between R and N

    # ---- output: R+ by score (stable: earlier batches win ties), then backfill
    ranked = sorted(scored.values(), key=lambda d: -d.score)
    floor = min((d.score for d in ranked), default=0.0)
    backfill: list[ScoredDoc] = []
    for doc in ranking:
        if doc.id in scored:
            continue
        position = first_stage[doc.id][0]
        backfill.append(
            ScoredDoc(
                doc.chunk,
                floor - 1.0 - len(backfill),
                source="backfill",
                extra={"first_stage_rank": position + 1, "first_stage_score": doc.score},
            )
        )
    docs = [*ranked, *backfill]
    for rank, doc in enumerate(docs, start=1):
        doc.rank = rank

    trace.scored = len(scored)
    trace.scored_first_stage = sum(d.source == "first_stage" for d in scored.values())
    trace.scored_neighbours = trace.scored - trace.scored_first_stage
    trace.new_documents = sum(d.id not in first_stage for d in scored.values())
    trace.backfilled = len(backfill)
    trace.neighbour_pool_left = len(frontier)
    trace.total_ms = (time.perf_counter() - start) * 1000.0
    return NARResult(docs, trace)


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


__all__ = [
    "BatchFeedback",
    "BatchHook",
    "BatchTrace",
    "ChunkFn",
    "NARParams",
    "NARResult",
    "NARTrace",
    "NeighbourFn",
    "PrefetchFn",
    "ScoreFn",
    "neighbourhood_aware_rerank",
    "rerank_only",
]
