"""Single-step RAG: retrieve once, answer once (Adaptive-RAG's strategy B)."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from ..retrieval.first_stage import FirstStage
from ..types import RunResult
from .parsers import as_text
from .prompts import single_step as prompt

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

_ANSWER_PREFIX = re.compile(r"^\s*(final\s+)?answer\s*[:\-]\s*", re.IGNORECASE)


def extract_short_answer(reply: str) -> str:
    """First non-empty line of a reply, without an 'Answer:' prefix or wrapping quotes (in
    the first :data:`~.parsers.MAX_CHARS` characters)."""
    for line in as_text(reply).strip().splitlines():
        line = _ANSWER_PREFIX.sub("", line).strip().strip("\"'*` ").rstrip(".").strip()
        if line:
            return line
    return ""


def answer_single_step(
    question: str,
    first_stage: FirstStage,
    chat: BaseChatModel,
    *,
    k: int = 3,
    passage_chars: int = 700,
) -> RunResult:
    """Retrieve the top ``k`` passages for ``question`` and answer from them in one call."""
    started = time.perf_counter()
    docs = first_stage.search(question, k)
    messages = [
        ("system", prompt.SYSTEM),
        ("human", prompt.user_message(question, docs, max_chars=passage_chars)),
    ]
    reply = chat.invoke(messages)
    usage = getattr(reply, "usage_metadata", None) or {}
    answer = extract_short_answer(str(reply.content))
    return RunResult(
        answer=answer,
        trace={
            "strategy": "single_step",
            "question": question,
            "retrieval": {"first_stage": first_stage.name, "k": k},
            "evidence": [doc.to_trace() for doc in docs],
            "raw_reply": str(reply.content),
            "llm_calls": 1,
            "retrieval_calls": 1,
            "input_tokens": int(usage.get("input_tokens", 0)),
            "output_tokens": int(usage.get("output_tokens", 0)),
            "seconds": round(time.perf_counter() - started, 3),
        },
    )
