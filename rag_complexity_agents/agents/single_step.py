"""The short answer in a reader's reply (single-step RAG is the ``single_step`` pipeline,
:mod:`.baselines`)."""

from __future__ import annotations

import re

from ..text import as_text

_ANSWER_PREFIX = re.compile(r"^\s*(final\s+)?answer\s*[:\-]\s*", re.IGNORECASE)
_ANSWER_MARK = re.compile(r"\banswer[ \t*]*:", re.IGNORECASE)
_EVIDENCE_LINE = re.compile(r"^[ \t*]*evidence[ \t*]*:", re.IGNORECASE)


def extract_short_answer(reply: str) -> str:
    """First non-empty line of a reply, without an 'Answer:' prefix or wrapping quotes (in
    the first :data:`~.parsers.MAX_CHARS` characters)."""
    for line in as_text(reply).strip().splitlines():
        line = _ANSWER_PREFIX.sub("", line).strip().strip("\"'*` ").rstrip(".").strip()
        if line:
            return line
    return ""


def quoted_answer(reply: str) -> str:
    """The answer of a reply that quotes its evidence first ('Evidence: ...' then 'Answer:
    ...'): what follows the last 'Answer:', else the first line that is not evidence."""
    text = as_text(reply)
    starts = [match.end() for match in _ANSWER_MARK.finditer(text)]
    if starts:
        return extract_short_answer(text[starts[-1] :])
    lines = [line for line in text.splitlines() if not _EVIDENCE_LINE.match(line)]
    return extract_short_answer("\n".join(lines))
