"""A collection's append-only chunk log: its committed files, manifest commits and writer lock.

The log's part of ``<home>/collections/<name>/``::

    manifest.json     committed counts (the single source of truth), written atomically
    chunks.jsonl      one chunk per line, in row order (append-only)
    embeddings.f32    float32 row-major matrix, one row per chunk (append-only)

A batch is appended to ``chunks.jsonl`` / ``embeddings.f32`` (and fsynced) and only then
committed by rewriting the manifest atomically. Bytes past the committed counts (a batch cut off
by a crash, a torn ``chunks.jsonl`` line) are truncated by the next writer, and on open when no
writer is active. Readers take no lock and never see a torn state: they read only a
:class:`Prefix` of the append-only files, the published one (whose indexes are built, see
:mod:`.indexes`), which the writer's appends never change. A collection exists once its first
batch is committed.

Concurrency: a collection has one writer at a time. A writer holds an inter-process lock
(``filelock``) on ``<collections>/.locks/<name>.lock``; a second writer logs one line saying it
waits, waits for the first to finish and continues from what that one committed.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from filelock import FileLock, Timeout

from ..errors import CorpusError
from ..types import Chunk
from .manifest import MANIFEST_VERSION, Manifest, atomic_write_text

log = logging.getLogger(__name__)

MANIFEST_FILE = "manifest.json"


def read_manifest(directory: Path) -> Manifest:
    """The manifest committed in ``directory``; CorpusError when unreadable or outdated."""
    manifest_path = directory / MANIFEST_FILE
    try:
        manifest = Manifest(**json.loads(manifest_path.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as exc:
        raise CorpusError(f"{manifest_path} is unreadable ({exc}); re-index") from exc
    if manifest.version != MANIFEST_VERSION:
        raise CorpusError(f"{manifest_path} has version {manifest.version}; re-index")
    return manifest


class Prefix(NamedTuple):
    """The first ``rows`` rows of the log: ``nbytes`` bytes of ``chunks.jsonl``."""

    rows: int
    nbytes: int


def chunk_line(chunk: Chunk) -> bytes:
    """``chunk`` as one line of ``chunks.jsonl``."""
    record = {
        "id": chunk.id,
        "title": chunk.title,
        "text": chunk.text,
        "metadata": dict(chunk.metadata),
    }
    return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")


def chunk_of(record: dict[str, Any]) -> Chunk:
    """The chunk of one ``chunks.jsonl`` record."""
    return Chunk(record["id"], record["text"], record["title"], record["metadata"])


class ChunkLog:
    """The committed rows of one collection directory and the manifest that counts them.

    The manifest object is owned here: :meth:`adopt_committed` replaces it with the one on
    disk, and everything else (the index set, the store) reads it through :attr:`manifest`."""

    def __init__(self, directory: Path, manifest: Manifest) -> None:
        self.directory = directory
        self.manifest = manifest

    @property
    def chunks_path(self) -> Path:
        return self.directory / "chunks.jsonl"

    @property
    def embeddings_path(self) -> Path:
        return self.directory / "embeddings.f32"

    def is_committed(self) -> bool:
        """Whether a manifest is on disk (the collection exists)."""
        return (self.directory / MANIFEST_FILE).is_file()

    @property
    def committed(self) -> Prefix:
        """Every committed row (what the writer extends)."""
        return Prefix(self.manifest.rows, self.manifest.chunks_bytes)

    @property
    def published(self) -> Prefix:
        """The rows whose indexes are built (what readers see)."""
        return Prefix(self.manifest.published_rows, self.manifest.published_bytes)

    # ----------------------------------------------------------------- commits
    def commit(self) -> None:
        """Publish the manifest's counts (atomically; readers see the old or the new one)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(
            self.directory / MANIFEST_FILE, json.dumps(asdict(self.manifest), indent=2)
        )

    def append(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Append ``chunks`` and their row-aligned ``vectors`` (fsynced), then commit them.
        Only the writer (holding the lock) calls this."""
        lines = b"".join(map(chunk_line, chunks))
        for path, payload in (
            (self.chunks_path, lines),
            (self.embeddings_path, vectors.tobytes()),
        ):
            with open(path, "ab") as handle:
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())
        self.manifest.rows += len(chunks)
        self.manifest.chunks_bytes += len(lines)
        self.commit()

    def adopt_committed(self) -> None:
        """Adopt the manifest on disk (another writer may have committed); CorpusError when
        it was created meanwhile with other embedding/chunk settings than ours."""
        if not self.is_committed():
            return
        ours = self.manifest
        self.manifest = read_manifest(self.directory)
        if (ours.embedding, ours.chunk_size, ours.chunk_overlap) != (
            self.manifest.embedding,
            self.manifest.chunk_size,
            self.manifest.chunk_overlap,
        ):
            raise CorpusError(
                f"collection {self.manifest.name!r} was created meanwhile by another process "
                "with other embedding/chunk settings; use a new collection name"
            )

    # ---------------------------------------------------------------- the tail
    def _committed_sizes(self) -> tuple[tuple[Path, int], ...]:
        m = self.manifest
        return (
            (self.chunks_path, m.chunks_bytes),
            (self.embeddings_path, m.rows * m.dimension * 4),
        )

    def check_files(self) -> None:
        """CorpusError when a data file is missing or shorter than committed."""
        for path, size in self._committed_sizes():
            actual = path.stat().st_size if path.exists() else None
            if actual is None and size:
                raise CorpusError(f"{path} is missing; the collection must be re-indexed")
            if actual is not None and actual < size:
                raise CorpusError(f"{path} is shorter than committed; re-index the collection")

    def has_uncommitted_tail(self) -> bool:
        return any(
            path.exists() and path.stat().st_size > size for path, size in self._committed_sizes()
        )

    def truncate_uncommitted(self) -> None:
        """Drop bytes written after the last commit (a batch interrupted by a crash). Only
        the writer (holding the lock) calls this."""
        self.check_files()
        self.directory.mkdir(parents=True, exist_ok=True)
        for path, size in self._committed_sizes():
            if not path.exists():
                path.touch()
            elif path.stat().st_size > size:
                with open(path, "r+b") as handle:
                    handle.truncate(size)

    # ----------------------------------------------------------------- reading
    def records(self, prefix: Prefix | None = None) -> Iterator[dict[str, Any]]:
        """The chunk records of ``prefix`` (default: every committed row), in row order, read
        line by line (bytes past it are never read); CorpusError when they do not parse or do
        not match its row count."""
        expected, remaining = prefix or self.committed
        count = 0
        if remaining:
            with open(self.chunks_path, "rb") as handle:
                while remaining > 0:
                    line = handle.readline(remaining)
                    remaining -= len(line)
                    count += 1
                    try:
                        record = json.loads(line)
                        _ = record["id"], record["text"], record["title"], record["metadata"]
                    except (ValueError, KeyError, TypeError) as exc:
                        raise CorpusError(
                            f"{self.chunks_path}:{count} is damaged ({exc}); delete "
                            f"{self.directory} and re-index"
                        ) from exc
                    yield record
        if count != expected:
            raise CorpusError(
                f"{self.chunks_path} holds {count} committed chunks, the manifest "
                f"{expected}; delete {self.directory} and re-index"
            )

    def ids(self, prefix: Prefix | None = None) -> list[str]:
        """The chunk ids of ``prefix`` (default: every committed row), in row order (without
        building the chunks)."""
        return [record["id"] for record in self.records(prefix)]

    def embeddings(self, prefix: Prefix | None = None) -> np.ndarray:
        """The row-aligned float32 embeddings of ``prefix`` (default: every committed row),
        memory-mapped."""
        rows, dim = (prefix or self.committed).rows, self.manifest.dimension
        if rows == 0:
            return np.zeros((0, dim), dtype=np.float32)
        return np.memmap(self.embeddings_path, dtype=np.float32, mode="r", shape=(rows, dim))


class WriterLock:
    """The inter-process writer lock of the collection in ``directory``: a file under
    ``<collections>/.locks/``, outside the collection's directory, which does not exist before
    the first commit and is removed when a first index commits nothing."""

    def __init__(self, directory: Path, name: str) -> None:
        self.path = directory.parent / ".locks" / f"{directory.name}.lock"
        self.name = name
        self._lock = FileLock(self.path, thread_local=False)

    @contextmanager
    def hold(self, wait_s: float | None) -> Iterator[None]:
        """Hold the lock; when another process holds it, log one line and wait for it up to
        ``wait_s`` seconds (None: no limit), then CorpusError."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            log.warning(
                "collection %r is being written by another process; waiting for it to finish",
                self.name,
            )
            try:
                self._lock.acquire(timeout=-1 if wait_s is None else wait_s)
            except Timeout as exc:
                raise CorpusError(
                    f"collection {self.name!r} is still being written by another process after "
                    f"{wait_s} s; try again later"
                ) from exc
        try:
            yield
        finally:
            self._lock.release()

    @contextmanager
    def hold_if_free(self) -> Iterator[bool]:
        """Hold the lock if no other process does (True), else do nothing (False)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock.acquire(timeout=0)
        except (Timeout, OSError):
            yield False
            return
        try:
            yield True
        finally:
            self._lock.release()
