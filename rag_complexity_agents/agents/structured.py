"""Structured output through the user's chat model, with text + parse-and-repair as the
fallback, and what a run's chat model can and cannot do (for the trace).

A chat model whose class implements ``with_structured_output`` or ``bind_tools`` itself
(``ChatOllama``: JSON schema; ``ChatOpenAI``, ``ChatAnthropic``: tool calling / JSON schema)
answers a loop step as a typed object (:class:`SelfAskMove`, :class:`ShortAnswer`). When the
model does not implement it (our llama.cpp model, fakes), when ``agents.structured_output`` is
``off``, or when a structured call fails or returns nothing usable, the step is asked as text
and parsed by the loop's lenient parser, which retries once with a format reminder (repair).
A context that saw a structured call fail stops trying, so a model that ignores the schema
costs one extra call per run context, not one per step.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from langchain_core.language_models.chat_models import BaseChatModel
from pydantic import BaseModel, Field

from ..errors import RCAError
from ..models.calls import ChatReply, call_chat, reply_text, with_knobs
from ..models.llamacpp import LlamaCppChatModel, MessagesInput, to_messages
from .steps import Update, costs

if TYPE_CHECKING:
    from .context import AgentContext
    from .state import AgentState

S = TypeVar("S", bound=BaseModel)

STRUCTURE_TOKENS = 48
"""Tokens added to a step's budget for the JSON / tool-call syntax around the content."""


class SelfAskMove(BaseModel):
    """The next line of a Self-Ask scratchpad."""

    kind: Literal["follow_up", "final"] = Field(
        description="'follow_up' to look up one more simple question; 'final' once the "
        "intermediate answers are enough to answer the question"
    )
    text: str = Field(description="The follow-up question, or the short final answer")


class ShortAnswer(BaseModel):
    """The answer to a question from the given passages."""

    answer: str = Field(description="The answer in a few words, or 'unknown'")


def supports_structured_output(chat: BaseChatModel) -> bool:
    """Whether ``chat``'s class implements structured output itself (not only the base
    class's default, which needs ``bind_tools``)."""
    kind = type(chat)
    return (
        kind.with_structured_output is not BaseChatModel.with_structured_output
        or kind.bind_tools is not BaseChatModel.bind_tools
    )


class StructuredOutput:
    """Per run context: whether loop steps ask the chat model for structured output, and
    why not when they do not."""

    def __init__(self, chat: BaseChatModel, setting: str) -> None:
        self.chat = chat
        self._lock = threading.Lock()
        self.reason: str | None = None
        if setting == "off":
            self.reason = "agents.structured_output is 'off'"
        elif not supports_structured_output(chat):
            self.reason = f"{type(chat).__name__} has no structured output"

    @property
    def enabled(self) -> bool:
        return self.reason is None

    def note(self) -> str:
        """One line for the trace."""
        if self.enabled:
            return f"structured output: {type(self.chat).__name__}.with_structured_output"
        return f"structured output: text + parse-and-repair ({self.reason})"

    def call(
        self, messages: MessagesInput, schema: type[S], *, max_tokens: int
    ) -> tuple[S | None, ChatReply | None, str | None]:
        """(object, reply, failure): the step as a ``schema`` object, or None with the reason
        it failed (then this context stops asking for structured output). ``reply`` is the
        raw reply (for the trace and token counts) when the model sent one."""
        if not self.enabled:
            return None, None, self.reason
        model, _ = with_knobs(self.chat, max_tokens=max_tokens + STRUCTURE_TOKENS)
        reply: ChatReply | None = None
        try:
            runnable = model.with_structured_output(schema, include_raw=True)
            out: Any = runnable.invoke(to_messages(messages))
            raw = out.get("raw")
            usage = getattr(raw, "usage_metadata", None) or {}
            parsed = out.get("parsed")
            text = reply_text(raw) if raw is not None else ""
            if not text and isinstance(parsed, BaseModel):
                text = parsed.model_dump_json()
            reply = ChatReply(
                text, int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
            )
            if isinstance(parsed, schema):
                return parsed, reply, None
            failure = f"unparsable structured reply ({out.get('parsing_error')})"
        except RCAError:
            raise
        except Exception as exc:  # NotImplementedError, a backend that rejects the schema, …
            failure = f"{type(exc).__name__}: {str(exc)[:200]}"
        with self._lock:
            self.reason = failure
        return None, reply, failure


def model_notes(ctx: AgentContext) -> list[str]:
    """What the run's chat model cannot do and how the run makes up for it (for the trace):
    structured output, and ASU's m samples in one prompt evaluation (llama.cpp's KV cache)
    or m separate calls."""
    notes = [ctx.structured.note()]
    if ctx.strategy == "sunar":
        m = ctx.config.asu.m
        if isinstance(ctx.chat, LlamaCppChatModel):
            notes.append(f"ASU: {m} samples per batch from one prompt evaluation (KV cache)")
        else:
            notes.append(
                f"ASU: {m} separate calls per batch ({type(ctx.chat).__name__} cannot sample "
                "several continuations of one evaluated prompt)"
            )
    return notes


def structured_messages(messages: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """``messages`` with the last human turn asking for the fields instead of a text line."""
    out = list(messages)
    role, text = out[-1]
    out[-1] = (role, text + "\n\nReply with the fields of the requested structure only.")
    return out


def ask_step(
    ctx: AgentContext,
    state: AgentState,
    messages: Sequence[tuple[str, str]],
    *,
    max_tokens: int,
    stop: Sequence[str] | None = None,
    schema: type[S] | None = None,
) -> tuple[S | None, ChatReply, Update]:
    """One loop step's chat call: a ``schema`` object when the context uses structured
    output and the model gives one, else the text reply for the loop's parser. Returns
    (object or None, the reply, the state update with the costs of every call made and, after
    a failed structured call, a note saying the step fell back to text)."""
    update: Update = {}
    if schema is not None and ctx.structured.enabled:
        obj, reply, failure = ctx.structured.call(
            structured_messages(messages), schema, max_tokens=max_tokens
        )
        if obj is not None and reply is not None:
            return obj, reply, costs(state, reply)
        if reply is not None:
            update = costs(state, reply)
        note = f"structured output failed ({failure}); text + parse-and-repair from now on"
        update["notes"] = [*(state.get("notes") or []), note]
    text_reply = call_chat(ctx.chat, list(messages), max_tokens=max_tokens, stop=stop)
    counted: Any = {**state, **update}  # the state after the structured call's costs
    update.update(costs(counted, text_reply))
    return None, text_reply, update


__all__ = [
    "STRUCTURE_TOKENS",
    "SelfAskMove",
    "ShortAnswer",
    "StructuredOutput",
    "ask_step",
    "model_notes",
    "structured_messages",
    "supports_structured_output",
]
