"""A collection's manifest (its committed counts), its name rules and atomic file writes."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorpusError

MANIFEST_VERSION = 1
#: Longest collection name. A name becomes a directory name (≤ 255 bytes on ext4, XFS, btrfs,
#: APFS, NTFS; ≤ 143 on eCryptfs) and, with the files below it, part of paths that Windows
#: caps at 260 characters; 100 ASCII characters fits all of them with room to spare.
MAX_NAME_CHARS = 100
_NAME_RE = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]{{1,{MAX_NAME_CHARS - 2}}}[A-Za-z0-9]$")


def validate_collection_name(name: str) -> str:
    """``name`` if it is a valid collection name, else CorpusError (one line)."""
    if not _NAME_RE.match(name) or ".." in name:
        shown = name if len(name) <= 40 else f"{name[:40]}… ({len(name)} characters)"
        raise CorpusError(
            f"invalid collection name {shown!r}: use 3–{MAX_NAME_CHARS} characters from "
            "letters, digits, '.', '_' and '-', starting and ending with a letter or digit"
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


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
