"""A collection: Chroma (dense) + bm25s (sparse) + the neighbourhood graph, kept consistent.

:class:`CorpusStore` is the facade the rest of the package uses; the work is split by job:

- :mod:`.log` — the append-only chunk log (``chunks.jsonl``, ``embeddings.f32``), the manifest
  whose atomic commits are the single source of truth, truncation of uncommitted bytes and the
  writer lock;
- :mod:`.indexes` — the index set (Chroma collection, versioned BM25 and neighbourhood graph):
  building, extending and publishing it, and checking it agrees with the log;
- :mod:`.ingest` — documents → chunks → batches → embed → write → commit.

On-disk layout of ``<home>/collections/<name>/``::

    manifest.json     committed counts (the single source of truth), written atomically
    chunks.jsonl      one chunk per line, in row order (append-only)
    embeddings.f32    float32 row-major matrix, one row per chunk (append-only)
    chroma/           Chroma PersistentClient directory (unless a Chroma server is configured)
    bm25-<rows>/      bm25s index over the first <rows> committed rows (the previous one is kept)
    graph-<rows>/     TopKGraph over the first <rows> committed rows (the previous one is kept)

Concurrency: a collection has one writer at a time. Writers (:meth:`CorpusStore.ingest`,
:meth:`CorpusStore.refresh_indexes`) hold the collection's inter-process lock; on entry they
adopt what other writers committed and cut off any uncommitted tail. Readers take no lock and
never see a torn or half-indexed state: a store pins the state published when its manifest was
read (the rows whose BM25 and graph are built, see :mod:`.indexes`) and reads only that prefix
of the append-only files, those index versions, and the Chroma results among those rows, while
a writer appends and publishes a new state. A collection exists once its first batch is
committed, so a failed first index leaves no empty collection behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from functools import cached_property
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np

from ..config import Config
from ..errors import CorpusError
from ..models.embeddings import SentenceTransformerEmbedder, load_embedder
from ..text import validate_collection_name
from ..types import Chunk
from . import ingest as _ingest
from .documents import Document
from .graph import TopKGraph
from .indexes import IndexSet, StateGone
from .log import MANIFEST_FILE, ChunkLog, Prefix, WriterLock, chunk_of, read_manifest
from .manifest import IngestReport, Manifest

T = TypeVar("T")


class CorpusStore:
    """One named collection. Use :meth:`open` for an existing one, :meth:`open_or_create`
    to index into one that may not exist yet (it is created by its first committed batch)."""

    #: Seconds a writer waits for another writer of the same collection (None: no limit).
    write_wait_s: float | None = None

    def __init__(self, directory: Path, manifest: Manifest, config: Config) -> None:
        self.config = config
        self.log = ChunkLog(directory, manifest)
        self.indexes = IndexSet(self.log, config, lambda: self.embedder)
        self._writer = WriterLock(directory, manifest.name)

    @property
    def directory(self) -> Path:
        return self.log.directory

    @property
    def manifest(self) -> Manifest:
        """The committed counts (owned by the log; replaced when another writer committed)."""
        return self.log.manifest

    # ----------------------------------------------------------------- opening
    @classmethod
    def path_for(cls, name: str, config: Config) -> Path:
        return config.corpus.collections_dir / validate_collection_name(name)

    @classmethod
    def exists(cls, name: str, config: Config) -> bool:
        return (cls.path_for(name, config) / MANIFEST_FILE).is_file()

    @classmethod
    def open(cls, name: str, config: Config) -> CorpusStore:
        """An existing collection. A torn tail left by a crashed writer is cut off here
        unless a writer is active (readers only ever read the committed prefix)."""
        directory = cls.path_for(name, config)
        if not (directory / MANIFEST_FILE).is_file():
            raise CorpusError(
                f"collection {name!r} does not exist under {config.corpus.collections_dir}; "
                f"create it with: rca index PATH --collection {name} (or rca index --demo "
                f"--collection {name} for the bundled demo corpus)"
            )
        store = cls(directory, read_manifest(directory), config)
        store.log.check_files()
        store._repair_if_idle()
        return store

    @classmethod
    def open_or_create(cls, name: str, config: Config) -> CorpusStore:
        """The collection ``name``; if it does not exist yet, an empty store that creates it
        on its first committed batch (nothing is written before that)."""
        if cls.exists(name, config):
            store = cls.open(name, config)
            store._check_compatible(config)
            return store
        return cls(cls.path_for(name, config), cls._new_manifest(name, config), config)

    @staticmethod
    def _new_manifest(name: str, config: Config) -> Manifest:
        embedder = load_embedder(config.models.embedding, batch_size=config.models.embed_batch_size)
        return Manifest(
            name=name,
            embedding=config.models.embedding,
            dimension=embedder.dimension,
            chunk_size=config.corpus.chunk_size,
            chunk_overlap=config.corpus.chunk_overlap,
            graph_k=config.graph.k,
            chunk_max_chars=config.corpus.max_chunk_chars,
        )

    def _check_compatible(self, config: Config) -> None:
        m = self.manifest
        if m.embedding != config.models.embedding:
            raise CorpusError(
                f"collection {m.name!r} was embedded with {m.embedding!r}, not "
                f"{config.models.embedding!r}; use a new collection name"
            )
        if (m.chunk_size, m.chunk_overlap) != (
            config.corpus.chunk_size,
            config.corpus.chunk_overlap,
        ):
            raise CorpusError(
                f"collection {m.name!r} uses chunk size/overlap {m.chunk_size}/{m.chunk_overlap}; "
                "index with the same settings or into a new collection"
            )
        if m.chunk_max_chars and m.chunk_max_chars != config.corpus.max_chunk_chars:
            raise CorpusError(
                f"collection {m.name!r} caps chunks at {m.chunk_max_chars} characters, not "
                f"{config.corpus.max_chunk_chars}; index with the same corpus.chunk_max_chars "
                "or into a new collection"
            )

    # ------------------------------------------------------------------ locking
    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the collection's writer lock; on entry the store reloads what other writers
        committed and cuts off anything uncommitted (a crashed writer's tail)."""
        with self._writer.hold(self.write_wait_s):
            self._reload()
            yield

    def _reload(self) -> None:
        """Adopt the manifest on disk (another writer may have committed) and truncate."""
        self.log.adopt_committed()
        self._reset_caches()
        self.log.truncate_uncommitted()

    def _repair_if_idle(self) -> None:
        """Cut off an uncommitted tail now if no writer is active (else the writer will)."""
        if not self.log.has_uncommitted_tail():
            return
        with self._writer.hold_if_free() as held:
            if held:
                self._reload()

    def _reset_caches(self) -> None:
        for attr in ("chunks", "ids", "row_of", "embeddings", "bm25", "graph"):
            self.__dict__.pop(attr, None)

    @property
    def _lock_path(self) -> Path:
        return self._writer.path

    @property
    def _chunks_path(self) -> Path:
        return self.log.chunks_path

    @property
    def _embeddings_path(self) -> Path:
        return self.log.embeddings_path

    @property
    def _chroma_collection(self) -> Any:
        return self.indexes.chroma

    @cached_property
    def embedder(self) -> SentenceTransformerEmbedder:
        return load_embedder(
            self.manifest.embedding, batch_size=self.config.models.embed_batch_size
        )

    # ------------------------------------------------------------------ reading
    # Everything below reads the pinned published state (:attr:`pinned`), never rows a
    # writer has committed but not yet indexed.
    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def pinned(self) -> Prefix:
        """The published rows this store reads (see the module docstring)."""
        return self.log.published

    def __len__(self) -> int:
        return self.pinned.rows

    def _read_pinned(self, load: Callable[[Prefix], T]) -> T:
        """``load(pinned)``; when a newer publication has deleted an index version of the
        pinned state, pin the state on disk now and load again."""
        try:
            return load(self.pinned)
        except StateGone:
            self.log.adopt_committed()
            self._reset_caches()
            return load(self.pinned)

    @cached_property
    def chunks(self) -> list[Chunk]:
        """The published chunks, in row order."""
        return [chunk_of(record) for record in self.log.records(self.pinned)]

    @cached_property
    def ids(self) -> list[str]:
        """The published chunk ids, in row order (without loading the chunks)."""
        if "chunks" in self.__dict__:
            return [chunk.id for chunk in self.chunks]
        return self.log.ids(self.pinned)

    @cached_property
    def row_of(self) -> dict[str, int]:
        return {chunk_id: row for row, chunk_id in enumerate(self.ids)}

    def chunk(self, chunk_id: str) -> Chunk:
        try:
            return self.chunks[self.row_of[chunk_id]]
        except KeyError as exc:
            raise CorpusError(f"chunk {chunk_id!r} is not in collection {self.name!r}") from exc

    @cached_property
    def embeddings(self) -> np.ndarray:
        """Row-aligned float32 embeddings of the published rows (memory-mapped)."""
        return self.log.embeddings(self.pinned)

    def vectors(self, chunk_ids: Sequence[str]) -> np.ndarray:
        """Stored embeddings of ``chunk_ids`` (rows in the same order)."""
        return np.asarray(self.embeddings[[self.row_of[i] for i in chunk_ids]])

    @cached_property
    def bm25(self) -> Any:
        return self._read_pinned(self.indexes.load_bm25)

    @cached_property
    def graph(self) -> TopKGraph:
        return self._read_pinned(self.indexes.load_graph)

    def chroma_count(self) -> int:
        return self.indexes.chroma_count()

    def query_dense(self, query_vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Chroma nearest neighbours as (chunk id, cosine similarity), published chunks only."""
        row_of = self.row_of
        pairs = self.indexes.query_dense(query_vector, k, len(row_of))
        return [pair for pair in pairs if pair[0] in row_of][:k]

    # ------------------------------------------------------------------ writing
    def chunk_documents(
        self, documents: Iterable[Document], spool: IO[bytes]
    ) -> tuple[int, set[str]]:
        """Chunk every document into ``spool`` with this collection's settings (nothing is
        written to the collection); returns (document count, chunk ids)."""
        m = self.manifest
        return _ingest.chunk_documents(
            documents,
            spool,
            self.embedder,
            chunk_size=m.chunk_size,
            chunk_overlap=m.chunk_overlap,
            max_chars=m.chunk_max_chars or self.config.corpus.max_chunk_chars,
        )

    def ingest(self, documents: Iterable[Document], *, progress: bool = True) -> IngestReport:
        """Add documents; already stored chunks are skipped. Safe to interrupt and rerun, and
        to run from several processes at once (writers take turns, see the module docstring).
        All documents are chunked before anything is written (see :mod:`.ingest`)."""
        return _ingest.ingest(self, documents, progress=progress)

    def _add_batch(self, batch: Sequence[Chunk]) -> None:
        """Store and commit one batch of new chunks (the step :func:`.ingest.ingest` repeats)."""
        _ingest.store_batch(batch, self.embedder, self.log, self.indexes)
        self._reset_caches()

    def refresh_indexes(self) -> None:
        """Build BM25 and the graph over the committed rows and publish them (see
        :mod:`.indexes`); this store then reads the new state."""
        with self.writing():
            self.indexes.refresh()
            self._reset_caches()

    def stats(self) -> dict[str, Any]:
        disk = sum(p.stat().st_size for p in self.directory.rglob("*") if p.is_file())
        info: dict[str, Any] = {
            **asdict(self.manifest),
            "directory": str(self.directory),
            "disk_mb": round(disk / 2**20, 2),
        }
        if self.manifest.graph_rows == self.pinned.rows and self.pinned.rows:
            info["graph"] = self.graph.stats()
        return info


def list_collections(config: Config) -> list[str]:
    root = config.corpus.collections_dir
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / MANIFEST_FILE).is_file())
