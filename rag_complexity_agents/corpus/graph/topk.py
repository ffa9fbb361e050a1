"""Exact top-k kernels: the most similar rows of every row of an embedding matrix.

Similarities are computed by float32 matrix products in row blocks (each block against every
column), the row itself is excluded, and each block's top-k is selected without a per-row Python
loop: the columns are split into ``GROUP`` interleaved groups, the top-k groups by their maximum
are kept (they always contain the top-k elements) and only their members are ranked. Ties are
broken deterministically by the lower row id.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from ...errors import CorpusError
from ...optional import LazyModule

if TYPE_CHECKING:
    import torch
else:  # only building or extending a graph needs torch; opening one does not
    torch = LazyModule("torch", "building a neighbourhood graph")


#: Columns per group of the pre-selection, and the contiguous span between a group's members
#: (see :func:`_top_values`).
GROUP = 16
SPAN = 32
#: Upper bound on one block of similarities (rows × all columns × 4 bytes).
DEFAULT_MAX_BLOCK_BYTES = 256 * 2**20


def as_matrix(embeddings: np.ndarray, what: str) -> np.ndarray:
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


def to_torch(array: np.ndarray) -> torch.Tensor:
    """Share the buffer of ``array`` with torch (read-only memmaps included; never written)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


def order_rows(values: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
    grouped = x[:, :main].unflatten(1, (n_chunks, GROUP, SPAN))  # type: ignore[no-untyped-call]
    group_max = grouped.amax(dim=2).flatten(1)
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


def select_topk(sims: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
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
    values, cols = order_rows(top_values.numpy(), top_cols.numpy())
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


def rows_per_block(n_cols: int, block_size: int, max_block_bytes: int) -> int:
    """Rows per similarity block: at most ``block_size`` and ``max_block_bytes`` of float32."""
    return max(1, min(block_size, max_block_bytes // max(1, 4 * n_cols)))


def similarity_blocks(
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
    per_block = rows_per_block(n_cols, block_size, max_block_bytes)
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
    matrix = as_matrix(embeddings, "embeddings")
    n = matrix.shape[0]
    rows = range(n) if rows is None else rows
    k = max(0, min(k, n - 1))
    out_cols = np.empty((len(rows), k), dtype=np.int32)
    out_values = np.empty((len(rows), k), dtype=np.float32)
    if k == 0 or len(rows) == 0:
        return out_cols, out_values
    vectors = to_torch(matrix)
    for start, block in similarity_blocks(vectors, rows, range(n), block_size, max_block_bytes):
        values, cols = select_topk(block, k)
        at = start - rows.start
        out_cols[at : at + block.shape[0]] = cols
        out_values[at : at + block.shape[0]] = values
    return out_cols, out_values


def dot_rows(vectors: torch.Tensor, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Similarities of ``rows[i]`` with each of ``cols[i, :]`` (float32, len(rows) × width)."""
    out = np.empty(cols.shape, dtype=np.float32)
    step = max(1, 2**21 // max(1, cols.shape[1] * vectors.shape[1]))
    for start in range(0, len(rows), step):
        r = torch.from_numpy(np.asarray(rows[start : start + step], dtype=np.int64))
        c = torch.from_numpy(np.asarray(cols[start : start + step], dtype=np.int64))
        out[start : start + step] = torch.bmm(vectors[c], vectors[r].unsqueeze(2)).squeeze(2)
    return out
