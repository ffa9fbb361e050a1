"""Neighbours on demand from the user's vector store: NAR's corpus graph without building it.

For a collection that lives in a vector database (a Chroma server, Qdrant, Milvus, pgvector, …)
the whole top-k graph is never computed. When NAR needs the neighbours of a scored document,
:class:`OnDemandGraph` takes the document's vector from the store and asks the store for the
vectors nearest to it; the answer is kept in memory and in a small sqlite file, so each
document's neighbours cost one store look-up per corpus, not one per query.

A store is reached through a :class:`NeighbourSource`:

* :class:`ChromaSource`: a ``chromadb`` collection (embedded or ``HttpClient``); also used for
  a ``langchain_chroma.Chroma`` store;
* :class:`LangChainSource`: any LangChain ``VectorStore`` with ``similarity_search_by_vector``
  (vectors from ``InMemoryVectorStore``'s records, else the store's own embedding function);
* :class:`LlamaIndexSource`: a LlamaIndex ``VectorStoreIndex`` (its vector store's ``query``).

Similarities are what the store reports as relevance (cosine for Chroma with cosine or
normalised vectors and for ``InMemoryVectorStore``); NAR uses only the order.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..errors import CorpusError
from ..types import Chunk

Found = list[tuple[Chunk, float]]


class NeighbourSource(Protocol):
    """A vector store that can give the vectors of its documents and search by vector."""

    #: A stable identity of the store's collection (the persistent cache's namespace), or
    #: None when there is none (then neighbours are cached in memory only).
    key: str | None

    def size(self) -> int | None:
        """Documents in the store, when the store can count them."""
        ...

    def vectors(self, chunks: Sequence[Chunk]) -> np.ndarray:
        """The store's vectors of ``chunks`` (float32, one row per chunk)."""
        ...

    def nearest(self, vectors: np.ndarray, k: int) -> list[Found]:
        """For each row of ``vectors``: up to ``k`` (chunk, similarity), most similar first."""
        ...


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


class ChromaSource:
    """A ``chromadb`` collection (embedded or on a Chroma server): ``get`` by id for vectors,
    one ``query`` with every look-up's vector; similarities are cosines of the returned
    embeddings."""

    def __init__(self, collection: Any, make_chunk: Callable[..., Chunk]) -> None:
        self.collection = collection
        self.key: str | None = f"chroma:{collection.id}"
        self._make_chunk = make_chunk

    def size(self) -> int | None:
        return int(self.collection.count())

    def vectors(self, chunks: Sequence[Chunk]) -> np.ndarray:
        ids = [c.id for c in chunks]
        data = self.collection.get(ids=ids, include=["embeddings"])
        by_id = dict(zip(data["ids"], data["embeddings"], strict=True))
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise CorpusError(f"the Chroma collection has no vectors for {missing[:3]}")
        return np.asarray([by_id[i] for i in ids], dtype=np.float32)

    def nearest(self, vectors: np.ndarray, k: int) -> list[Found]:
        data = self.collection.query(
            query_embeddings=np.asarray(vectors, dtype=np.float32),
            n_results=k,
            include=["documents", "metadatas", "embeddings"],
        )
        out: list[Found] = []
        for query, ids, texts, metas, embs in zip(
            _unit(np.asarray(vectors, dtype=np.float32)),
            data["ids"],
            data["documents"],
            data["metadatas"] or [[None] * len(i) for i in data["ids"]],
            data["embeddings"],
            strict=True,
        ):
            sims = _unit(np.asarray(embs, dtype=np.float32)) @ query if len(ids) else []
            chunks = [
                self._make_chunk(t or "", id=i, metadata=m)
                for i, t, m in zip(ids, texts, metas, strict=True)
            ]
            out.append(list(zip(chunks, [float(s) for s in sims], strict=True)))
        return out


class LangChainSource:
    """A LangChain ``VectorStore``: ``similarity_search_with_score_by_vector`` (or
    ``similarity_search_by_vector``, similarity 1/rank); vectors from ``InMemoryVectorStore``'s
    records, else the store's embedding function applied to the document text."""

    def __init__(
        self, store: Any, make_chunk: Callable[[Any], Chunk], key: str | None = None
    ) -> None:
        self.store = store
        self.key = key
        self._from_document = make_chunk

    def size(self) -> int | None:
        records = getattr(self.store, "store", None)
        return len(records) if isinstance(records, dict) else None

    def vectors(self, chunks: Sequence[Chunk]) -> np.ndarray:
        records = getattr(self.store, "store", None)
        if isinstance(records, dict) and all(c.id in records for c in chunks):
            return np.asarray([records[c.id]["vector"] for c in chunks], dtype=np.float32)
        embeddings = getattr(self.store, "embeddings", None)
        if embeddings is None:
            raise CorpusError(
                f"{type(self.store).__name__} neither exposes its vectors nor an embedding "
                "function; on-demand neighbours need one of them"
            )
        return np.asarray(embeddings.embed_documents([c.text for c in chunks]), np.float32)

    def nearest(self, vectors: np.ndarray, k: int) -> list[Found]:
        out: list[Found] = []
        for vector in np.asarray(vectors, dtype=np.float32).tolist():
            scored = getattr(self.store, "similarity_search_with_score_by_vector", None)
            if callable(scored):
                pairs = scored(vector, k=k)
                out.append([(self._from_document(d), float(s)) for d, s in pairs])
            else:
                docs = self.store.similarity_search_by_vector(vector, k=k)
                out.append([(self._from_document(d), 1.0 / r) for r, d in enumerate(docs, 1)])
        return out


class LlamaIndexSource:
    """A LlamaIndex ``VectorStoreIndex``: its vector store's ``query`` by embedding; vectors from
    the vector store (``get``), else the index's embedding model; texts from the docstore."""

    def __init__(
        self, index: Any, make_chunk: Callable[[Any], Chunk], key: str | None = None
    ) -> None:
        self.index = index
        self.key = key
        self._from_node = make_chunk

    def size(self) -> int | None:
        docs = getattr(getattr(self.index, "docstore", None), "docs", None)
        return len(docs) if isinstance(docs, dict) else None

    def vectors(self, chunks: Sequence[Chunk]) -> np.ndarray:
        getter = getattr(self.index.vector_store, "get", None)
        try:
            return np.asarray([getter(c.id) for c in chunks], dtype=np.float32)  # type: ignore[misc]
        except (TypeError, KeyError, ValueError, NotImplementedError):
            model = self.index._embed_model
            texts = [c.text for c in chunks]
            return np.asarray(model.get_text_embedding_batch(texts), dtype=np.float32)

    def nearest(self, vectors: np.ndarray, k: int) -> list[Found]:
        from llama_index.core.vector_stores.types import VectorStoreQuery

        out: list[Found] = []
        for vector in np.asarray(vectors, dtype=np.float32).tolist():
            result = self.index.vector_store.query(
                VectorStoreQuery(query_embedding=vector, similarity_top_k=k)
            )
            ids = list(result.ids or [])
            sims = list(result.similarities or [1.0 / r for r in range(1, len(ids) + 1)])
            nodes = result.nodes or [self.index.docstore.get_node(i) for i in ids]
            out.append([(self._from_node(n), float(s)) for n, s in zip(nodes, sims, strict=True)])
        return out


class NeighbourCache:
    """Neighbour lists (and the neighbours' texts) of one store, in a sqlite file.

    Entries are per (store key, document id) and record how many neighbours were asked. When
    the store's document count differs from the one the entries were made with, they are
    dropped (new documents may be anyone's neighbours).
    """

    def __init__(self, path: str | Path, key: str, size: int | None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.key = key
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(
            """
            CREATE TABLE IF NOT EXISTS stores (key TEXT PRIMARY KEY, size INTEGER);
            CREATE TABLE IF NOT EXISTS neighbours (
                key TEXT, doc_id TEXT, k INTEGER, found TEXT, PRIMARY KEY (key, doc_id));
            CREATE TABLE IF NOT EXISTS chunks (
                key TEXT, id TEXT, text TEXT, title TEXT, metadata TEXT, PRIMARY KEY (key, id));
            """
        )
        with self._lock:
            row = self._db.execute("SELECT size FROM stores WHERE key = ?", (key,)).fetchone()
            if row is None or row[0] != size:
                self._db.execute("BEGIN")
                self._db.execute("DELETE FROM neighbours WHERE key = ?", (key,))
                self._db.execute("DELETE FROM chunks WHERE key = ?", (key,))
                self._db.execute("INSERT OR REPLACE INTO stores VALUES (?, ?)", (key, size))
                self._db.execute("COMMIT")

    def get(self, doc_id: str) -> tuple[int, list[tuple[Chunk, float]]] | None:
        """(neighbours asked, [(chunk, similarity)]) of ``doc_id``, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT k, found FROM neighbours WHERE key = ? AND doc_id = ?", (self.key, doc_id)
            ).fetchone()
            if row is None:
                return None
            pairs = json.loads(row[1])
            chunks = {
                r[0]: Chunk(r[0], r[1], r[2], json.loads(r[3]))
                for r in self._db.execute(
                    f"SELECT id, text, title, metadata FROM chunks WHERE key = ? AND id IN "
                    f"({','.join('?' * len(pairs))})",
                    (self.key, *[p[0] for p in pairs]),
                )
            }
        if any(p[0] not in chunks for p in pairs):
            return None
        return int(row[0]), [(chunks[i], float(s)) for i, s in pairs]

    def put(self, doc_id: str, k: int, found: Sequence[tuple[Chunk, float]]) -> None:
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT OR REPLACE INTO chunks VALUES (?, ?, ?, ?, ?)",
                [
                    (self.key, c.id, c.text, c.title, json.dumps(c.metadata, default=str))
                    for c, _ in found
                ],
            )
            self._db.execute(
                "INSERT OR REPLACE INTO neighbours VALUES (?, ?, ?, ?)",
                (self.key, doc_id, k, json.dumps([[c.id, s] for c, s in found])),
            )
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()


class OnDemandGraph:
    """A corpus graph (``neighbours(doc_id, n)``) whose lists come from a vector store when
    first needed.

    ``chunk_of`` gives a known document (its text is needed when the store cannot hand out
    vectors); ``add_chunk`` registers the neighbours found, so that NAR can score them.
    At least ``k`` neighbours are asked per look-up (more when ``n`` is larger), so that later
    calls with a smaller ``n`` are served from the cache.
    """

    def __init__(
        self,
        source: NeighbourSource,
        *,
        chunk_of: Callable[[str], Chunk],
        add_chunk: Callable[[Chunk], Chunk],
        k: int = 16,
        cache_path: str | Path | None = None,
    ) -> None:
        self.source = source
        self.k = k
        self._chunk_of = chunk_of
        self._add_chunk = add_chunk
        self._lists: dict[str, tuple[int, list[tuple[str, float]]]] = {}
        self._lock = threading.RLock()
        self.cache = (
            NeighbourCache(cache_path, source.key, source.size())
            if cache_path is not None and source.key is not None
            else None
        )
        #: look-ups served from memory / the sqlite file / the store; store calls and their time
        self.counts = {"memory": 0, "disk": 0, "store": 0, "store_calls": 0}
        self.store_ms = 0.0

    def neighbours(self, doc_id: str, n: int) -> list[tuple[str, float]]:
        """Up to ``n`` (doc id, similarity) pairs, most similar first, never ``doc_id``."""
        if n <= 0:
            return []
        with self._lock:
            self.prefetch([doc_id], n)
            have = self._lists.get(doc_id)
            if have is None:
                raise CorpusError(f"document {doc_id!r} is not in the vector store")
            return have[1][:n]

    def prefetch(self, doc_ids: Sequence[str], n: int) -> None:
        """Make the lists of ``doc_ids`` (at least ``n`` long) available with one store look-up
        for all that are neither in memory nor in the cache file. Documents ``chunk_of`` does
        not know are skipped (:meth:`neighbours` raises CorpusError for them)."""
        with self._lock:
            missing: dict[str, Chunk] = {}
            for doc_id in dict.fromkeys(doc_ids):
                have = self._lists.get(doc_id)
                if have is not None and have[0] >= n:
                    self.counts["memory"] += 1
                    continue
                stored = self.cache.get(doc_id) if self.cache is not None else None
                if stored is not None and stored[0] >= n:
                    self.counts["disk"] += 1
                    self._remember(doc_id, stored[0], stored[1])
                    continue
                try:
                    missing[doc_id] = self._chunk_of(doc_id)
                except CorpusError:
                    continue
            if missing:
                self._fetch(missing, max(n, self.k))

    def _fetch(self, chunks: dict[str, Chunk], k: int) -> None:
        """One store look-up for the lists of ``chunks`` (doc id → chunk)."""
        tick = time.perf_counter()
        found = self.source.nearest(self.source.vectors(list(chunks.values())), k + 1)
        self.store_ms += (time.perf_counter() - tick) * 1000.0
        self.counts["store_calls"] += 1
        self.counts["store"] += len(chunks)
        for doc_id, pairs in zip(chunks, found, strict=True):
            kept = [(c, s) for c, s in pairs if c.id != doc_id][:k]
            if self.cache is not None:
                self.cache.put(doc_id, k, kept)
            self._remember(doc_id, k, kept)

    def _remember(self, doc_id: str, k: int, found: Sequence[tuple[Chunk, float]]) -> None:
        self._lists[doc_id] = (k, [(self._add_chunk(c).id, s) for c, s in found])

    def close(self) -> None:
        """Close the cache file."""
        if self.cache is not None:
            self.cache.close()
