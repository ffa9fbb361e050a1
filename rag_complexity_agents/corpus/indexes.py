"""A collection's index set: Chroma (dense), bm25s (sparse) and the neighbourhood graph.

The indexes' part of ``<home>/collections/<name>/``::

    chroma/           Chroma PersistentClient directory (unless a Chroma server is configured)
    bm25-<rows>/      bm25s index over the first <rows> committed rows (the previous one is kept)
    graph/            TopKGraph (memory-mapped top-k neighbours)

Chroma receives each batch before the chunk log commits it. Its upserts are idempotent, so a
rerun re-adds exactly what was not committed, and entries a crashed run upserted but never
committed are deleted before the next ingest. BM25 and the graph record in the manifest the row
count they cover (``bm25_rows``, ``graph_rows``) and are rebuilt/extended when it lags behind;
a new version is published atomically by the manifest commit, and a reader refuses an index
whose count disagrees with the committed rows.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..errors import CorpusError
from ..models.embeddings import SentenceTransformerEmbedder
from ..types import Chunk
from .chroma import ChromaEmbeddingFunction, chroma_metadata
from .graph import TopKGraph
from .log import ChunkLog

_BM25_PREFIX = "bm25-"
#: Bytes of one block of similarities while the graph is built or extended: it bounds that
#: step's memory (a few blocks' worth) whatever the collection size.
GRAPH_BLOCK_BYTES = 64 * 2**20


class IndexSet:
    """The indexes over the rows of ``log``. Chroma embeds with ``embedder()`` (called when
    the Chroma collection is first opened)."""

    def __init__(
        self, log: ChunkLog, config: Config, embedder: Callable[[], SentenceTransformerEmbedder]
    ) -> None:
        self.log = log
        self.config = config
        self._embedder = embedder
        self._chroma_max_batch = 0

    @property
    def directory(self) -> Path:
        return self.log.directory

    @property
    def name(self) -> str:
        return self.log.manifest.name

    # ------------------------------------------------------------------ Chroma
    @cached_property
    def chroma(self) -> Any:
        """The collection's Chroma collection (a local directory or the configured server)."""
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
            name=self.name,
            # Chroma's EmbeddingFunction type also takes images; this one embeds texts only
            embedding_function=ChromaEmbeddingFunction(self._embedder()),  # type: ignore[arg-type]
            configuration={"hnsw": {"space": "cosine"}},
        )

    @property
    def chroma_open(self) -> bool:
        """Whether this process holds the Chroma collection open."""
        return "chroma" in self.__dict__

    def release_chroma(self) -> None:
        """Close the Chroma client (the next use opens it again): a local Chroma holds the
        collection's HNSW index in memory while its client is open."""
        self.__dict__.pop("chroma", None)
        client = self.__dict__.pop("_chroma_client", None)
        if client is not None:
            client.close()

    def chroma_count(self) -> int:
        return int(self.chroma.count())

    def upsert(self, batch: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Put ``batch`` with its row-aligned ``vectors`` into Chroma (idempotent)."""
        collection = self.chroma
        for start in range(0, len(batch), self._chroma_max_batch):
            part = batch[start : start + self._chroma_max_batch]
            collection.upsert(
                ids=[chunk.id for chunk in part],
                embeddings=vectors[start : start + len(part)],
                documents=[chunk.text for chunk in part],
                metadatas=[chroma_metadata(chunk) for chunk in part],
            )

    def drop_orphans(self, committed_ids: Callable[[], Iterable[str]]) -> None:
        """Remove Chroma entries a crashed run upserted but never committed (the committed
        ids are read only when Chroma holds more entries than the log commits)."""
        collection = self.chroma
        if collection.count() <= self.log.manifest.rows:
            return
        committed = set(committed_ids())
        stored = collection.get(include=[])["ids"]
        orphans = [chunk_id for chunk_id in stored if chunk_id not in committed]
        for start in range(0, len(orphans), self._chroma_max_batch):
            collection.delete(ids=orphans[start : start + self._chroma_max_batch])

    def query_dense(self, query_vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Chroma nearest neighbours as (chunk id, cosine similarity); they may include
        entries the log has not committed (the caller filters them)."""
        k = min(k, self.log.manifest.rows)
        if k == 0:
            return []
        result = self.chroma.query(
            query_embeddings=[np.asarray(query_vector, dtype=np.float32)],
            n_results=k,
            include=["distances"],
        )
        return [
            (chunk_id, 1.0 - float(distance))
            for chunk_id, distance in zip(result["ids"][0], result["distances"][0], strict=True)
        ]

    # -------------------------------------------------------------------- BM25
    def _bm25_dir(self, rows: int) -> Path:
        return self.directory / f"{_BM25_PREFIX}{rows}"

    def load_bm25(self) -> Any:
        """The bm25s index over the committed rows; CorpusError when it lags behind them."""
        import bm25s

        manifest = self.log.manifest
        if manifest.bm25_rows != manifest.rows:
            raise CorpusError(
                f"the BM25 index of {self.name!r} is behind its chunks; rerun rca index"
            )
        path = self._bm25_dir(manifest.rows)
        if not path.is_dir():
            legacy = self.directory / "bm25"  # layout before versioned BM25 directories
            if not legacy.is_dir():
                raise CorpusError(
                    f"the BM25 index of {self.name!r} changed while it was open; open it again"
                )
            path = legacy
        return bm25s.BM25.load(str(path), show_progress=False)

    def refresh_bm25(self) -> None:
        """Build BM25 over all committed rows into ``bm25-<rows>/``, publish it by the
        manifest commit, then delete all but it and its predecessor (a reader may hold that)."""
        import bm25s

        m = self.log.manifest
        if m.bm25_rows == m.rows:
            return
        tokens = bm25s.tokenize(  # reads the chunks as a stream, keeps only their token ids
            (f"{r['title']}\n{r['text']}" for r in self.log.records()),
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
        self.log.commit()
        keep = {final.name, self._bm25_dir(previous).name}
        for path in self.directory.iterdir():
            stale = path.name == "bm25" or path.name.startswith(_BM25_PREFIX)
            if stale and path.name not in keep:
                shutil.rmtree(path, ignore_errors=True)

    # ------------------------------------------------------------------- graph
    def load_graph(self) -> TopKGraph:
        """The neighbourhood graph over the committed rows; CorpusError when it lags behind."""
        manifest = self.log.manifest
        if manifest.graph_rows != manifest.rows:
            raise CorpusError(
                f"the neighbourhood graph of {self.name!r} is behind its chunks; rerun rca index"
            )
        return TopKGraph.open(self.directory / "graph")

    def refresh_graph(self) -> None:
        """Build the graph over all committed rows, or extend it by the rows it lacks, and
        publish it by the manifest commit."""
        m = self.log.manifest
        if m.graph_rows == m.rows:
            return
        graph_dir = self.directory / "graph"
        embeddings = np.asarray(self.log.embeddings())
        ids = self.log.ids()
        if m.graph_rows == 0 or not graph_dir.exists():
            TopKGraph.build(
                graph_dir,
                embeddings,
                ids,
                k=m.graph_k,
                block_size=self.config.graph.block_size,
                max_block_bytes=GRAPH_BLOCK_BYTES,
                method=self.config.graph.method,
                exact_max_rows=self.config.graph.exact_max_rows,
            )
        else:
            TopKGraph.open(graph_dir).extend(embeddings, ids, max_block_bytes=GRAPH_BLOCK_BYTES)
        m.graph_rows = m.rows
        self.log.commit()

    def refresh(self) -> None:
        """Bring BM25 and the graph up to the committed rows. Only the writer calls this."""
        self.refresh_bm25()
        self.refresh_graph()
