"""Chat turns: the question of a run given ``{"messages": [...]}`` instead of
``{"question": ...}``, and the messages a run appends.

The last human message is the question. When earlier turns exist, a follow-up ("And where was
he born?") is rewritten as a standalone question with one chat call first, since retrieval
needs the names the follow-up leaves out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage

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


def appended(question: str, answer: str, *, by_messages: bool) -> list[Any]:
    """The messages a run adds to ``messages``: the answer, after the question when it was
    asked as ``{"question": ...}`` (so the thread's history reads as a chat)."""
    reply = AIMessage(content=answer)
    return [reply] if by_messages else [HumanMessage(content=question), reply]
