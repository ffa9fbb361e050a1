"""Ingestion into a collection: documents → chunks → batches → embed → write → commit.

Ingestion is idempotent and crash-safe: chunks get content-hash ids, and chunks already
committed are skipped. Each batch is embedded, upserted into Chroma, appended to the chunk log
and only then committed by the manifest (see :mod:`.log`); a crash leaves at most an
uncommitted tail, which the next writer cuts off, and Chroma entries past the commit, which the
next ingest deletes, so a rerun adds exactly what was not committed. BM25 and the graph are
brought up to the committed rows at the end (see :mod:`.indexes`).

All documents are read, checked and chunked before anything is written, so a bad file or
record stops the run with nothing half-written. The chunks wait in an unnamed temporary file
next to the collections and are stored batch by batch, so memory does not grow with the input
(beyond its chunk ids).
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from typing import IO, TYPE_CHECKING

from tqdm.auto import tqdm

from ..errors import CorpusError
from ..models.embeddings import SentenceTransformerEmbedder
from ..types import Chunk
from .documents import Document, document_problem, iter_chunks
from .indexes import IndexSet
from .log import ChunkLog, chunk_line, chunk_of
from .manifest import IngestReport

if TYPE_CHECKING:
    from .store import CorpusStore


def chunk_documents(
    documents: Iterable[Document],
    spool: IO[bytes],
    embedder: SentenceTransformerEmbedder,
    *,
    chunk_size: int,
    chunk_overlap: int,
    max_chars: int | None = None,
) -> tuple[int, set[str]]:
    """Chunk every document into ``spool`` (one ``chunks.jsonl`` line per chunk, duplicates
    dropped); returns (document count, chunk ids). Documents are read and tokenised as streams
    and no chunk is kept in memory. A document the store cannot hold (its id, title or
    metadata, see :func:`.documents.document_problem`) is a CorpusError naming it."""
    seen: set[str] = set()
    n_docs = 0
    for doc in documents:
        n_docs += 1
        problem = document_problem(doc)
        if problem:
            raise CorpusError(f"document {str(doc.id)[:80]!r}: {problem}")
        for chunk in iter_chunks(
            doc,
            embedder.token_offsets,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            max_chars=max_chars,
        ):
            if chunk.id not in seen:
                seen.add(chunk.id)
                spool.write(chunk_line(chunk))
    return n_docs, seen


def ingest(store: CorpusStore, documents: Iterable[Document], *, progress: bool) -> IngestReport:
    """Add ``documents`` to ``store`` (what :meth:`CorpusStore.ingest` does): chunk them all
    into a spool, then, holding the writer lock, store the chunks not yet committed batch by
    batch (through ``store._add_batch``) and refresh BM25 and the graph."""
    collections = store.directory.parent
    collections.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(prefix="chunks-", dir=collections) as spool:
        n_docs, ids = store.chunk_documents(documents, spool)
        n_chunks = len(ids)
        if n_docs == 0 or not n_chunks:
            raise CorpusError("no text to index: the input holds no non-empty documents")
        with store.writing():
            known = set(store.log.ids())  # every committed row, published or not
            n_new = len(ids - known)
            del ids
            spool.seek(0)
            new = (
                chunk for chunk in map(chunk_of, map(json.loads, spool)) if chunk.id not in known
            )
            try:
                store.indexes.drop_orphans(store.log.ids)
                add_all(
                    new,
                    n_new,
                    store._add_batch,
                    batch_size=store.config.corpus.ingest_batch_size,
                    desc=f"indexing {store.name}",
                    progress=progress,
                )
            finally:
                store.indexes.release_chroma()  # BM25 and the graph do not need its HNSW index
                discard_if_uncommitted(store.log, store.indexes)
            del known
            store.refresh_indexes()
    return IngestReport(
        documents=n_docs, chunks=n_chunks, added=n_new, skipped=n_chunks - n_new, rows=len(store)
    )


def add_all(
    new: Iterable[Chunk],
    total: int,
    add_batch: Callable[[Sequence[Chunk]], None],
    *,
    batch_size: int,
    desc: str,
    progress: bool,
) -> None:
    """Pass ``new`` to ``add_batch`` in batches of ``batch_size`` (a progress bar of ``total``)."""
    chunks = iter(new)
    with tqdm(total=total, desc=desc, unit="chunk", disable=not progress) as bar:
        while batch := list(itertools.islice(chunks, batch_size)):
            add_batch(batch)
            bar.update(len(batch))


def store_batch(
    batch: Sequence[Chunk],
    embedder: SentenceTransformerEmbedder,
    log: ChunkLog,
    indexes: IndexSet,
) -> None:
    """Embed ``batch``, upsert it into Chroma, append it to the log and commit it."""
    vectors = embedder.encode([chunk.text for chunk in batch])
    indexes.upsert(batch, vectors)
    log.append(batch, vectors)


def discard_if_uncommitted(log: ChunkLog, indexes: IndexSet) -> None:
    """Remove the directory of a collection whose first index committed nothing, unless
    Chroma holds it open in this process (then it stays, invisible without a manifest,
    and the next run reuses it)."""
    if log.is_committed():
        return
    if not indexes.chroma_open or indexes.config.corpus.chroma_host:
        shutil.rmtree(log.directory, ignore_errors=True)
