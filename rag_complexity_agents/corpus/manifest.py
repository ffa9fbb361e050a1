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


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
