"""The short answer in a reader's reply (single-step RAG is the ``single_step`` pipeline,
:mod:`.baselines`)."""

from __future__ import annotations

import re

from ..text import as_text

_ANSWER_PREFIX = re.compile(r"^\s*(final\s+)?answer\s*[:\-]\s*", re.IGNORECASE)


def extract_short_answer(reply: str) -> str:
    """First non-empty line of a reply, without an 'Answer:' prefix or wrapping quotes (in
    the first :data:`~.parsers.MAX_CHARS` characters)."""
    for line in as_text(reply).strip().splitlines():
        line = _ANSWER_PREFIX.sub("", line).strip().strip("\"'*` ").rstrip(".").strip()
        if line:
            return line
    return ""
