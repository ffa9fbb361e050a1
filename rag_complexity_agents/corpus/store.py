"""A collection: Chroma (dense) + bm25s (sparse) + the neighbourhood graph, kept consistent.

On-disk layout of ``<home>/collections/<name>/``::

    manifest.json     committed counts (the single source of truth), written atomically
    chunks.jsonl      one chunk per line, in row order (append-only)
    embeddings.f32    float32 row-major matrix, one row per chunk (append-only)
    chroma/           Chroma PersistentClient directory (unless a Chroma server is configured)
    bm25-<rows>/      bm25s index over the first <rows> committed rows (the previous one is kept)
    graph/            TopKGraph (memory-mapped top-k neighbours)

Ingestion is idempotent and crash-safe: chunks get content-hash ids; each batch is embedded,
upserted into Chroma, appended to ``chunks.jsonl``/``embeddings.f32`` and only then committed by
rewriting the manifest atomically. Bytes past the committed counts (a batch cut off by a crash,
a torn ``chunks.jsonl`` line) are truncated by the next writer, and on open when no writer is
active; Chroma upserts are idempotent, so a rerun re-adds exactly what was not committed. BM25 and
the graph record the row count they cover and are rebuilt/extended when it lags behind.

Concurrency: a collection has one writer at a time. Writers (:meth:`CorpusStore.ingest`,
:meth:`CorpusStore.refresh_indexes`) hold an inter-process lock (``filelock``) on
``<collections>/.locks/<name>.lock``; a second writer logs one line saying it waits, waits for
the first to finish and continues from what that one committed. Readers take no lock and never
see a torn state: they read only the committed prefix of the append-only files, and BM25 / graph
versions are published atomically. A collection exists once its first batch is committed, so a
failed first index leaves no empty collection behind.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from functools import cached_property
from pathlib import Path
from typing import IO, Any

import numpy as np
from filelock import FileLock, Timeout
from tqdm.auto import tqdm

from ..config import Config
from ..errors import CorpusError
from ..models.embeddings import SentenceTransformerEmbedder, load_embedder
from ..types import Chunk
from .chroma import ChromaEmbeddingFunction, chroma_metadata
from .documents import Document, iter_chunks
from .graph import TopKGraph
from .manifest import (
    MANIFEST_VERSION,
    IngestReport,
    Manifest,
    atomic_write_text,
    validate_collection_name,
)

log = logging.getLogger(__name__)

_BM25_PREFIX = "bm25-"
#: Bytes of one block of similarities while the graph is built or extended: it bounds that
#: step's memory (a few blocks' worth) whatever the collection size.
GRAPH_BLOCK_BYTES = 64 * 2**20


class CorpusStore:
    """One named collection. Use :meth:`open` for an existing one, :meth:`open_or_create`
    to index into one that may not exist yet (it is created by its first committed batch)."""

    #: Seconds a writer waits for another writer of the same collection (None: no limit).
    write_wait_s: float | None = None

    def __init__(self, directory: Path, manifest: Manifest, config: Config) -> None:
        self.directory = directory
        self.manifest = manifest
        self.config = config
        self._lock_path = directory.parent / ".locks" / f"{directory.name}.lock"
        self._lock = FileLock(self._lock_path, thread_local=False)

    # ----------------------------------------------------------------- opening
    @classmethod
    def path_for(cls, name: str, config: Config) -> Path:
        return config.corpus.collections_dir / validate_collection_name(name)

    @classmethod
    def exists(cls, name: str, config: Config) -> bool:
        return (cls.path_for(name, config) / "manifest.json").is_file()

    @staticmethod
    def _read_manifest(directory: Path) -> Manifest:
        manifest_path = directory / "manifest.json"
        try:
            manifest = Manifest(**json.loads(manifest_path.read_text(encoding="utf-8")))
        except (ValueError, TypeError) as exc:
            raise CorpusError(f"{manifest_path} is unreadable ({exc}); re-index") from exc
        if manifest.version != MANIFEST_VERSION:
            raise CorpusError(f"{manifest_path} has version {manifest.version}; re-index")
        return manifest

    @classmethod
    def open(cls, name: str, config: Config) -> CorpusStore:
        """An existing collection. A torn tail left by a crashed writer is cut off here
        unless a writer is active (readers only ever read the committed prefix)."""
        directory = cls.path_for(name, config)
        if not (directory / "manifest.json").is_file():
            raise CorpusError(
                f"collection {name!r} does not exist under {config.corpus.collections_dir}; "
                f"create it with: rca index PATH --collection {name}"
            )
        store = cls(directory, cls._read_manifest(directory), config)
        store._check_files()
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

    # ------------------------------------------------------------------ locking
    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the collection's writer lock; on entry the store reloads what other writers
        committed and cuts off anything uncommitted (a crashed writer's tail)."""
        self._lock_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            log.warning(
                "collection %r is being written by another process; waiting for it to finish",
                self.name,
            )
            try:
                self._lock.acquire(timeout=-1 if self.write_wait_s is None else self.write_wait_s)
            except Timeout as exc:
                raise CorpusError(
                    f"collection {self.name!r} is still being written by another process after "
                    f"{self.write_wait_s} s; try again later"
                ) from exc
        try:
            self._reload()
            yield
        finally:
            self._lock.release()

    def _reload(self) -> None:
        """Adopt the manifest on disk (another writer may have committed) and truncate."""
        if (self.directory / "manifest.json").is_file():
            ours = self.manifest
            self.manifest = self._read_manifest(self.directory)
            if (ours.embedding, ours.chunk_size, ours.chunk_overlap) != (
                self.manifest.embedding,
                self.manifest.chunk_size,
                self.manifest.chunk_overlap,
            ):
                raise CorpusError(
                    f"collection {self.name!r} was created meanwhile by another process with "
                    "other embedding/chunk settings; use a new collection name"
                )
        self._reset_caches()
        self._truncate_uncommitted()

    def _repair_if_idle(self) -> None:
        """Cut off an uncommitted tail now if no writer is active (else the writer will)."""
        if not self._has_uncommitted_tail():
            return
        try:
            self._lock_path.parent.mkdir(parents=True, exist_ok=True)
            self._lock.acquire(timeout=0)
        except (Timeout, OSError):
            return
        try:
            self._reload()
        finally:
            self._lock.release()

    # --------------------------------------------------------------- internals
    @property
    def _chunks_path(self) -> Path:
        return self.directory / "chunks.jsonl"

    @property
    def _embeddings_path(self) -> Path:
        return self.directory / "embeddings.f32"

    def _committed_sizes(self) -> tuple[tuple[Path, int], ...]:
        m = self.manifest
        return (
            (self._chunks_path, m.chunks_bytes),
            (self._embeddings_path, m.rows * m.dimension * 4),
        )

    def _commit(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(
            self.directory / "manifest.json", json.dumps(asdict(self.manifest), indent=2)
        )

    def _check_files(self) -> None:
        """CorpusError when a data file is missing or shorter than committed."""
        for path, size in self._committed_sizes():
            actual = path.stat().st_size if path.exists() else None
            if actual is None and size:
                raise CorpusError(f"{path} is missing; the collection must be re-indexed")
            if actual is not None and actual < size:
                raise CorpusError(f"{path} is shorter than committed; re-index the collection")

    def _has_uncommitted_tail(self) -> bool:
        return any(
            path.exists() and path.stat().st_size > size for path, size in self._committed_sizes()
        )

    def _truncate_uncommitted(self) -> None:
        """Drop bytes written after the last commit (a batch interrupted by a crash). Only
        the writer (holding the lock) calls this."""
        self._check_files()
        self.directory.mkdir(parents=True, exist_ok=True)
        for path, size in self._committed_sizes():
            if not path.exists():
                path.touch()
            elif path.stat().st_size > size:
                with open(path, "r+b") as handle:
                    handle.truncate(size)

    def _reset_caches(self) -> None:
        for attr in ("chunks", "ids", "row_of", "embeddings", "bm25", "graph"):
            self.__dict__.pop(attr, None)

    @cached_property
    def embedder(self) -> SentenceTransformerEmbedder:
        return load_embedder(
            self.manifest.embedding, batch_size=self.config.models.embed_batch_size
        )

    @cached_property
    def _chroma_collection(self) -> Any:
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False, allow_reset=False)
        corpus = self.config.corpus
        if corpus.chroma_host:
            client = chromadb.HttpClient(
                host=corpus.chroma_host, port=corpus.chroma_port, settings=settings
            )
        else:
            client = chromadb.PersistentClient(
                path=str(self.directory / "chroma"), settings=settings
            )
        self._chroma_max_batch = int(client.get_max_batch_size())
        self._chroma_client = client
        return client.get_or_create_collection(
            name=self.manifest.name,
            # Chroma's EmbeddingFunction type also takes images; this one embeds texts only
            embedding_function=ChromaEmbeddingFunction(self.embedder),  # type: ignore[arg-type]
            configuration={"hnsw": {"space": "cosine"}},
        )

    # ------------------------------------------------------------------ reading
    @property
    def name(self) -> str:
        return self.manifest.name

    def __len__(self) -> int:
        return self.manifest.rows

    def _records(self) -> Iterator[dict[str, Any]]:
        """The committed chunk records, in row order, read line by line (bytes past the
        commit are never read); CorpusError when they do not parse or do not match the
        manifest's row count."""
        remaining, count = self.manifest.chunks_bytes, 0
        if remaining:
            with open(self._chunks_path, "rb") as handle:
                while remaining > 0:
                    line = handle.readline(remaining)
                    remaining -= len(line)
                    count += 1
                    try:
                        record = json.loads(line)
                        _ = record["id"], record["text"], record["title"], record["metadata"]
                    except (ValueError, KeyError, TypeError) as exc:
                        raise CorpusError(
                            f"{self._chunks_path}:{count} is damaged ({exc}); delete "
                            f"{self.directory} and re-index"
                        ) from exc
                    yield record
        if count != self.manifest.rows:
            raise CorpusError(
                f"{self._chunks_path} holds {count} committed chunks, the manifest "
                f"{self.manifest.rows}; delete {self.directory} and re-index"
            )

    @cached_property
    def chunks(self) -> list[Chunk]:
        """The committed chunks, in row order."""
        return [_chunk_of(record) for record in self._records()]

    @cached_property
    def ids(self) -> list[str]:
        """The committed chunk ids, in row order (without loading the chunks)."""
        if "chunks" in self.__dict__:
            return [chunk.id for chunk in self.chunks]
        return [record["id"] for record in self._records()]

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
        """Row-aligned float32 embeddings (memory-mapped)."""
        rows, dim = self.manifest.rows, self.manifest.dimension
        if rows == 0:
            return np.zeros((0, dim), dtype=np.float32)
        return np.memmap(self._embeddings_path, dtype=np.float32, mode="r", shape=(rows, dim))

    def vectors(self, chunk_ids: Sequence[str]) -> np.ndarray:
        """Stored embeddings of ``chunk_ids`` (rows in the same order)."""
        return np.asarray(self.embeddings[[self.row_of[i] for i in chunk_ids]])

    def _bm25_dir(self, rows: int) -> Path:
        return self.directory / f"{_BM25_PREFIX}{rows}"

    @cached_property
    def bm25(self) -> Any:
        import bm25s

        if self.manifest.bm25_rows != self.manifest.rows:
            raise CorpusError(
                f"the BM25 index of {self.name!r} is behind its chunks; rerun rca index"
            )
        path = self._bm25_dir(self.manifest.rows)
        if not path.is_dir():
            legacy = self.directory / "bm25"  # layout before versioned BM25 directories
            if not legacy.is_dir():
                raise CorpusError(
                    f"the BM25 index of {self.name!r} changed while it was open; open it again"
                )
            path = legacy
        return bm25s.BM25.load(str(path), show_progress=False)

    @cached_property
    def graph(self) -> TopKGraph:
        if self.manifest.graph_rows != self.manifest.rows:
            raise CorpusError(
                f"the neighbourhood graph of {self.name!r} is behind its chunks; rerun rca index"
            )
        return TopKGraph.open(self.directory / "graph")

    def chroma_count(self) -> int:
        return int(self._chroma_collection.count())

    def query_dense(self, query_vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Chroma nearest neighbours as (chunk id, cosine similarity)."""
        k = min(k, len(self))
        if k == 0:
            return []
        result = self._chroma_collection.query(
            query_embeddings=[np.asarray(query_vector, dtype=np.float32)],
            n_results=k,
            include=["distances"],
        )
        return [
            (chunk_id, 1.0 - float(distance))
            for chunk_id, distance in zip(result["ids"][0], result["distances"][0], strict=True)
            if chunk_id in self.row_of
        ]

    # ------------------------------------------------------------------ writing
    def chunk_documents(
        self, documents: Iterable[Document], spool: IO[bytes]
    ) -> tuple[int, set[str]]:
        """Chunk every document into ``spool`` (one ``chunks.jsonl`` line per chunk, duplicates
        dropped; nothing is written to the collection); returns (document count, chunk ids).
        Documents are read and tokenised as streams and no chunk is kept in memory."""
        m = self.manifest
        seen: set[str] = set()
        n_docs = 0
        for doc in documents:
            n_docs += 1
            for chunk in iter_chunks(
                doc,
                self.embedder.token_offsets,
                chunk_size=m.chunk_size,
                chunk_overlap=m.chunk_overlap,
            ):
                if chunk.id not in seen:
                    seen.add(chunk.id)
                    spool.write(_chunk_line(chunk))
        return n_docs, seen

    def ingest(self, documents: Iterable[Document], *, progress: bool = True) -> IngestReport:
        """Add documents; already stored chunks are skipped. Safe to interrupt and rerun, and
        to run from several processes at once (writers take turns, see the module docstring).

        All documents are read and chunked before anything is written, so a bad file stops
        the run with nothing half-written. The chunks wait in an unnamed temporary file next
        to the collections and are stored batch by batch, so memory does not grow with the
        input (beyond its chunk ids).
        """
        collections = self.directory.parent
        collections.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(prefix="chunks-", dir=collections) as spool:
            n_docs, ids = self.chunk_documents(documents, spool)
            n_chunks = len(ids)
            if n_docs == 0 or not n_chunks:
                raise CorpusError("no text to index: the input holds no non-empty documents")
            with self.writing():
                known = set(self.ids)
                n_new = len(ids - known)
                del ids
                spool.seek(0)
                new = (
                    chunk
                    for chunk in map(_chunk_of, map(json.loads, spool))
                    if chunk.id not in known
                )
                try:
                    self._add_all(new, n_new, progress=progress)
                finally:
                    self._release_chroma()  # BM25 and the graph do not need its HNSW index
                    self._discard_if_uncommitted()
                del known
                self.refresh_indexes()
        return IngestReport(
            documents=n_docs, chunks=n_chunks, added=n_new, skipped=n_chunks - n_new, rows=len(self)
        )

    def _add_all(self, new: Iterable[Chunk], total: int, *, progress: bool) -> None:
        self._drop_orphans_from_chroma()
        batch_size = self.config.corpus.ingest_batch_size
        chunks = iter(new)
        with tqdm(
            total=total, desc=f"indexing {self.name}", unit="chunk", disable=not progress
        ) as bar:
            while batch := list(itertools.islice(chunks, batch_size)):
                self._add_batch(batch)
                bar.update(len(batch))

    def _release_chroma(self) -> None:
        """Close this store's Chroma client (the next use opens it again): a local Chroma
        holds the collection's HNSW index in memory while its client is open."""
        self.__dict__.pop("_chroma_collection", None)
        client = self.__dict__.pop("_chroma_client", None)
        if client is not None:
            client.close()

    def _discard_if_uncommitted(self) -> None:
        """Remove the directory of a collection whose first index committed nothing, unless
        Chroma holds it open in this process (then it stays, invisible without a manifest,
        and the next run reuses it)."""
        if (self.directory / "manifest.json").is_file():
            return
        if "_chroma_collection" not in self.__dict__ or self.config.corpus.chroma_host:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _add_batch(self, batch: Sequence[Chunk]) -> None:
        vectors = self.embedder.encode([chunk.text for chunk in batch])
        collection = self._chroma_collection
        for start in range(0, len(batch), self._chroma_max_batch):
            part = batch[start : start + self._chroma_max_batch]
            collection.upsert(
                ids=[chunk.id for chunk in part],
                embeddings=vectors[start : start + len(part)],
                documents=[chunk.text for chunk in part],
                metadatas=[chroma_metadata(chunk) for chunk in part],
            )
        lines = b"".join(map(_chunk_line, batch))
        for path, payload in (
            (self._chunks_path, lines),
            (self._embeddings_path, vectors.tobytes()),
        ):
            with open(path, "ab") as handle:
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())
        self.manifest.rows += len(batch)
        self.manifest.chunks_bytes += len(lines)
        self._commit()
        self._reset_caches()

    def _drop_orphans_from_chroma(self) -> None:
        """Remove Chroma entries a crashed run upserted but never committed."""
        collection = self._chroma_collection
        if collection.count() <= len(self):
            return
        committed = set(self.ids)
        stored = collection.get(include=[])["ids"]
        orphans = [chunk_id for chunk_id in stored if chunk_id not in committed]
        for start in range(0, len(orphans), self._chroma_max_batch):
            collection.delete(ids=orphans[start : start + self._chroma_max_batch])

    def refresh_indexes(self) -> None:
        """Bring BM25 and the graph up to the committed rows (rebuild / extend as needed)."""
        with self.writing():
            self._refresh_bm25()
            self._refresh_graph()
            self._reset_caches()

    def _refresh_bm25(self) -> None:
        """Build BM25 over all committed rows into ``bm25-<rows>/``, publish it by the
        manifest commit, then delete all but it and its predecessor (a reader may hold that)."""
        import bm25s

        m = self.manifest
        if m.bm25_rows == m.rows:
            return
        tokens = bm25s.tokenize(  # reads the chunks as a stream, keeps only their token ids
            (f"{r['title']}\n{r['text']}" for r in self._records()),
            stopwords="en",
            show_progress=False,
        )
        index = bm25s.BM25()
        index.index(tokens, show_progress=False)
        del tokens
        tmp = self.directory / "bm25.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        index.save(str(tmp), show_progress=False)
        del index
        final = self._bm25_dir(m.rows)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        previous = m.bm25_rows
        m.bm25_rows = m.rows
        self._commit()
        keep = {final.name, self._bm25_dir(previous).name}
        for path in self.directory.iterdir():
            stale = path.name == "bm25" or path.name.startswith(_BM25_PREFIX)
            if stale and path.name not in keep:
                shutil.rmtree(path, ignore_errors=True)

    def _refresh_graph(self) -> None:
        m = self.manifest
        if m.graph_rows == m.rows:
            return
        graph_dir = self.directory / "graph"
        embeddings = np.asarray(self.embeddings)
        if m.graph_rows == 0 or not graph_dir.exists():
            TopKGraph.build(
                graph_dir,
                embeddings,
                self.ids,
                k=m.graph_k,
                block_size=self.config.graph.block_size,
                max_block_bytes=GRAPH_BLOCK_BYTES,
                method=self.config.graph.method,
                exact_max_rows=self.config.graph.exact_max_rows,
            )
        else:
            TopKGraph.open(graph_dir).extend(
                embeddings, self.ids, max_block_bytes=GRAPH_BLOCK_BYTES
            )
        m.graph_rows = m.rows
        self._commit()

    def stats(self) -> dict[str, Any]:
        disk = sum(p.stat().st_size for p in self.directory.rglob("*") if p.is_file())
        info: dict[str, Any] = {
            **asdict(self.manifest),
            "directory": str(self.directory),
            "disk_mb": round(disk / 2**20, 2),
        }
        if self.manifest.graph_rows == self.manifest.rows and self.manifest.rows:
            info["graph"] = self.graph.stats()
        return info


def _chunk_line(chunk: Chunk) -> bytes:
    """``chunk`` as one line of ``chunks.jsonl``."""
    record = {
        "id": chunk.id,
        "title": chunk.title,
        "text": chunk.text,
        "metadata": dict(chunk.metadata),
    }
    return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")


def _chunk_of(record: dict[str, Any]) -> Chunk:
    """The chunk of one ``chunks.jsonl`` record."""
    return Chunk(record["id"], record["text"], record["title"], record["metadata"])


def list_collections(config: Config) -> list[str]:
    root = config.corpus.collections_dir
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "manifest.json").is_file())
