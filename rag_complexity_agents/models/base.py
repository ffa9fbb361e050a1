"""Small interfaces every model-backed component implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ..types import Chunk


@runtime_checkable
class Embedder(Protocol):
    """Dense text encoder returning L2-normalised float32 rows."""

    @property
    def dimension(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


@runtime_checkable
class Scorer(Protocol):
    """Scores documents for a query; higher is more relevant. Batched."""

    name: str

    def score(self, query: str, docs: Sequence[Chunk]) -> np.ndarray: ...


@runtime_checkable
class Equivalence(Protocol):
    """Decides whether two answers mean the same thing (both directions checked inside)."""

    name: str

    def equivalent(self, a: str, b: str, *, question: str | None = None) -> bool: ...
