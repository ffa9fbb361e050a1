"""Bring your own store: the user's documents as our corpus and the user's search as the
first stage of NAR and of the loops.

:func:`~rag_complexity_agents.integrations.byo_langchain.from_langchain` and
:func:`~rag_complexity_agents.integrations.byo_llamaindex.from_llamaindex` return
:class:`ByoComponents`, a :class:`~rag_complexity_agents.components.Components` whose ``store``
is an :class:`ExternalCorpus` (the user's documents) and whose ``first_stage`` is an
:class:`ExternalFirstStage` asking the user's store. Everything that takes components takes
them::

    parts = from_langchain(vectorstore, config=Config())
    parts.sunar_retriever().retrieve("question", 5)  # or build_pipeline(name, components=parts)

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
* a store that lists no documents yet (an empty Chroma collection, an empty index) still
  gives components: its searches find nothing, :meth:`ByoComponents.empty_store_note` says
  so (an agent then answers "not found" with that note), and the store is listed again
  until documents arrive, when the graph is built over them;
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
from ..corpus.graph.memory import InMemoryNeighbourGraph
from ..errors import CorpusError, InputError
from ..models.embeddings import as_embedder, load_embedder
from ..types import Chunk, ScoredDoc
from .neighbours import NeighbourSource, OnDemandGraph

SearchFn = Callable[[str, int], Sequence[tuple[Chunk, float | None]]]
#: A store's documents and, when it exposes them, their vectors (one row per document).
Listing = tuple[list[Chunk], np.ndarray | None]
#: Lists a store's documents again; None when the store cannot list them.
Lister = Callable[[], Listing | None]
NeighbourMode = Literal["graph", "on_demand"]
#: The collection size reported for an on-demand store that cannot count its documents.
UNKNOWN_SIZE = 2**31 - 1


def content_id(text: str, title: str = "") -> str:
    """A stable id for a document without one: ``doc-`` + 16 hex digits of sha256."""
    digest = hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()
    return f"doc-{digest[:16]}"


def plain_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``metadata`` with string keys (``None`` gives an empty dict)."""
    return {str(k): v for k, v in (metadata or {}).items()}


def make_chunk(
    text: str, *, id: str | None = None, title: str = "", metadata: Mapping[str, Any] | None = None
) -> Chunk:
    """A document as a Chunk; its id is ``id``, else ``metadata["id"]``, else
    :func:`content_id`, and ``metadata["doc_id"]`` defaults to that id."""
    meta = plain_metadata(metadata)
    title = title or str(meta.get("title") or "")
    chunk_id = str(id) if id else (str(meta["id"]) if meta.get("id") else content_id(text, title))
    meta.setdefault("doc_id", chunk_id)
    return Chunk(chunk_id, text or "", title, meta)


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
        relist: Lister | None = None,
        use_store_vectors: bool = True,
    ) -> None:
        self.name = name
        self.embedder = embedder
        self.graph_k = graph_k
        self._chunks: dict[str, Chunk] = {}
        self._listed: list[str] = []
        self._store_vectors: np.ndarray | None = None
        self._vectors: dict[str, np.ndarray] = {}
        self._graph: InMemoryNeighbourGraph | OnDemandGraph | None = None
        self._lock = threading.RLock()
        self._size = size
        self._relist = relist
        self._use_store_vectors = use_store_vectors
        self.graph_source = "embedder"
        self._take(list(chunks), store_vectors)

    def _take(self, chunks: list[Chunk], store_vectors: np.ndarray | None) -> None:
        """Make ``chunks`` the listed documents (the graph is built over them)."""
        for chunk in chunks:
            self._chunks.setdefault(chunk.id, chunk)
        self._listed = list(dict.fromkeys(c.id for c in chunks))
        if store_vectors is not None and len(store_vectors) != len(self._listed):
            store_vectors = None  # duplicates were dropped: fall back to our embedder
        self._store_vectors = store_vectors
        self.graph_source = "store" if store_vectors is not None else "embedder"

    @property
    def pending(self) -> bool:
        """Whether the store listed fewer than two documents and may be listed again."""
        return self._relist is not None and len(self._listed) < 2 and self._graph is None

    def refresh(self) -> None:
        """List a pending store again (documents may have been added since)."""
        with self._lock:
            if not self.pending or self._relist is None:
                return
            listing = self._relist()
            if listing and len(listing[0]) > len(self._listed):
                chunks, vectors = listing
                self._take(chunks, vectors if self._use_store_vectors else None)

    def is_empty(self) -> bool:
        """Whether a pending store still has no documents at all (listed again first)."""
        self.refresh()
        return self.pending and not self._chunks

    def __len__(self) -> int:
        """Documents known here, or the store's size when neighbours come on demand (unknown
        while a pending store waits for documents)."""
        if self.pending:
            return UNKNOWN_SIZE
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
    def graph(self) -> InMemoryNeighbourGraph | OnDemandGraph | PendingGraph:
        """The neighbourhood graph over the listed documents (built on first use); for a
        pending store, a :class:`PendingGraph` that builds it once documents arrive."""
        with self._lock:
            self.refresh()
            if self.pending:
                return PendingGraph(self)
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


class PendingGraph:
    """The graph of a store that had no documents when it was wrapped: asks the corpus
    again on each look-up, so neighbours appear once the store has documents (until then a
    look-up raises CorpusError, which NAR counts as a document without neighbours)."""

    def __init__(self, corpus: ExternalCorpus) -> None:
        self.corpus = corpus

    def neighbours(self, doc_id: str, n: int) -> list[tuple[str, float]]:
        graph = self.corpus.graph
        if isinstance(graph, PendingGraph):
            raise CorpusError(f"the store {self.corpus.name} has too few documents for a graph")
        return list(graph.neighbours(doc_id, n))


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

    def empty_store_note(self) -> str | None:
        """A note while the user's store has no documents (it was empty when wrapped and
        still is), else None: an agent over it answers "not found" until documents arrive."""
        if not self._corpus.is_empty():
            return None
        return (
            f"the store {self._corpus.name} has no documents yet, so nothing can be found: "
            "the answer is 'not found' until documents are added to the store"
        )


def _embedder(config: Config, embeddings: Any = None) -> Any:
    """The user's embedding object as an Embedder, else the one ``models.embedding`` names."""
    if embeddings is not None:
        return as_embedder(embeddings)
    return load_embedder(config.models.embedding, batch_size=config.models.embed_batch_size)


def build_components(
    search: SearchFn,
    given: Sequence[Chunk] | None,
    lister: Lister,
    *,
    config: Config | None,
    use_store_vectors: bool,
    name: str,
    source: NeighbourSource | None = None,
    neighbour_cache: str | Path | None = None,
    embeddings: Any = None,
    documents_arg: str = "documents=",
) -> ByoComponents:
    """Components over ``search``; the graph over the documents ``given`` by the caller,
    else over what ``lister`` reads from the store (listed again later while it holds none,
    see the module doc), or on demand from ``source``; ``embeddings`` (the user's) replace
    ``models.embedding``; ``documents_arg`` is how a refusal names the caller's argument."""
    listing = lister() if given is None and source is None else None
    listed, vectors = (list(given), None) if given is not None else (listing or ([], None))
    relist = lister if listing is not None else None
    cfg = config or Config()
    embedder = _embedder(cfg, embeddings)
    if source is not None:
        size = source.size()
        corpus = ExternalCorpus(
            [], embedder=embedder, graph_k=cfg.graph.k, name=name, size=size or UNKNOWN_SIZE
        )
        cache = neighbour_cache or Path(cfg.corpus.home) / "neighbours.sqlite"
        corpus.use_on_demand(source, cache)
        return _parts(cfg, corpus, search, name, injected=embeddings is not None)
    if not listed and relist is None:
        raise CorpusError(
            f"cannot list the documents of {name}; pass {documents_arg} with the store's "
            "documents so that the neighbourhood graph can be built"
        )
    corpus = ExternalCorpus(
        listed,
        embedder=embedder,
        graph_k=cfg.graph.k,
        store_vectors=vectors if use_store_vectors else None,
        name=name,
        relist=relist,
        use_store_vectors=use_store_vectors,
    )
    return _parts(cfg, corpus, search, name, injected=embeddings is not None)


def _parts(
    cfg: Config, corpus: ExternalCorpus, search: SearchFn, name: str, *, injected: bool
) -> ByoComponents:
    parts = ByoComponents(cfg, corpus, ExternalFirstStage(search, corpus, name=name))
    if injected:  # the user's embeddings serve the equivalence etc. too
        parts.inject(embedder=corpus.embedder)
    return parts
