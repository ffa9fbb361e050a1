"""A collection's manifest (its committed counts) and atomic file writes.

A collection's name rules are :func:`rag_complexity_agents.text.validate_collection_name`
(the config validates names too, so they live in the base layer).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MANIFEST_VERSION = 1


@dataclass
class Manifest:
    """A collection's committed counts.

    ``rows`` / ``chunks_bytes`` count the rows the chunk log commits (a writer adds a batch at
    a time); ``published_rows`` / ``published_bytes`` the prefix of them whose BM25 index and
    graph are built: the state readers see, published by one atomic manifest write once a
    writer has built both (``bm25_rows`` and ``graph_rows`` then equal it). ``chunk_max_chars``
    is the character cap chunks were cut with (0: not recorded)."""

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
    published_rows: int = -1
    published_bytes: int = -1
    chunk_max_chars: int = 0

    def __post_init__(self) -> None:
        if self.published_rows < 0:  # written before publication was recorded
            complete = self.rows == self.bm25_rows == self.graph_rows
            self.published_rows = self.rows if complete else 0
            self.published_bytes = self.chunks_bytes if complete else 0


@dataclass(frozen=True)
class IngestReport:
    documents: int
    chunks: int
    added: int
    skipped: int
    rows: int


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
