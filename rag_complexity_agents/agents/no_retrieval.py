"""No retrieval: the chat model answers from its own knowledge (Adaptive-RAG's strategy A)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..types import RunResult
from .single_step import extract_short_answer

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

SYSTEM = (
    "Answer the question from what you know. Reply with the answer only: a name, date, "
    "number or short phrase, with no explanation. If you are unsure, give your best guess."
)


def user_message(question: str) -> str:
    return f"Question: {question}\nAnswer:"


def answer_no_retrieval(question: str, chat: BaseChatModel) -> RunResult:
    """One LLM call, no evidence; the trace has the same cost keys as the other strategies."""
    started = time.perf_counter()
    reply = chat.invoke([("system", SYSTEM), ("human", user_message(question))])
    usage = getattr(reply, "usage_metadata", None) or {}
    return RunResult(
        answer=extract_short_answer(str(reply.content)),
        trace={
            "strategy": "no_retrieval",
            "question": question,
            "evidence": [],
            "raw_reply": str(reply.content),
            "llm_calls": 1,
            "retrieval_calls": 0,
            "input_tokens": int(usage.get("input_tokens", 0)),
            "output_tokens": int(usage.get("output_tokens", 0)),
            "seconds": round(time.perf_counter() - started, 3),
        },
    )


__all__ = ["SYSTEM", "answer_no_retrieval", "user_message"]
