"""A collection: Chroma (dense) + bm25s (sparse) + the neighbourhood graph, kept consistent.

On-disk layout of ``<home>/collections/<name>/``::

    manifest.json     committed counts (the single source of truth), written atomically
    chunks.jsonl      one chunk per line, in row order (append-only)
    embeddings.f32    float32 row-major matrix, one row per chunk (append-only)
    chroma/           Chroma PersistentClient directory (unless a Chroma server is configured)
    bm25/             bm25s index over all committed rows
    graph/            TopKGraph (memory-mapped top-k neighbours)

Ingestion is idempotent and crash-safe: chunks get content-hash ids; each batch is embedded,
upserted into Chroma, appended to ``chunks.jsonl``/``embeddings.f32`` and only then committed by
rewriting the manifest atomically. On open, bytes past the committed counts (a batch cut off by
a crash) are truncated; Chroma upserts are idempotent, so a rerun re-adds exactly what was not
committed. BM25 and the graph record the row count they cover and are rebuilt/extended when it
lags behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..config import Config
from ..errors import CorpusError
from ..models.embeddings import SentenceTransformerEmbedder, load_embedder
from ..types import Chunk
from .documents import SourceDocument, chunk_document
from .graph import TopKGraph

MANIFEST_VERSION = 1
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")


def validate_collection_name(name: str) -> str:
    if not _NAME_RE.match(name) or ".." in name:
        raise CorpusError(
            f"invalid collection name {name!r}: use 3–512 characters from letters, digits, "
            "'.', '_' and '-', starting and ending with a letter or digit"
        )
    return name


@dataclass
class Manifest:
    name: str
    embedding: str
    dimension: int
    chunk_size: int
    chunk_overlap: int
    graph_k: int
    rows: int = 0
    chunks_bytes: int = 0
    bm25_rows: int = 0
    graph_rows: int = 0
    version: int = MANIFEST_VERSION


@dataclass(frozen=True)
class IngestReport:
    documents: int
    chunks: int
    added: int
    skipped: int
    rows: int


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _chroma_metadata(chunk: Chunk) -> dict[str, str | int | float | bool]:
    """Chroma accepts scalar metadata only; other values are stored as JSON strings."""
    out: dict[str, str | int | float | bool] = {"title": chunk.title}
    for key, value in chunk.metadata.items():
        if isinstance(value, str | int | float | bool):
            out[key] = value
        elif value is not None:
            out[key] = json.dumps(value, ensure_ascii=False)
    return out


class ChromaEmbeddingFunction:
    """Chroma embedding function backed by our encoder (Chroma's default would download one)."""

    def __init__(self, embedder: SentenceTransformerEmbedder) -> None:
        self._embedder = embedder

    def __call__(self, input: Sequence[str]) -> list[np.ndarray]:
        return list(self._embedder.encode(list(input)))

    def embed_query(self, input: Sequence[str]) -> list[np.ndarray]:
        return self(input)

    @staticmethod
    def name() -> str:
        return "rag-complexity-agents"

    def get_config(self) -> dict[str, Any]:
        return {"path": str(self._embedder.path)}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> ChromaEmbeddingFunction:
        return ChromaEmbeddingFunction(SentenceTransformerEmbedder(config["path"]))

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine"]

    def is_legacy(self) -> bool:
        return False


class CorpusStore:
    """One named collection. Use :meth:`open` for an existing one, :meth:`create` otherwise."""

    def __init__(self, directory: Path, manifest: Manifest, config: Config) -> None:
        self.directory = directory
        self.manifest = manifest
        self.config = config
        self._truncate_uncommitted()

    # ----------------------------------------------------------------- opening
    @classmethod
    def path_for(cls, name: str, config: Config) -> Path:
        return config.corpus.collections_dir / validate_collection_name(name)

    @classmethod
    def exists(cls, name: str, config: Config) -> bool:
        return (cls.path_for(name, config) / "manifest.json").is_file()

    @classmethod
    def open(cls, name: str, config: Config) -> CorpusStore:
        directory = cls.path_for(name, config)
        manifest_path = directory / "manifest.json"
        if not manifest_path.is_file():
            raise CorpusError(
                f"collection {name!r} does not exist under {config.corpus.collections_dir}; "
                f"create it with: rca index PATH --collection {name}"
            )
        try:
            manifest = Manifest(**json.loads(manifest_path.read_text(encoding="utf-8")))
        except (ValueError, TypeError) as exc:
            raise CorpusError(f"{manifest_path} is unreadable ({exc}); re-index") from exc
        if manifest.version != MANIFEST_VERSION:
            raise CorpusError(f"{manifest_path} has version {manifest.version}; re-index")
        return cls(directory, manifest, config)

    @classmethod
    def open_or_create(cls, name: str, config: Config) -> CorpusStore:
        if cls.exists(name, config):
            store = cls.open(name, config)
            store._check_compatible(config)
            return store
        directory = cls.path_for(name, config)
        directory.mkdir(parents=True, exist_ok=True)
        embedder = load_embedder(config.models.embedding, batch_size=config.models.embed_batch_size)
        manifest = Manifest(
            name=name,
            embedding=config.models.embedding,
            dimension=embedder.dimension,
            chunk_size=config.corpus.chunk_size,
            chunk_overlap=config.corpus.chunk_overlap,
            graph_k=config.graph.k,
        )
        store = cls(directory, manifest, config)
        store._commit()
        return store

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

    # --------------------------------------------------------------- internals
    @property
    def _chunks_path(self) -> Path:
        return self.directory / "chunks.jsonl"

    @property
    def _embeddings_path(self) -> Path:
        return self.directory / "embeddings.f32"

    def _commit(self) -> None:
        _atomic_write_text(
            self.directory / "manifest.json", json.dumps(asdict(self.manifest), indent=2)
        )

    def _truncate_uncommitted(self) -> None:
        """Drop bytes written after the last commit (a batch interrupted by a crash)."""
        m = self.manifest
        for path, size in (
            (self._chunks_path, m.chunks_bytes),
            (self._embeddings_path, m.rows * m.dimension * 4),
        ):
            if not path.exists():
                if size:
                    raise CorpusError(f"{path} is missing; the collection must be re-indexed")
                path.touch()
            elif path.stat().st_size > size:
                with open(path, "r+b") as handle:
                    handle.truncate(size)
            elif path.stat().st_size < size:
                raise CorpusError(f"{path} is shorter than committed; re-index the collection")

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

    @cached_property
    def chunks(self) -> list[Chunk]:
        out = []
        with open(self._chunks_path, encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                out.append(Chunk(record["id"], record["text"], record["title"], record["metadata"]))
        return out

    @cached_property
    def ids(self) -> list[str]:
        return [chunk.id for chunk in self.chunks]

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

    @cached_property
    def bm25(self) -> Any:
        import bm25s

        if self.manifest.bm25_rows != self.manifest.rows:
            raise CorpusError(
                f"the BM25 index of {self.name!r} is behind its chunks; rerun rca index"
            )
        return bm25s.BM25.load(str(self.directory / "bm25"), show_progress=False)

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
    def chunk_documents(self, documents: Iterable[SourceDocument]) -> tuple[int, list[Chunk]]:
        """Chunk every document (no writes); returns (document count, de-duplicated chunks)."""
        m = self.manifest
        seen: set[str] = set()
        chunks: list[Chunk] = []
        n_docs = 0
        for doc in documents:
            n_docs += 1
            for chunk in chunk_document(
                doc,
                self.embedder.token_offsets,
                chunk_size=m.chunk_size,
                chunk_overlap=m.chunk_overlap,
            ):
                if chunk.id not in seen:
                    seen.add(chunk.id)
                    chunks.append(chunk)
        return n_docs, chunks

    def ingest(self, documents: Iterable[SourceDocument], *, progress: bool = True) -> IngestReport:
        """Add documents; already stored chunks are skipped. Safe to interrupt and rerun.

        All documents are read and chunked before anything is written, so a bad file stops
        the run with nothing half-written.
        """
        n_docs, chunks = self.chunk_documents(documents)
        if n_docs == 0 or not chunks:
            raise CorpusError("no text to index: the input holds no non-empty documents")
        known = set(self.ids)
        new = [chunk for chunk in chunks if chunk.id not in known]
        self._drop_orphans_from_chroma()
        batch_size = self.config.corpus.ingest_batch_size
        with tqdm(
            total=len(new), desc=f"indexing {self.name}", unit="chunk", disable=not progress
        ) as bar:
            for start in range(0, len(new), batch_size):
                batch = new[start : start + batch_size]
                self._add_batch(batch)
                bar.update(len(batch))
        self.refresh_indexes()
        return IngestReport(
            documents=n_docs,
            chunks=len(chunks),
            added=len(new),
            skipped=len(chunks) - len(new),
            rows=len(self),
        )

    def _add_batch(self, batch: Sequence[Chunk]) -> None:
        vectors = self.embedder.encode([chunk.text for chunk in batch])
        collection = self._chroma_collection
        for start in range(0, len(batch), self._chroma_max_batch):
            part = batch[start : start + self._chroma_max_batch]
            collection.upsert(
                ids=[chunk.id for chunk in part],
                embeddings=vectors[start : start + len(part)],
                documents=[chunk.text for chunk in part],
                metadatas=[_chroma_metadata(chunk) for chunk in part],
            )
        lines = "".join(
            json.dumps(
                {"id": c.id, "title": c.title, "text": c.text, "metadata": dict(c.metadata)},
                ensure_ascii=False,
            )
            + "\n"
            for c in batch
        ).encode("utf-8")
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
        import bm25s

        m = self.manifest
        if m.bm25_rows != m.rows:
            tokens = bm25s.tokenize(
                [f"{c.title}\n{c.text}" for c in self.chunks], stopwords="en", show_progress=False
            )
            index = bm25s.BM25()
            index.index(tokens, show_progress=False)
            tmp = self.directory / "bm25.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            index.save(str(tmp), show_progress=False)
            final = self.directory / "bm25"
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            m.bm25_rows = m.rows
            self._commit()
        if m.graph_rows != m.rows:
            graph_dir = self.directory / "graph"
            embeddings = np.asarray(self.embeddings)
            if m.graph_rows == 0 or not graph_dir.exists():
                TopKGraph.build(
                    graph_dir,
                    embeddings,
                    self.ids,
                    k=m.graph_k,
                    block_size=self.config.graph.block_size,
                    method=self.config.graph.method,
                    exact_max_rows=self.config.graph.exact_max_rows,
                )
            else:
                TopKGraph.open(graph_dir).extend(embeddings, self.ids)
            m.graph_rows = m.rows
            self._commit()
        self._reset_caches()

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


def list_collections(config: Config) -> list[str]:
    root = config.corpus.collections_dir
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "manifest.json").is_file())
