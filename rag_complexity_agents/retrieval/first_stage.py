"""First-stage retrieval over a collection: BM25, dense (Chroma) and hybrid (RRF)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..config import RetrievalConfig
from ..corpus.store import CorpusStore
from ..types import ScoredDoc


@runtime_checkable
class FirstStage(Protocol):
    """Anything that turns a query into an initial ranking."""

    name: str

    def search(self, query: str, k: int) -> list[ScoredDoc]: ...


def _ranked(store: CorpusStore, pairs: Sequence[tuple[str, float]]) -> list[ScoredDoc]:
    return [
        ScoredDoc(store.chunk(chunk_id), score, rank=rank)
        for rank, (chunk_id, score) in enumerate(pairs, start=1)
    ]


class BM25FirstStage:
    """bm25s over title + text; documents sharing no term with the query are not returned."""

    name = "bm25"

    def __init__(self, store: CorpusStore) -> None:
        self.store = store

    def search(self, query: str, k: int) -> list[ScoredDoc]:
        import bm25s

        k = min(k, len(self.store))
        if k == 0:
            return []
        tokens = bm25s.tokenize(query, stopwords="en", return_ids=False, show_progress=False)
        if not tokens or not tokens[0]:
            return []
        rows, scores = self.store.bm25.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        ids = self.store.ids
        pairs = [(ids[int(r)], float(s)) for r, s in zip(rows[0], scores[0], strict=True) if s > 0]
        return _ranked(self.store, pairs)


class DenseFirstStage:
    """Chroma nearest neighbours of the query embedding (cosine similarity as score)."""

    name = "dense"

    def __init__(self, store: CorpusStore) -> None:
        self.store = store

    def search(self, query: str, k: int) -> list[ScoredDoc]:
        vector = self.store.embedder.encode_query(query)
        return _ranked(self.store, self.store.query_dense(vector, k))


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[ScoredDoc]], *, k: int, rrf_k: int = 60
) -> list[ScoredDoc]:
    """Fuse rankings by sum of 1/(rrf_k + rank); ties keep the order of first appearance."""
    fused: dict[str, float] = {}
    docs: dict[str, ScoredDoc] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            fused[doc.id] = fused.get(doc.id, 0.0) + 1.0 / (rrf_k + rank)
            docs.setdefault(doc.id, doc)
    order = sorted(fused, key=lambda i: -fused[i])[:k]
    return [ScoredDoc(docs[i].chunk, fused[i], rank=rank) for rank, i in enumerate(order, start=1)]


class HybridFirstStage:
    """Reciprocal-rank fusion of BM25 and dense rankings (each fetched at depth ``k``)."""

    name = "hybrid"

    def __init__(self, store: CorpusStore, *, rrf_k: int = 60) -> None:
        self.sparse = BM25FirstStage(store)
        self.dense = DenseFirstStage(store)
        self.rrf_k = rrf_k

    def search(self, query: str, k: int) -> list[ScoredDoc]:
        rankings = [self.sparse.search(query, k), self.dense.search(query, k)]
        return reciprocal_rank_fusion(rankings, k=k, rrf_k=self.rrf_k)


def make_first_stage(store: CorpusStore, config: RetrievalConfig) -> FirstStage:
    if config.mode == "bm25":
        return BM25FirstStage(store)
    if config.mode == "dense":
        return DenseFirstStage(store)
    return HybridFirstStage(store, rrf_k=config.rrf_k)
