"""Approximate top-k neighbours by cluster blocks: exact similarities inside each row's
neighbourhood of k-means clusters.

The rows are partitioned into ``C`` clusters by spherical k-means (Lloyd iterations on a row
sample, then every row assigned to its most similar centroid). For each cluster A, its "probe"
clusters are the ``P`` clusters whose centroids are most similar to A's (A first); the members
of A are compared with every member of its probe clusters by one float32 matrix product per
block, and each row keeps its top-k of those candidates (the selection of :mod:`.topk`). A
row's true neighbour is missed only when it lies outside the row's cluster's P nearest
clusters. With ``P = C`` every row is compared with every row, so the result equals the exact
graph.

Cost: about 2 · n · P · (n / C) · d flops of matrix products (plus the k-means), against
2 · n² · d for the exact build; with clusters of a fixed average size (``n / C`` =
:data:`CLUSTER_ROWS`) it grows linearly in n. No n × n matrix is ever held: one cluster's
block of similarities at a time (at most ``max_block_bytes``), the candidate vectors of that
cluster, and the n × k outputs. Deterministic for a given ``seed`` (and thread count).

The result has the exact build's shape and order (similarity descending, lower row first on
ties), so the graph's on-disk format, memory mapping and ``extend`` do not change. Parameters
(:data:`CLUSTER_ROWS`, :data:`PROBES`) were chosen by measured graph recall against the exact
graph (``benchmarks/index_build.py --cluster-sweep``; docs/scaling.md).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ...optional import LazyModule
from .topk import DEFAULT_MAX_BLOCK_BYTES, as_matrix, select_topk, to_torch

if TYPE_CHECKING:
    import torch
else:  # only building a graph needs torch
    torch = LazyModule("torch", "building a neighbourhood graph")

__all__ = [
    "CLUSTER_ROWS",
    "KMEANS_ITERATIONS",
    "KMEANS_SAMPLE_PER_CLUSTER",
    "PROBES",
    "assign_clusters",
    "cluster_topk",
    "default_clusters",
    "probe_order",
    "spherical_kmeans",
]

#: Average rows per cluster: ``C = ceil(n / CLUSTER_ROWS)`` clusters.
CLUSTER_ROWS = 1000
#: Probe clusters per cluster (P): each row is compared with the members of this many clusters.
PROBES = 32
#: Lloyd iterations of the k-means, and sample rows per cluster it is trained on.
KMEANS_ITERATIONS = 10
KMEANS_SAMPLE_PER_CLUSTER = 64
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
    return rows / rows.norm(dim=1, keepdim=True).clamp_min(1e-12)


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


def probe_order(centroids: np.ndarray) -> np.ndarray:
    """Per cluster, every cluster ordered by centroid similarity, itself first (C × C int64;
    ties: lower cluster first)."""
    sims = centroids @ centroids.T
    np.fill_diagonal(sims, np.inf)
    return np.argsort(-sims, axis=1, kind="stable")


def _candidates(
    cluster: int, order: np.ndarray, members: list[np.ndarray], probes: int, k: int
) -> np.ndarray:
    """Sorted rows of ``cluster``'s first ``probes`` non-empty probe clusters, extended by the
    next ones until there are more than ``k`` rows (so every row keeps k others)."""
    chosen: list[np.ndarray] = []
    count = 0
    for other in order[cluster].tolist():
        if members[other].size == 0:
            continue
        chosen.append(members[other])
        count += members[other].size
        if len(chosen) >= probes and count > k:
            break
    return np.sort(np.concatenate(chosen))


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
    cluster's rows are compared exactly with the rows of its ``probes`` nearest clusters (all
    rows when ``probes`` ≥ C: the exact graph). Returns int32 neighbour rows and float32
    similarities, both ``n × min(k, n-1)``, ordered by (similarity desc, row asc) like
    :func:`~.topk.exact_topk`.
    """
    matrix = as_matrix(embeddings, "embeddings")
    n = matrix.shape[0]
    k = max(0, min(k, n - 1))
    out_cols = np.empty((n, k), dtype=np.int32)
    out_values = np.empty((n, k), dtype=np.float32)
    if k == 0:
        return out_cols, out_values
    vectors = to_torch(matrix)
    n_clusters = max(1, min(n_clusters or default_clusters(n), n))
    if n_clusters == 1:
        labels = np.zeros(n, dtype=np.int64)
        order = np.zeros((1, 1), dtype=np.int64)
    else:
        centroids = spherical_kmeans(matrix, n_clusters, seed=seed)
        labels = assign_clusters(vectors, torch.from_numpy(centroids))
        order = probe_order(centroids)
    by_cluster = np.argsort(labels, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(labels, minlength=len(order)))])
    members = [by_cluster[bounds[c] : bounds[c + 1]] for c in range(len(order))]
    buffer = torch.empty(0)
    for cluster, rows in enumerate(members):
        if rows.size == 0:
            continue
        cand = _candidates(cluster, order, members, probes or PROBES, k)
        cand_vectors = torch.from_numpy(matrix[cand])
        own = np.searchsorted(cand, rows)  # each row's own column (rows ⊂ cand)
        per_block = max(1, min(rows.size, max_block_bytes // (4 * cand.size)))
        if buffer.numel() < per_block * cand.size:
            buffer = torch.empty(per_block * cand.size)
        for at in range(0, rows.size, per_block):
            part = rows[at : at + per_block]
            block = buffer[: part.size * cand.size].view(part.size, cand.size)
            torch.mm(torch.from_numpy(matrix[part]), cand_vectors.T, out=block)
            block[torch.arange(part.size), torch.from_numpy(own[at : at + per_block])] = -math.inf
            values, cols = select_topk(block, k)
            out_cols[part] = cand[cols]
            out_values[part] = values
    return out_cols, out_values
