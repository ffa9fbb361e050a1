"""Reusable, reproducible KV prefixes: block-aligned reuse rules and an LRU of saved states.

llama-cpp-python keeps the KV cache of the previous call and re-evaluates only the tokens after
the longest common prefix. On top of that a small LRU of saved KV states
(:class:`PrefixStateCache`) lets several *alternating* long prefixes (e.g. few-shot prompts of
different agent steps) each skip re-evaluation. ``llama_cpp.LlamaRAMCache`` is not used because
``Llama.save_state`` also copies an ``n_batch × n_vocab`` float buffer per entry (311 MB for
Qwen2.5's 152k vocabulary, 0.9 s per save) that its capacity does not count.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

#: Prompts are evaluated in blocks aligned to multiples of this many positions, and the last
#: prompt token alone. llama.cpp's numbers can depend on how tokens are batched, so this
#: makes every prompt token's KV identical whatever was cached before: same prompt + same seed
#: gives the same answer regardless of call history. Reuse rounds down to a block boundary,
#: so a smaller block reuses more: 32 lets consecutive prompts that share only their system
#: instruction (the ASU prompts: ~55 tokens) reuse it. Measured with Qwen2.5-0.5B on this
#: project's 2-core machine: blocks of 16, 32 and 64 tokens give bit-identical logits (a
#: single 199-token batch does not), so 32 answers exactly as 64 did; prefill in 32-token
#: blocks was as fast as in 64 with two threads (idle) and ~5 % slower with one (under load).
BLOCK = 32


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two token arrays."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


def reusable(shared: int, target: int, canon: int, primed: int) -> int:
    """How many cached KV positions a prompt of ``target + 1`` tokens may keep.

    ``canon``: leading positions evaluated in full aligned blocks; ``primed``: the prompt
    length (minus one) those positions were primed for. Re-priming the very same prompt keeps
    everything; otherwise only whole blocks that are both shared and canonical.
    """
    if shared >= target and primed == target:
        return target
    return (min(shared, canon) // BLOCK) * BLOCK


@dataclass
class SavedState:
    """A saved llama.cpp context state and the KV bookkeeping it was saved with."""

    tokens: np.ndarray  # the evaluated tokens whose KV the state holds
    data: ctypes.Array[ctypes.c_uint8]
    n_bytes: int
    canon: int
    primed: int


@dataclass
class PrefixStateCache:
    """LRU of llama.cpp context states keyed by their evaluated tokens, bounded in bytes."""

    capacity_bytes: int
    entries: OrderedDict[int, SavedState] = field(default_factory=OrderedDict)
    _next_id: int = 0

    @property
    def size_bytes(self) -> int:
        return sum(e.n_bytes for e in self.entries.values())

    def best(self, tokens: np.ndarray) -> tuple[int | None, int]:
        """The entry that lets a prompt keep the most positions, and that count."""
        target = len(tokens) - 1
        best_key, best_keep = None, 0
        for key, entry in self.entries.items():
            shared = common_prefix(entry.tokens, tokens)
            keep = reusable(shared, target, entry.canon, entry.primed)
            if keep > best_keep:
                best_key, best_keep = key, keep
        return best_key, best_keep

    def add(self, entry: SavedState, overlap: float) -> None:
        # An entry that the new one nearly covers (same prefix, different tail) is redundant.
        for key in [
            k
            for k, e in self.entries.items()
            if common_prefix(e.tokens, entry.tokens) >= overlap * len(e.tokens)
        ]:
            del self.entries[key]
        self.entries[self._next_id] = entry
        self._next_id += 1
        while self.entries and self.size_bytes > self.capacity_bytes:
            self.entries.popitem(last=False)
