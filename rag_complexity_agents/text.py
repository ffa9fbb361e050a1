"""Text helpers shared across layers: answer normalisation, stop words, question validation."""

from __future__ import annotations

import re
import string
import unicodedata

from .errors import InputError

_STOPWORD_TEXT = """a an the of in on at to for from by with and or but is are was were be been
being do does did what which who whom whose when where why how that this these those it its as
into than then there their they he she his her him i you we our your not no s had has have"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())
"""English function words ignored when comparing the content of questions and passages."""

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    text = unicodedata.normalize("NFKC", text).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def validate_question(question: object, *, max_chars: int) -> str:
    """Return the stripped question or raise InputError saying what is wrong with it."""
    if not isinstance(question, str):
        raise InputError(f"a question must be a string, got {type(question).__name__}")
    stripped = question.strip()
    if not stripped:
        raise InputError("the question is empty; ask something, e.g. rca ask 'Who wrote Emma?'")
    if len(stripped) > max_chars:
        raise InputError(
            f"the question is {len(stripped):,} characters long; the limit is {max_chars:,} "
            "(config max_question_chars). Put long material into a collection with rca index "
            "and ask a short question about it."
        )
    printable = sum(ch.isprintable() or ch.isspace() for ch in stripped)
    letters = sum(ch.isalnum() for ch in stripped)
    if printable / len(stripped) < 0.9 or letters == 0:
        raise InputError(
            "the question looks garbled (control characters or no letters or digits); "
            "check its encoding"
        )
    return stripped
