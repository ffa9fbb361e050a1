"""One exception hierarchy; every message tells the user what to do next.

Errors about what a caller gave (a config value, a question, a collection) are also
``ValueError``s, errors of the environment (a model, a server, a library) also
``RuntimeError``s: servers that pass only such built-in errors' messages on to their clients
(the LangGraph API server) then show ours instead of "An internal error occurred".
"""

from __future__ import annotations


class RCAError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(RCAError, ValueError):
    """A configuration value or model spec is invalid."""


class ModelNotAvailable(RCAError, RuntimeError):
    """A model (chat, embedding, scorer, equivalence) cannot be found or loaded."""


class ChecksumMismatch(ModelNotAvailable):
    """Assembled model weights do not match the published sha256."""


class ModelServerError(RCAError, RuntimeError):
    """A model server (Ollama) is down, slow or answered with an error."""


class ModelCallError(ModelServerError):
    """A chat-model call failed inside the backend (not one of our own errors)."""


class CorpusError(RCAError, ValueError):
    """A corpus input or a stored collection is missing, empty or unreadable."""


class InputError(RCAError, ValueError):
    """A question or other user input is unusable (empty, too long, garbled)."""


class MissingDependency(RCAError, RuntimeError):
    """An optional library (torch, transformers, sentence-transformers, llama.cpp) that a
    feature needs is not installed."""
