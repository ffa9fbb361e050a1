"""Approximate top-k neighbours by cluster blocks: exact similarities between each row and the
members of its most similar k-means clusters (an inverted-file scan of every row).

The rows are partitioned into ``C`` clusters by spherical k-means (Lloyd iterations on a row
sample, then every row assigned to its most similar centroid). Every row "probes" its ``P``
most similar centroids. Cluster by cluster, the rows that probe a cluster are compared with all
of its members by float32 matrix products (one per block of rows), and each row's running top-k
list takes the values above its current k-th (the rows whose list cannot change are skipped
after one comparison pass over the block). A row's true neighbour is missed only when it lies
in a cluster outside the row's P nearest centroids. With ``P = C`` every row is compared with
every row, so the result equals the exact graph. (Probing per cluster instead of per row, i.e.
one probe list for all members of a cluster, lost 0.1–0.15 recall at the same cost on the
benchmark vectors; so did probe lists per sub-cluster of 250 rows.)

Cost: about 2 · n · P · (n / C) · d flops of matrix products (plus the k-means), against
2 · n² · d for the exact build; with clusters of a fixed average size (``n / C`` =
:data:`CLUSTER_ROWS`) it grows linearly in n. No n × n matrix is ever held: one block of
similarities at a time (at most ``max_block_bytes``), the n × P probe table (int32) and the
n × k outputs. Deterministic for a given ``seed`` (and thread count).

The result has the exact build's shape and order (similarity descending, lower row first on
equal similarities), so the graph's on-disk format, memory mapping and ``extend`` do not change.
Parameters (:data:`CLUSTER_ROWS`, :data:`PROBES`) were chosen by measured graph recall against
the exact graph (``benchmarks/index_build.py --cluster-sweep``; docs/scaling.md).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ...optional import LazyModule
from .topk import DEFAULT_MAX_BLOCK_BYTES, _top_values, as_matrix, exact_topk, order_rows, to_torch

if TYPE_CHECKING:
    import torch
else:  # only building a graph needs torch
    torch = LazyModule("torch", "building a neighbourhood graph")

#: Average rows per cluster: ``C = ceil(n / CLUSTER_ROWS)`` clusters.
CLUSTER_ROWS = 1000
#: Probe clusters per cluster (P): each row is compared with the members of this many clusters.
PROBES = 48
#: Lloyd iterations of the k-means, and sample rows per cluster it is trained on.
KMEANS_ITERATIONS = 10
KMEANS_SAMPLE_PER_CLUSTER = 64
#: Rows whose list takes at most this many values from a block are merged with a narrow
#: selection (most rows, once their list is good).
FEW = 8
#: Rows per block of probing rows (bounds the selection's int64 index arrays, which are
#: twice the block's size: 8192 × ~1,000 members ≈ 33 MB of similarities).
QUERY_ROWS = 8192
#: Rows per block when assigning rows to centroids.
ASSIGN_ROWS = 16384


def default_clusters(n_rows: int) -> int:
    """The number of clusters C for ``n_rows`` rows: ``ceil(n / CLUSTER_ROWS)``."""
    return max(1, math.ceil(n_rows / CLUSTER_ROWS))


def assign_clusters(vectors: torch.Tensor, centroids: torch.Tensor) -> np.ndarray:
    """Index (int64) of the most similar centroid (by dot product) of every row."""
    labels = np.empty(vectors.shape[0], dtype=np.int64)
    for start in range(0, vectors.shape[0], ASSIGN_ROWS):
        block = vectors[start : start + ASSIGN_ROWS]
        labels[start : start + block.shape[0]] = torch.mm(block, centroids.T).argmax(dim=1).numpy()
    return labels


def _unit(rows: torch.Tensor) -> torch.Tensor:
    unit: torch.Tensor = rows / rows.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return unit


def spherical_kmeans(
    matrix: np.ndarray,
    n_clusters: int,
    *,
    iterations: int = KMEANS_ITERATIONS,
    sample_per_cluster: int = KMEANS_SAMPLE_PER_CLUSTER,
    seed: int = 0,
) -> np.ndarray:
    """``n_clusters`` unit centroids (float32, C × d) of spherical k-means on a row sample.

    Trained on ``min(n, sample_per_cluster · C)`` rows drawn with ``seed`` (their directions:
    rows are normalised), started from C distinct sample rows; a cluster that empties is
    re-seeded with a sample row drawn from the same generator.
    """
    rng = np.random.default_rng(seed)
    n = matrix.shape[0]
    n_clusters = max(1, min(n_clusters, n))
    size = min(n, sample_per_cluster * n_clusters)
    picked = np.sort(rng.choice(n, size=size, replace=False)) if size < n else np.arange(n)
    sample = _unit(torch.from_numpy(np.ascontiguousarray(matrix[picked])))
    start = torch.from_numpy(rng.choice(size, size=n_clusters, replace=False))
    centroids = sample[start].clone()
    for _ in range(iterations):
        labels = torch.from_numpy(assign_clusters(sample, centroids))
        sums = torch.zeros_like(centroids).index_add_(0, labels, sample)
        counts = torch.bincount(labels, minlength=n_clusters)
        empty = torch.nonzero(counts == 0, as_tuple=True)[0]
        if empty.numel():
            sums[empty] = sample[torch.from_numpy(rng.choice(size, size=empty.numel()))]
        centroids = _unit(sums)
    return centroids.numpy()


def row_probes(
    vectors: torch.Tensor, centroids: torch.Tensor, probes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per row, its most similar centroid (int64 labels) and its ``probes`` most similar
    centroids (n × probes int32, unordered)."""
    n, n_clusters = vectors.shape[0], centroids.shape[0]
    labels = np.empty(n, dtype=np.int64)
    near = np.empty((n, probes), dtype=np.int32)
    for start in range(0, n, ASSIGN_ROWS):
        sims = torch.mm(vectors[start : start + ASSIGN_ROWS], centroids.T).numpy()
        stop = start + sims.shape[0]
        labels[start:stop] = sims.argmax(axis=1)
        if probes >= n_clusters:
            near[start:stop] = np.arange(n_clusters)
        else:
            near[start:stop] = np.argpartition(sims, n_clusters - probes, axis=1)[:, -probes:]
    return labels, near


def _queries_by_cluster(near: np.ndarray, first: int, stop: int) -> list[np.ndarray]:
    """For clusters ``first .. stop - 1``: the rows (ascending) that probe each of them."""
    rows, slots = np.nonzero((near >= first) & (near < stop))
    keys = near[rows, slots]
    order = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(keys[order], np.arange(first, stop + 1))
    return [rows[order[bounds[i] : bounds[i + 1]]] for i in range(stop - first)]


def _merge(
    out_values: np.ndarray,
    out_cols: np.ndarray,
    rows: np.ndarray,
    block: torch.Tensor,
    cols: np.ndarray,
) -> None:
    """Merge ``block`` (similarities of ``rows`` with the rows ``cols``) into the running
    unordered top-k lists of ``rows``. Only rows with values above their current k-th take
    part; rows with at most :data:`FEW` such values contribute that many (a cheap selection),
    the others up to k."""
    k = out_values.shape[1]
    kth = torch.from_numpy(out_values[rows].min(axis=1))
    counts = (block > kth.unsqueeze(1)).sum(dim=1).numpy()
    for group in (np.nonzero((counts > 0) & (counts <= FEW))[0], np.nonzero(counts > FEW)[0]):
        if group.size == 0:
            continue
        width = min(k, int(counts[group].max()), block.shape[1])
        new_values, new_at = _top_values(block[torch.from_numpy(group)], width)
        at = rows[group]
        values = np.concatenate([out_values[at], new_values.numpy()], axis=1)
        merged = np.concatenate([out_cols[at], cols[new_at.numpy()].astype(np.int32)], axis=1)
        keep = np.argpartition(-values, k - 1, axis=1)[:, :k]
        out_values[at] = np.take_along_axis(values, keep, axis=1)
        out_cols[at] = np.take_along_axis(merged, keep, axis=1)


def cluster_topk(
    embeddings: np.ndarray,
    k: int,
    *,
    n_clusters: int | None = None,
    probes: int | None = None,
    seed: int = 0,
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
) -> tuple[np.ndarray, np.ndarray]:
    """Approximate top-k neighbours (by dot product, self excluded) of every row.

    ``n_clusters`` defaults to :func:`default_clusters`, ``probes`` to :data:`PROBES`; each
    row is compared exactly with the members of its ``probes`` most similar clusters (every
    row when ``probes`` ≥ C: the exact graph). Rows left with fewer than k others get their
    exact top-k. Returns int32 neighbour rows and float32 similarities, both
    ``n × min(k, n-1)``, ordered by (similarity desc, row asc) like
    :func:`~.topk.exact_topk`.
    """
    matrix = as_matrix(embeddings, "embeddings")
    n = matrix.shape[0]
    k = max(0, min(k, n - 1))
    out_cols = np.full((n, k), -1, dtype=np.int32)
    out_values = np.full((n, k), -np.inf, dtype=np.float32)
    if k == 0:
        return out_cols, out_values
    vectors = to_torch(matrix)
    n_clusters = max(1, min(n_clusters or default_clusters(n), n))
    probes = max(1, min(probes or PROBES, n_clusters))
    centroids = torch.from_numpy(spherical_kmeans(matrix, n_clusters, seed=seed))
    labels, near = row_probes(vectors, centroids, probes)
    by_cluster = np.argsort(labels, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(labels, minlength=n_clusters))])
    chunk = max(1, n_clusters * 2**22 // max(1, near.size))  # ~4M probe entries per pass
    for first in range(0, n_clusters, chunk):
        stop = min(n_clusters, first + chunk)
        for cluster, queries in enumerate(_queries_by_cluster(near, first, stop), start=first):
            members = by_cluster[bounds[cluster] : bounds[cluster + 1]]
            if members.size == 0 or queries.size == 0:
                continue
            member_vectors = torch.from_numpy(matrix[members])
            per_block = max(1, min(QUERY_ROWS, max_block_bytes // (4 * members.size)))
            for at in range(0, queries.size, per_block):
                part = queries[at : at + per_block]
                block = torch.mm(torch.from_numpy(matrix[part]), member_vectors.T)
                own = np.nonzero(labels[part] == cluster)[0]  # these rows are members
                if own.size:
                    col = np.searchsorted(members, part[own])
                    block[torch.from_numpy(own), torch.from_numpy(col)] = -math.inf
                _merge(out_values, out_cols, part, block, members)
    for row in np.nonzero(out_cols.min(axis=1) < 0)[0].tolist():  # too few candidates
        out_cols[row : row + 1], out_values[row : row + 1] = exact_topk(
            matrix, k, rows=range(row, row + 1)
        )
    for start in range(0, n, 2**16):
        out_values[start : start + 2**16], out_cols[start : start + 2**16] = order_rows(
            out_values[start : start + 2**16], out_cols[start : start + 2**16]
        )
    return out_cols, out_values
