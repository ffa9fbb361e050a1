"""One exception hierarchy; every message tells the user what to do next.

Our errors are ``RuntimeError``s: servers that pass only built-in errors' messages on to their
clients (the LangGraph API server hides anything else behind "An internal error occurred")
then show ours, and pydantic, which turns a ``ValueError`` raised while a model is built into
its own multi-line ValidationError, lets ours through unchanged.
"""

from __future__ import annotations


class RCAError(RuntimeError):
    """Base class of every error this package raises on purpose."""


class ConfigError(RCAError):
    """A configuration value or model spec is invalid."""


class ModelNotAvailable(RCAError):
    """A model (chat, embedding, scorer, equivalence) cannot be found or loaded."""


class ChecksumMismatch(ModelNotAvailable):
    """Assembled model weights do not match the published sha256."""


class ModelServerError(RCAError):
    """A model server (Ollama) is down, slow or answered with an error."""


class ModelCallError(ModelServerError):
    """A chat-model call failed inside the backend (not one of our own errors)."""


class CorpusError(RCAError):
    """A corpus input or a stored collection is missing, empty or unreadable."""


class InputError(RCAError):
    """A question or other user input is unusable (empty, too long, garbled)."""


class MissingDependency(RCAError):
    """An optional library (torch, transformers, sentence-transformers, llama.cpp) that a
    feature needs is not installed."""


class RunCancelled(RCAError):
    """The run was cancelled (its API client or the server stopped it): raised before the
    next model call, so the thread running it stops instead of working for nobody."""
