"""The neighbourhood graph G (SUNAR §3.1.1): top-k kernels (:mod:`.topk`), crash-safe on-disk
storage (:mod:`.storage`) and the memory-mapped graph (:mod:`.topk_graph`)."""

from .topk import DEFAULT_MAX_BLOCK_BYTES, exact_topk, rows_per_block
from .topk_graph import CorpusGraph, GraphStats, TopKGraph

__all__ = [
    "DEFAULT_MAX_BLOCK_BYTES",
    "CorpusGraph",
    "GraphStats",
    "TopKGraph",
    "exact_topk",
    "rows_per_block",
]
