"""What the harness runs and builds strategies from: :class:`Strategy`, :class:`RecordStrategy`
and :class:`EvalComponents`.

These are the types the registry (:mod:`.strategies`), the runner (:mod:`.runner`) and the
strategies themselves (:mod:`.ceilings`, :mod:`.peers`, plugins) share, kept apart from the
registry so that a strategy module never imports the registry that builds it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..components import Components
from ..config import Config
from ..errors import InputError, RCAError
from ..models.cache import LLMCallCache, with_llm_cache
from ..types import RunResult
from .datasets import QARecord

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


@runtime_checkable
class Strategy(Protocol):
    """Answers one question; the trace is JSON-serialisable (see the module docstring)."""

    def __call__(self, question: str) -> RunResult: ...


class RecordStrategy(ABC):
    """A strategy that reads the gold record of its question (gold paragraphs, gold
    sub-questions): the harness calls :meth:`answer_record`. Called with the question text
    alone it raises InputError, since there is no gold to read."""

    def __call__(self, question: str) -> RunResult:
        raise InputError(
            f"{type(self).__name__} reads the gold record of a dataset question; run it "
            "through the evaluation harness (rca eval run), not on a bare question"
        )

    @abstractmethod
    def answer_record(self, record: QARecord) -> RunResult:
        """Answer ``record.question`` using the gold fields of ``record``."""


StrategyBuilder = Callable[["EvalComponents"], Strategy]


class EvalComponents(Components):
    """:class:`Components` whose chat model goes through the harness's LLM call cache.

    Everything stays lazy: a strategy that never touches the chat model or the collection
    loads neither.
    """

    def __init__(self, config: Config | None = None, *, llm_cache: LLMCallCache | None = None):
        super().__init__(config)
        self.llm_cache = llm_cache

    @cached_property
    def chat(self) -> BaseChatModel:
        base = Components.chat.func(self)  # type: ignore[attr-defined]
        self._cached_chat = with_llm_cache(base, self.llm_cache)
        return self._cached_chat

    def owns_chat(self) -> bool:
        """Whether the chat model in use came from ``models.*`` (also through the cache)."""
        chat = vars(self).get("chat")
        return (chat is not None and chat is vars(self).get("_cached_chat")) or super().owns_chat()

    @cached_property
    def paragraph_resolver(self) -> Callable[[str], str | None]:
        """chunk id → the ``paragraph_id`` / ``doc_id`` in its metadata (None if unknown)."""
        state: dict[str, bool] = {"broken": False}

        def resolve(chunk_id: str) -> str | None:
            if state["broken"]:
                return None
            try:
                chunk = self.store.chunk(chunk_id)
            except RCAError:
                state["broken"] = True  # no collection: nothing to resolve against
                return None
            except (KeyError, IndexError):
                return None
            value = chunk.metadata.get("paragraph_id") or chunk.metadata.get("doc_id")
            return str(value) if value else None

        return resolve
