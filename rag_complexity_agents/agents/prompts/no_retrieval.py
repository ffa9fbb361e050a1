"""The prompt of the chat model answering alone (the ``no_retrieval`` pipeline, Adaptive-RAG's
strategy A)."""

from __future__ import annotations

SYSTEM = (
    "Answer the question from what you know. Reply with the answer only: a name, date, "
    "number or short phrase, with no explanation. If you are unsure, give your best guess."
)


def user_message(question: str) -> str:
    return f"Question: {question}\nAnswer:"
