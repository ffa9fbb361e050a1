"""Prompt for single-step retrieve-then-answer."""

from __future__ import annotations

from collections.abc import Sequence

from ...types import ScoredDoc

SYSTEM = (
    "You answer questions using the numbered passages provided. Reply with the answer only: "
    "a name, date, number or short phrase, with no explanation. If the passages do not "
    "contain the answer, give your best guess."
)

QUOTE_SYSTEM = (
    "You answer questions using the numbered passages provided. First write 'Evidence:' and "
    "copy the words of one passage that answer the question. Then write 'Answer:' and the "
    "answer alone: a name, date, number or short phrase. If the passages do not contain the "
    "answer, give your best guess."
)
"""The answer prompt that quotes its evidence first (``agents.quote_evidence``)."""


def format_passages(docs: Sequence[ScoredDoc], *, max_chars: int = 700) -> str:
    lines = []
    for number, doc in enumerate(docs, start=1):
        title = f"{doc.chunk.title}: " if doc.chunk.title else ""
        text = doc.text if len(doc.text) <= max_chars else doc.text[:max_chars] + " …"
        lines.append(f"[{number}] {title}{text}")
    return "\n".join(lines)


ECHO = "the question is about it. Name what it asks for."
"""Why an answer that only repeats what the question names is ruled out."""


def user_message(
    question: str,
    docs: Sequence[ScoredDoc],
    *,
    max_chars: int = 700,
    ruled_out: str = "",
    why: str = ECHO,
) -> str:
    """The passages and the question; ``ruled_out``: an answer the model gave before, which
    it is told to avoid, and ``why`` (by default: it only repeats what the question names)."""
    passages = format_passages(docs, max_chars=max_chars)
    note = f'\n(Not "{ruled_out}": {why})' if ruled_out else ""
    return f"Passages:\n{passages}\n\nQuestion: {question}{note}\nAnswer:"
