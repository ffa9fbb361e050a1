"""The LLM calls of GRADE's pipeline: greedy replies and Yes/No judgements, cached per step.

Every call goes through :func:`~rag_complexity_agents.models.calls.call_chat` and, when a
cache is given, through :meth:`~rag_complexity_agents.models.cache.LLMCallCache.memo` (keyed
by step, prompt, parameters and model identity), so an interrupted run resumes where it
stopped. Failures are counted, never raised, except a missing model or a model server that
is down, which no retry can fix.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import ModelCallError, ModelNotAvailable, ModelServerError
from ...models.cache import LLMCallCache, model_identity
from ...models.calls import call_chat
from ...models.structured import StructuredOutput, ask_yes_no
from .prompts import Messages

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


#: Errors that end the run: a missing model or a model server that is down.
FATAL = (ModelNotAvailable, ModelServerError)


class StepLLM:
    """Runs and caches the pipeline's LLM calls; counts calls and cache hits per step and
    adds every failure to ``skipped`` (``llm_error:<step>``, ``<step>_unparseable``)."""

    def __init__(
        self, chat: BaseChatModel, cache: LLMCallCache | None, skipped: Counter[str]
    ) -> None:
        self.chat = chat
        self.cache = cache
        self.skipped = skipped
        self.calls: Counter[str] = Counter()
        self.hits: Counter[str] = Counter()
        self._identity: str | None = None
        self._structured: StructuredOutput | None = None

    def _key(self, step: str, messages: Messages, **params: Any) -> str:
        if self._identity is None:
            self._identity = json.dumps(model_identity(self.chat), sort_keys=True, default=str)
        payload = json.dumps([step, messages, params, self._identity], ensure_ascii=False)
        return "grade:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def _run(
        self, step: str, key: str, compute: Callable[[], Any], valid: Callable[[Any], bool]
    ) -> Any:
        """The cached value of ``key``, else ``compute()`` counted as a call of ``step``."""

        def call() -> Any:
            self.calls[step] += 1
            try:
                return compute()
            except Exception as exc:
                if isinstance(exc, FATAL) and not isinstance(exc, ModelCallError):
                    raise  # no retry brings back a missing model or a server that is down
                self.skipped[f"llm_error:{step}"] += 1
                return None

        if self.cache is None:
            return call()
        entry = self.cache.memo(key, call, kind=f"grade.{step}", valid=valid)
        if entry.hit:
            self.hits[step] += 1
        return entry.value

    def generate(
        self,
        step: str,
        messages: Messages,
        *,
        max_tokens: int,
        stop: Sequence[str] | None = None,
    ) -> str | None:
        """Greedy reply text, or None (counted as ``llm_error:<step>``)."""
        key = self._key(step, messages, max_tokens=max_tokens, stop=list(stop or []))

        def reply() -> str:
            return call_chat(
                self.chat, messages, max_tokens=max_tokens, temperature=0.0, stop=stop
            ).text

        value = self._run(step, key, reply, lambda v: isinstance(v, str))
        return value if isinstance(value, str) else None

    def yes(self, step: str, messages: Messages) -> float | None:
        """P(yes) from next-token probabilities when the model offers them, else a Yes/No
        reply (a structured one when the model has structured output; 1.0 / 0.0); None when
        neither works (counted)."""
        key = self._key(step, messages, judge="yes")
        unparseable = False

        def judge() -> float | None:
            nonlocal unparseable
            probability = getattr(self.chat, "yes_probability", None)
            if callable(probability):
                return float(probability(messages))
            if self._structured is None:
                self._structured = StructuredOutput(self.chat)
            verdict = ask_yes_no(self._structured, messages, kind=f"{step}_judge", max_tokens=3)
            unparseable = verdict is None
            return None if verdict is None else float(verdict)

        value = self._run(step, key, judge, lambda v: isinstance(v, int | float))
        if unparseable:
            self.skipped[f"{step}_unparseable"] += 1
        return None if value is None else float(value)
