"""Bring your own LlamaIndex store: a retriever or an index (e.g. ``VectorStoreIndex``) as the
first stage of NAR and of the loops.

:func:`from_llamaindex` returns
:class:`~rag_complexity_agents.integrations.external.ByoComponents` over the index's nodes (how
they become a corpus and its graph: see :mod:`~rag_complexity_agents.integrations.external`).
The helpers turn nodes into chunks (:func:`chunk_from_llamaindex`), list an index's nodes and
vectors and search it (:func:`llamaindex_search`). LlamaIndex is imported only when a store is
wrapped.
"""

from __future__ import annotations

import threading
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
    plain_metadata,
)
from .neighbours import LlamaIndexSource


def chunk_from_llamaindex(node: Any) -> Chunk:
    """A LlamaIndex node (or ``NodeWithScore``) as a Chunk (id: ``node_id``)."""
    node = getattr(node, "node", node)
    text = node.get_content() if hasattr(node, "get_content") else str(getattr(node, "text", ""))
    meta = plain_metadata(getattr(node, "metadata", None))
    ref = getattr(node, "ref_doc_id", None)
    if ref:
        meta.setdefault("doc_id", ref)
    return make_chunk(text, id=getattr(node, "node_id", None), metadata=meta)


def _llamaindex_listing(source: Any) -> Listing | None:
    """The nodes (and vectors) of an index or a retriever's index from its docstore: an
    empty list for an index with no nodes yet; None when there is nothing to list from (no
    docstore, or an empty one in front of a vector store it does not mirror)."""
    index = source if hasattr(source, "as_retriever") else getattr(source, "_index", None)
    docstore = getattr(index, "docstore", None) or getattr(source, "_docstore", None)
    docs = getattr(docstore, "docs", None)
    data = getattr(getattr(index, "vector_store", None), "data", None)
    table = getattr(data, "embedding_dict", None)
    if not isinstance(docs, dict):
        return None
    if not docs:  # empty, or the nodes live in a vector store the docstore does not mirror
        return ([], None) if isinstance(table, dict) and not table else None
    chunks = [chunk_from_llamaindex(node) for node in docs.values()]
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


def index_embed_model(source: Any) -> Any:
    """The embedding model a LlamaIndex index (or its retriever) embeds queries with, if it
    exposes one."""
    for name in ("_embed_model", "embed_model"):
        try:
            found = getattr(source, name, None)
        except (AttributeError, NotImplementedError, ValueError):
            found = None
        if found is not None:
            ours = getattr(found, "rca_embedder", None)  # our RCAEmbedding: its embedder
            return ours() if callable(ours) else found
    return None


def from_llamaindex(
    source: Any,
    *,
    nodes: Sequence[Any] | None = None,
    config: Config | None = None,
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
    :func:`~rag_complexity_agents.integrations.byo_langchain.from_langchain`. ``embeddings``
    (a LlamaIndex ``BaseEmbedding`` or a LangChain ``Embeddings``) replace
    ``models.embedding``; by default the index's own ``embed_model`` does, so documents are
    scored in the space the index was built in. An index with no nodes yet is waited for
    (see :mod:`~rag_complexity_agents.integrations.external`)."""
    if embeddings is None:
        embeddings = index_embed_model(source)
    on_demand = neighbours == "on_demand"
    if on_demand and not hasattr(source, "vector_store"):
        raise InputError(
            f"on-demand neighbours need a LlamaIndex index, got {type(source).__name__}"
        )
    return build_components(
        llamaindex_search(source),
        None if nodes is None else [chunk_from_llamaindex(n) for n in nodes],
        lambda: _llamaindex_listing(source),
        config=config,
        use_store_vectors=use_store_vectors,
        name=f"llamaindex:{type(source).__name__}",
        source=LlamaIndexSource(source, chunk_from_llamaindex, key=cache_key)
        if on_demand
        else None,
        neighbour_cache=neighbour_cache,
        embeddings=embeddings,
        documents_arg="nodes= (from_llamaindex) or documents= (create_rag_agent)",
    )
