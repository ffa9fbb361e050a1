"""Robust parsers for the loops' output formats.

Small models break formats all the time: markers in the wrong case, brackets missing, the
final-answer marker repeated, several steps written at once, nothing useful at all. Every
parser here is total: it accepts any object, never raises, and returns a small dataclass
whose ``kind`` / ``action`` says what was found (``"none"`` when nothing usable was).
Inputs are cut to :data:`MAX_CHARS` first, every pattern is linear, at most
:data:`MAX_MARKERS` markers are tried and each reads a bounded part of its line, so the work
is linear in the input and a huge or adversarial reply costs little. Hypothesis fuzzes each
of them (tests/test_agents_parsers.py, tests/test_parsers_property.py).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ..text import as_text

MAX_ANSWER_CHARS = 200
MAX_QUERY_CHARS = 300
MAX_CHAIN_NODES = 20
MAX_MARKERS = 50
"""Markers ('Follow up:', 'the answer is', …) tried per reply before giving up."""
LINE_WINDOW = 1_000
"""Characters of a line read first after a marker (several times the longest answer)."""
_WINDOW_MARGIN = 50  # longer than any marker a window can cut

_WRAP = "\"'`*_“”‘’«»[](){}<> \t"
_FINAL = re.compile(
    r"(?:so[ \t]+)?the[ \t]+final[ \t]+answer[ \t]+is(?:[ \t]*[:：])?"
    r"|\[[ \t]*final[ _]*answer[ \t]*\](?:[ \t]*[:：])?|\bfinal[ _]*answer[ \t]*[:：]",
    re.IGNORECASE,
)
_ANSWER_IS = re.compile(
    r"(?:so[ \t]+)?the[ \t]+(?:final[ \t]+|short[ \t]+)?answer[ \t]+is(?:[ \t]*[:：])?"
    r"|\[[ \t]*final[ _]*answer[ \t]*\](?:[ \t]*[:：])?|\bfinal[ _]*answer[ \t]*[:：]"
    r"|^[ \t]*answer[ \t]*[:：]",
    re.IGNORECASE | re.MULTILINE,
)
_FOLLOW_UP = re.compile(
    r"\bfollow[ \t_-]*up(?:[ \t]*question)?[ \t]*(?:\d{1,3}[ \t]*)?[:：]", re.IGNORECASE
)
_INTERMEDIATE = re.compile(r"\bintermediate[ \t]+answer(?:[ \t]*[:：])?", re.IGNORECASE)
_NEEDED_NO = re.compile(
    r"follow[ \t_-]*up[ \t]+questions?[ \t]+needed(?:[ \t]+here)?(?:[ \t]*[:：?])?[ \t*]*no\b",
    re.IGNORECASE,
)
_LEADING_MARKERS = re.compile(
    r"^(?:[ \t]*(?:(?:so[ \t]+)?the[ \t]+final[ \t]+answer[ \t]+is|\[[ \t]*final[ _]*answer"
    r"[ \t]*\]|final[ _]*answer|answer)(?:[ \t]*[:：])?)+[ \t]*",
    re.IGNORECASE,
)
_QUERY_LABEL = re.compile(
    r"^[ \t*]*(?:sub-?)?(?:question|query|q)[ \t]*(?:\d{1,3}[ \t]*)?[:：][ \t]*", re.I
)
_SENTENCE_END = re.compile(r"(?<=[^\s.]{2}[.!?])\s+(?=[A-Z\"'(\[])")


_LABEL_WORD = r"(?:evidence|passage|document|source|context)s?[ \t]*"
_BRACKETED = r"\[[ \t]*\d{1,2}[ \t]*\]"
_PASSAGE_LABEL = re.compile(
    rf"[ \t]*(?:(?:{_LABEL_WORD})?{_BRACKETED}|{_LABEL_WORD}#?\d{{1,2}})"
    rf"(?:[ \t]*(?:,|and|&)?[ \t]*{_BRACKETED})*[ \t.]*",
    re.IGNORECASE,
)


_LABELS_MAX_CHARS = 40
"""Longer answers are not label lists (and the pattern never reads a long text)."""


def names_passage(answer: str) -> bool:
    """Whether ``answer`` only points at passages by their labels ("[1]", "Passage 2",
    "[1] and [3]") instead of giving an answer; a bare number ("12") is an answer."""
    text = " ".join(answer.split())
    return len(text) <= _LABELS_MAX_CHARS and bool(_PASSAGE_LABEL.fullmatch(text))


def has_content(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if has_content(line):
            return line.strip()
    return ""


def _answer_text(text: str) -> str:
    """:func:`clean_answer` before its length cap."""
    line = _LEADING_MARKERS.sub("", _first_line(text)).strip()
    line = line.strip(_WRAP).rstrip(".;,:").strip(_WRAP)
    return " ".join(line.split())


def _query_text(text: str) -> str:
    """:func:`clean_query` before its length cap."""
    line = _INTERMEDIATE.split(_first_line(text), maxsplit=1)[0]
    line = _QUERY_LABEL.sub("", line)
    return " ".join(line.split()).strip(_WRAP.replace("?", ""))


def _capped(line: str, limit: int) -> str:
    """``line`` cut to ``limit`` characters at a space; '' when nothing usable is left."""
    if len(line) > limit:
        line = line[:limit].rsplit(" ", 1)[0]
    return line if has_content(line) else ""


def clean_answer(text: object) -> str:
    """A short answer from the start of ``text``: first usable line, markers and wrapping
    quotes/markdown removed, trailing full stop dropped, at most 200 characters."""
    return _capped(_answer_text(as_text(text)), MAX_ANSWER_CHARS)


def clean_query(text: object) -> str:
    """A search query / sub-question: first usable line, wrappers removed, ≤ 300 chars."""
    return _capped(_query_text(as_text(text)), MAX_QUERY_CHARS)


_Cleaner = Callable[[str], str]


def _read_line(text: str, pos: int, clean: _Cleaner, limit: int) -> str:
    """``clean`` applied to the text from ``pos`` to the end of its line, then capped at
    ``limit`` characters. A long line is first read through a window of
    :data:`LINE_WINDOW` characters (whole words only); the whole line is read only when the
    window does not settle the result (too little survives cleaning, e.g. a run of markers),
    so each marker costs a bounded amount of work on ordinary replies."""
    end = text.find("\n", pos, pos + LINE_WINDOW)
    if end >= 0 or pos + LINE_WINDOW >= len(text):
        return _capped(clean(text[pos:end] if end >= 0 else text[pos:]), limit)
    window = text[pos : pos + LINE_WINDOW]
    if not text[pos + LINE_WINDOW].isspace():
        head = window.rsplit(None, 1)  # drop the word the window cuts
        window = head[0] if len(head) == 2 else window
    cleaned = clean(window)
    if len(cleaned) > limit + _WINDOW_MARGIN:
        return _capped(cleaned, limit)
    end = text.find("\n", pos + LINE_WINDOW)
    return _capped(clean(text[pos:end] if end >= 0 else text[pos:]), limit)


def _next_line(text: str, pos: int) -> int:
    """Where the line after the one holding ``pos`` starts (``len(text)`` if none)."""
    end = text.find("\n", pos)
    return len(text) if end < 0 else end + 1


def _answer_at(text: str, pos: int) -> str:
    """The answer right after a marker ending at ``pos``: the rest of that line, or the
    next line when the rest is empty."""
    answer = _read_line(text, pos, _answer_text, MAX_ANSWER_CHARS)
    if not answer:
        nxt = _next_line(text, pos)
        if nxt < len(text):
            answer = _read_line(text, nxt, _answer_text, MAX_ANSWER_CHARS)
    return answer


def _first_answer(text: str, pattern: re.Pattern[str]) -> tuple[int, str] | None:
    """(start of the marker, answer) of the first marker followed by an answer; at most
    :data:`MAX_MARKERS` markers are tried."""
    for match in itertools.islice(pattern.finditer(text), MAX_MARKERS):
        answer = _answer_at(text, match.end())
        if answer:
            return match.start(), answer
    return None


def _answer_after(text: str, pattern: re.Pattern[str]) -> str:
    """The first non-empty answer after any match of ``pattern`` ('' if none)."""
    found = _first_answer(text, pattern)
    return found[1] if found else ""


def find_answer(text: object) -> str:
    """The answer after a final-answer style marker ('the answer is', '[Final Answer]:',
    'Answer:'), else ''."""
    return _answer_after(as_text(text), _ANSWER_IS)


# --------------------------------------------------------------------------------------------
# Self-Ask
# --------------------------------------------------------------------------------------------

SelfAskKind = Literal["follow_up", "final", "none"]


@dataclass(frozen=True, slots=True)
class SelfAskParse:
    """``follow_up``: the next sub-question; ``final``: the final answer; ``none``: neither.
    ``lenient`` is true when the follow-up was read from a bare question line."""

    kind: SelfAskKind
    follow_up: str = ""
    answer: str = ""
    lenient: bool = False


def parse_self_ask(text: object) -> SelfAskParse:
    """The next Self-Ask move. The earliest of 'Follow up:' / a final-answer marker wins; a
    reply that only says 'follow up questions needed: No' plus a line is read as final; a
    bare line ending in '?' is read as a follow-up (``lenient``)."""
    raw = as_text(text)
    follow: tuple[int, str] | None = None
    for match in itertools.islice(_FOLLOW_UP.finditer(raw), MAX_MARKERS):
        query = _read_line(raw, match.end(), _query_text, MAX_QUERY_CHARS)
        if query:
            follow = (match.start(), query)
            break
    final = _first_answer(raw, _FINAL)
    if follow is not None and (final is None or follow[0] < final[0]):
        return SelfAskParse("follow_up", follow_up=follow[1])
    if final is not None:
        return SelfAskParse("final", answer=final[1])
    no = _NEEDED_NO.search(raw)
    if no is not None:
        answer = clean_answer(raw[no.end() :])
        if answer:
            return SelfAskParse("final", answer=answer)
    line = clean_query(raw)
    if line.endswith("?") and not _INTERMEDIATE.match(line) and len(line) > 3:
        return SelfAskParse("follow_up", follow_up=line, lenient=True)
    return SelfAskParse("none")


# --------------------------------------------------------------------------------------------
# ReAct
# --------------------------------------------------------------------------------------------

ReActAction = Literal["search", "lookup", "finish", "none"]

_ACTION_BRACKET = re.compile(r"\b(search|look[ \t]?up|finish)[ \t]*\[([^\]\n]*)\]?", re.IGNORECASE)
_ACTION_COLON = re.compile(
    r"\baction[ \t]*(?:\d{1,3}[ \t]*)?[:：][ \t]*(search|look[ \t]?up|finish)"
    r"(?:[ \t]*[:：(])?[ \t]*([^\n]*)",
    re.IGNORECASE,
)
_THOUGHT = re.compile(r"\bthought[ \t]*(?:\d{1,3}[ \t]*)?[:：]", re.IGNORECASE)
_ACTION_LABEL = re.compile(r"\baction[ \t]*(?:\d{1,3}[ \t]*)?[:：]", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ReActParse:
    thought: str
    action: ReActAction
    argument: str = ""


def _action_kind(word: str) -> ReActAction:
    word = word.lower().replace(" ", "").replace("\t", "")
    if word == "search":
        return "search"
    if word == "lookup":
        return "lookup"
    return "finish"


def parse_react(text: object) -> ReActParse:
    """Thought and the first action (Search[…], Lookup[…], Finish[…]; also 'Action: Search:
    …' without brackets, and a final-answer marker as Finish)."""
    raw = as_text(text)
    thought_match = _THOUGHT.search(raw)
    start = thought_match.end() if thought_match else 0
    rest = raw[start:]
    label = _ACTION_LABEL.search(rest)
    thought_text = rest[: label.start()] if label else rest.split("\n", 1)[0]
    thought = " ".join(thought_text.split())[:500]
    candidates: list[tuple[int, ReActAction, str]] = []
    for pattern in (_ACTION_BRACKET, _ACTION_COLON):
        for count, match in enumerate(pattern.finditer(raw)):
            if count >= 50:
                break
            candidates.append((match.start(), _action_kind(match.group(1)), match.group(2)))
    for _, action, argument in sorted(candidates, key=lambda c: c[0]):
        value = clean_answer(argument) if action == "finish" else clean_query(argument)
        if value:
            return ReActParse(thought, action, value)
    answer = _answer_after(raw, _FINAL)
    if answer:
        return ReActParse(thought, "finish", answer)
    return ReActParse(thought, "none")


# --------------------------------------------------------------------------------------------
# SearChain
# --------------------------------------------------------------------------------------------

_CHAIN_MARK = re.compile(
    r"\[[ \t]*(unsolved[ \t]+query|query|answer|final[ \t]+answer|final[ \t]+content)[ \t]*"
    r"(?:\d{1,3}[ \t]*)?\](?:[ \t]*[:：])?"
    r"|^[ \t]*(unsolved[ \t]+query|query|answer|final[ \t]+answer|final[ \t]+content)[ \t]*"
    r"(?:\d{1,3}[ \t]*)?[:：]",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass(slots=True)
class ChainNode:
    """One [Query]/[Answer] node; ``unsolved`` when the model marked it [Unsolved Query]."""

    query: str
    answer: str | None = None
    unsolved: bool = False


@dataclass(slots=True)
class SearChainParse:
    nodes: list[ChainNode] = field(default_factory=list)
    final: str = ""
    content: str = ""

    @property
    def kind(self) -> Literal["chain", "final", "none"]:
        if self.nodes:
            return "chain"
        return "final" if self.final else "none"


def parse_searchain(text: object) -> SearChainParse:
    """The chain of [Query n]/[Answer n]/[Unsolved Query] nodes, [Final Content] and
    [Final Answer] (brackets optional at a line start; at most 20 nodes)."""
    raw = as_text(text)
    out = SearChainParse()
    marks = list(_CHAIN_MARK.finditer(raw))
    for i, match in enumerate(marks):
        label = " ".join((match.group(1) or match.group(2) or "").lower().split())
        end = marks[i + 1].start() if i + 1 < len(marks) else len(raw)
        segment = raw[match.end() : end]
        if label in ("query", "unsolved query"):
            query = clean_query(segment)
            if not query:
                continue
            unsolved = label == "unsolved query"
            if unsolved and out.nodes and out.nodes[-1].query == query:
                out.nodes[-1].unsolved = True
                continue
            if len(out.nodes) < MAX_CHAIN_NODES:
                out.nodes.append(ChainNode(query, None, unsolved))
        elif label == "answer":
            answer = clean_answer(segment)
            if answer and out.nodes and out.nodes[-1].answer is None:
                out.nodes[-1].answer = answer
                out.nodes[-1].unsolved = False
        elif label == "final answer":
            answer = clean_answer(segment)
            if answer and not out.final:
                out.final = answer
        elif label == "final content" and not out.content:
            out.content = " ".join(segment.split())[:1000]
    if not out.final and out.content:
        out.final = _answer_after(out.content, _ANSWER_IS)
    return out


# --------------------------------------------------------------------------------------------
# Plan-and-execute
# --------------------------------------------------------------------------------------------

_PLAN_ITEM = re.compile(r"^[ \t]*(?:\(?\d{1,2}[.):]|[-*•])[ \t]*(.*)$")


def parse_plan(text: object, max_questions: int = MAX_CHAIN_NODES) -> list[str]:
    """The simple questions of a plan: its numbered or bulleted lines that end with '?'
    (labels such as 'Question 2:' removed, repeats dropped), at most ``max_questions``. A
    reply without any such line that is itself one question counts as a plan of one."""
    raw = as_text(text)
    questions: list[str] = []
    seen: set[str] = set()
    for line in raw.splitlines():
        match = _PLAN_ITEM.match(line)
        query = clean_query(match.group(1)) if match else ""
        if query.endswith("?") and query not in seen:
            seen.add(query)
            questions.append(query)
    if not questions:
        lines = [line for line in raw.splitlines() if has_content(line)]
        query = clean_query(lines[0]) if len(lines) == 1 else ""
        questions = [query] if query.endswith("?") else []
    return questions[: max(0, max_questions)]


# --------------------------------------------------------------------------------------------
# IRCoT and chain-of-thought
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CoTParse:
    """``sentence``: the first reasoning sentence (IRCoT); ``answer``: the answer when the
    reply contains an answer pattern, else ''."""

    sentence: str
    answer: str
    reasoning: str = ""


def parse_ircot(text: object) -> CoTParse:
    """One IRCoT step: the next sentence, and the answer if 'the answer is …' appears in it."""
    raw = as_text(text).strip()
    first = _SENTENCE_END.split(" ".join(raw.split()), maxsplit=1)[0][:400].strip()
    answer = find_answer(raw) if _ANSWER_IS.search(raw[: len(first) + 200]) else ""
    if answer:
        match = _ANSWER_IS.search(raw)
        sentence = " ".join(raw[: match.end()].split()) + f" {answer}." if match else first
        return CoTParse(sentence[:600].strip(), answer, raw[:2000])
    return CoTParse(first if has_content(first) else "", "", raw[:2000])


def parse_cot(text: object) -> CoTParse:
    """Few-shot CoT: the reasoning and the answer after the answer pattern; without one, the
    last usable line counts as the answer."""
    raw = as_text(text).strip()
    answer = find_answer(raw)
    if not answer:
        lines = [line for line in raw.splitlines() if has_content(line)]
        answer = clean_answer(lines[-1]) if lines else ""
    reasoning = _ANSWER_IS.split(raw, maxsplit=1)[0].strip()[:2000]
    first = _SENTENCE_END.split(" ".join(raw.split()), maxsplit=1)[0][:400]
    return CoTParse(first if has_content(first) else "", answer, reasoning)
