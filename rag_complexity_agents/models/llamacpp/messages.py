"""Chat messages: what callers may pass (:data:`MessagesInput`), a reply's text and the
chat-template dicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)

from .tools import tool_call_text

#: A string (one user turn) or a sequence of LangChain message-likes.
MessagesInput = str | Sequence[BaseMessage | tuple[str, str] | dict[str, Any] | str]


def to_messages(messages: MessagesInput) -> list[BaseMessage]:
    """A string (one user turn) or any LangChain message-like sequence → messages."""
    if isinstance(messages, str):
        return [HumanMessage(content=messages)]
    return convert_to_messages(list(messages))


def reply_text(message: Any) -> str:
    """The text of a chat reply: a message, its content, or a list of content blocks."""
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    return "".join(
        b if isinstance(b, str) else str(b.get("text", ""))
        for b in content
        if isinstance(b, str) or b.get("type", "text") == "text"
    )


def role_of(message: BaseMessage) -> str:
    """The chat-template role of a message (``system``, ``user``, ``assistant``, ``tool``…)."""
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage | FunctionMessage):
        return "tool"
    if isinstance(message, ChatMessage):
        return message.role
    return "user"


def template_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """``{"role", "content"}`` dicts for a GGUF chat template; content blocks become text and
    an assistant's tool calls the JSON lines it wrote them as (:mod:`.tools`)."""
    dicts = []
    for message in messages:
        content = reply_text(message)
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = [tool_call_text(call) for call in message.tool_calls]
            content = "\n".join([content, *calls] if content else calls)
        dicts.append({"role": role_of(message), "content": content})
    return dicts
