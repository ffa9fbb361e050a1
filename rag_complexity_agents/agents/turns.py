"""Chat turns: the question of a run given ``{"messages": [...]}`` instead of
``{"question": ...}``, and the messages a run appends.

The last human message is the question. When earlier turns exist, a follow-up ("And where was
he born?") is rewritten as a standalone question with one chat call first, since retrieval
needs the names the follow-up leaves out.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    HumanMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, LLMResult
from langchain_core.runnables.config import ensure_config, get_callback_manager_for_config
from langgraph.constants import TAG_NOSTREAM

from ..errors import InputError
from ..models.calls import ChatReply
from .context import AgentContext
from .prompts import followup
from .state import AgentState
from .structured import ask_step

HISTORY_TURNS = 6
"""Earlier turns (human and AI messages) the follow-up rewrite reads."""


def message_text(message: BaseMessage) -> str:
    """The text of a message (text parts of a multi-part content joined)."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = [p if isinstance(p, str) else str(p.get("text", "")) for p in content]
    return " ".join(part for part in parts if part)


def _turns(messages: Sequence[AnyMessage]) -> list[tuple[str, str]]:
    speakers = {"human": "User", "ai": "Assistant"}
    return [
        (speakers[m.type], message_text(m))
        for m in messages
        if m.type in speakers and message_text(m).strip()
    ]


def question_of(state: AgentState, ctx: AgentContext) -> tuple[str, ChatReply | None, bool]:
    """(question, the rewrite's reply or None, asked by messages). The last message, when it
    is a human one, is the question (rewritten when earlier turns exist); else
    ``state["question"]``; neither is an InputError that names both inputs."""
    messages = list(state.get("messages") or [])
    if messages and messages[-1].type == "human":
        last = message_text(messages[-1]).strip()
        history = _turns(messages[:-1])[-HISTORY_TURNS:]
        if not history or not last:
            return last, None, True
        _, reply, _ = ask_step(
            ctx, state, followup.messages(history, last), kind="followup", max_tokens=64
        )
        rewritten = reply.text.strip().splitlines()[0].strip() if reply.text.strip() else ""
        return rewritten or last, reply, True
    question = state.get("question")
    if question is None:
        raise InputError(
            "pass the question as {'question': '...'} or as {'messages': [...]} ending with "
            "a human message"
        )
    return question, None, False


ANSWER_TAG = "rca:answer"
"""Tag of the final answer's message stream (:func:`streamed_answer`)."""
_PIECES = re.compile(r"\s*\S+")


def streamed_answer(question: str, answer: str, hidden_tags: Sequence[str] = ()) -> AIMessage:
    """The run's final answer as an ``AIMessage``, first streamed piece by piece (a word and
    the space before it) to the callbacks of the current run as a chat-model run tagged
    :data:`ANSWER_TAG`, so LangGraph's ``stream_mode="messages"`` shows it as chunks of one
    message. The stream starts once the answer is final: the abstention and MER checks may
    replace what a model call generated, and a chat UI must never show text the run then
    takes back. ``hidden_tags`` (the node's own, e.g. ``nostream``) are not passed on."""
    reply = AIMessage(content=answer, id=f"run-{uuid.uuid4()}")
    manager = get_callback_manager_for_config(ensure_config())
    if not manager.handlers:
        return reply
    shown = manager.copy()
    shown.remove_tags([TAG_NOSTREAM, *hidden_tags])
    shown.add_tags([ANSWER_TAG])
    (run,) = shown.on_chat_model_start(
        {"name": "rca-answer"}, [[HumanMessage(content=question)]], name="answer"
    )
    for piece in _PIECES.findall(answer):
        message = AIMessageChunk(content=piece, id=reply.id)
        run.on_llm_new_token(piece, chunk=ChatGenerationChunk(message=message))
    run.on_llm_end(LLMResult(generations=[[ChatGeneration(message=reply)]]))
    return reply


def appended(reply: AIMessage, question: str, *, by_messages: bool) -> list[Any]:
    """The messages a run adds to ``messages``: the answer, after the question when it was
    asked as ``{"question": ...}`` (so the thread's history reads as a chat)."""
    return [reply] if by_messages else [HumanMessage(content=question), reply]
