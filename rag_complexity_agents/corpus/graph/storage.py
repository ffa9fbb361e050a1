"""On-disk storage of a top-k graph: crash-safe generations, published atomically.

Layout on disk (one directory)::

    graph/
        CURRENT              name of the live generation, e.g. "g00000002" (replaced atomically)
        g00000002/
            neighbours.npy   int32   (rows × k)  row ids of the neighbours, most similar first
            similarities.npy float16 (rows × k)  their similarities (dot products; cosines for
                                                  L2-normalised embeddings)
            ids.json         the row → document-id list
            meta.json        format, rows, k, requested k, embedding dimension, method
                             ("exact" or the ANN library; absent = exact)

Every write goes to a fresh generation directory which is fsynced, then published by an atomic
replace of ``CURRENT``; a crash at any point leaves the previous consistent graph in place.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import CorpusError

FORMAT = "rca-topk-graph"
FORMAT_VERSION = 1
CURRENT_FILE = "CURRENT"
NEIGHBOURS_FILE = "neighbours.npy"
SIMILARITIES_FILE = "similarities.npy"
IDS_FILE = "ids.json"
META_FILE = "meta.json"


def _fsync_path(path: Path) -> None:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) if path.is_dir() else os.O_RDONLY
    try:
        fd = os.open(path, flags)
    except OSError:  # e.g. directories on Windows
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_generation(
    directory: Path,
    neighbours: np.ndarray,
    similarities: np.ndarray,
    ids: Sequence[str],
    meta: dict[str, Any],
) -> str:
    """Write a complete new generation and publish it atomically; returns its name."""
    directory.mkdir(parents=True, exist_ok=True)
    previous = read_current(directory)
    number = int(previous[1:]) + 1 if previous and previous[1:].isdigit() else 1
    name = f"g{number:08d}"
    tmp = directory / f"tmp-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        np.save(tmp / NEIGHBOURS_FILE, np.ascontiguousarray(neighbours, dtype=np.int32))
        np.save(tmp / SIMILARITIES_FILE, np.ascontiguousarray(similarities, dtype=np.float16))
        (tmp / IDS_FILE).write_text(json.dumps(list(ids), ensure_ascii=False), encoding="utf-8")
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        for path in tmp.iterdir():
            _fsync_path(path)
        _fsync_path(tmp)
        final = directory / name
        shutil.rmtree(final, ignore_errors=True)  # a leftover of an earlier crash, never live
        os.replace(tmp, final)
        _fsync_path(directory)
        pointer = directory / f"{CURRENT_FILE}.tmp-{uuid.uuid4().hex}"
        with open(pointer, "w", encoding="utf-8") as handle:
            handle.write(name + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(pointer, directory / CURRENT_FILE)
        _fsync_path(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # Best effort: drop superseded generations and crash leftovers (open memmaps stay valid on
    # POSIX; elsewhere the files are removed later).
    for entry in directory.iterdir():
        if entry.name != name and (
            entry.name.startswith(("tmp-", f"{CURRENT_FILE}.tmp-"))
            or (entry.name.startswith("g") and entry.name[1:].isdigit())
        ):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    return name


def read_current(directory: Path) -> str | None:
    """The live generation's name, or None when ``directory`` holds no graph."""
    try:
        name = (directory / CURRENT_FILE).read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise CorpusError(
            f"cannot read the neighbourhood graph pointer in {directory}: {exc}"
        ) from exc
    return name or None


def check_ids(ids: Sequence[str], n_rows: int) -> list[str]:
    """``ids`` as strings; CorpusError unless there is one unique id per row."""
    id_list = [str(i) for i in ids]
    if len(id_list) != n_rows:
        raise CorpusError(f"{len(id_list)} ids for {n_rows} embedding rows; they must match")
    if len(set(id_list)) != len(id_list):
        raise CorpusError("document ids must be unique to build a neighbourhood graph")
    return id_list


def graph_meta(
    n_rows: int, k: int, k_requested: int, dim: int, block_size: int, method: str
) -> dict[str, Any]:
    """The ``meta.json`` of a generation."""
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "rows": n_rows,
        "k": k,
        "k_requested": k_requested,
        "dim": dim,
        "block_size": block_size,
        "method": method,
        "neighbours_dtype": "int32",
        "similarities_dtype": "float16",
    }


def validate_generation(
    gen_dir: Path,
    meta: Any,
    ids: Any,
    neighbour_rows: np.ndarray,
    similarities: np.ndarray,
) -> None:
    """Raise CorpusError unless a loaded generation is consistent with its ``meta.json``."""

    def corrupt(why: str) -> CorpusError:
        return CorpusError(
            f"the neighbourhood graph in {gen_dir} is corrupt ({why}); rebuild it with rca index"
        )

    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise corrupt("meta.json is not a graph description")
    if meta.get("version") != FORMAT_VERSION:
        raise corrupt(f"unsupported format version {meta.get('version')!r}")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise corrupt("ids.json is not a list of strings")
    try:
        rows, k, k_req, dim = (int(meta[key]) for key in ("rows", "k", "k_requested", "dim"))
    except (KeyError, TypeError, ValueError) as exc:
        raise corrupt(f"meta.json lacks {exc}") from exc
    if len(ids) != rows:
        raise corrupt(f"{len(ids)} ids but {rows} rows")
    if k != min(k_req, max(rows - 1, 0)) or dim < 0:
        raise corrupt(f"k={k} does not fit rows={rows}, k_requested={k_req}")
    for name, array, dtype in (
        ("neighbours", neighbour_rows, np.int32),
        ("similarities", similarities, np.float16),
    ):
        if array.dtype != dtype or array.shape != (rows, k):
            raise corrupt(
                f"{name} is {array.dtype} {array.shape}, expected {dtype.__name__} {(rows, k)}"
            )
    if neighbour_rows.size:
        low, high = int(neighbour_rows.min()), int(neighbour_rows.max())
        if low < 0 or high >= rows:
            raise corrupt(f"neighbour rows span {low}..{high} outside 0..{rows - 1}")
