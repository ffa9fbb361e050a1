"""Chat messages: what callers may pass (:data:`MessagesInput`) and the chat-template dicts."""

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

#: A string (one user turn) or a sequence of LangChain message-likes.
MessagesInput = str | Sequence[BaseMessage | tuple[str, str] | dict[str, Any] | str]


def to_messages(messages: MessagesInput) -> list[BaseMessage]:
    """A string (one user turn) or any LangChain message-like sequence → messages."""
    if isinstance(messages, str):
        return [HumanMessage(content=messages)]
    return convert_to_messages(list(messages))


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
    """``{"role", "content"}`` dicts for a GGUF chat template; content blocks become text."""
    # models.calls imports this package (for LlamaCppChatModel), so it is imported at use.
    from ..calls import reply_text

    return [{"role": role_of(m), "content": reply_text(m)} for m in messages]
