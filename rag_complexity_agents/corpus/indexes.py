"""A collection's index set: Chroma (dense), bm25s (sparse) and the neighbourhood graph.

The indexes' part of ``<home>/collections/<name>/``::

    chroma/           Chroma PersistentClient directory (unless a Chroma server is configured)
    bm25-<rows>/      bm25s index over the first <rows> committed rows
    graph-<rows>/     TopKGraph over the first <rows> committed rows (memory-mapped top-k)

Chroma receives each batch before the chunk log commits it. Its upserts are idempotent, so a
rerun re-adds exactly what was not committed, and entries a crashed run upserted but never
committed are deleted before the next ingest.

Publication: when a writer has committed its batches it builds ``bm25-<rows>/`` and
``graph-<rows>/`` over all committed rows (the graph as an extended copy of the previous one)
and only then publishes them, with the row count and chunk bytes they cover, by one atomic
manifest commit (``published_rows``). A reader pins the published state of the manifest it
read: it reads that prefix of the chunk log and those index versions, and drops Chroma results
beyond it, so it sees Chroma, BM25 and the graph agree while a writer appends. The version a
publication replaces is kept (a reader may have pinned it); older ones are deleted, and a
reader whose pinned version is gone pins the newer state (:class:`StateGone`).
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
from .graph.storage import read_current
from .log import ChunkLog, Prefix


class StateGone(CorpusError):
    """An index version of the state a reader pinned was deleted by a newer publication (the
    reader pins the newer state and reads again)."""


_BM25_PREFIX = "bm25-"
_GRAPH_PREFIX = "graph-"
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

    def query_dense(self, query_vector: np.ndarray, k: int, rows: int) -> list[tuple[str, float]]:
        """Chroma nearest neighbours as (chunk id, cosine similarity): the ``k`` nearest of
        the first ``rows`` rows, among more when Chroma holds more entries (a writer's rows
        not yet published, which the caller filters out)."""
        k = min(k, rows)
        if k == 0:
            return []
        k += max(0, self.chroma_count() - rows)
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

    def load_bm25(self, prefix: Prefix) -> Any:
        """The bm25s index over the rows of ``prefix`` (the published state); CorpusError when
        the manifest has none for them, :class:`StateGone` when a newer publication has
        deleted it since the manifest was read."""
        import bm25s

        if self.log.manifest.bm25_rows != prefix.rows:
            raise CorpusError(
                f"the BM25 index of {self.name!r} is behind its chunks; rerun rca index"
            )
        gone = StateGone(f"the BM25 index of {self.name!r} was replaced")
        path = self._bm25_dir(prefix.rows)
        if not path.is_dir():
            path = self.directory / "bm25"  # layout before versioned BM25 directories
            if not path.is_dir():
                raise gone
        try:
            return bm25s.BM25.load(str(path), show_progress=False)
        except (FileNotFoundError, NotADirectoryError) as exc:  # deleted while being read
            raise gone from exc

    def _build_bm25(self, prefix: Prefix) -> Path:
        """Build BM25 over the rows of ``prefix`` into ``bm25-<rows>/`` (not yet published)."""
        import bm25s

        final = self._bm25_dir(prefix.rows)
        if self.log.manifest.bm25_rows == prefix.rows and final.is_dir():
            return final
        tokens = bm25s.tokenize(  # reads the chunks as a stream, keeps only their token ids
            (f"{r['title']}\n{r['text']}" for r in self.log.records(prefix)),
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
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        return final

    # ------------------------------------------------------------------- graph
    def _graph_dir(self, rows: int) -> Path:
        return self.directory / f"{_GRAPH_PREFIX}{rows}"

    def _existing_graph_dir(self, rows: int) -> Path | None:
        """Where the graph over ``rows`` rows lives (``graph-<rows>/`` or the unversioned
        ``graph/`` of older collections), or None."""
        for path in (self._graph_dir(rows), self.directory / "graph"):
            if read_current(path) is not None:
                return path
        return None

    def load_graph(self, prefix: Prefix) -> TopKGraph:
        """The neighbourhood graph over the rows of ``prefix`` (the published state);
        CorpusError when the manifest has none for them, :class:`StateGone` when a newer
        publication has deleted it since the manifest was read."""
        if self.log.manifest.graph_rows != prefix.rows:
            raise CorpusError(
                f"the neighbourhood graph of {self.name!r} is behind its chunks; rerun rca index"
            )
        path = self._existing_graph_dir(prefix.rows)
        if path is None:
            raise StateGone(f"the neighbourhood graph of {self.name!r} was replaced")
        graph = TopKGraph.open(path)
        if len(graph) != prefix.rows:
            raise StateGone(f"the neighbourhood graph of {self.name!r} was replaced")
        return graph

    def _build_graph(self, prefix: Prefix) -> Path:
        """Build the graph over the rows of ``prefix`` into ``graph-<rows>/`` (not yet
        published): a copy of the published graph extended by the rows it lacks, or built
        from scratch when there is none."""
        m = self.log.manifest
        final = self._graph_dir(prefix.rows)
        if m.graph_rows == prefix.rows and read_current(final) is not None:
            return final
        embeddings = np.asarray(self.log.embeddings(prefix))
        ids = self.log.ids(prefix)
        previous = self._existing_graph_dir(m.graph_rows) if m.graph_rows else None
        tmp = self.directory / "graph.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        if previous is None:
            TopKGraph.build(
                tmp,
                embeddings,
                ids,
                k=m.graph_k,
                block_size=self.config.graph.block_size,
                max_block_bytes=GRAPH_BLOCK_BYTES,
                method=self.config.graph.method,
                exact_max_rows=self.config.graph.exact_max_rows,
            )
        else:  # readers may hold the previous graph: extend a copy of it
            shutil.copytree(previous, tmp, ignore=shutil.ignore_patterns("tmp-*", "CURRENT.tmp-*"))
            TopKGraph.open(tmp).extend(embeddings, ids, max_block_bytes=GRAPH_BLOCK_BYTES)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        return final

    # ------------------------------------------------------------- publication
    def refresh(self) -> None:
        """Build BM25 and the graph over every committed row and publish them with those
        rows by one manifest commit; then delete the index versions older than the one this
        replaces (a reader may still hold that one). Only the writer calls this."""
        m = self.log.manifest
        committed = self.log.committed
        if m.published_rows == m.bm25_rows == m.graph_rows == committed.rows:
            return
        keep = {self._build_bm25(committed), self._build_graph(committed)}
        previous = self.log.published
        keep.add(self._bm25_dir(previous.rows))
        keep.add(self._existing_graph_dir(previous.rows) or self._graph_dir(previous.rows))
        m.bm25_rows = m.graph_rows = m.published_rows = committed.rows
        m.published_bytes = committed.nbytes
        self.log.commit()
        self._drop_versions(keep)

    def _drop_versions(self, keep: set[Path]) -> None:
        """Delete the BM25 / graph versions not in ``keep`` (open memory maps stay valid)."""
        for path in self.directory.iterdir():
            name = path.name
            versioned = name.startswith((_BM25_PREFIX, _GRAPH_PREFIX)) or name in ("bm25", "graph")
            if versioned and path not in keep:
                shutil.rmtree(path, ignore_errors=True)
