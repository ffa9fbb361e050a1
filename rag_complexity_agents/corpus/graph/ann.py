"""Approximate top-k neighbours from an HNSW index (faiss-cpu), for collections too large for
the exact build.

The exact build costs n² · d multiply-adds (100k chunks: ~35 s on two cores, 1M: about an hour).
An HNSW index (Malkov & Yashunin, 2018) is built in about n · log n distance computations and then
asked for the k + 1 nearest rows of every row; the row itself is dropped. The result has the
exact build's shape and order (similarity descending, lower row first on ties), so the graph's
on-disk format, memory mapping and ``extend`` do not change. The vectors are held in the index
as float16 (``ScalarQuantizer.QT_fp16``), half the memory of a float32 copy; the similarities it
reports are dot products of those float16 vectors (the graph stores float16 similarities anyway).

faiss is an optional dependency: ``pip install 'rag-complexity-agents[ann]'``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import CorpusError
from .topk import as_matrix, exact_topk, order_rows

#: The library behind ``method="faiss"`` (the name stored in the graph's ``meta.json``).
ANN_LIBRARY = "faiss"
#: HNSW links per node, and the candidate list size while inserting (quality of the index).
HNSW_M = 32
EF_CONSTRUCTION = 80
#: Rows asked from the index per search call (bounds the int64/float32 result buffers).
SEARCH_ROWS = 8192


def default_ef_search(k: int) -> int:
    """HNSW's candidate list size at search time for ``k`` neighbours: ``max(400, 6·k)``.

    Measured at 100k real-plus-random 384-d vectors (``M`` = 32, efConstruction = 80;
    benchmarks/results/index_build.md): k = 16 needs about 400 and k = 100 about 600 for a
    graph recall of 0.95 against the exact graph; twice k (the usual advice for queries)
    gave 0.78–0.90 on those rows.
    """
    return max(400, 6 * k)


def ann_available() -> bool:
    """Whether faiss-cpu can be imported."""
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:
        raise CorpusError(
            "an approximate neighbourhood graph needs faiss-cpu: "
            "pip install 'rag-complexity-agents[ann]' (or set graph.method = 'exact')"
        ) from exc
    return faiss


def hnsw_index(
    matrix: np.ndarray, *, m: int = HNSW_M, ef_construction: int = EF_CONSTRUCTION
) -> Any:
    """A faiss HNSW index (inner product, float16 vectors) holding the rows of ``matrix``."""
    faiss = _faiss()
    index = faiss.IndexHNSWSQ(
        matrix.shape[1], faiss.ScalarQuantizer.QT_fp16, m, faiss.METRIC_INNER_PRODUCT
    )
    index.hnsw.efConstruction = ef_construction
    index.train(matrix[: min(len(matrix), 4096)])  # fp16 needs no statistics; faiss wants a call
    for start in range(0, len(matrix), 2**16):
        index.add(matrix[start : start + 2**16])
    return index


def search_rows(
    index: Any, matrix: np.ndarray, k: int, start: int, stop: int, ef_search: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The index's top-k of rows ``start .. stop - 1`` of ``matrix`` (the indexed rows), self
    excluded, ordered like :func:`~.topk.exact_topk`: (neighbour rows, similarities, the
    rows that got fewer than k other rows)."""
    index.hnsw.efSearch = max(ef_search or default_ef_search(k), k + 1)
    values, cols = index.search(matrix[start:stop], k + 1)
    own = np.arange(start, stop)[:, None]
    valid = (cols != own) & (cols >= 0)
    keep = np.argsort(~valid, axis=1, kind="stable")[:, :k]  # valid columns first, in order
    values = np.take_along_axis(values, keep, axis=1)
    cols = np.take_along_axis(cols, keep, axis=1)
    short = np.nonzero(valid.sum(axis=1) < k)[0] + start
    values, cols = order_rows(values, cols)
    return cols, values, short


def approximate_topk(
    embeddings: np.ndarray,
    k: int,
    *,
    m: int = HNSW_M,
    ef_construction: int = EF_CONSTRUCTION,
    ef_search: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Approximate top-k neighbours (by dot product, self excluded) of every row.

    Returns int32 neighbour rows and float32 similarities, both ``n × min(k, n-1)``, ordered
    by (similarity desc, row asc) like :func:`~.topk.exact_topk`. Rows for which the index
    returns fewer than k other rows (possible with many duplicate vectors) get their exact
    top-k.
    """
    matrix = as_matrix(embeddings, "embeddings")
    n = matrix.shape[0]
    k = max(0, min(k, n - 1))
    out_cols = np.empty((n, k), dtype=np.int32)
    out_values = np.empty((n, k), dtype=np.float32)
    if k == 0:
        return out_cols, out_values
    index = hnsw_index(matrix, m=m, ef_construction=ef_construction)
    short: list[int] = []
    for start in range(0, n, SEARCH_ROWS):
        stop = min(n, start + SEARCH_ROWS)
        cols, values, missing = search_rows(index, matrix, k, start, stop, ef_search)
        out_cols[start:stop], out_values[start:stop] = cols, values
        short.extend(missing.tolist())
    del index
    for row in short:
        out_cols[row : row + 1], out_values[row : row + 1] = exact_topk(
            matrix, k, rows=range(row, row + 1)
        )
    return out_cols, out_values
