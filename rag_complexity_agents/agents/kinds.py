"""The kind of answer a question asks for (a time, a place, a person, a number), read from its
opening words, and whether an answer plainly is not of that kind ("June 13, 2008" for "Where
did Tim Russert die?"). Pure functions, no model."""

from __future__ import annotations

import re
from typing import Literal

from ..text import normalize_answer

Kind = Literal["time", "place", "person", "number"]
KIND_NAMES: dict[Kind, str] = {
    "time": "a date or a year",
    "place": "a place",
    "person": "a person",
    "number": "a number",
}
"""How a re-asked prompt names the kind of answer wanted."""

_KINDS: tuple[tuple[Kind, re.Pattern[str]], ...] = (
    (
        "time",
        re.compile(
            r"^(?:when\b|(?:in |on |by )?(?:what|which) (?:year|date|day|month|decade|century)\b)"
        ),
    ),
    (
        "place",
        re.compile(
            r"^(?:where\b|(?:in |from |to |at )?(?:what|which) "
            r"(?:city|country|state|county|town|village|province|region|continent|nation)\b)"
        ),
    ),
    ("person", re.compile(r"^(?:who|whom)\b")),
    ("number", re.compile(r"^how (?:many|much|old|long)\b")),
)

_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
    "eighty ninety hundred thousand million billion trillion dozen half once twice several few "
    "many none"
)
_TIME_WORDS = frozenset(
    f"{_MONTHS} spring summer autumn fall winter century centuries decade decades bc bce ad ce "
    "circa c early mid late st nd rd th year years month months week weeks day days hour hours "
    "minute minutes night morning evening today yesterday tomorrow ago during after before "
    "since until war era age ages period reign dynasty times".split()
)
"""Words of a time ("the 1990s", "spring", "during the war", "the Middle Ages"): an answer to
"When ...?" with one of them, a digit or a number word is not flagged."""
_NUMBER = frozenset(_NUMBER_WORDS.split())
_ORDINAL = re.compile(r"^\d+(?:st|nd|rd|th|s)?$")


def asks_for(question: str) -> Kind | None:
    """The kind of answer a question's opening asks for: "time" (when, in what year),
    "place" (where, which city / country / ...), "person" (who), "number" (how many), or
    None when the opening does not say ("What is ...", "The city where ... is in which
    country?")."""
    opening = question.strip().lower()
    return next((kind for kind, pattern in _KINDS if pattern.match(opening)), None)


def _is_time(token: str) -> bool:
    return bool(_ORDINAL.match(token)) or token in _TIME_WORDS


def not_of_kind(answer: str, kind: Kind | None) -> bool:
    """Whether ``answer`` plainly is not an answer of ``kind``: only a date or a number for a
    place or a person ("June 13, 2008", "1941", "the 19th century"); no digit, month, season,
    century or number word for a time ("Paris" for "When ...") or a number (a length of time
    counts). An empty answer, or one whose kind cannot be told, is not flagged; callers leave
    out "unknown" and yes / no."""
    tokens = normalize_answer(answer).split()
    if kind is None or not tokens:
        return False
    if kind in ("place", "person"):
        return all(_is_time(t) or t in _NUMBER for t in tokens) and any(
            any(c.isdigit() for c in t) for t in tokens
        )
    return not any(_is_time(t) or t in _NUMBER or any(c.isdigit() for c in t) for t in tokens)
