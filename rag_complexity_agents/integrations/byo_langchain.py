"""Bring your own LangChain store: a ``VectorStore`` or ``BaseRetriever`` as the first stage
of NAR and of the loops.

:func:`from_langchain` returns
:class:`~rag_complexity_agents.integrations.external.ByoComponents` over the store's documents
(how they become a corpus and its graph: see :mod:`~rag_complexity_agents.integrations.external`).
The helpers turn LangChain documents into chunks (:func:`chunk_from_langchain`), list a store's
documents and vectors, search it (:func:`langchain_search`) and ask it for neighbours on demand
(:func:`langchain_neighbour_source`). LangChain is imported only when a store is wrapped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..errors import InputError
from ..types import Chunk
from .external import (
    ByoComponents,
    Listing,
    NeighbourMode,
    SearchFn,
    build_components,
    make_chunk,
)
from .neighbours import ChromaSource, LangChainSource, NeighbourSource


def chunk_from_langchain(doc: Any) -> Chunk:
    """A LangChain ``Document`` as a Chunk (id: ``doc.id``, ``metadata["id"]`` or a hash)."""
    return make_chunk(
        str(getattr(doc, "page_content", "") or ""),
        id=getattr(doc, "id", None),
        metadata=getattr(doc, "metadata", None),
    )


def _langchain_listing(source: Any) -> Listing | None:
    """The documents (and vectors) a store or retriever exposes; None when it cannot list
    them (an empty list when it can and holds none)."""
    from langchain_core.vectorstores import InMemoryVectorStore

    store = getattr(source, "vectorstore", None) or source
    records = getattr(store, "store", None)
    if isinstance(records, dict) and (records or isinstance(store, InMemoryVectorStore)):
        chunks, vectors = [], []
        for key, rec in records.items():
            chunks.append(
                make_chunk(
                    str(rec.get("text", "")), id=rec.get("id") or key, metadata=rec.get("metadata")
                )
            )
            vectors.append(rec.get("vector"))
        ok = bool(vectors) and all(v is not None for v in vectors)
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
        ok = matrix is not None and len(chunks) > 0 and len(matrix) == len(chunks)
        return chunks, matrix if ok else None
    docs = getattr(source, "docs", None)
    if isinstance(docs, list):
        return [chunk_from_langchain(d) for d in docs], None
    return None


def _scored_search(store: Any) -> SearchFn:
    """Search a VectorStore with its own relevance scores: the store's distance or
    similarity through its relevance function, as LangChain's
    ``similarity_search_with_relevance_scores`` computes them, without that method's warning
    (which prints every returned document) when a store's distances fall outside [0, 1], as
    L2 distances of unnormalised vectors do. A store without a relevance function gives
    rank-based scores."""

    def search(query: str, k: int) -> list[tuple[Chunk, float | None]]:
        try:
            pairs = store._similarity_search_with_relevance_scores(query, k=k)
        except NotImplementedError:
            return [(chunk_from_langchain(d), None) for d in store.similarity_search(query, k=k)]
        return [(chunk_from_langchain(d), float(s)) for d, s in pairs]

    return search


def langchain_search(source: Any) -> SearchFn:
    """A search function over a LangChain VectorStore or BaseRetriever."""
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import VectorStore, VectorStoreRetriever

    if isinstance(source, VectorStore):
        return _scored_search(source)
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
    use_store_vectors: bool = True,
    neighbours: NeighbourMode = "graph",
    neighbour_cache: str | Path | None = None,
    cache_key: str | None = None,
    embeddings: Any = None,
) -> ByoComponents:
    """Components whose first stage is a LangChain ``VectorStore`` or ``BaseRetriever``.

    ``documents`` (LangChain Documents) are all the store's documents; without them they are
    read from the store when it can list them (see
    :mod:`~rag_complexity_agents.integrations.external`).
    ``neighbours="on_demand"`` asks the store for neighbours instead of building the graph (a
    ``VectorStore`` or its retriever); they persist in ``neighbour_cache`` under the store's
    identity (a Chroma collection's id, else ``cache_key``; without either they are kept in
    memory only). ``embeddings`` (e.g. the store's own LangChain ``Embeddings``)
    score documents and build the graph instead of ``models.embedding``.
    """
    on_demand = neighbours == "on_demand"
    return build_components(
        langchain_search(source),
        None if documents is None else [chunk_from_langchain(d) for d in documents],
        lambda: _langchain_listing(source),
        config=config,
        use_store_vectors=use_store_vectors,
        name=f"langchain:{type(source).__name__}",
        source=langchain_neighbour_source(source, cache_key) if on_demand else None,
        neighbour_cache=neighbour_cache,
        embeddings=embeddings,
    )
