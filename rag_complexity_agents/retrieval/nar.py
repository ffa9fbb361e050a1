"""Neighbourhood-Aware Retrieval (NAR): SUNAR's Algorithm 1.

:class:`NeighbourhoodAwareReranker` is the algorithm and nothing else. Its inputs are plain
data and callables, so it runs (and is tested) without any model:

* ``initial``: the initial ranking R (first-stage list, best first);
* ``score(query, chunks) -> scores``: the scorer (``Scorer.score`` fits);
* ``neighbours(doc_id, n) -> [(doc_id, similarity)]``: the corpus graph G
  (``TopKGraph.neighbours`` fits);
* ``chunk_of(doc_id) -> Chunk``: turns a neighbour id into a scorable chunk;
* optionally ``rescore(query, batch, index) -> BatchFeedback``: re-scores each scored batch
  (ASU's 1/s), see :class:`BatchHook`;
* optionally ``prefetch(doc_ids, n)``: told once per batch which documents' neighbours are
  read next (``OnDemandGraph.prefetch`` fits: one store call per batch instead of one per
  document). It only warms the graph; the neighbours read, and so the results, are the same.

The loop, for budget c and batch size b::

    R+ = {} ; C = R ; N = {}
    repeat
        B  = score(top min(b, c - |R+|) documents of C)      # never a document twice
        B  = rescore(B)                                       # optional, e.g. ASU's 1/s
        R+ = R+ ∪ B ; R = R \\ B ; N = N \\ B
        N  = N ∪ (neighbours(B, G) \\ R+)   priority = score of the document that brought it
        C  = the other pool (R ↔ N); if it is empty, the non-empty one
    until |R+| >= c or R and N are both empty
    return R+ by score, then the unscored rest of R in first-stage order (backfill)

Details the paper leaves open, and the choices made here (those of the reference design,
pyterrier-adaptive ``GAR``):

* A neighbour reached from several scored documents keeps the highest bringer score as its
  priority (and that bringer as ``via``); ties go to the neighbour that reached its priority
  first, i.e. the earlier batch, then the bringer's rank in the batch (best score first),
  then the bringer's graph order (most similar first).
* A first-stage document may also enter N (line 15 only removes R+). Whichever pool scores it
  first wins; the other pool then skips it. Such a document gets ``source="neighbour"`` and
  keeps its first-stage rank in ``extra["first_stage_rank"]``.
* Scores must be finite: a NaN or ±inf from the scorer or the batch hook raises ValueError
  (NaN has no order, so it would corrupt the neighbour pool's priorities and the ranking).
* Backfilled documents get scores strictly below every scored one
  (``min(scored) - 1 - i``) so that a single sort by score keeps the order; their first-stage
  score is kept in ``extra["first_stage_score"]``.

:func:`neighbourhood_aware_rerank` runs the algorithm with timed callables and builds the
:class:`NARTrace` afterwards from the returned batches: the trace splits the wall time into
``scoring_ms`` (inside ``score``), ``hook_ms`` (inside the batch hook) and ``bookkeeping_ms``
(everything else: pool updates, graph look-ups, sorting), so NAR's own overhead can be
compared with the scorer's cost; ``graph_ms`` is the part spent inside ``neighbours`` and
``prefetch``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Container, Iterable, Sequence
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


RescoreFn = Callable[[str, Sequence[ScoredDoc], int], BatchFeedback]


# ---------------------------------------------------------------------------- the two pools


class _FirstStage:
    """R: the initial ranking without duplicate ids, consumed from the top."""

    def __init__(self, initial: Iterable[ScoredDoc]) -> None:
        self.ranking: list[ScoredDoc] = []
        self._position: dict[str, int] = {}
        for doc in initial:
            if doc.id not in self._position:
                self._position[doc.id] = len(self.ranking)
                self.ranking.append(doc)
        self._cursor = 0

    def has_unscored(self, scored: Container[str]) -> bool:
        """Whether R \\ R+ is non-empty (skips the documents the neighbour pool scored)."""
        while self._cursor < len(self.ranking) and self.ranking[self._cursor].id in scored:
            self._cursor += 1
        return self._cursor < len(self.ranking)

    def take(self, size: int, scored: Container[str], index: int) -> list[ScoredDoc]:
        """The top ``size`` unscored documents of R, as unscored members of batch ``index``."""
        batch: list[ScoredDoc] = []
        while len(batch) < size and self.has_unscored(scored):
            doc = self.ranking[self._cursor]
            self._cursor += 1
            batch.append(
                ScoredDoc(
                    doc.chunk,
                    float("nan"),
                    source="first_stage",
                    batch=index,
                    extra=self.provenance(doc.id),
                )
            )
        return batch

    def get(self, doc_id: str) -> ScoredDoc | None:
        position = self._position.get(doc_id)
        return None if position is None else self.ranking[position]

    def provenance(self, doc_id: str) -> dict[str, Any]:
        """The first-stage rank (1-based) and score of a document of R."""
        position = self._position[doc_id]
        return {
            "first_stage_rank": position + 1,
            "first_stage_score": self.ranking[position].score,
        }


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

    def take(
        self, size: int, index: int, first_stage: _FirstStage, chunk_of: ChunkFn
    ) -> list[ScoredDoc]:
        """The ``size`` highest-priority documents of N, as unscored members of batch
        ``index`` (a document of R keeps its first-stage chunk and provenance)."""
        batch: list[ScoredDoc] = []
        while len(batch) < size and (popped := self.pop()) is not None:
            doc_id, entry = popped
            extra: dict[str, Any] = {"priority": entry.priority, "similarity": entry.similarity}
            original = first_stage.get(doc_id)
            if original is not None:
                extra.update(first_stage.provenance(doc_id))
            chunk = original.chunk if original is not None else chunk_of(doc_id)
            batch.append(
                ScoredDoc(
                    chunk,
                    float("nan"),
                    source="neighbour",
                    batch=index,
                    via=entry.via,
                    extra=extra,
                )
            )
        return batch


# ---------------------------------------------------------------------------- Algorithm 1


@dataclass(slots=True)
class NARBatch:
    """One iteration of Algorithm 1: the batch B (final scores in ``doc.score``), the pool C
    it was taken from, the scorer's scores before re-scoring, and the re-scorer's info."""

    pool: PoolName
    docs: list[ScoredDoc]
    scorer_scores: list[float]
    rescore_info: dict[str, Any]
    neighbours_added: int


@dataclass(slots=True)
class NAROutcome:
    """Algorithm 1's output: R+ by score then the backfill (``rank`` = 1..n), the batches in
    scoring order, and how many documents were left in the neighbour pool N."""

    docs: list[ScoredDoc]
    batches: list[NARBatch]
    neighbour_pool_left: int


def _checked(values: Any, batch: Sequence[ScoredDoc], source: str) -> np.ndarray:
    """``values`` as one finite float per document of ``batch``, else ValueError."""
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (len(batch),):
        raise ValueError(
            f"{source} returned shape {array.shape} for a batch of {len(batch)} documents"
        )
    bad = [f"{doc.id}={v}" for doc, v in zip(batch, array, strict=True) if not np.isfinite(v)]
    if bad:
        raise ValueError(
            f"{source} returned non-finite scores ({', '.join(bad)}); NAR ranks by score and "
            "needs finite numbers (check the scorer model and its inputs)"
        )
    return array


def _rank_with_backfill(scored: Collection[ScoredDoc], first_stage: _FirstStage) -> list[ScoredDoc]:
    """R+ by descending score (stable: earlier batches win ties), then the unscored rest of R
    in first-stage order with scores below every scored one; ranks 1..n."""
    ranked = sorted(scored, key=lambda d: -d.score)
    scored_ids = {doc.id for doc in ranked}
    floor = min((doc.score for doc in ranked), default=0.0)
    unscored = [doc for doc in first_stage.ranking if doc.id not in scored_ids]
    backfill = [
        ScoredDoc(
            doc.chunk, floor - 1.0 - i, source="backfill", extra=first_stage.provenance(doc.id)
        )
        for i, doc in enumerate(unscored)
    ]
    docs = [*ranked, *backfill]
    for rank, doc in enumerate(docs, start=1):
        doc.rank = rank
    return docs


class NeighbourhoodAwareReranker:
    """SUNAR's Algorithm 1: re-rank R within a scoring budget, alternating between R and the
    graph neighbours N of what scored well.

    ``batch_size`` is b, ``budget`` is c, ``neighbours_per_doc`` the neighbours of each scored
    document offered to N (0 turns NAR into plain re-ranking of R's top c); their defaults
    and checks live in :class:`NARParams` (see :meth:`from_params`). ``rescore`` is the
    optional re-scoring of each batch (ASU). Nothing here times or traces: time the callables
    and read the returned :class:`NARBatch` records.
    """

    def __init__(
        self,
        score: ScoreFn,
        neighbours: NeighbourFn,
        chunk_of: ChunkFn,
        *,
        batch_size: int,
        budget: int,
        neighbours_per_doc: int,
        rescore: RescoreFn | None = None,
        prefetch: PrefetchFn | None = None,
    ) -> None:
        self.score = score
        self.neighbours = neighbours
        self.chunk_of = chunk_of
        self.batch_size = batch_size
        self.budget = budget
        self.neighbours_per_doc = neighbours_per_doc
        self.rescore = rescore
        self.prefetch = prefetch

    @classmethod
    def from_params(
        cls,
        params: NARParams,
        score: ScoreFn,
        neighbours: NeighbourFn,
        chunk_of: ChunkFn,
        *,
        rescore: RescoreFn | None = None,
        prefetch: PrefetchFn | None = None,
    ) -> NeighbourhoodAwareReranker:
        """The reranker for the configured knobs (b, c, neighbours per document)."""
        return cls(
            score,
            neighbours,
            chunk_of,
            batch_size=params.b,
            budget=params.c,
            neighbours_per_doc=params.neighbours_per_doc,
            rescore=rescore,
            prefetch=prefetch,
        )

    def rerank(self, query: str, initial: Sequence[ScoredDoc]) -> NAROutcome:
        """Run Algorithm 1 for ``query`` over the initial ranking ``initial`` (R).

        Returns every scored document (R+) by descending final score, then the first-stage
        documents that were never scored (backfill). Documents reached through the graph that
        were not scored within the budget are not returned. Duplicate ids in ``initial`` keep
        their first occurrence.
        """
        first_stage = _FirstStage(initial)  # R
        frontier = _NeighbourPool()  # N
        results: dict[str, ScoredDoc] = {}  # R+, in scoring order
        batches: list[NARBatch] = []
        take_first_stage = True  # C starts as R
        while len(results) < self.budget:
            has_r, has_n = first_stage.has_unscored(results), len(frontier) > 0
            if not (has_r or has_n):
                break
            pool: PoolName = "R" if (take_first_stage and has_r) or not has_n else "N"
            size, index = min(self.batch_size, self.budget - len(results)), len(batches)
            if pool == "R":
                batch = first_stage.take(size, results, index)
            else:
                batch = frontier.take(size, index, first_stage, self.chunk_of)
            scorer_scores, info = self._score(query, batch, index)  # SCORE(B), RESCORE(B)
            for doc in batch:  # R+ = R+ ∪ B; R = R \ B; N = N \ B
                results[doc.id] = doc
                frontier.discard(doc.id)
            added = self._expand(batch, frontier, results)  # N = N ∪ (neighbours(B) \ R+)
            batches.append(NARBatch(pool, batch, scorer_scores, info, added))
            take_first_stage = pool == "N"  # alternate C between R and N
        return NAROutcome(
            _rank_with_backfill(results.values(), first_stage), batches, len(frontier)
        )

    def _score(
        self, query: str, batch: list[ScoredDoc], index: int
    ) -> tuple[list[float], dict[str, Any]]:
        """Score B, then re-score it when a ``rescore`` step is set; the documents get their
        final scores (the scorer's kept in ``extra["scorer_score"]`` when re-scored).
        Returns the scorer's scores and the re-scorer's info."""
        raw = _checked(self.score(query, [doc.chunk for doc in batch]), batch, "the scorer")
        for doc, value in zip(batch, raw, strict=True):
            doc.score = float(value)
        if self.rescore is None:
            return raw.tolist(), {}
        feedback = self.rescore(query, batch, index)
        final = _checked(feedback.scores, batch, "the batch hook")
        for doc, before, after in zip(batch, raw, final, strict=True):
            doc.extra["scorer_score"] = float(before)
            doc.score = float(after)
        return raw.tolist(), feedback.info

    def _expand(
        self, batch: Sequence[ScoredDoc], frontier: _NeighbourPool, scored: Container[str]
    ) -> int:
        """Offer each scored document's graph neighbours to N, best-scored bringer first,
        with the bringer's score as priority. Returns how many entered N."""
        n = self.neighbours_per_doc
        if n <= 0:
            return 0
        bringers = sorted(batch, key=lambda doc: -doc.score)
        if self.prefetch is not None:
            self.prefetch([doc.id for doc in bringers], n)
        return sum(
            frontier.offer_all(self.neighbours(doc.id, n), doc.score, doc.id, scored)
            for doc in bringers
        )


# ---------------------------------------------------------------------------- timing, trace
