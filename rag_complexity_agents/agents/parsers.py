"""Robust parsers for the loops' output formats.

Small models break formats all the time: markers in the wrong case, brackets missing, the
final-answer marker repeated, several steps written at once, nothing useful at all. Every
parser here is total: it accepts any object, never raises, and returns a small dataclass
whose ``kind`` / ``action`` says what was found (``"none"`` when nothing usable was).
Inputs are cut to :data:`MAX_CHARS` first, and every pattern is linear, so a huge or
adversarial reply costs little. Hypothesis fuzzes each of them (tests/test_agents_parsers.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from ..text import MAX_CHARS, as_text

MAX_ANSWER_CHARS = 200
MAX_QUERY_CHARS = 300
MAX_CHAIN_NODES = 20

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


def has_content(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if has_content(line):
            return line.strip()
    return ""


def clean_answer(text: object) -> str:
    """A short answer from the start of ``text``: first usable line, markers and wrapping
    quotes/markdown removed, trailing full stop dropped, at most 200 characters."""
    line = _first_line(as_text(text))
    line = _LEADING_MARKERS.sub("", line).strip()
    line = line.strip(_WRAP).rstrip(".;,:").strip(_WRAP)
    line = " ".join(line.split())
    if len(line) > MAX_ANSWER_CHARS:
        line = line[:MAX_ANSWER_CHARS].rsplit(" ", 1)[0]
    return line if has_content(line) else ""


def clean_query(text: object) -> str:
    """A search query / sub-question: first usable line, wrappers removed, ≤ 300 chars."""
    line = _first_line(as_text(text))
    line = _INTERMEDIATE.split(line, maxsplit=1)[0]
    line = _QUERY_LABEL.sub("", line)
    line = " ".join(line.split()).strip(_WRAP.replace("?", ""))
    if len(line) > MAX_QUERY_CHARS:
        line = line[:MAX_QUERY_CHARS].rsplit(" ", 1)[0]
    return line if has_content(line) else ""


def _line_at(text: str, pos: int) -> tuple[str, int]:
    """The text from ``pos`` to the end of its line, and where the next line starts."""
    end = text.find("\n", pos)
    if end < 0:
        return text[pos:], len(text)
    return text[pos:end], end + 1


def _answer_at(text: str, pos: int) -> str:
    """The answer right after a marker ending at ``pos``: the rest of that line, or the
    next line when the rest is empty."""
    line, nxt = _line_at(text, pos)
    answer = clean_answer(line)
    if not answer and nxt < len(text):
        answer = clean_answer(_line_at(text, nxt)[0])
    return answer


def _first_answer(text: str, pattern: re.Pattern[str]) -> tuple[int, str] | None:
    """(start of the marker, answer) of the first marker followed by an answer."""
    for match in pattern.finditer(text):
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
    for match in _FOLLOW_UP.finditer(raw):
        query = clean_query(_line_at(raw, match.end())[0])
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
    for line in raw.splitlines():
        match = _PLAN_ITEM.match(line)
        query = clean_query(match.group(1)) if match else ""
        if query.endswith("?") and query not in questions:
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


__all__ = [
    "MAX_CHARS",
    "ChainNode",
    "CoTParse",
    "ReActParse",
    "SearChainParse",
    "SelfAskParse",
    "as_text",
    "clean_answer",
    "clean_query",
    "find_answer",
    "has_content",
    "parse_cot",
    "parse_ircot",
    "parse_plan",
    "parse_react",
    "parse_searchain",
    "parse_self_ask",
]
