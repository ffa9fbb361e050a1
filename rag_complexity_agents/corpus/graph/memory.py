"""An exact neighbourhood graph kept in memory, for a few thousand documents.

Used when the documents are not one of our collections (a user's LangChain or LlamaIndex store):
the graph is built once over the listed documents with numpy only, so the lean install (no
torch) can build it, and nothing is written to disk.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import CorpusError


def numpy_topk(matrix: np.ndarray, k: int, *, block: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k rows by dot product (self excluded) of every row of a small matrix, with
    numpy only (no torch: the lean install): int32 neighbour rows and float32 similarities,
    ``n × min(k, n-1)``, ordered by (similarity desc, row asc)."""
    n = matrix.shape[0]
    k = max(0, min(k, n - 1))
    cols = np.empty((n, k), dtype=np.int32)
    sims = np.empty((n, k), dtype=np.float32)
    for start in range(0, n, block):
        stop = min(n, start + block)
        values = matrix[start:stop] @ matrix.T
        values[np.arange(stop - start), np.arange(start, stop)] = -np.inf
        order = np.argsort(-values, axis=1, kind="stable")[:, :k]
        cols[start:stop] = order
        sims[start:stop] = np.take_along_axis(values, order, axis=1)
    return cols, sims


class InMemoryNeighbourGraph:
    """Exact top-k cosine neighbours of a few thousand documents, kept in memory."""

    def __init__(self, ids: Sequence[str], vectors: np.ndarray, k: int) -> None:
        self.ids = list(ids)
        self.row_of = {doc_id: row for row, doc_id in enumerate(self.ids)}
        matrix: np.ndarray = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms == 0, 1.0, norms)
        self.cols, self.sims = numpy_topk(matrix, k)

    def __len__(self) -> int:
        return len(self.ids)

    def neighbours(self, doc_id: str, n: int) -> list[tuple[str, float]]:
        """The ``n`` nearest documents of ``doc_id`` with their cosine similarities."""
        row = self.row_of.get(doc_id)
        if row is None:
            raise CorpusError(f"document {doc_id!r} is not in the neighbourhood graph")
        n = max(0, min(n, self.cols.shape[1]))
        return [
            (self.ids[int(c)], float(s))
            for c, s in zip(self.cols[row, :n], self.sims[row, :n], strict=True)
        ]
