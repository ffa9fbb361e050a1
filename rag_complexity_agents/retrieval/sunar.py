"""``SunarRetriever``: first stage + NAR (+ optional ASU) behind one ``retrieve(query, k)``.

Plain Python, no LangGraph: the agent graphs, the LlamaIndex/LangChain adapters and the
benchmarks all call this object. It is built from a collection and a config by
:func:`rag_complexity_agents.components.sunar_retriever` (or ``Components.sunar_retriever``).

Pool source (``nar.pool``) for a sub-question with ``original_query`` given:

* ``own``: R = the sub-question's own first-stage top-``first_stage_k``;
* ``original``: R = the original question's list (what the official SUNAR code does: the
  sub-question only re-scores and expands it);
* ``union``: both lists fused by reciprocal rank (up to 2 × ``first_stage_k`` documents).

Without ``original_query`` every policy uses the query's own list (the trace says so).
``carried`` (ids of documents a loop retrieved for its earlier hops, best first) joins the
pool by reciprocal rank, so a hop re-ranks the union of the earlier hops' evidence and its own
fresh search. Scoring is always against the query passed in.

Bad input:

* an empty collection raises :class:`~rag_complexity_agents.errors.CorpusError` (index
  documents first); a query for which the first stage finds nothing returns ``[]``;
* ``k`` larger than the collection returns every document NAR ranked (``len(result) < k``,
  ``trace["k_capped"]`` is true); ``k < 1`` raises InputError;
* a collection without a usable neighbourhood graph raises CorpusError, or with
  ``nar.missing_graph = "rerank"`` re-ranks R without neighbours and records
  ``trace["graph"]["fallback"]``; documents missing from the graph (e.g. from a foreign first
  stage) simply have no neighbours (counted in ``trace["graph"]["unknown_ids"]``).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from ..config.sections import NARParams
from ..corpus.graph import TopKGraph
from ..errors import CorpusError, InputError
from ..types import Chunk, ScoredDoc
from .first_stage import FirstStage, reciprocal_rank_fusion
from .nar import BatchHook
from .nar_trace import NARResult, neighbourhood_aware_rerank

if TYPE_CHECKING:
    from ..models.base import Scorer

PoolSource = Literal["own", "original", "union"]
MissingGraph = Literal["error", "rerank"]
ScoreFn = Callable[[str, Sequence[Chunk]], np.ndarray]


class NeighbourGraph(Protocol):
    """What NAR needs from a corpus graph (``TopKGraph`` fits)."""

    def neighbours(self, doc_id: str, n: int) -> list[tuple[str, float]]: ...


def fuse_pools(
    own: Sequence[ScoredDoc], original: Sequence[ScoredDoc], *, rrf_k: int = 60
) -> list[ScoredDoc]:
    """The ``union`` pool: both rankings fused by reciprocal rank, all documents kept.

    ``extra["pool"]`` says which list(s) a document came from.
    """
    in_own = {d.id for d in own}
    in_original = {d.id for d in original}
    fused = reciprocal_rank_fusion([own, original], k=len(in_own | in_original), rrf_k=rrf_k)
    for doc in fused:
        both = doc.id in in_own and doc.id in in_original
        doc.extra["pool"] = "both" if both else ("own" if doc.id in in_own else "original")
    return fused


class SunarRetriever:
    """First stage → NAR (Algorithm 1) → optional ASU re-scoring, with a JSON trace.

    ``graph`` may be ``None`` only with ``missing_graph="rerank"``. ``collection_size``
    (when known) lets empty collections fail clearly and caps ``k``.
    """

    def __init__(
        self,
        first_stage: FirstStage,
        scorer: Scorer | ScoreFn,
        graph: NeighbourGraph | None,
        chunk_of: Callable[[str], Chunk],
        *,
        params: NARParams | None = None,
        first_stage_k: int = 100,
        pool: PoolSource = "union",
        asu: BatchHook | None = None,
        missing_graph: MissingGraph = "error",
        graph_error: str | None = None,
        collection_size: int | None = None,
        rrf_k: int = 60,
        default_k: int = 10,
        original_cache_size: int = 32,
    ) -> None:
        if first_stage_k < 1:
            raise ValueError(f"first_stage_k must be at least 1, got {first_stage_k}")
        if pool not in ("own", "original", "union"):
            raise ValueError(f"unknown pool source {pool!r}; use 'own', 'original' or 'union'")
        self.first_stage = first_stage
        score = getattr(scorer, "score", None)
        self.score: ScoreFn = score if callable(score) else scorer  # type: ignore[assignment]
        self.scorer_name = str(getattr(scorer, "name", getattr(scorer, "__name__", "scorer")))
        self.params = params or NARParams()
        self.first_stage_k = first_stage_k
        self.pool: PoolSource = pool
        self.asu = asu
        self.chunk_of = chunk_of
        self.collection_size = collection_size
        self.rrf_k = rrf_k
        self.default_k = default_k
        self.graph_fallback: str | None = None
        if graph is None:
            reason = graph_error or "no neighbourhood graph was given"
            if missing_graph == "error":
                raise CorpusError(
                    f"{reason}. Rebuild it with `rca index` (it builds the graph), or set "
                    "nar.missing_graph = 'rerank' to re-rank without neighbours"
                )
            warnings.warn(
                f"{reason}; SUNAR falls back to re-ranking without neighbours",
                RuntimeWarning,
                stacklevel=2,
            )
            self.graph_fallback = reason
        self.graph = graph
        self._unknown_ids = 0
        self._graph_view: tuple[list[str], dict[str, int], np.ndarray, np.ndarray] | None = None
        self._graph_generation: str | None = None
        self._original_cache: OrderedDict[str, list[ScoredDoc]] = OrderedDict()
        self._original_cache_size = original_cache_size
        self.trace: dict[str, Any] = {}

    # ------------------------------------------------------------------ retrieval
    def _neighbours(self, doc_id: str, n: int) -> list[tuple[str, float]]:
        graph = self.graph
        if graph is None:
            return []
        if isinstance(graph, TopKGraph):
            return self._topk_neighbours(graph, doc_id, n)
        try:
            return list(graph.neighbours(doc_id, n))
        except CorpusError:
            self._unknown_ids += 1
            return []

    def _prefetch(self, doc_ids: Sequence[str], n: int) -> None:
        """Batch the coming neighbour look-ups when the graph can (``OnDemandGraph.prefetch``).

        A batch holding a document the graph does not know is left to the one-by-one
        look-ups, which count it as unknown."""
        prefetch = getattr(self.graph, "prefetch", None)
        if prefetch is None:
            return
        with contextlib.suppress(CorpusError):
            prefetch(doc_ids, n)

    def _topk_neighbours(self, graph: TopKGraph, doc_id: str, n: int) -> list[tuple[str, float]]:
        """``TopKGraph.neighbours`` on plain-array views of its memmaps (NAR's hot loop)."""
        if self._graph_view is None or self._graph_generation != graph.generation:
            self._graph_view = (
                graph.ids,
                graph.row_of,
                np.asarray(graph.neighbour_rows),  # views of the mapped files, nothing read
                np.asarray(graph.similarities),
            )
            self._graph_generation = graph.generation
        ids, row_of, rows, sims = self._graph_view
        row = row_of.get(doc_id)
        if row is None:
            self._unknown_ids += 1
            return []
        n = max(0, min(n, rows.shape[1]))
        return list(
            zip([ids[c] for c in rows[row, :n].tolist()], sims[row, :n].tolist(), strict=True)
        )

    def _search(self, query: str) -> list[ScoredDoc]:
        k = self.first_stage_k
        if self.collection_size is not None:
            k = min(k, self.collection_size)
        return self.first_stage.search(query, k)

    def _original_list(self, original_query: str) -> list[ScoredDoc]:
        cached = self._original_cache.get(original_query)
        if cached is not None:
            self._original_cache.move_to_end(original_query)
            return cached
        result = self._search(original_query)
        self._original_cache[original_query] = result
        while len(self._original_cache) > self._original_cache_size:
            self._original_cache.popitem(last=False)
        return result

    def initial_ranking(
        self, query: str, original_query: str | None = None, carried: Sequence[str] = ()
    ) -> tuple[list[ScoredDoc], dict[str, Any]]:
        """The pool R for ``query`` (plus the ``carried`` documents) and a trace of how it
        was built."""
        info: dict[str, Any] = {"pool": self.pool}
        tick = time.perf_counter()
        if original_query is None or self.pool == "own" or original_query.strip() == query:
            if self.pool != "own":
                info["pool_used"] = "own"
                info["pool_note"] = "no distinct original question was given"
            ranking = self._search(query)
            info["own_size"] = len(ranking)
        elif self.pool == "original":
            ranking = [
                ScoredDoc(d.chunk, d.score, rank=d.rank, extra={**d.extra, "pool": "original"})
                for d in self._original_list(original_query)
            ]
            info["original_size"] = len(ranking)
        else:
            own = self._search(query)
            original = self._original_list(original_query)
            ranking = fuse_pools(own, original, rrf_k=self.rrf_k)
            info.update(own_size=len(own), original_size=len(original))
        if carried:
            carry = [ScoredDoc(self.chunk_of(i), 0.0) for i in dict.fromkeys(carried)]
            known = {d.id for d in ranking}
            size = len(known | {d.id for d in carry})
            fused = reciprocal_rank_fusion([ranking, carry], k=size, rrf_k=self.rrf_k)
            pools = {d.id: d.extra.get("pool") for d in ranking}
            for doc in fused:
                doc.extra["pool"] = pools.get(doc.id) or "carried"
            ranking = fused
            info["carried"] = len(carry)
        info.setdefault("pool_used", self.pool)
        info["size"] = len(ranking)
        info["first_stage_ms"] = round((time.perf_counter() - tick) * 1000.0, 3)
        return ranking, info

    def run(
        self, query: str, *, original_query: str | None = None, carried: Sequence[str] = ()
    ) -> NARResult:
        """Initial ranking + NAR for ``query``; the full ranked list and NAR's own trace."""
        if not isinstance(query, str) or not query.strip():
            raise InputError("the query is empty; pass the (sub-)question to retrieve for")
        if self.collection_size == 0:
            raise CorpusError("the collection is empty; add documents with rca index PATH")
        query = query.strip()
        ranking, pool_info = self.initial_ranking(query, original_query, carried)
        self._unknown_ids = 0
        reset = getattr(self.asu, "reset", None)
        if callable(reset):
            reset()
        result = neighbourhood_aware_rerank(
            query,
            ranking,
            score=self.score,
            neighbours=self._neighbours,
            chunk_of=self.chunk_of,
            params=self.params,
            hook=self.asu,
            prefetch=self._prefetch,
        )
        self.trace = {
            "retriever": "sunar",
            "query": query,
            "original_query": original_query,
            "first_stage": getattr(self.first_stage, "name", type(self.first_stage).__name__),
            "first_stage_k": self.first_stage_k,
            "scorer": self.scorer_name,
            "asu": self.asu is not None,
            "initial": pool_info,
            "graph": {
                "available": self.graph is not None,
                "unknown_ids": self._unknown_ids,
                **({"fallback": self.graph_fallback} if self.graph_fallback else {}),
            },
            "nar": result.trace.to_dict(),
        }
        return result

    def retrieve(
        self,
        query: str,
        k: int | None = None,
        *,
        original_query: str | None = None,
        carried: Sequence[str] = (),
    ) -> list[ScoredDoc]:
        """The top ``k`` documents for ``query`` (default ``retrieval.k``), with provenance.

        ``original_query`` is the complex question a sub-question came from; it selects the
        pool for the ``original`` / ``union`` policies; ``carried`` documents join the pool.
        ``self.trace`` describes the call.
        """
        if k is None:
            k = self.default_k
        if k < 1:
            raise InputError(f"k must be at least 1, got {k}")
        result = self.run(query, original_query=original_query, carried=carried)
        docs = result.docs[:k]
        self.trace["k"] = k
        self.trace["k_capped"] = len(docs) < k
        self.trace["returned"] = [d.to_trace() for d in docs]
        return docs
