"""The neighbourhood graph G (SUNAR §3.1.1): top-k kernels (:mod:`.topk`), crash-safe on-disk
storage (:mod:`.storage`), approximate neighbours (:mod:`.cluster`, :mod:`.ann`) and the
memory-mapped graph (:mod:`.topk_graph`)."""

from .ann import ann_available, approximate_topk
from .cluster import cluster_topk
from .topk import DEFAULT_MAX_BLOCK_BYTES, exact_topk, rows_per_block
from .topk_graph import EXACT_MAX_ROWS, CorpusGraph, GraphMethod, GraphStats, TopKGraph

__all__ = [
    "DEFAULT_MAX_BLOCK_BYTES",
    "EXACT_MAX_ROWS",
    "CorpusGraph",
    "GraphMethod",
    "GraphStats",
    "TopKGraph",
    "ann_available",
    "approximate_topk",
    "cluster_topk",
    "exact_topk",
    "rows_per_block",
]
