"""Structured output through any chat model, with text + parse-and-repair as the fallback,
and the count of format failures.

**Structured output.** A chat model whose class implements ``with_structured_output`` or
``bind_tools`` itself answers a structured step as a typed object (:mod:`.schemas`): our
llama.cpp model decodes under a grammar made from the JSON schema, ``ChatOllama`` sends the
schema as ``format``, OpenAI/Anthropic models use tool calling or JSON schema. A model that
does not implement it (a plain ``BaseChatModel``, fakes), a setting of ``off``, or a structured
call that fails or returns nothing usable sends the step as text, read by the step's lenient
parser. A :class:`StructuredOutput` that saw a structured call fail stops trying, so a model
that ignores the schema costs one extra call per holder (a run context, a judge), not one per
step.

**Format failures.** A *format failure* is one chat reply of a structured step that could not
be read as the step's structure: a structured reply that did not validate against the schema
(or a structured call that raised), or a text reply the step's parser found nothing usable
in. Every such reply counts, also one that a later retry repaired (the first try's failure
is still a failure), so zero means every reply had the expected shape. Failures are recorded
per step kind with :func:`record_format_failure` into the tally of the innermost
:func:`format_failures` block (a context variable), which the loop scaffold opens around
every graph node; outside such a block they are not counted.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from langchain_core.language_models.chat_models import BaseChatModel
from pydantic import BaseModel

from ..errors import RCAError
from .calls import (
    ChatReply,
    accepts_grammar,
    call_chat,
    check_prompt,
    parse_yes_no,
    strip_reasoning,
    with_knobs,
)
from .llamacpp import LlamaCppChatModel, MessagesInput, to_messages
from .llamacpp.messages import reply_text
from .schemas import YesNo, format_instruction, json_schema_of, json_token_bound

S = TypeVar("S", bound=BaseModel)

STRUCTURE_TOKENS = 48
"""Tokens added to a step's budget for the JSON / tool-call syntax around the content."""

_TALLY: ContextVar[Counter[str] | None] = ContextVar("rca_format_failures", default=None)


def record_format_failure(kind: str, count: int = 1) -> None:
    """Count ``count`` format failures of step kind ``kind`` in the current tally."""
    tally = _TALLY.get()
    if tally is not None and count > 0:
        tally[kind] += count


@contextmanager
def format_failures() -> Iterator[Counter[str]]:
    """A fresh tally of format failures per step kind for the calls made inside the block."""
    tally: Counter[str] = Counter()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


def supports_structured_output(chat: BaseChatModel) -> bool:
    """Whether ``chat``'s class implements structured output itself (not only the base
    class's default, which needs ``bind_tools``)."""
    kind = type(chat)
    own = getattr(kind, "with_structured_output", None)
    tools = getattr(kind, "bind_tools", None)
    return (own is not None and own is not BaseChatModel.with_structured_output) or (
        tools is not None and tools is not BaseChatModel.bind_tools
    )


def structured_messages(messages: MessagesInput, schema: Any) -> list[Any]:
    """``messages`` with the last turn asking for the schema's JSON object instead of text."""
    out: list[Any] = list(to_messages(messages))
    last = out[-1]
    instruction = format_instruction(schema)
    out[-1] = last.model_copy(update={"content": f"{reply_text(last)}\n\n{instruction}"})
    return out


def structured_budget(schema: Any, max_tokens: int) -> int:
    """Tokens for a structured reply: the step's budget plus the JSON syntax, and at least
    what any reply the schema allows needs (so a bounded schema is never cut off)."""
    bound = json_token_bound(json_schema_of(schema)) or 0
    return max(max_tokens + STRUCTURE_TOKENS, bound)


def _with_fields(chat: BaseChatModel, **knobs: Any) -> BaseChatModel:
    """``chat`` with the knobs set as fields (a structured-output runnable does not pass call
    arguments on to the model); knobs the model has no field for are left out."""
    model, kwargs = with_knobs(chat, **knobs)
    fields = getattr(type(model), "model_fields", {})
    update = {k: v for k, v in kwargs.items() if k in fields}
    return model.model_copy(update=update) if update else model


def parse_after_reasoning(schema: type[S], text: str) -> S | None:
    """A reasoning model's structured reply read past its ``<think>…</think>`` block (the
    JSON after it), or None when ``text`` has no such block or the rest does not validate."""
    rest = strip_reasoning(text)
    if rest == text or not rest:
        return None
    try:
        return schema.model_validate_json(rest.strip().removeprefix("```json").strip("`\n "))
    except ValueError:
        return None


class StructuredOutput:
    """Whether a holder (a run context, a judge) asks its chat model for structured output,
    and why not when it does not."""

    def __init__(self, chat: BaseChatModel, setting: str = "auto") -> None:
        self.chat = chat
        self.setting = setting
        self._lock = threading.Lock()
        self.reason: str | None = None
        if setting == "off":
            self.reason = "agents.structured_output is 'off'"
        elif not supports_structured_output(chat):
            self.reason = f"{type(chat).__name__} has no structured output"
        elif setting == "auto" and isinstance(chat, LlamaCppChatModel):
            # Measured on the end-to-end tests with the packaged 0.5B: grammar-decoded steps
            # kept the format but lowered the answers (a ReAct run finished with an exemplar's
            # question, MER returned its schema's field description), so our in-process model
            # uses the grammar only when asked for ('on') until the benchmark says it pays.
            self.reason = "the packaged llama.cpp model uses its grammar only with 'on'"

    @property
    def enabled(self) -> bool:
        return self.reason is None

    def text_grammar(self, grammar: str) -> str | None:
        """``grammar`` (GBNF) for a text reply when the chat model takes one and structured
        output is not 'off', else None (the reply relies on the prompt)."""
        return grammar if self.setting != "off" and accepts_grammar(self.chat) else None

    def note(self) -> str:
        """One line for the trace."""
        if self.enabled:
            return f"structured output: {type(self.chat).__name__}.with_structured_output"
        return f"structured output: text + parse-and-repair ({self.reason})"

    def call(
        self,
        messages: MessagesInput,
        schema: type[S],
        *,
        kind: str,
        max_tokens: int,
        temperature: float | None = None,
    ) -> tuple[S | None, ChatReply | None, str | None]:
        """(object, reply, failure): the step as a ``schema`` object, or None with the reason
        it failed (then this holder stops asking for structured output). ``reply`` is the
        raw reply (for the trace and token counts) when the model sent one; a reply that did
        not validate is a format failure of step kind ``kind``. ``messages`` get the schema's
        field instruction (:func:`structured_messages`)."""
        if not self.enabled:
            return None, None, self.reason
        model = _with_fields(
            self.chat, max_tokens=structured_budget(schema, max_tokens), temperature=temperature
        )
        reply: ChatReply | None = None
        try:
            runnable = model.with_structured_output(schema, include_raw=True)
            prompt = structured_messages(messages, schema)
            check_prompt(self.chat, prompt)
            out: Any = runnable.invoke(prompt)
            raw = out.get("raw")
            usage = getattr(raw, "usage_metadata", None) or {}
            parsed = out.get("parsed")
            text = reply_text(raw) if raw is not None else ""
            if not isinstance(parsed, schema):
                parsed = parse_after_reasoning(schema, text) or parsed
            text = strip_reasoning(text)
            if not text and isinstance(parsed, BaseModel):
                text = parsed.model_dump_json()
            reply = ChatReply(
                text, int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
            )
            if isinstance(parsed, schema):
                return parsed, reply, None
            failure = f"unparsable structured reply ({out.get('parsing_error')})"
            record_format_failure(kind)
        except RCAError:
            raise
        except Exception as exc:  # NotImplementedError, a backend that rejects the schema, …
            failure = f"{type(exc).__name__}: {str(exc)[:200]}"
        with self._lock:
            self.reason = failure
        return None, reply, failure


def ask_choice(
    structured: StructuredOutput,
    messages: MessagesInput,
    schema: type[BaseModel],
    parse: Callable[[str], str | None],
    *,
    kind: str,
    max_tokens: int = 4,
    stop: Sequence[str] | None = None,
) -> str | None:
    """A judge's one-word verdict (``schema``'s ``answer`` field, e.g. yes / no), greedy: the
    structured object when the model gives one, else the text reply read by ``parse``; None
    when neither could be read. Each unreadable reply is a format failure of ``kind``."""
    obj, _, _ = structured.call(messages, schema, kind=kind, max_tokens=max_tokens, temperature=0.0)
    if obj is not None:
        return str(getattr(obj, "answer", "")) or None
    verdict = parse(
        call_chat(structured.chat, messages, max_tokens=max_tokens, temperature=0.0, stop=stop).text
    )
    if verdict is None:
        record_format_failure(kind)
    return verdict


def _yes_no_word(text: str) -> str | None:
    verdict = parse_yes_no(text)
    return None if verdict is None else ("yes" if verdict else "no")


def ask_yes_no(
    structured: StructuredOutput, messages: MessagesInput, *, kind: str, max_tokens: int = 4
) -> bool | None:
    """A yes/no judge's verdict through :func:`ask_choice` (:class:`~.schemas.YesNo`, or the
    text reply read by :func:`~.calls.parse_yes_no`); None when it could not be read."""
    word = ask_choice(structured, messages, YesNo, _yes_no_word, kind=kind, max_tokens=max_tokens)
    return None if word is None else word == "yes"
