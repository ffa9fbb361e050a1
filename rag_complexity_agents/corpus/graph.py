"""The neighbourhood graph G of SUNAR §3.1.1: the exact top-k most similar chunks of every chunk.

Layout on disk (one directory)::

    graph/
        CURRENT              name of the live generation, e.g. "g00000002" (replaced atomically)
        g00000002/
            neighbours.npy   int32   (rows × k)  row ids of the neighbours, most similar first
            similarities.npy float16 (rows × k)  their similarities (dot products; cosines for
                                                  L2-normalised embeddings)
            ids.json         the row → document-id list
            meta.json        format, rows, k, requested k, embedding dimension

Rows are positions in the caller's embedding matrix (the corpus store keeps it on disk in row
order). Every write goes to a fresh generation directory which is fsynced, then published by an
atomic replace of ``CURRENT``; a crash at any point leaves the previous consistent graph in place.
Readers memory-map the arrays read-only, so opening a large graph costs almost nothing.

The top-k is exact. Similarities are computed by float32 matrix products in row blocks (each block
against every column), the document itself is excluded, and each block's top-k is selected
without a per-row Python loop: the columns are split into ``GROUP`` interleaved groups, the top-k
groups by their maximum are kept (they always contain the top-k elements) and only their members
are ranked. Ties are broken deterministically by the lower row id.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import uuid
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, runtime_checkable

import numpy as np

from ..errors import CorpusError
from ..optional import LazyModule

if TYPE_CHECKING:
    import torch
else:  # only building or extending a graph needs torch; opening one does not
    torch = LazyModule("torch", "building a neighbourhood graph")

__all__ = [
    "DEFAULT_MAX_BLOCK_BYTES",
    "CorpusGraph",
    "GraphStats",
    "TopKGraph",
    "exact_topk",
]

FORMAT = "rca-topk-graph"
FORMAT_VERSION = 1
CURRENT_FILE = "CURRENT"
NEIGHBOURS_FILE = "neighbours.npy"
SIMILARITIES_FILE = "similarities.npy"
IDS_FILE = "ids.json"
META_FILE = "meta.json"

#: Columns per group of the pre-selection, and the contiguous span between a group's members
#: (see :func:`_top_values`).
GROUP = 16
SPAN = 32
#: Upper bound on one block of similarities (rows × all columns × 4 bytes).
DEFAULT_MAX_BLOCK_BYTES = 256 * 2**20
#: Relative slack for comparing float32 similarities with stored float16 ones (2^-10 > 2^-11).
_FP16_SLACK = 2.0**-10


@runtime_checkable
class CorpusGraph(Protocol):
    """Anything that returns the most similar documents of a document."""

    def neighbours(self, doc_id: str, n: int) -> list[tuple[str, float]]:
        """Up to ``n`` (doc id, similarity) pairs, most similar first, never ``doc_id`` itself."""
        ...


class GraphStats(TypedDict):
    """What ``rca info`` shows about a graph."""

    rows: int
    k: int
    k_requested: int
    dim: int
    mean_similarity: float | None
    min_similarity: float | None
    max_similarity: float | None
    bytes_on_disk: int
    generation: str


# --------------------------------------------------------------------------------------------
# exact top-k
# --------------------------------------------------------------------------------------------


def _as_matrix(embeddings: np.ndarray, what: str) -> np.ndarray:
    """A C-contiguous float32 2-D view (no copy for a float32 memmap) with finite values."""
    array = np.asarray(embeddings)
    if array.ndim != 2:
        raise CorpusError(f"{what} must be a 2-D matrix (rows × dim), got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.floating):
        raise CorpusError(f"{what} must hold floating-point values, got dtype {array.dtype}")
    array = np.ascontiguousarray(array, dtype=np.float32)
    if array.size and not bool(np.isfinite(array).all()):
        raise CorpusError(f"{what} contain NaN or infinite values; re-embed the corpus")
    return array


def _to_torch(array: np.ndarray) -> torch.Tensor:
    """Share the buffer of ``array`` with torch (read-only memmaps included; never written)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


def _order_rows(values: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort each row by (value descending, column ascending)."""
    order = np.argsort(-values, axis=1)
    values = np.take_along_axis(values, order, axis=1)
    cols = np.take_along_axis(cols, order, axis=1)
    if values.shape[1] > 1:
        equal = np.nonzero((values[:, 1:] == values[:, :-1]).any(axis=1))[0]
        if equal.size:  # equal values: the unstable argsort left their columns in any order
            order = np.lexsort((cols[equal], -values[equal]), axis=1)
            values[equal] = np.take_along_axis(values[equal], order, axis=1)
            cols[equal] = np.take_along_axis(cols[equal], order, axis=1)
    return values, cols


def _exact_rows(sims: torch.Tensor, threshold: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of each row of ``sims`` among its elements ≥ ``threshold`` (at least k per row).

    Deterministic (value descending, column ascending); used for rows with ties at the k-th
    value, where a partial selection may keep any of the tied columns.
    """
    n_rows = sims.shape[0]
    limit = torch.from_numpy(np.ascontiguousarray(threshold, dtype=np.float32)).unsqueeze(1)
    rows_t, cols_t = torch.nonzero(sims >= limit, as_tuple=True)
    rows, cols = rows_t.numpy(), cols_t.numpy()
    values = sims[rows_t, cols_t].numpy()
    order = np.lexsort((cols, -values, rows))
    rows, cols, values = rows[order], cols[order], values[order]
    counts = np.bincount(rows, minlength=n_rows)
    rank = np.arange(rows.size) - (np.cumsum(counts) - counts)[rows]
    keep = rank < k
    out_values = np.empty((n_rows, k), dtype=np.float32)
    out_cols = np.empty((n_rows, k), dtype=np.int64)
    out_values[rows[keep], rank[keep]] = values[keep]
    out_cols[rows[keep], rank[keep]] = cols[keep]
    return out_values, out_cols


def _partition_top(values: torch.Tensor, m: int) -> torch.Tensor:
    """Positions (int64) of the ``m`` largest entries of each row (unordered; ties: any).

    numpy's introselect is several times faster than ``torch.topk`` for k≈100 on CPU; it
    releases the GIL, so row ranges are split over ``torch.get_num_threads()`` threads.
    """
    n_rows, width = values.shape
    if m >= width:
        return torch.arange(width).expand(n_rows, width).contiguous()
    array = values.numpy()
    out = np.empty((n_rows, m), dtype=np.int64)

    def part(start: int, stop: int) -> None:
        out[start:stop] = np.argpartition(array[start:stop], width - m, axis=1)[:, width - m :]

    workers = min(torch.get_num_threads(), max(1, n_rows * width // 2**18))
    if workers <= 1:
        part(0, n_rows)
    else:
        bounds = np.linspace(0, n_rows, workers + 1).astype(int)
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(part, bounds[:-1], bounds[1:]))
    return torch.from_numpy(out)


def _top_values(x: torch.Tensor, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, the ``m`` largest values and their columns (values exact; ties: any column).

    Wide rows are cut into chunks of ``GROUP × SPAN`` columns; group (chunk c, offset b) holds
    the ``GROUP`` columns c·GROUP·SPAN + g·SPAN + b. The group maxima are an element-wise max
    over ``GROUP`` slabs of ``SPAN`` contiguous floats (memory speed, and a group's members
    share a page for the gather). The m groups with the largest maxima hold the m largest
    values: if a group holding one of the j largest values were left out, each of the m
    selected groups would have a maximum at least that large, i.e. m ≥ j candidates at least
    that large. The group maxima are selected the same way (recursively), so only about
    m·GROUP candidates per row are ever partitioned.
    """
    width = x.shape[1]
    chunk = GROUP * SPAN
    if width < max(2 * m * GROUP, chunk):
        cols = _partition_top(x, m)
        return x.gather(1, cols), cols
    n_chunks = width // chunk
    main = n_chunks * chunk
    group_max = x[:, :main].unflatten(1, (n_chunks, GROUP, SPAN)).amax(dim=2).flatten(1)
    _, groups = _top_values(group_max, m)
    first = torch.div(groups, SPAN, rounding_mode="floor") * chunk + groups % SPAN
    cols = (first.unsqueeze(2) + torch.arange(GROUP) * SPAN).flatten(1)
    candidates = x.gather(1, cols)
    if main < width:  # the last width % chunk columns are always candidates
        candidates = torch.cat([candidates, x[:, main:]], dim=1)
    picked = _partition_top(candidates, m)
    n_grouped = cols.shape[1]
    in_groups = picked < n_grouped
    picked_cols = torch.where(
        in_groups, cols.gather(1, picked.clamp(max=n_grouped - 1)), picked - n_grouped + main
    )
    return candidates.gather(1, picked), picked_cols


def _select_topk(sims: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact per-row top-k of a block (rows × columns; -inf marks excluded cells).

    Returns float32 values and int64 column positions ordered by (value desc, column asc).
    The k+1 largest values are found exactly; where the (k+1)-th equals the k-th, the tied
    columns are chosen by :func:`_exact_rows` so that the lower column wins.
    """
    n_rows, n_cols = sims.shape
    k = min(k, n_cols)
    if k == 0 or n_rows == 0:
        return np.empty((n_rows, 0), np.float32), np.empty((n_rows, 0), np.int64)
    m = min(k + 1, n_cols)
    top_values, top_cols = _top_values(sims, m)
    values, cols = _order_rows(top_values.numpy(), top_cols.numpy())
    if m > k:
        tied = np.nonzero(values[:, k] == values[:, k - 1])[0]
        values, cols = values[:, :k], cols[:, :k]
        step = max(1, 2**22 // n_cols)  # bounds the memory of heavily tied rows
        for at in range(0, tied.size, step):
            part = tied[at : at + step]
            values[part], cols[part] = _exact_rows(
                sims[torch.from_numpy(part)], values[part, k - 1], k
            )
    return np.ascontiguousarray(values), np.ascontiguousarray(cols)


def _rows_per_block(n_cols: int, block_size: int, max_block_bytes: int) -> int:
    return max(1, min(block_size, max_block_bytes // max(1, 4 * n_cols)))


def _similarity_blocks(
    vectors: torch.Tensor,
    rows: range,
    cols: range,
    block_size: int,
    max_block_bytes: int,
) -> Iterator[tuple[int, torch.Tensor]]:
    """Yield (first row, rows × cols similarities) with self-similarities set to -inf.

    One buffer is reused for every block; a yielded block is only valid until the next one.
    """
    n_cols = len(cols)
    per_block = _rows_per_block(n_cols, block_size, max_block_bytes)
    buffer = torch.empty(min(per_block, len(rows)) * n_cols)
    col_vectors = vectors[cols.start : cols.stop]
    for start in range(rows.start, rows.stop, per_block):
        stop = min(start + per_block, rows.stop)
        block = buffer[: (stop - start) * n_cols].view(stop - start, n_cols)
        torch.mm(vectors[start:stop], col_vectors.T, out=block)
        lo, hi = max(start, cols.start), min(stop, cols.stop)
        if lo < hi:  # rows that are also columns of this block: exclude self
            block[lo - start : hi - start, lo - cols.start : hi - cols.start].diagonal().fill_(
                -math.inf
            )
        yield start, block


def exact_topk(
    embeddings: np.ndarray,
    k: int,
    *,
    rows: range | None = None,
    block_size: int = 4096,
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k neighbours (by dot product, self excluded) of ``rows`` among all rows.

    Returns int32 neighbour rows and float32 similarities, both ``len(rows) × min(k, n-1)``,
    ordered by (similarity desc, row asc). Blocks hold at most ``block_size`` rows and
    ``max_block_bytes`` of similarities.
    """
    matrix = _as_matrix(embeddings, "embeddings")
    n = matrix.shape[0]
    rows = range(n) if rows is None else rows
    k = max(0, min(k, n - 1))
    out_cols = np.empty((len(rows), k), dtype=np.int32)
    out_values = np.empty((len(rows), k), dtype=np.float32)
    if k == 0 or len(rows) == 0:
        return out_cols, out_values
    vectors = _to_torch(matrix)
    for start, block in _similarity_blocks(vectors, rows, range(n), block_size, max_block_bytes):
        values, cols = _select_topk(block, k)
        at = start - rows.start
        out_cols[at : at + block.shape[0]] = cols
        out_values[at : at + block.shape[0]] = values
    return out_cols, out_values


# --------------------------------------------------------------------------------------------
# storage helpers
# --------------------------------------------------------------------------------------------


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


def _write_generation(
    directory: Path,
    neighbours: np.ndarray,
    similarities: np.ndarray,
    ids: Sequence[str],
    meta: dict[str, Any],
) -> str:
    """Write a complete new generation and publish it atomically; returns its name."""
    directory.mkdir(parents=True, exist_ok=True)
    previous = _read_current(directory)
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


def _read_current(directory: Path) -> str | None:
    try:
        name = (directory / CURRENT_FILE).read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise CorpusError(
            f"cannot read the neighbourhood graph pointer in {directory}: {exc}"
        ) from exc
    return name or None


# --------------------------------------------------------------------------------------------
# the graph
# --------------------------------------------------------------------------------------------


class TopKGraph:
    """Exact top-k neighbourhood graph over the rows of an embedding matrix, memory-mapped.

    Build with :meth:`build`, load with :meth:`open`, grow with :meth:`extend`.
    """

    def __init__(
        self,
        directory: Path,
        generation: str,
        neighbour_rows: np.ndarray,
        similarities: np.ndarray,
        ids: list[str],
        meta: dict[str, Any],
    ) -> None:
        self.directory = directory
        self.generation = generation
        self._neighbours = neighbour_rows
        self._similarities = similarities
        self._ids = ids
        self._meta = meta

    # ---- construction ----------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        directory: str | os.PathLike[str],
        embeddings: np.ndarray,
        ids: Sequence[str],
        k: int = 100,
        block_size: int = 4096,
        *,
        max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    ) -> TopKGraph:
        """Compute the exact graph of ``embeddings`` (row i ↔ ``ids[i]``) and store it.

        ``k`` is capped at ``len(ids) - 1``; the requested value is remembered so that
        :meth:`extend` grows the lists once more rows exist. Replaces any graph in
        ``directory`` (crash-safely).
        """
        if k < 1:
            raise CorpusError(f"graph k must be at least 1, got {k}")
        if block_size < 1:
            raise CorpusError(f"graph block_size must be at least 1, got {block_size}")
        matrix = _as_matrix(embeddings, "embeddings")
        id_list = _check_ids(ids, matrix.shape[0])
        neighbour_rows, values = exact_topk(
            matrix, k, block_size=block_size, max_block_bytes=max_block_bytes
        )
        meta = _meta(len(id_list), neighbour_rows.shape[1], k, matrix.shape[1], block_size)
        path = Path(directory)
        _write_generation(path, neighbour_rows, values.astype(np.float16), id_list, meta)
        return cls.open(path)

    @classmethod
    def open(cls, directory: str | os.PathLike[str]) -> TopKGraph:
        """Memory-map the graph stored in ``directory`` (read-only); CorpusError if unusable."""
        path = Path(directory)
        generation = _read_current(path)
        if generation is None:
            raise CorpusError(
                f"no neighbourhood graph in {path}; build it with rca index (TopKGraph.build)"
            )
        gen_dir = path / generation
        try:
            meta = json.loads((gen_dir / META_FILE).read_text(encoding="utf-8"))
            ids = json.loads((gen_dir / IDS_FILE).read_text(encoding="utf-8"))
            neighbour_rows = np.load(gen_dir / NEIGHBOURS_FILE, mmap_mode="r")
            similarities = np.load(gen_dir / SIMILARITIES_FILE, mmap_mode="r")
        except (OSError, ValueError, EOFError, UnicodeDecodeError) as exc:
            raise CorpusError(
                f"the neighbourhood graph in {gen_dir} is missing or corrupt ({exc}); "
                "rebuild it with rca index"
            ) from exc
        _validate(gen_dir, meta, ids, neighbour_rows, similarities)
        return cls(path, generation, neighbour_rows, similarities, ids, meta)

    def extend(
        self,
        embeddings_all: np.ndarray,
        ids_all: Sequence[str],
        *,
        block_size: int | None = None,
        max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    ) -> TopKGraph:
        """Add the rows appended after the current ones, keeping the graph exact.

        ``embeddings_all``/``ids_all`` cover every row: the current rows first (unchanged),
        then the new ones. New rows get their top-k among all rows; each existing row's list
        is merged with its similarities to the new rows (only rows that a new row can enter
        are touched). The result is written as a new generation and published atomically;
        this object then serves the new graph. Returns ``self``.
        """
        matrix = _as_matrix(embeddings_all, "embeddings")
        id_list = _check_ids(ids_all, matrix.shape[0])
        n_old, n_all = len(self), matrix.shape[0]
        if n_all < n_old or id_list[:n_old] != self._ids:
            raise CorpusError(
                "extend() only appends rows: the first ids must be the graph's ids in order; "
                "rebuild the graph (TopKGraph.build) after deleting or reordering chunks"
            )
        if n_all and matrix.shape[1] != self.dim:
            raise CorpusError(
                f"embedding dimension {matrix.shape[1]} differs from the graph's {self.dim}"
            )
        if n_all == n_old:
            return self
        blocks = block_size or int(self._meta.get("block_size", 4096))
        self._check_same_embeddings(matrix)
        k_old = self.k
        k_new = min(self.k_requested, n_all - 1)
        vectors = _to_torch(matrix)

        neighbour_rows = np.empty((n_all, k_new), dtype=np.int32)
        similarities = np.empty((n_all, k_new), dtype=np.float16)
        if k_new == k_old:
            neighbour_rows[:n_old] = self._neighbours
            similarities[:n_old] = self._similarities

        # existing rows: merge their lists with the similarities to the new rows
        for start, block in _similarity_blocks(
            vectors, range(n_old), range(n_old, n_all), blocks, max_block_bytes
        ):
            stop = start + block.shape[0]
            if k_new == k_old:
                kth = torch.from_numpy(self._similarities[start:stop, -1].astype(np.float32))
                slack = _FP16_SLACK * kth.abs() + 1e-6
                touched = torch.nonzero(block.amax(dim=1) >= kth - slack, as_tuple=True)[0]
            else:  # lists were capped at n_old - 1: every row grows
                touched = torch.arange(block.shape[0])
            if touched.numel() == 0:
                continue
            new_values, new_cols = _select_topk(block[touched], k_new)
            rows = touched.numpy() + start
            old_cols = np.asarray(self._neighbours[rows], dtype=np.int64)
            old_values = _dot_rows(vectors, rows, old_cols)
            values, cols = _order_rows(
                np.concatenate([old_values, new_values], axis=1),
                np.concatenate([old_cols, new_cols + n_old], axis=1),
            )
            neighbour_rows[rows] = cols[:, :k_new]
            similarities[rows] = values[:, :k_new]

        # new rows: exact top-k among all rows
        new_rows, new_values = exact_topk(
            matrix,
            k_new,
            rows=range(n_old, n_all),
            block_size=blocks,
            max_block_bytes=max_block_bytes,
        )
        neighbour_rows[n_old:] = new_rows
        similarities[n_old:] = new_values

        meta = _meta(n_all, k_new, self.k_requested, matrix.shape[1], blocks)
        generation = _write_generation(self.directory, neighbour_rows, similarities, id_list, meta)
        fresh = TopKGraph.open(self.directory)
        if fresh.generation != generation:  # pragma: no cover - a concurrent writer
            raise CorpusError(f"the graph in {self.directory} changed while extending it")
        self.generation = fresh.generation
        self._neighbours, self._similarities = fresh._neighbours, fresh._similarities
        self._ids, self._meta = fresh._ids, fresh._meta
        self.__dict__.pop("row_of", None)
        return self

    def _check_same_embeddings(self, matrix: np.ndarray) -> None:
        """Spot-check that the first rows are the embeddings the graph was built from."""
        if self.k == 0:
            return
        sample = np.unique(np.linspace(0, len(self) - 1, num=min(len(self), 64)).astype(np.int64))
        cols = np.asarray(self._neighbours[sample, :1], dtype=np.int64)
        got = _dot_rows(_to_torch(matrix), sample, cols)[:, 0]
        stored = self._similarities[sample, 0].astype(np.float32)
        if not np.allclose(got, stored, rtol=_FP16_SLACK, atol=1e-3):
            raise CorpusError(
                "the embeddings passed to extend() do not match the ones the graph was built "
                "from; rebuild the graph (TopKGraph.build)"
            )

    # ---- queries ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def k(self) -> int:
        """Neighbours stored per row (the requested k capped at rows - 1)."""
        return int(self._neighbours.shape[1])

    @property
    def k_requested(self) -> int:
        return int(self._meta["k_requested"])

    @property
    def dim(self) -> int:
        return int(self._meta["dim"])

    @property
    def ids(self) -> list[str]:
        """Row → document id (a copy)."""
        return list(self._ids)

    @cached_property
    def row_of(self) -> dict[str, int]:
        """Document id → row."""
        return {doc_id: row for row, doc_id in enumerate(self._ids)}

    @property
    def neighbour_rows(self) -> np.ndarray:
        """The read-only int32 (rows × k) memmap of neighbour rows."""
        return self._neighbours

    @property
    def similarities(self) -> np.ndarray:
        """The read-only float16 (rows × k) memmap of similarities."""
        return self._similarities

    def neighbours_of_row(self, row: int, n: int) -> list[tuple[int, float]]:
        """Up to ``n`` (row, similarity) pairs of row ``row``, most similar first."""
        if not 0 <= row < len(self):
            raise CorpusError(f"row {row} is outside the graph (0..{len(self) - 1})")
        n = max(0, min(n, self.k))
        cols = np.asarray(self._neighbours[row, :n]).tolist()  # one copy, not n scalar reads
        values = self._similarities[row, :n].astype(np.float32).tolist()
        return list(zip(cols, values, strict=True))

    def neighbours(self, doc_id: str, n: int) -> list[tuple[str, float]]:
        """Up to ``n`` (document id, similarity) pairs, most similar first, never ``doc_id``."""
        row = self.row_of.get(doc_id)
        if row is None:
            raise CorpusError(f"document {doc_id!r} is not in the neighbourhood graph")
        return [(self._ids[c], v) for c, v in self.neighbours_of_row(row, n)]

    def stats(self) -> GraphStats:
        """Rows, k, similarity summary and bytes on disk (for ``rca info``)."""
        mean = low = high = None
        if self._similarities.size:
            total, low_v, high_v = 0.0, math.inf, -math.inf
            step = max(1, 2**22 // max(1, self.k))
            for start in range(0, len(self), step):
                chunk = np.asarray(self._similarities[start : start + step], dtype=np.float32)
                total += float(chunk.sum(dtype=np.float64))
                low_v = min(low_v, float(chunk.min()))
                high_v = max(high_v, float(chunk.max()))
            mean, low, high = total / self._similarities.size, low_v, high_v
        gen_dir = self.directory / self.generation
        size = sum(p.stat().st_size for p in gen_dir.iterdir() if p.is_file())
        return GraphStats(
            rows=len(self),
            k=self.k,
            k_requested=self.k_requested,
            dim=self.dim,
            mean_similarity=mean,
            min_similarity=low,
            max_similarity=high,
            bytes_on_disk=size,
            generation=self.generation,
        )

    def __repr__(self) -> str:
        return f"TopKGraph({str(self.directory)!r}, rows={len(self)}, k={self.k})"


def _dot_rows(vectors: torch.Tensor, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Similarities of ``rows[i]`` with each of ``cols[i, :]`` (float32, len(rows) × width)."""
    out = np.empty(cols.shape, dtype=np.float32)
    step = max(1, 2**21 // max(1, cols.shape[1] * vectors.shape[1]))
    for start in range(0, len(rows), step):
        r = torch.from_numpy(np.asarray(rows[start : start + step], dtype=np.int64))
        c = torch.from_numpy(np.asarray(cols[start : start + step], dtype=np.int64))
        out[start : start + step] = torch.bmm(vectors[c], vectors[r].unsqueeze(2)).squeeze(2)
    return out


def _check_ids(ids: Sequence[str], n_rows: int) -> list[str]:
    id_list = [str(i) for i in ids]
    if len(id_list) != n_rows:
        raise CorpusError(f"{len(id_list)} ids for {n_rows} embedding rows; they must match")
    if len(set(id_list)) != len(id_list):
        raise CorpusError("document ids must be unique to build a neighbourhood graph")
    return id_list


def _meta(n_rows: int, k: int, k_requested: int, dim: int, block_size: int) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "rows": n_rows,
        "k": k,
        "k_requested": k_requested,
        "dim": dim,
        "block_size": block_size,
        "neighbours_dtype": "int32",
        "similarities_dtype": "float16",
    }


def _validate(
    gen_dir: Path,
    meta: Any,
    ids: Any,
    neighbour_rows: np.ndarray,
    similarities: np.ndarray,
) -> None:
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
