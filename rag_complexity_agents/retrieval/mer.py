"""Meta Evidence Reasoner (MER, SUNAR §3.2 and Fig. 4).

After the decomposition loop stops, MER answers the original question once more from
(1) the reasoning path [(sq_1, sa_1) … (sq_n, sa_n)] and (2) the top-l evidences pooled
across the sub-questions' rankings and re-scored against the original question (what the
official code does). The model is asked to quote the evidence it uses, build its own
reasoning (the path may be wrong) and end with the answer after a fixed marker.

The prompt follows the structure of the paper's Fig. 4 (instruction → exemplars → existing
reasoning path → evidence → question) in this project's own words; the exemplars are data
(:data:`DEFAULT_EXEMPLARS`) and can be replaced. :func:`extract_final_answer` reads the
answer after the marker and falls back gracefully when a small model breaks the format.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..models.calls import ANSWER_LINE_CHARS, ChatReply, call_chat
from ..models.schemas import MERAnswer
from ..models.structured import StructuredOutput, record_format_failure
from ..text import as_text
from ..types import Chunk, ScoredDoc

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

FINAL_MARKER = "[Final Answer]:"
REASONING_MARKER = "[Reasoning]:"
STOP = ["\nQuestion:", "\nReasoning path so far:", "\n---"]
"""Where a text reply ends: before the model starts another case."""
CHARS_PER_TOKEN = 4
"""English text's usual characters per token: the marker grammar's reasoning line may hold
this many characters per token of the reasoner's budget."""


def marker_grammar(reasoning_chars: int, answer_chars: int = ANSWER_LINE_CHARS) -> str:
    """GBNF of the reply format: one reasoning line after :data:`REASONING_MARKER`, then one
    answer line after :data:`FINAL_MARKER`, each bounded, so a model decoded under it always
    reaches the answer and stops after it (the packaged 0.5B otherwise answers in one plain
    sentence without the markers on most questions)."""
    return (
        f'root ::= "{REASONING_MARKER} " [^\\n]{{1,{reasoning_chars}}} '
        f'"\\n{FINAL_MARKER} " [^\\n]{{1,{answer_chars}}}'
    )


ScoreFn = Callable[[str, Sequence[Chunk]], np.ndarray]
Evidence = ScoredDoc | Chunk | str


@dataclass(frozen=True, slots=True)
class MERExemplar:
    """One worked example: question, a (possibly flawed) path, evidence, reasoning, answer."""

    question: str
    path: tuple[tuple[str, str], ...]
    evidence: tuple[tuple[str, str], ...]  # (title, text)
    reasoning: str
    answer: str


DEFAULT_EXEMPLARS: tuple[MERExemplar, ...] = (
    MERExemplar(
        question="Who was the father of the author of Frankenstein?",
        path=(
            ("Who wrote Frankenstein?", "Mary Shelley"),
            ("Who was the father of Mary Shelley?", "William Godwin"),
        ),
        evidence=(
            (
                "Frankenstein",
                "Frankenstein; or, The Modern Prometheus is an 1818 novel by the English "
                "writer Mary Shelley.",
            ),
            (
                "Mary Shelley",
                "Mary Shelley was the daughter of the philosopher William Godwin and the "
                "writer Mary Wollstonecraft.",
            ),
        ),
        reasoning="Evidence [1] says Frankenstein was written by Mary Shelley. Evidence [2] "
        "says Mary Shelley's father was William Godwin. The path agrees with the evidence.",
        answer="William Godwin",
    ),
    MERExemplar(
        question="In which city was the composer of the opera Carmen born?",
        path=(
            ("Who composed the opera Carmen?", "Georges Bizet"),
            ("Where was Georges Bizet born?", "Bougival"),
        ),
        evidence=(
            ("Carmen", "Carmen is an opera in four acts by the French composer Georges Bizet."),
            (
                "Georges Bizet",
                "Georges Bizet (born 25 October 1838 in Paris; died 3 June 1875 in Bougival) "
                "was a French composer of the Romantic era.",
            ),
        ),
        reasoning="Evidence [1] names Georges Bizet as the composer of Carmen. Evidence [2] "
        "says Bizet was born in Paris; Bougival is where he died, so the second step of the "
        "path is wrong.",
        answer="Paris",
    ),
    MERExemplar(
        question="Were the directors of Jaws and Alien born in the same country?",
        path=(
            ("Who directed Jaws?", "Steven Spielberg"),
            ("Who directed Alien?", "Ridley Scott"),
            ("Where was Steven Spielberg born?", "Cincinnati, Ohio"),
            ("Where was Ridley Scott born?", "South Shields, England"),
        ),
        evidence=(
            ("Jaws (film)", "Jaws is a 1975 American thriller film directed by Steven Spielberg."),
            (
                "Alien (film)",
                "Alien is a 1979 science fiction horror film directed by Ridley Scott.",
            ),
            ("Steven Spielberg", "Steven Spielberg was born in Cincinnati, Ohio, United States."),
            ("Ridley Scott", "Ridley Scott was born in South Shields, England."),
        ),
        reasoning="Evidence [1] and [2] give the directors: Steven Spielberg and Ridley Scott. "
        "Evidence [3] places Spielberg's birth in the United States and evidence [4] places "
        "Scott's in England. The countries differ.",
        answer="No",
    ),
)

MER_INSTRUCTION = (
    "You answer a complex question from evidence passages. You also get the reasoning path of "
    "an earlier attempt: sub-questions with their intermediate answers. That path can be "
    "incomplete or wrong, so check every step against the evidence. Think step by step: pick "
    "out the sentences of the evidence that matter for the question, build your own reasoning "
    f"from them after {REASONING_MARKER}, then give a short, precise final answer (a name, a "
    f"date, a number, yes or no) on one line after {FINAL_MARKER}"
)


def _clip(text: str, max_chars: int) -> str:
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    return text[:max_chars].rsplit(" ", 1)[0] + " …"


def _evidence_pair(item: Evidence) -> tuple[str, str]:
    if isinstance(item, ScoredDoc):
        return item.chunk.title, item.chunk.text
    if isinstance(item, Chunk):
        return item.title, item.text
    return "", str(item)


def _format_path(path: Sequence[tuple[str, str]]) -> str:
    if not path:
        return "(no sub-questions were asked)"
    return "\n".join(
        f"{i}. {sq.strip()} -> {sa.strip() or '(no answer)'}" for i, (sq, sa) in enumerate(path, 1)
    )


def _format_evidence(evidence: Sequence[Evidence], max_chars: int) -> str:
    if not evidence:
        return "(no evidence was retrieved)"
    lines = []
    for i, item in enumerate(evidence, start=1):
        title, text = _evidence_pair(item)
        prefix = f"{title}: " if title else ""
        lines.append(f"[{i}] {prefix}{_clip(text, max_chars)}")
    return "\n".join(lines)


def _format_case(
    question: str,
    path: Sequence[tuple[str, str]],
    evidence: Sequence[Evidence],
    max_chars: int,
) -> str:
    return (
        f"Reasoning path so far:\n{_format_path(path)}\n\n"
        f"Evidence:\n{_format_evidence(evidence, max_chars)}\n\n"
        f"Question: {question.strip()}"
    )


def format_exemplar(exemplar: MERExemplar, *, max_evidence_chars: int = 700) -> str:
    """One exemplar as it appears in the prompt (case, reasoning, marker, answer)."""
    evidence = [
        Chunk(id=f"exemplar-{i}", text=t, title=ti) for i, (ti, t) in enumerate(exemplar.evidence)
    ]
    return (
        _format_case(exemplar.question, exemplar.path, evidence, max_evidence_chars) + "\n"
        f"{REASONING_MARKER} {exemplar.reasoning}\n"
        f"{FINAL_MARKER} {exemplar.answer}"
    )


def build_mer_messages(
    question: str,
    reasoning_path: Sequence[tuple[str, str]],
    evidence: Sequence[Evidence],
    *,
    exemplars: Sequence[MERExemplar] = DEFAULT_EXEMPLARS,
    max_evidence_chars: int = 700,
) -> list[tuple[str, str]]:
    """The MER prompt as (role, content) messages: instruction (system), then one user turn
    with the exemplars, the existing reasoning path, the evidence and the question."""
    parts = []
    if exemplars:
        shown = "\n\n---\n\n".join(
            format_exemplar(e, max_evidence_chars=max_evidence_chars) for e in exemplars
        )
        parts.append(f"Examples:\n\n{shown}\n\n---\n")
    parts.append(
        "Now the real case. Use the most relevant evidence, form your own reasoning after "
        f"{REASONING_MARKER} and end with {FINAL_MARKER} followed by the short answer.\n\n"
        + _format_case(question, reasoning_path, evidence, max_evidence_chars)
    )
    return [("system", MER_INSTRUCTION), ("human", "\n".join(parts))]


# --------------------------------------------------------------------------------------------
# Answer extraction
# --------------------------------------------------------------------------------------------

ExtractionMethod = Literal["structured", "marker", "answer_is", "answer_line", "last_line", "empty"]

# Every pattern is linear: an unbounded run of whitespace is only matched right after a literal
# (never twice in a row, never at each start position), so no input makes them backtrack.
_FINAL = re.compile(
    r"(?:\*\*|__)?(?:\[\s*)?final[\s_-]*answer\s*(?:\]\s*)?(?:(?:\*\*|__)\s*)?"
    r"(?:[:：=\-]|is\b)\s*(?:\*\*|__)?",
    re.IGNORECASE,
)
_ANSWER_IS = re.compile(r"\b(?:so\s+)?the\s+(?:final\s+|short\s+)?answer\s+is\s*:?\s*", re.I)
_ANSWER_LINE = re.compile(
    r"^[ \t]*(?:\*\*)?(?:\[\s*)?answer\s*(?:\]\s*)?(?:\*\*\s*)?[:：]\s*", re.I
)
_MARKERS = re.compile(r"\[(?:final\s*answer|reasoning|answer)\]\s*:?", re.IGNORECASE)
_STRIP = "\"'`*_“”‘’«» \t"
#: Lines looked at after a marker whose own line holds no answer.
_LOOKAHEAD_LINES = 3
#: Markers of one kind tried before falling back to the next rule.
_MAX_MARKERS = 50


def _clean(answer: str) -> str:
    answer = _MARKERS.split(answer, maxsplit=1)[0]
    answer = answer.strip(_STRIP)
    answer = re.sub(r"\s+", " ", answer)
    answer = answer.rstrip(".;,").strip(_STRIP)
    return answer


def _after(text: str, end: int) -> str:
    """The rest of the line after ``end``, or the first non-empty one of the next few lines
    when that is empty ('' if there is none)."""
    pos = end
    for _ in range(_LOOKAHEAD_LINES + 1):
        newline = text.find("\n", pos)
        answer = _clean(text[pos:] if newline < 0 else text[pos:newline])
        if answer or newline < 0:
            return answer
        pos = newline + 1
    return ""


@dataclass(frozen=True, slots=True)
class ExtractedAnswer:
    answer: str
    method: ExtractionMethod


def extract_final_answer(text: str) -> ExtractedAnswer:
    """The answer after the fixed marker, with fallbacks for a model that broke the format.

    Order: the first non-empty ``[Final Answer]:`` (also ``Final Answer:``, ``**Final
    answer**:``, ``final answer is``); the last "the answer is X"; the last ``Answer: X``
    line; the last non-empty line that is not a reasoning line; else ''. At most 50 markers
    of each kind are tried; only the first
    :data:`~rag_complexity_agents.text.MAX_CHARS` characters are read, and the
    work is linear in them.
    """
    text = as_text(text)
    if not text.strip():
        return ExtractedAnswer("", "empty")
    for match in itertools.islice(_FINAL.finditer(text), _MAX_MARKERS):
        answer = _after(text, match.end())
        if answer:
            return ExtractedAnswer(answer, "marker")
    matches = list(_ANSWER_IS.finditer(text))
    for match in reversed(matches[-_MAX_MARKERS:]):
        answer = _after(text, match.end())
        answer = re.split(r"(?<=\w)\.\s", answer, maxsplit=1)[0]
        if _clean(answer):
            return ExtractedAnswer(_clean(answer), "answer_is")
    lines = [line for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        label = _ANSWER_LINE.match(line)
        if label and _clean(line[label.end() :]):
            return ExtractedAnswer(_clean(line[label.end() :]), "answer_line")
    for line in reversed(lines):
        if line.strip().lower().startswith(("[reasoning]", "reasoning:")):
            continue
        if _clean(line):
            return ExtractedAnswer(_clean(line), "last_line")
    return ExtractedAnswer("", "empty")


# --------------------------------------------------------------------------------------------
# Evidence across sub-questions
# --------------------------------------------------------------------------------------------


def collect_evidence(
    question: str,
    rankings: Sequence[Sequence[ScoredDoc]],
    *,
    l: int = 10,  # noqa: E741 - the paper's symbol
    score: ScoreFn | None = None,
) -> list[ScoredDoc]:
    """Top-l evidences across the sub-questions' rankings, re-scored against ``question``.

    Candidates are the top-l documents of every ranking (first occurrence kept). With
    ``score`` they are re-scored against the original question and the best l kept (the
    official code's choice); without it the rankings are interleaved rank by rank. Each
    returned document records the sub-question(s) it came from in ``extra["sub_questions"]``.
    """
    if l < 1:
        raise ValueError(f"l must be at least 1, got {l}")
    candidates: dict[str, ScoredDoc] = {}
    origins: dict[str, list[int]] = {}
    for depth in range(l):
        for index, ranking in enumerate(rankings):
            if depth >= len(ranking):
                continue
            doc = ranking[depth]
            origins.setdefault(doc.id, [])
            if index not in origins[doc.id]:
                origins[doc.id].append(index)
            candidates.setdefault(doc.id, doc)
    docs = list(candidates.values())
    if score is not None and docs:
        values = np.asarray(score(question, [d.chunk for d in docs]), dtype=np.float64)
        order = sorted(range(len(docs)), key=lambda i: -values[i])
        picked = [(docs[i], float(values[i])) for i in order[:l]]
    else:
        picked = [(d, float(d.score)) for d in docs[:l]]
    out = []
    for rank, (doc, value) in enumerate(picked, start=1):
        out.append(
            ScoredDoc(
                doc.chunk,
                value,
                source=doc.source,
                rank=rank,
                batch=doc.batch,
                via=doc.via,
                extra={
                    **doc.extra,
                    "sub_questions": sorted(origins[doc.id]),
                    "sub_score": doc.score,
                },
            )
        )
    return out


@dataclass(slots=True)
class MERResult:
    answer: str
    method: ExtractionMethod
    output: str
    evidence_ids: list[str] = field(default_factory=list)

    def to_trace(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "extraction": self.method,
            "output": self.output,
            "evidence_ids": list(self.evidence_ids),
        }


class MetaEvidenceReasoner:
    """Asks the chat model for a reasoned final answer (see the module docstring)."""

    def __init__(
        self,
        chat: BaseChatModel,
        *,
        exemplars: Sequence[MERExemplar] = DEFAULT_EXEMPLARS,
        max_tokens: int = 256,
        max_evidence_chars: int = 700,
        structured: StructuredOutput | None = None,
    ) -> None:
        self.chat = chat
        self.exemplars = tuple(exemplars)
        self.max_tokens = max_tokens
        self.max_evidence_chars = max_evidence_chars
        self._structured = structured

    @property
    def structured(self) -> StructuredOutput:
        """Whether the reasoner asks its chat model for a :class:`MERAnswer` object (a run
        context's holder when one was given, else the reasoner's own)."""
        if self._structured is None:
            self._structured = StructuredOutput(self.chat)
        return self._structured

    def messages(
        self,
        question: str,
        reasoning_path: Sequence[tuple[str, str]],
        evidence: Sequence[Evidence],
    ) -> list[tuple[str, str]]:
        return build_mer_messages(
            question,
            reasoning_path,
            evidence,
            exemplars=self.exemplars,
            max_evidence_chars=self.max_evidence_chars,
        )

    def reply(
        self,
        question: str,
        reasoning_path: Sequence[tuple[str, str]],
        evidence: Sequence[Evidence],
    ) -> tuple[ExtractedAnswer, str, list[ChatReply]]:
        """(answer, output text, every chat reply it took).

        A :class:`MERAnswer` object when the model gives structured output (the output text
        is then written with the markers), else the text reply read by
        :func:`extract_final_answer`. A text reply of a model that takes a grammar (our
        llama.cpp model) is decoded under :func:`marker_grammar` unless structured output is
        ``off``: its reasoning line may hold :data:`CHARS_PER_TOKEN` characters per token of
        ``max_tokens``, and the call's budget covers the grammar's longest reply, so the
        answer is never cut off. A structured reply that does not validate or has no answer,
        and a text reply without an answer after the marker, are format failures of kind
        ``mer``."""
        messages = self.messages(question, reasoning_path, evidence)
        replies: list[ChatReply] = []
        if self.structured.enabled:
            obj, raw, _ = self.structured.call(
                messages, MERAnswer, kind="mer", max_tokens=self.max_tokens
            )
            replies.extend([raw] if raw is not None else [])
            answer = _clean(obj.answer) if obj is not None else ""
            if obj is not None and answer:
                output = f"{REASONING_MARKER} {obj.reasoning}\n{FINAL_MARKER} {answer}"
                return ExtractedAnswer(answer, "structured"), output, replies
            if obj is not None:
                record_format_failure("mer")
        max_tokens = self.max_tokens
        reasoning_chars = CHARS_PER_TOKEN * self.max_tokens
        grammar = self.structured.text_grammar(marker_grammar(reasoning_chars))
        if grammar is not None:
            # the longest reply the grammar allows, at worst one token per character
            fixed = f"{REASONING_MARKER} \n{FINAL_MARKER} "
            max_tokens = len(fixed) + reasoning_chars + ANSWER_LINE_CHARS
        text = call_chat(self.chat, messages, max_tokens=max_tokens, stop=STOP, grammar=grammar)
        replies.append(text)
        extracted = extract_final_answer(text.text)
        if extracted.method != "marker":
            record_format_failure("mer")
        return extracted, text.text, replies

    def __call__(
        self,
        question: str,
        reasoning_path: Sequence[tuple[str, str]],
        evidence: Sequence[Evidence],
    ) -> MERResult:
        extracted, output, _ = self.reply(question, reasoning_path, evidence)
        ids = [e.id for e in evidence if isinstance(e, ScoredDoc | Chunk)]
        return MERResult(extracted.answer, extracted.method, output, ids)
