"""Follow-up prompt: a chat turn that leans on earlier turns becomes one standalone question."""

from __future__ import annotations

from collections.abc import Sequence

SYSTEM = (
    "You turn the last message of a conversation into a question that can be understood on "
    "its own: replace pronouns and vague references with the names they stand for, keep "
    "everything else. If it already stands on its own, repeat it unchanged. Reply with the "
    "question only."
)

MAX_TURN_CHARS = 600
"""Characters kept of each earlier turn (the recent ones matter; long answers are cut)."""


def messages(history: Sequence[tuple[str, str]], last: str) -> list[tuple[str, str]]:
    """The prompt for ``last`` after ``history`` ((speaker, text) turns, oldest first)."""
    lines = [f"{speaker}: {text[:MAX_TURN_CHARS]}" for speaker, text in history]
    conversation = "\n".join(lines)
    return [
        ("system", SYSTEM),
        ("human", f"Conversation:\n{conversation}\n\nLast message: {last}\nStandalone question:"),
    ]
