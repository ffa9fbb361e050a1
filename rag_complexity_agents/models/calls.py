"""The one way this package calls a chat model.

Every caller (loops, ASU, MER, judges, GRADE, RRCP, integrations) goes through
:func:`call_chat` / :func:`sample_answers`, so that generation knobs, stop sequences, reply
flattening, token accounting and error translation exist once:

* **Knobs the way the backend takes them.** Our llama.cpp model takes ``max_tokens`` /
  ``temperature`` / ``seed`` per call. Most LangChain chat models only take them as fields
  (``ChatOllama`` rejects unknown call arguments and calls the length ``num_predict``), so
  they are called on a copy with the matching field set; a model with neither gets them as
  call arguments.
* **Text.** A reply's content (a string or a list of content blocks) is flattened to text,
  and a reasoning model's ``<think>…</think>`` block before the answer is dropped
  (:func:`strip_reasoning`).
* **Usage.** Input/output tokens come from ``usage_metadata`` when the model reports it.
* **Errors.** Our own errors pass through; anything else the backend raises becomes a
  :class:`~rag_complexity_agents.errors.ModelCallError` that says what to check (for a
  server that cannot be reached: which host).
* **Notes.** What the run should know about a call (a prompt longer than an Ollama model's
  context, a reply cut inside its reasoning) is recorded once per text with
  :func:`record_note` into the innermost :func:`call_notes` block, which the loop scaffold
  opens around every graph node and adds to the run's notes.
* **Cancellation.** Every call first checks that its run was not cancelled
  (:func:`check_cancelled`, under the event of :func:`cancel_on`), so a cancelled run's
  thread stops before its next model call.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage

from ..errors import ModelCallError, RCAError, RunCancelled
from .chat import connection_hint, ollama_context_note
from .llamacpp import LlamaCppChatModel, MessagesInput, to_messages
from .llamacpp.messages import reply_text

_LENGTH_FIELDS = ("num_predict", "max_tokens", "max_new_tokens")

_NOTES: ContextVar[list[str] | None] = ContextVar("rca_call_notes", default=None)
_CANCEL: ContextVar[threading.Event | None] = ContextVar("rca_cancel", default=None)


@contextmanager
def cancel_on(event: threading.Event) -> Iterator[threading.Event]:
    """Model calls made inside the block (and in threads that copy its context, such as a
    nested graph's nodes) raise RunCancelled once ``event`` is set: a cancelled run stops
    before its next model call."""
    token = _CANCEL.set(event)
    try:
        yield event
    finally:
        _CANCEL.reset(token)


def check_cancelled() -> None:
    """Raise RunCancelled when the current run was cancelled (:func:`cancel_on`)."""
    event = _CANCEL.get()
    if event is not None and event.is_set():
        raise RunCancelled("the run was cancelled; it stopped before its next model call")


@contextmanager
def call_notes() -> Iterator[list[str]]:
    """A fresh list of the notes recorded by the calls made inside the block."""
    notes: list[str] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


def record_note(note: str | None) -> None:
    """Add ``note`` to the current :func:`call_notes` block (once; nothing outside one)."""
    notes = _NOTES.get()
    if note and notes is not None and note not in notes:
        notes.append(note)


def check_prompt(chat: BaseChatModel, messages: Sequence[BaseMessage]) -> None:
    """Record a note when the prompt is longer than the context ``chat`` asks its server for
    (an Ollama model without a large enough ``num_ctx``)."""
    record_note(ollama_context_note(chat, sum(len(reply_text(m)) for m in messages)))


_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"
UNFINISHED_REASONING = (
    "a reply ended inside the model's <think> reasoning, so it held no answer: turn the "
    "model's reasoning off (e.g. ChatOllama(reasoning=False)) or use a model without it"
)


def strip_reasoning(text: str) -> str:
    """``text`` without a reasoning model's ``<think>…</think>`` block before the answer
    (also when the template opened the block, so only ``</think>`` is in the reply); a reply
    that ends inside the block has no answer yet and gives "" (noted for the run). Text
    without the tags is returned as it is."""
    end = text.rfind(_THINK_CLOSE)
    if end >= 0:
        return text[end + len(_THINK_CLOSE) :].lstrip()
    if text.lstrip().startswith(_THINK_OPEN):
        record_note(UNFINISHED_REASONING)
        return ""
    return text


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
    check_cancelled()
    model, kwargs = with_knobs(chat, max_tokens=max_tokens, temperature=temperature, seed=seed)
    if stop:
        kwargs["stop"] = list(stop)
    if grammar is not None and accepts_grammar(chat):
        kwargs["grammar"] = grammar
    prompt = to_messages(messages)
    check_prompt(chat, prompt)
    try:
        message = model.invoke(prompt, **kwargs)
    except RCAError:
        raise
    except Exception as exc:
        hint = connection_hint(chat, exc)
        raise ModelCallError(
            f"the chat model failed ({type(exc).__name__}: {exc}); "
            + (
                hint
                or "check models.chat, that the model is installed (rca info) or that its "
                "server is running"
            )
        ) from exc
    usage = getattr(message, "usage_metadata", None) or {}
    return ChatReply(
        strip_reasoning(reply_text(message)),
        int(usage.get("input_tokens", 0)),
        int(usage.get("output_tokens", 0)),
    )


def sample_answers(
    chat: BaseChatModel,
    messages: MessagesInput,
    m: int,
    *,
    temperature: float,
    seed: int,
    max_tokens: int | None = None,
    stop: Sequence[str] | None = None,
) -> list[str]:
    """m sampled answers (sample i uses seed ``seed + i``), each cut at the first of
    ``stop``.

    A :class:`LlamaCppChatModel` evaluates the prompt once and samples m continuations;
    other chat models get m calls with the sample's temperature and seed.
    """
    if m < 1:
        raise ValueError("m must be at least 1")
    check_cancelled()
    if isinstance(chat, LlamaCppChatModel):
        cut: dict[str, Any] = {"stop": list(stop)} if stop else {}  # no key: cache keys hold
        return chat.sample(
            messages, m, temperature=temperature, seed=seed, max_tokens=max_tokens, **cut
        )
    msgs: Sequence[BaseMessage] = to_messages(messages)
    return [
        call_chat(
            chat, msgs, max_tokens=max_tokens, temperature=temperature, seed=seed + i, stop=stop
        ).text
        for i in range(m)
    ]


def sampling_calls(chat: BaseChatModel, m: int) -> int:
    """The LLM calls that :func:`sample_answers` makes for m samples: one prompt evaluation
    on llama.cpp, m calls on other models."""
    return 1 if isinstance(chat, LlamaCppChatModel) else m


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
