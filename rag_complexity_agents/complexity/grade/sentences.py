"""Stage 1 of GRADE's generation: documents → sentences, each placed in its evaluation chunk,
and the rule-based factual filter (the paper uses an LLM call; a rule suffices on CPU).

Also the content-word helpers the later stages use to check that extracted names are
grounded in their source text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from ...corpus.documents import Document, chunk_grade_setting
from ...text import STOPWORDS
from .kg import normalize_entity
from .records import Sentence

_ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "st",
        "jr",
        "sr",
        "vs",
        "etc",
        "inc",
        "ltd",
        "co",
        "no",
        "fig",
        "e.g",
        "i.e",
        "u.s",
        "u.k",
        "approx",
    ]
)
_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_OPINION = re.compile(
    r"\b(i|we|you|my|our|your|think|believe|feel|perhaps|maybe|should|must|opinion)\b",
    re.IGNORECASE,
)
_VERBISH = re.compile(
    r"\b(is|are|was|were|be|been|has|have|had|\w+ed|\w+s|became|won|wrote|made|built|began|"
    r"lies|rose|took|gave|held|ran|led|grew|flows|stands)\b",
    re.IGNORECASE,
)


_CLOSERS = ".!?\"')]"
_INITIALS = re.compile(r"(?:[A-Za-z]\.){2,}")
_TOKEN_WINDOW = 32


def _last_word(text: str, start: int, end: int) -> str:
    """The last whitespace-separated word of ``text[start:end]`` ('' if there is none).

    Reads a window that doubles until it holds the whole word, so the cost is the word's
    length, not the distance to ``start`` (the start of the current sentence, which can be
    far back when many candidate breaks were initials)."""
    size = _TOKEN_WINDOW
    while True:
        low = max(start, end - size)
        words = text[low:end].rsplit(None, 1)
        if low == start or len(words) == 2:
            return words[-1] if words else ""
        size *= 2


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences without breaking initials (J. R. R. Tolkien) or common
    abbreviations (U.S., Dr.). Linear in the length of ``text``."""
    pieces: list[str] = []
    start = 0
    for match in _SPLIT.finditer(text):
        end = match.start() + 1
        before = text[end - 3] if end >= 3 else " "  # the character before the punctuation
        if not before.isalpha() and before not in _CLOSERS:  # no abbreviation or initial
            pieces.append(text[start : match.end()])
            start = match.end()
            continue
        low = end - _TOKEN_WINDOW
        words = text[max(low, start) : end].rsplit(None, 1)
        if len(words) == 2 or low <= start:
            last = words[-1] if words else ""
        else:
            last = _last_word(text, start, end)
        token = last.rstrip(_CLOSERS).lower()
        if (len(token) == 1 and token.isalpha()) or token in _ABBREVIATIONS:
            continue
        if last.endswith(".") and _INITIALS.fullmatch(last):
            continue
        pieces.append(text[start : match.end()])
        start = match.end()
    pieces.append(text[start:])
    return [" ".join(p.split()) for p in pieces if p and not p.isspace()]


def is_factual(sentence: str, *, min_words: int = 5, max_words: int = 80) -> bool:
    """Rule-based factual filter: a declarative sentence of reasonable length with a
    verb-like word and a name, number or date, and no first/second person or opinion words."""
    words = _WORD.findall(sentence)
    if not min_words <= len(sentence.split()) <= max_words or len(words) < 3:
        return False
    if sentence.rstrip().endswith("?") or _OPINION.search(sentence):
        return False
    has_anchor = any(ch.isdigit() for ch in sentence) or any(w[0].isupper() for w in words[1:])
    return has_anchor and bool(_VERBISH.search(sentence))


def content_words(text: str) -> set[str]:
    """The normalised words of ``text`` that are not stop words."""
    return {w for w in normalize_entity(text).split() if w not in STOPWORDS}


def grounded(name: str, text: str) -> bool:
    """Whether an extracted entity name shares a content word with its source text."""
    words = content_words(name)
    return bool(words) and bool(words & content_words(text))


def document_sentences(
    documents: Iterable[Document],
    token_offsets: Callable[[str], list[tuple[int, int]]],
    *,
    chunk_size: int,
    chunk_overlap: int,
) -> tuple[list[Sentence], dict[str, dict[str, str]]]:
    """Sentences with their evaluation-setting chunk; chunks (id, title, text) by id."""
    out: list[Sentence] = []
    chunks: dict[str, dict[str, str]] = {}
    for d_index, doc in enumerate(documents):
        text = doc.text.strip()
        if not text:
            continue
        pieces = chunk_grade_setting(
            doc,
            token_offsets,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
        )
        spans: list[tuple[int, int, str]] = []
        cursor = 0
        for piece in pieces:
            begin = text.find(piece.text, cursor)
            begin = begin if begin >= 0 else text.find(piece.text)
            spans.append((begin, begin + len(piece.text), piece.id))
            cursor = max(begin, 0)
            chunks[piece.id] = {"id": piece.id, "title": doc.title, "text": piece.text}
        pos = 0
        for s_index, sentence in enumerate(split_sentences(text)):
            where = text.find(sentence.split()[0], pos)
            pos = max(where, pos)
            end = pos + len(sentence)
            inside = [cid for b, e, cid in spans if b <= pos and end <= e]
            best = inside[0] if inside else min(spans, key=lambda s: abs(s[0] - pos))[2]
            out.append(Sentence(f"{d_index}.{s_index}", doc.id, doc.title, sentence, best))
    return out, chunks
