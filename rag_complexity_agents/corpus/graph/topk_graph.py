"""The neighbourhood graph G of SUNAR §3.1.1: the top-k most similar chunks of every chunk.

Rows are positions in the caller's embedding matrix (the corpus store keeps it on disk in row
order). The graph is stored by :mod:`.storage` (crash-safe generations); readers memory-map the
arrays read-only, so opening a large graph costs almost nothing. The top-k is exact
(:mod:`.topk`) or, for large collections, approximate: cluster blocks (:mod:`.cluster`, the
default above :data:`EXACT_MAX_ROWS`) or an HNSW index (:mod:`.ann`, optional faiss).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, runtime_checkable

import numpy as np

from ...errors import CorpusError
from ...optional import LazyModule
from .ann import ANN_LIBRARY, approximate_topk
from .cluster import cluster_topk
from .storage import (
    IDS_FILE,
    META_FILE,
    NEIGHBOURS_FILE,
    SIMILARITIES_FILE,
    check_ids,
    graph_meta,
    read_current,
    validate_generation,
    write_generation,
)
from .topk import (
    DEFAULT_MAX_BLOCK_BYTES,
    as_matrix,
    dot_rows,
    exact_topk,
    order_rows,
    select_topk,
    similarity_blocks,
    to_torch,
)

if TYPE_CHECKING:
    import torch
else:  # only building or extending a graph needs torch; opening one does not
    torch = LazyModule("torch", "building a neighbourhood graph")

GraphMethod = Literal["auto", "exact", "cluster", "faiss"]
#: The approximate build that ``method="auto"`` uses above the threshold (:mod:`.cluster`).
CLUSTER_METHOD = "cluster"
#: ``method="auto"`` builds the exact graph up to this many rows and the cluster-block graph
#: above: where their CPU costs meet. Measured at 100k rows on the same loaded 2-core machine
#: (docs/scaling.md): exact 129 CPU-s (k = 16, load ~10), cluster blocks 192.5 CPU-s (k = 100,
#: P = 48, load ~13, recall 0.964). Exact grows as n², cluster blocks as n (fixed cluster
#: size), so they meet near 100k · 192.5 / 129 ≈ 150k rows; 200,000 leaves the margin to
#: exactness (at 200k exact costs ~4 CPU-minutes on an idle machine). Above it the exact
#: build's n² cost runs away: ~6,900 CPU-s at 1M, against ~10 × the 100k cluster cost.
EXACT_MAX_ROWS = 200_000

#: Relative slack for comparing float32 similarities with stored float16 ones (2^-10 > 2^-11).
_FP16_SLACK = 2.0**-10


def resolve_method(method: str, n_rows: int, exact_max_rows: int = EXACT_MAX_ROWS) -> str:
    """The build method (``"exact"``, ``"cluster"`` or ``"faiss"``) that ``method`` means for
    ``n_rows`` rows: ``"auto"`` is exact up to ``exact_max_rows`` rows, cluster above."""
    if method not in ("auto", "exact", CLUSTER_METHOD, ANN_LIBRARY):
        raise CorpusError(
            f"unknown graph method {method!r}; use 'auto', 'exact', 'cluster' or 'faiss'"
        )
    if method != "auto":
        return method
    return "exact" if n_rows <= exact_max_rows else CLUSTER_METHOD


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
    method: str


class TopKGraph:
    """Top-k neighbourhood graph over the rows of an embedding matrix, memory-mapped.

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
        method: GraphMethod = "auto",
        exact_max_rows: int = EXACT_MAX_ROWS,
        clusters: int | None = None,
        probes: int | None = None,
    ) -> TopKGraph:
        """Compute the graph of ``embeddings`` (row i ↔ ``ids[i]``) and store it.

        ``method``: ``"exact"`` (blocked exact top-k), ``"cluster"`` (approximate, exact
        products within k-means cluster neighbourhoods; see :mod:`.cluster`), ``"faiss"``
        (approximate, HNSW; optional dependency, see :mod:`.ann`) or ``"auto"``: exact up to
        ``exact_max_rows`` rows, cluster above. ``clusters`` (C) and ``probes`` (P) set the
        cluster build's parameters (default: :func:`.cluster.default_clusters` and
        :data:`.cluster.PROBES`); the other methods ignore them. ``k`` is capped at
        ``len(ids) - 1``; the requested value is remembered so that :meth:`extend` grows the
        lists once more rows exist. Replaces any graph in ``directory`` (crash-safely).
        """
        if k < 1:
            raise CorpusError(f"graph k must be at least 1, got {k}")
        if block_size < 1:
            raise CorpusError(f"graph block_size must be at least 1, got {block_size}")
        matrix = as_matrix(embeddings, "embeddings")
        id_list = check_ids(ids, matrix.shape[0])
        chosen = resolve_method(method, matrix.shape[0], exact_max_rows)
        if chosen == "exact":
            neighbour_rows, values = exact_topk(
                matrix, k, block_size=block_size, max_block_bytes=max_block_bytes
            )
        elif chosen == CLUSTER_METHOD:
            neighbour_rows, values = cluster_topk(
                matrix, k, n_clusters=clusters, probes=probes, max_block_bytes=max_block_bytes
            )
        else:
            neighbour_rows, values = approximate_topk(matrix, k)
        meta = graph_meta(
            len(id_list), neighbour_rows.shape[1], k, matrix.shape[1], block_size, chosen
        )
        path = Path(directory)
        write_generation(path, neighbour_rows, values.astype(np.float16), id_list, meta)
        return cls.open(path)

    @classmethod
    def open(cls, directory: str | os.PathLike[str]) -> TopKGraph:
        """Memory-map the graph stored in ``directory`` (read-only); CorpusError if unusable."""
        path = Path(directory)
        generation = read_current(path)
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
        validate_generation(gen_dir, meta, ids, neighbour_rows, similarities)
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
        matrix = as_matrix(embeddings_all, "embeddings")
        id_list = check_ids(ids_all, matrix.shape[0])
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
        vectors = to_torch(matrix)

        neighbour_rows = np.empty((n_all, k_new), dtype=np.int32)
        similarities = np.empty((n_all, k_new), dtype=np.float16)
        if k_new == k_old:
            neighbour_rows[:n_old] = self._neighbours
            similarities[:n_old] = self._similarities

        # existing rows: merge their lists with the similarities to the new rows
        for start, block in similarity_blocks(
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
            new_values, new_cols = select_topk(block[touched], k_new)
            rows = touched.numpy() + start
            old_cols = np.asarray(self._neighbours[rows], dtype=np.int64)
            old_values = dot_rows(vectors, rows, old_cols)
            values, cols = order_rows(
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

        meta = graph_meta(n_all, k_new, self.k_requested, matrix.shape[1], blocks, self.method)
        generation = write_generation(self.directory, neighbour_rows, similarities, id_list, meta)
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
        got = dot_rows(to_torch(matrix), sample, cols)[:, 0]
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
    def method(self) -> str:
        """How the lists were computed: ``"exact"``, ``"cluster"`` or ``"faiss"``.

        Rows added by :meth:`extend` get exact lists whatever the method."""
        return str(self._meta.get("method", "exact"))

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
            method=self.method,
        )

    def __repr__(self) -> str:
        return f"TopKGraph({str(self.directory)!r}, rows={len(self)}, k={self.k})"
