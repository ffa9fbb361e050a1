"""The one way this package calls a chat model.

Every caller (loops, ASU, MER, judges, GRADE, RRCP, integrations) goes through
:func:`call_chat` / :func:`sample_answers`, so that generation knobs, stop sequences, reply
flattening, token accounting and error translation exist once:

* **Knobs the way the backend takes them.** Our llama.cpp model takes ``max_tokens`` /
  ``temperature`` / ``seed`` per call. Most LangChain chat models only take them as fields
  (``ChatOllama`` rejects unknown call arguments and calls the length ``num_predict``), so
  they are called on a copy with the matching field set; a model with neither gets them as
  call arguments.
* **Text.** A reply's content (a string or a list of content blocks) is flattened to text.
* **Usage.** Input/output tokens come from ``usage_metadata`` when the model reports it.
* **Errors.** Our own errors pass through; anything else the backend raises becomes a
  :class:`~rag_complexity_agents.errors.ModelCallError` that says what to check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage

from ..errors import ModelCallError, RCAError
from .llamacpp import LlamaCppChatModel, MessagesInput, to_messages
from .llamacpp.messages import reply_text

_LENGTH_FIELDS = ("num_predict", "max_tokens", "max_new_tokens")


@dataclass(frozen=True, slots=True)
class ChatReply:
    """A chat call's text and its token usage (0 when the model does not report it)."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0


def takes_call_knobs(chat: BaseChatModel) -> bool:
    """True when ``chat`` takes max_tokens / temperature / seed as call arguments."""
    return isinstance(chat, LlamaCppChatModel)


def accepts_grammar(chat: BaseChatModel) -> bool:
    """True when ``chat`` decodes a text reply under a GBNF grammar given per call."""
    return isinstance(chat, LlamaCppChatModel)


def with_knobs(
    chat: BaseChatModel,
    *,
    max_tokens: int | None = None,
    temperature: float | None = None,
    seed: int | None = None,
) -> tuple[BaseChatModel, dict[str, Any]]:
    """(model, call kwargs) that apply the knobs the way ``chat`` takes them."""
    knobs = {
        k: v
        for k, v in (("max_tokens", max_tokens), ("temperature", temperature), ("seed", seed))
        if v is not None
    }
    if not knobs or takes_call_knobs(chat):
        return chat, knobs
    fields = getattr(type(chat), "model_fields", {})
    update: dict[str, Any] = {}
    kwargs: dict[str, Any] = {}
    for name, value in knobs.items():
        if name == "max_tokens":
            field = next((n for n in _LENGTH_FIELDS if n in fields), None)
        else:
            field = name if name in fields else None
        if field is None:
            kwargs[name] = value
        else:
            update[field] = value
    return (chat.model_copy(update=update) if update else chat), kwargs


ANSWER_LINE_CHARS = 120
"""Longest answer line a grammar allows (a name, a date, a short phrase)."""


def line_grammar(prefix: str, max_chars: int = ANSWER_LINE_CHARS) -> str:
    """GBNF of a one-line reply: ``prefix``, a space, 1 to ``max_chars`` characters other
    than a line break, and the line break the model may end it with (a loop's fixed answer
    line, e.g. Self-Ask's final line)."""
    literal = prefix.replace("\\", "\\\\").replace('"', '\\"')
    return f'root ::= "{literal} " [^\\n]{{1,{max_chars}}} "\\n"?'


def call_chat(
    chat: BaseChatModel,
    messages: MessagesInput,
    *,
    max_tokens: int | None = None,
    temperature: float | None = None,
    seed: int | None = None,
    stop: Sequence[str] | None = None,
    grammar: str | None = None,
) -> ChatReply:
    """One chat call with per-call knobs; returns the reply text and its token usage.

    ``grammar`` (a GBNF text) constrains the reply of a model that :func:`accepts_grammar`;
    other models get the call without it and rely on the prompt.

    Raises :class:`~rag_complexity_agents.errors.ModelCallError` when the backend fails with
    anything other than one of our own errors (which pass through unchanged).
    """
    model, kwargs = with_knobs(chat, max_tokens=max_tokens, temperature=temperature, seed=seed)
    if stop:
        kwargs["stop"] = list(stop)
    if grammar is not None and accepts_grammar(chat):
        kwargs["grammar"] = grammar
    try:
        message = model.invoke(to_messages(messages), **kwargs)
    except RCAError:
        raise
    except Exception as exc:
        raise ModelCallError(
            f"the chat model failed ({type(exc).__name__}: {exc}); check models.chat, that "
            "the model is installed (rca info) or that its server is running"
        ) from exc
    usage = getattr(message, "usage_metadata", None) or {}
    return ChatReply(
        reply_text(message), int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    )


def sample_answers(
    chat: BaseChatModel,
    messages: MessagesInput,
    m: int,
    *,
    temperature: float,
    seed: int,
    max_tokens: int | None = None,
) -> list[str]:
    """m sampled answers (sample i uses seed ``seed + i``).

    A :class:`LlamaCppChatModel` evaluates the prompt once and samples m continuations;
    other chat models get m calls with the sample's temperature and seed.
    """
    if m < 1:
        raise ValueError("m must be at least 1")
    if isinstance(chat, LlamaCppChatModel):
        return chat.sample(messages, m, temperature=temperature, seed=seed, max_tokens=max_tokens)
    msgs: Sequence[BaseMessage] = to_messages(messages)
    return [
        call_chat(chat, msgs, max_tokens=max_tokens, temperature=temperature, seed=seed + i).text
        for i in range(m)
    ]


_YES = frozenset({"yes", "true", "consistent", "valid"})
_NO = frozenset({"no", "false", "inconsistent", "invalid"})
_YES_NO_WORD = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def parse_yes_no(text: str) -> bool | None:
    """A judge's Yes/No reply: its first word when that is a yes/no word (or a synonym such
    as true/false), else the first standalone 'yes' or 'no' in the first 2,000 characters;
    None when neither is there (also for a non-string)."""
    head = text[:2000] if isinstance(text, str) else ""
    words = re.sub(r"[^a-z]", " ", head[:64].lower()).split()
    if words and words[0] in _YES:
        return True
    if words and words[0] in _NO:
        return False
    match = _YES_NO_WORD.search(head)
    return None if match is None else match.group(1).lower() == "yes"


__all__ = [
    "ANSWER_LINE_CHARS",
    "ChatReply",
    "accepts_grammar",
    "call_chat",
    "line_grammar",
    "parse_yes_no",
    "reply_text",
    "sample_answers",
    "takes_call_knobs",
    "with_knobs",
]
