"""Bring your own store: a LangChain ``VectorStore`` / ``BaseRetriever`` or a LlamaIndex
retriever / index as the first stage of NAR and of the loops.

:func:`from_langchain` and :func:`from_llamaindex` return :class:`ByoComponents`, a
:class:`~rag_complexity_agents.components.Components` whose ``store`` is an
:class:`ExternalCorpus` (the user's documents) and whose ``first_stage`` asks the user's
store. Everything that takes components takes them::

    parts = from_langchain(vectorstore, config=Config())
    parts.sunar_retriever().retrieve("question", 5)  # or build_preset(..., components=parts)

How the user's documents become a corpus:

* every document the store returns is one unit of retrieval (no re-chunking: the store
  already decided its chunks);
* ids: the document's own id (LangChain ``Document.id``, ``metadata["id"]``, LlamaIndex
  ``node_id``), else a stable content hash ``doc-<sha256(title, text)[:16]>``, so the same
  text always gets the same id;
* the neighbourhood graph is built once, in memory, over the documents the store can list
  (``documents=`` / ``nodes=`` given by the caller, else what the store exposes:
  ``InMemoryVectorStore.store``, Chroma's ``get()``, a retriever's ``docs`` or its
  ``vectorstore``, a LlamaIndex index's docstore). When the store exposes its own vectors
  the graph uses them (``use_store_vectors``); otherwise our embedder encodes the documents.
  A store whose documents cannot be listed raises CorpusError asking for ``documents=``;
* documents returned later that were not listed join the corpus on the fly (scored by our
  embedder) but have no graph neighbours (``trace["graph"]["unknown_ids"]`` counts them);
* a store that returns nothing gives an empty ranking (and an empty result, no error).

With ``neighbours="on_demand"`` nothing is listed and no graph is built: NAR asks the store for
the nearest documents of each scored document when it needs them (see
:mod:`~rag_complexity_agents.integrations.neighbours`), cached in ``neighbour_cache`` (default
``<corpus.home>/neighbours.sqlite``). Use it when the store is larger than a few hundred
thousand documents or lives in a vector database cluster.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..components import Components
from ..config import Config
from ..errors import CorpusError, InputError
from ..types import Chunk, ScoredDoc
from .neighbours import (
    ChromaSource,
    LangChainSource,
    LlamaIndexSource,
    NeighbourSource,
    OnDemandGraph,
)

SearchFn = Callable[[str, int], Sequence[tuple[Chunk, float | None]]]
NeighbourMode = Literal["graph", "on_demand"]
#: The collection size reported for an on-demand store that cannot count its documents.
UNKNOWN_SIZE = 2**31 - 1


def content_id(text: str, title: str = "") -> str:
    """A stable id for a document without one: ``doc-`` + 16 hex digits of sha256."""
    digest = hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()
    return f"doc-{digest[:16]}"


def _plain_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    return {str(k): v for k, v in (metadata or {}).items()}


def make_chunk(
    text: str, *, id: str | None = None, title: str = "", metadata: Mapping[str, Any] | None = None
) -> Chunk:
    meta = _plain_metadata(metadata)
    title = title or str(meta.get("title") or "")
    chunk_id = str(id) if id else (str(meta["id"]) if meta.get("id") else content_id(text, title))
    meta.setdefault("doc_id", chunk_id)
    return Chunk(chunk_id, text or "", title, meta)


# --------------------------------------------------------------------------------------------
# The corpus and its graph
# --------------------------------------------------------------------------------------------


def numpy_topk(matrix: np.ndarray, k: int, *, block: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k rows by dot product (self excluded) of every row of a small matrix, with
    numpy only (no torch: the lean install): int32 neighbour rows and float32 similarities,
    ``n × min(k, n-1)``, ordered by (similarity desc, row asc)."""
    n = matrix.shape[0]
    k = max(0, min(k, n - 1))
    cols = np.empty((n, k), dtype=np.int32)
    sims = np.empty((n, k), dtype=np.float32)
    for start in range(0, n, block):
        stop = min(n, start + block)
        values = matrix[start:stop] @ matrix.T
        values[np.arange(stop - start), np.arange(start, stop)] = -np.inf
        order = np.argsort(-values, axis=1, kind="stable")[:, :k]
        cols[start:stop] = order
        sims[start:stop] = np.take_along_axis(values, order, axis=1)
    return cols, sims


class InMemoryNeighbourGraph:
    """Exact top-k cosine neighbours of a few thousand documents, kept in memory."""

    def __init__(self, ids: Sequence[str], vectors: np.ndarray, k: int) -> None:
        self.ids = list(ids)
        self.row_of = {doc_id: row for row, doc_id in enumerate(self.ids)}
        matrix: np.ndarray = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms == 0, 1.0, norms)
        self.cols, self.sims = numpy_topk(matrix, k)

    def __len__(self) -> int:
        return len(self.ids)

    def neighbours(self, doc_id: str, n: int) -> list[tuple[str, float]]:
        row = self.row_of.get(doc_id)
        if row is None:
            raise CorpusError(f"document {doc_id!r} is not in the neighbourhood graph")
        n = max(0, min(n, self.cols.shape[1]))
        return [
            (self.ids[int(c)], float(s))
            for c, s in zip(self.cols[row, :n], self.sims[row, :n], strict=True)
        ]


class ExternalCorpus:
    """The user's documents, shaped like the part of
    :class:`~rag_complexity_agents.corpus.store.CorpusStore` that NAR and the loops use
    (``name``, ``len``, ``chunk``, ``vectors``, ``graph``, ``embedder``)."""

    def __init__(
        self,
        chunks: Iterable[Chunk],
        *,
        embedder: Any,
        graph_k: int = 16,
        store_vectors: np.ndarray | None = None,
        name: str = "external",
        size: int | None = None,
    ) -> None:
        self.name = name
        self.embedder = embedder
        self.graph_k = graph_k
        self._chunks: dict[str, Chunk] = {}
        for chunk in chunks:
            self._chunks.setdefault(chunk.id, chunk)
        self._listed = list(self._chunks)
        if store_vectors is not None and len(store_vectors) != len(self._listed):
            store_vectors = None  # duplicates were dropped: fall back to our embedder
        self._store_vectors = store_vectors
        self._vectors: dict[str, np.ndarray] = {}
        self._graph: InMemoryNeighbourGraph | OnDemandGraph | None = None
        self._lock = threading.RLock()
        self._size = size
        self.graph_source = "store" if store_vectors is not None else "embedder"

    def __len__(self) -> int:
        """Documents known here, or the store's size when neighbours come on demand."""
        return max(len(self._chunks), self._size or 0)

    def use_on_demand(self, source: NeighbourSource, cache_path: str | Path | None) -> None:
        """Serve ``graph`` from ``source`` on demand instead of building it."""
        with self._lock:
            self._graph = OnDemandGraph(
                source,
                chunk_of=self.chunk,
                add_chunk=self.add,
                k=self.graph_k,
                cache_path=cache_path,
            )
            self.graph_source = "on_demand"

    @property
    def ids(self) -> list[str]:
        return list(self._chunks)

    def chunk(self, chunk_id: str) -> Chunk:
        try:
            return self._chunks[chunk_id]
        except KeyError as exc:
            raise CorpusError(f"document {chunk_id!r} is not in the external corpus") from exc

    def add(self, chunk: Chunk) -> Chunk:
        """Register a document seen in a ranking (the stored one wins on id clashes)."""
        with self._lock:
            return self._chunks.setdefault(chunk.id, chunk)

    def vectors(self, chunk_ids: Sequence[str]) -> np.ndarray:
        """Our embedder's vectors of ``chunk_ids`` (encoded once, then cached)."""
        with self._lock:
            missing = [i for i in dict.fromkeys(chunk_ids) if i not in self._vectors]
            if missing:
                texts = [self.chunk(i).text for i in missing]
                for chunk_id, vector in zip(missing, self.embedder.encode(texts), strict=True):
                    self._vectors[chunk_id] = np.asarray(vector, dtype=np.float32)
            return np.stack([self._vectors[i] for i in chunk_ids])

    @property
    def graph(self) -> InMemoryNeighbourGraph | OnDemandGraph:
        with self._lock:
            if self._graph is None:
                if len(self._listed) < 2:
                    raise CorpusError(
                        "the external store listed fewer than two documents, so there is no "
                        "neighbourhood graph; pass documents= (all of the store's documents)"
                    )
                if self._store_vectors is not None:
                    vectors = self._store_vectors
                else:
                    vectors = self.vectors(self._listed)
                self._graph = InMemoryNeighbourGraph(self._listed, vectors, self.graph_k)
            return self._graph


class ExternalFirstStage:
    """A :class:`~rag_complexity_agents.retrieval.first_stage.FirstStage` over a search
    function ``(query, k) -> [(Chunk, score or None)]``; rankings join the corpus."""

    def __init__(self, search: SearchFn, corpus: ExternalCorpus, *, name: str) -> None:
        self._search = search
        self.corpus = corpus
        self.name = name

    def search(self, query: str, k: int) -> list[ScoredDoc]:
        if k < 1:
            raise InputError(f"k must be at least 1, got {k}")
        found = self._search(query, k) or []
        out: list[ScoredDoc] = []
        seen: set[str] = set()
        for chunk, score in found:
            if chunk.id in seen:
                continue
            seen.add(chunk.id)
            stored = self.corpus.add(chunk)
            rank = len(out) + 1
            value = float(score) if score is not None else 1.0 / rank
            out.append(ScoredDoc(stored, value, rank=rank))
            if len(out) == k:
                break
        return out


class ByoComponents(Components):
    """Components whose store and first stage are the user's (everything else as usual:
    the scorer uses our embedder, the chat model comes from ``models.chat``)."""

    def __init__(self, config: Config, corpus: ExternalCorpus, first_stage: ExternalFirstStage):
        super().__init__(config)
        self._corpus = corpus
        self._first_stage = first_stage

    # ExternalCorpus has the part of CorpusStore that NAR and the loops use, not the class.
    @property
    def store(self) -> ExternalCorpus:  # type: ignore[override]
        return self._corpus

    @property
    def first_stage(self) -> ExternalFirstStage:
        return self._first_stage


def _config(config: Config | None, profile: str | None) -> Config:
    from ..profiles import apply_profile

    return apply_profile(config or Config(), profile)


def _embedder(config: Config, embeddings: Any = None) -> Any:
    """The user's embedding object as an Embedder, else the one ``models.embedding`` names."""
    from ..models.embeddings import as_embedder, load_embedder

    if embeddings is not None:
        return as_embedder(embeddings)
    return load_embedder(config.models.embedding, batch_size=config.models.embed_batch_size)


def _build(
    search: SearchFn,
    listed: Sequence[Chunk],
    vectors: np.ndarray | None,
    *,
    config: Config | None,
    profile: str | None,
    use_store_vectors: bool,
    name: str,
    source: NeighbourSource | None = None,
    neighbour_cache: str | Path | None = None,
    embeddings: Any = None,
) -> ByoComponents:
    """Components over ``search``; the graph over ``listed``, or on demand from ``source``;
    ``embeddings`` (the user's) replace ``models.embedding``."""
    cfg = _config(config, profile)
    embedder = _embedder(cfg, embeddings)
    if source is not None:
        size = source.size()
        corpus = ExternalCorpus(
            [], embedder=embedder, graph_k=cfg.graph.k, name=name, size=size or UNKNOWN_SIZE
        )
        cache = neighbour_cache or Path(cfg.corpus.home) / "neighbours.sqlite"
        corpus.use_on_demand(source, cache)
        return _parts(cfg, corpus, search, name, injected=embeddings is not None)
    if not listed:
        raise CorpusError(
            f"cannot list the documents of {name}; pass documents= (LangChain) or nodes= "
            "(LlamaIndex) with the store's documents so that the neighbourhood graph can be built"
        )
    corpus = ExternalCorpus(
        listed,
        embedder=embedder,
        graph_k=cfg.graph.k,
        store_vectors=vectors if use_store_vectors else None,
        name=name,
    )
    return _parts(cfg, corpus, search, name, injected=embeddings is not None)


def _parts(
    cfg: Config, corpus: ExternalCorpus, search: SearchFn, name: str, *, injected: bool
) -> ByoComponents:
    parts = ByoComponents(cfg, corpus, ExternalFirstStage(search, corpus, name=name))
    if injected:  # the user's embeddings serve the equivalence etc. too
        parts.inject(embedder=corpus.embedder)
    return parts


# --------------------------------------------------------------------------------------------
# LangChain
# --------------------------------------------------------------------------------------------


def chunk_from_langchain(doc: Any) -> Chunk:
    """A LangChain ``Document`` as a Chunk (id: ``doc.id``, ``metadata["id"]`` or a hash)."""
    return make_chunk(
        str(getattr(doc, "page_content", "") or ""),
        id=getattr(doc, "id", None),
        metadata=getattr(doc, "metadata", None),
    )


def _langchain_listing(source: Any) -> tuple[list[Chunk], np.ndarray | None]:
    store = getattr(source, "vectorstore", None) or source
    records = getattr(store, "store", None)
    if isinstance(records, dict) and records:  # InMemoryVectorStore
        chunks, vectors = [], []
        for key, rec in records.items():
            chunks.append(
                make_chunk(
                    str(rec.get("text", "")), id=rec.get("id") or key, metadata=rec.get("metadata")
                )
            )
            vectors.append(rec.get("vector"))
        ok = all(v is not None for v in vectors)
        return chunks, np.asarray(vectors, dtype=np.float32) if ok else None
    getter = getattr(store, "get", None)
    if callable(getter) and hasattr(store, "_collection"):  # langchain_chroma.Chroma
        data = getter(include=["documents", "metadatas", "embeddings"])
        metadatas = data.get("metadatas") or [None] * len(data["ids"])
        chunks = [
            make_chunk(text or "", id=i, metadata=m)
            for i, text, m in zip(data["ids"], data["documents"], metadatas, strict=True)
        ]
        embeddings = data.get("embeddings")
        matrix = np.asarray(embeddings, dtype=np.float32) if embeddings is not None else None
        return chunks, matrix if matrix is not None and len(matrix) == len(chunks) else None
    docs = getattr(source, "docs", None)
    if isinstance(docs, list):
        return [chunk_from_langchain(d) for d in docs], None
    return [], None


def langchain_search(source: Any) -> SearchFn:
    """A search function over a LangChain VectorStore or BaseRetriever."""
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import VectorStore, VectorStoreRetriever

    if isinstance(source, VectorStore):

        def search_store(query: str, k: int) -> list[tuple[Chunk, float | None]]:
            try:
                pairs = source.similarity_search_with_relevance_scores(query, k=k)
                return [(chunk_from_langchain(d), float(s)) for d, s in pairs]
            except NotImplementedError:
                return [
                    (chunk_from_langchain(d), None) for d in source.similarity_search(query, k=k)
                ]

        return search_store
    if isinstance(source, VectorStoreRetriever):

        def search_vs_retriever(query: str, k: int) -> list[tuple[Chunk, float | None]]:
            return [(chunk_from_langchain(d), None) for d in source.invoke(query, k=k)]

        return search_vs_retriever
    if isinstance(source, BaseRetriever):

        def search_retriever(query: str, k: int) -> list[tuple[Chunk, float | None]]:
            return [(chunk_from_langchain(d), None) for d in source.invoke(query)[:k]]

        return search_retriever
    raise InputError(
        f"expected a LangChain VectorStore or BaseRetriever, got {type(source).__name__}"
    )


def langchain_neighbour_source(store: Any, key: str | None = None) -> NeighbourSource:
    """The on-demand neighbour source of a LangChain ``VectorStore`` (a ``langchain_chroma``
    store is asked through its Chroma collection)."""
    from langchain_core.vectorstores import VectorStore

    store = getattr(store, "vectorstore", None) or store
    if not isinstance(store, VectorStore):
        raise InputError(
            f"on-demand neighbours need a LangChain VectorStore, got {type(store).__name__}"
        )
    collection = getattr(store, "_collection", None)
    if collection is not None and hasattr(collection, "query"):  # langchain_chroma.Chroma
        return ChromaSource(collection, make_chunk)
    return LangChainSource(store, chunk_from_langchain, key=key)


def from_langchain(
    source: Any,
    *,
    documents: Sequence[Any] | None = None,
    config: Config | None = None,
    profile: str | None = "cpu",
    use_store_vectors: bool = True,
    neighbours: NeighbourMode = "graph",
    neighbour_cache: str | Path | None = None,
    cache_key: str | None = None,
    embeddings: Any = None,
) -> ByoComponents:
    """Components whose first stage is a LangChain ``VectorStore`` or ``BaseRetriever``.

    ``documents`` (LangChain Documents) are all the store's documents; without them they are
    read from the store when it can list them (see the module docstring). ``profile`` is the
    agents profile applied to ``config`` (``cpu`` shrinks paper-sized knobs, ``paper`` keeps
    them). ``neighbours="on_demand"`` asks the store for neighbours instead of building the
    graph (a ``VectorStore`` or its retriever); they persist in ``neighbour_cache`` under the
    store's identity (a Chroma collection's id, else ``cache_key``; without either they are
    kept in memory only). ``embeddings`` (e.g. the store's own LangChain ``Embeddings``)
    score documents and build the graph instead of ``models.embedding``.
    """
    if neighbours == "on_demand":
        return _build(
            langchain_search(source),
            [],
            None,
            config=config,
            profile=profile,
            use_store_vectors=use_store_vectors,
            name=f"langchain:{type(source).__name__}",
            source=langchain_neighbour_source(source, cache_key),
            neighbour_cache=neighbour_cache,
            embeddings=embeddings,
        )
    if documents is not None:
        listed, vectors = [chunk_from_langchain(d) for d in documents], None
    else:
        listed, vectors = _langchain_listing(source)
    return _build(
        langchain_search(source),
        listed,
        vectors,
        config=config,
        profile=profile,
        use_store_vectors=use_store_vectors,
        name=f"langchain:{type(source).__name__}",
        embeddings=embeddings,
    )


# --------------------------------------------------------------------------------------------
# LlamaIndex
# --------------------------------------------------------------------------------------------


def chunk_from_llamaindex(node: Any) -> Chunk:
    """A LlamaIndex node (or ``NodeWithScore``) as a Chunk (id: ``node_id``)."""
    node = getattr(node, "node", node)
    text = node.get_content() if hasattr(node, "get_content") else str(getattr(node, "text", ""))
    meta = _plain_metadata(getattr(node, "metadata", None))
    ref = getattr(node, "ref_doc_id", None)
    if ref:
        meta.setdefault("doc_id", ref)
    return make_chunk(text, id=getattr(node, "node_id", None), metadata=meta)


def _llamaindex_listing(source: Any) -> tuple[list[Chunk], np.ndarray | None]:
    index = source if hasattr(source, "as_retriever") else getattr(source, "_index", None)
    docstore = getattr(index, "docstore", None) or getattr(source, "_docstore", None)
    docs = getattr(docstore, "docs", None)
    if not docs:
        return [], None
    chunks = [chunk_from_llamaindex(node) for node in docs.values()]
    data = getattr(getattr(index, "vector_store", None), "data", None)
    table = getattr(data, "embedding_dict", None)
    if isinstance(table, dict) and all(c.id in table for c in chunks):
        return chunks, np.asarray([table[c.id] for c in chunks], dtype=np.float32)
    return chunks, None


def llamaindex_search(source: Any) -> SearchFn:
    """A search function over a LlamaIndex retriever or index."""
    from llama_index.core.base.base_retriever import BaseRetriever

    if hasattr(source, "as_retriever"):

        def search_index(query: str, k: int) -> list[tuple[Chunk, float | None]]:
            found = source.as_retriever(similarity_top_k=k).retrieve(query)
            return [(chunk_from_llamaindex(n), n.score) for n in found]

        return search_index
    if isinstance(source, BaseRetriever):
        lock = threading.Lock()

        def search_retriever(query: str, k: int) -> list[tuple[Chunk, float | None]]:
            with lock:
                if hasattr(source, "_similarity_top_k"):
                    source._similarity_top_k = k
                found = source.retrieve(query)
            return [(chunk_from_llamaindex(n), n.score) for n in found][:k]

        return search_retriever
    raise InputError(f"expected a LlamaIndex retriever or index, got {type(source).__name__}")


def from_llamaindex(
    source: Any,
    *,
    nodes: Sequence[Any] | None = None,
    config: Config | None = None,
    profile: str | None = "cpu",
    use_store_vectors: bool = True,
    neighbours: NeighbourMode = "graph",
    neighbour_cache: str | Path | None = None,
    cache_key: str | None = None,
    embeddings: Any = None,
) -> ByoComponents:
    """Components whose first stage is a LlamaIndex retriever or index (e.g.
    ``VectorStoreIndex``). ``nodes`` are all its nodes; without them they are read from the
    index's docstore. ``neighbours="on_demand"`` (an index only) asks its vector store for
    neighbours instead of building the graph; ``neighbour_cache``/``cache_key`` as in
    :func:`from_langchain`. ``embeddings`` (a LlamaIndex ``BaseEmbedding`` such as the
    index's ``embed_model``, or a LangChain ``Embeddings``) replace ``models.embedding``."""
    if neighbours == "on_demand":
        if not hasattr(source, "vector_store"):
            raise InputError(
                f"on-demand neighbours need a LlamaIndex index, got {type(source).__name__}"
            )
        return _build(
            llamaindex_search(source),
            [],
            None,
            config=config,
            profile=profile,
            use_store_vectors=use_store_vectors,
            name=f"llamaindex:{type(source).__name__}",
            source=LlamaIndexSource(source, chunk_from_llamaindex, key=cache_key),
            neighbour_cache=neighbour_cache,
            embeddings=embeddings,
        )
    if nodes is not None:
        listed, vectors = [chunk_from_llamaindex(n) for n in nodes], None
    else:
        listed, vectors = _llamaindex_listing(source)
    return _build(
        llamaindex_search(source),
        listed,
        vectors,
        config=config,
        profile=profile,
        use_store_vectors=use_store_vectors,
        name=f"llamaindex:{type(source).__name__}",
        embeddings=embeddings,
    )


__all__ = [
    "ByoComponents",
    "ExternalCorpus",
    "ExternalFirstStage",
    "InMemoryNeighbourGraph",
    "chunk_from_langchain",
    "chunk_from_llamaindex",
    "content_id",
    "from_langchain",
    "from_llamaindex",
    "langchain_neighbour_source",
    "langchain_search",
    "llamaindex_search",
    "make_chunk",
    "numpy_topk",
]
