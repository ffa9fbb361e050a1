"""Text helpers shared across layers: answer normalisation and cover-EM, the capped text a
parser reads, stop words, question and collection-name validation."""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable, Sequence

from .errors import CorpusError, InputError

_STOPWORD_TEXT = """a an the of in on at to for from by with and or but is are was were be been
being do does did what which who whom whose when where why how that this these those it its as
into than then there their they he she his her him i you we our your not no s had has have"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())
"""English function words ignored when comparing the content of questions and passages."""

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)

MAX_CHARS = 20_000
"""Parsers read at most this many characters of a model's reply (:func:`as_text`)."""

Golds = str | Iterable[str]
"""One gold answer, or several (a primary answer and its aliases)."""

#: Longest collection name. A name becomes a directory name (≤ 255 bytes on ext4, XFS, btrfs,
#: APFS, NTFS; ≤ 143 on eCryptfs) and, with the files below it, part of paths that Windows
#: caps at 260 characters; 100 ASCII characters fits all of them with room to spare.
MAX_COLLECTION_NAME_CHARS = 100
_NAME_RE = re.compile(
    rf"^[A-Za-z0-9][A-Za-z0-9._-]{{1,{MAX_COLLECTION_NAME_CHARS - 2}}}[A-Za-z0-9]$"
)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    text = unicodedata.normalize("NFKC", text).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def gold_list(golds: Golds) -> list[str]:
    """The gold answers as a list of strings (a single string is one answer)."""
    if isinstance(golds, str):
        return [golds]
    return [str(g) for g in golds]


def _contains_run(tokens: Sequence[str], run: Sequence[str]) -> bool:
    n = len(run)
    return any(list(tokens[i : i + n]) == list(run) for i in range(len(tokens) - n + 1))


def cover_em(prediction: str | None, golds: Golds) -> float:
    """1.0 if some normalised gold answer is a contiguous token run of the prediction.

    SUNAR's "cover exact match". A gold answer that normalises to the empty string matches
    only an empty prediction, so an empty prediction never covers anything else.
    """
    pred_tokens = normalize_answer(prediction or "").split()
    for gold in gold_list(golds):
        gold_tokens = normalize_answer(gold).split()
        if not gold_tokens:
            if not pred_tokens:
                return 1.0
            continue
        if _contains_run(pred_tokens, gold_tokens):
            return 1.0
    return 0.0


CUT_MARK = " …"
"""What marks a passage cut short (:func:`cut_passage`)."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def content_words(text: str) -> set[str]:
    """The normalised words of ``text`` that are not stop words."""
    return set(normalize_answer(text).split()) - STOPWORDS


def _stems(text: str) -> set[str]:
    return {word[:6] for word in content_words(text)}


def cut_passage(text: str, max_chars: int, focus: str = "", title: str = "") -> str:
    """``text`` cut to ``max_chars`` characters, marked with :data:`CUT_MARK` where cut.

    Without ``focus``: its start. With ``focus`` (the question it is read for): the run of
    whole sentences that fits and holds the most of the question's content words other than
    the words of the passage's ``title`` (the page's subject, which its start names anyway),
    words compared by their first six letters, when that is more than the start holds; a cut
    start is marked too. Ties keep the start, so a passage that fits, or whose start is as
    good, reads as before. The fact a question asks about a page's subject can sit after the
    page's first ``max_chars`` characters, where a cut at the start never shows it."""
    if len(text) <= max_chars:
        return text
    head = text[:max_chars] + CUT_MARK
    wanted = _stems(focus) - _stems(title) if focus else set()
    if not wanted:
        return head
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    budget = max_chars - 2 * len(CUT_MARK)
    best, best_held = head, len(wanted & _stems(text[:max_chars]))
    for first, (begin, _) in enumerate(spans):
        end = begin
        for _, stop in spans[first:]:
            if stop - begin > budget:
                break
            end = stop
        if end == begin or begin == 0:
            continue
        held = len(wanted & _stems(text[begin:end]))
        if held > best_held:
            best_held = held
            best = CUT_MARK.strip() + " " + text[begin:end] + (CUT_MARK if end < len(text) else "")
    return best


def as_text(value: object) -> str:
    """A string to parse: non-strings become '', NULs are dropped, length is capped."""
    if not isinstance(value, str):
        return ""
    return value[:MAX_CHARS].replace("\x00", " ")


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


def validate_collection_name(name: str) -> str:
    """``name`` if it is a valid collection name, else CorpusError (one line)."""
    if not _NAME_RE.match(name) or ".." in name:
        shown = name if len(name) <= 40 else f"{name[:40]}… ({len(name)} characters)"
        raise CorpusError(
            f"invalid collection name {shown!r}: use 3–{MAX_COLLECTION_NAME_CHARS} characters "
            "from letters, digits, '.', '_' and '-', starting and ending with a letter or digit"
        )
    return name
