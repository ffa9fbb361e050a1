"""Ceiling strategies: what the reader and the retrieval can do when decomposition is given.

All three run the ``single_step`` pipeline, the graph of the single-step baseline (same
prompt, same ``answer.passage_chars`` cut, same ``models.chat``), so the gap between them and
a loop says where the loop loses its points:

* ``gold_evidence`` (:class:`GoldEvidence`) — the reader given the question's gold supporting
  paragraphs only, in dataset order; no retrieval. The distance to 100% is the reader's loss.
* ``gold_decomposition`` (:class:`GoldDecomposition`) — the dataset's own sub-questions
  (:func:`~.datasets.gold_decomposition`) answered in order, each by single-step RAG over the
  first stage (``answer.passages`` passages); ``#k`` in a later sub-question is replaced by
  the *predicted* answer of step k, and the last step's answer is the final answer. With
  retrieval in the loop, its distance to ``gold_evidence`` is retrieval's loss; a loop's
  distance to it is decomposition's loss.
* ``gold_bridges`` (:class:`GoldDecomposition` with ``bridges="gold"``) — the same, but ``#k``
  is replaced by the *gold* answer of step k, so every hop is retrieved for with the right
  bridge entity. Its distance to ``gold_decomposition`` (in evidence recall above all) is what
  the reader's wrong bridge answers cost; only the last hop's answer is the reader's own.

Sub-questions in the knowledge-base form ``"<entity> >> <relation>"`` (a third of MuSiQue's
steps and every 2Wiki step) are asked as ``"What is the <relation> of <entity>?"``
(:func:`as_question`); the Wikidata relations that are not nouns ("educated at", "shares
border with", ...) have their own wording in :data:`RELATION_QUESTIONS`, one table for every
dataset. Traces keep each step (asked question, answer, gold answers, whether it was
covered) for the analysis of where a chain breaks.

Ceilings measure reading and bridging, not the guard against unsupported answers: their
single-step runs keep only the exemplar check (``agents.abstain = "exemplar"``), as the
ceilings did before the ``"supported"`` default; a hop answered "not found" would end the
chain a loop's own hops carry on.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from typing import Any, Literal

from ..agents.plan_execute import substitute_answers
from ..agents.registry import build_pipeline
from ..agents.run import run_graph
from ..errors import InputError
from ..text import cover_em
from ..types import Chunk, RunResult, ScoredDoc
from .base import EvalComponents, RecordStrategy
from .datasets import QARecord, gold_decomposition

_KB_STEP = " >> "

#: Questions for the Wikidata relations of MuSiQue / 2Wiki steps that do not read as nouns
#: ("What is the <relation> of X?" covers the nouns: spouse, capital, place of birth, ...).
RELATION_QUESTIONS: dict[str, str] = {
    "located in the administrative territorial entity": (
        "In which administrative territorial entity is {entity} located?"
    ),
    "located on terrain feature": "On which terrain feature is {entity} located?",
    "shares border with": "What shares a border with {entity}?",
    "educated at": "Where was {entity} educated?",
    "owned by": "Who owns {entity}?",
    "part of": "What is {entity} part of?",
    "has part": "What are the parts of {entity}?",
    "capital of": "What is {entity} the capital of?",
    "member of": "What is {entity} a member of?",
    "member of sports team": "Which sports team is {entity} a member of?",
    "member of political party": "Which political party is {entity} a member of?",
    "followed by": "What followed {entity}?",
    "named after": "What is {entity} named after?",
    "award received": "What award did {entity} receive?",
    "position held": "What position did {entity} hold?",
    "cast member": "Who is a cast member of {entity}?",
    "work location": "Where did {entity} work?",
    "location of formation": "Where was {entity} formed?",
}


def as_question(step: str) -> str:
    """A sub-question as asked: ``"X >> relation"`` → ``"What is the relation of X?"`` (or
    the relation's :data:`RELATION_QUESTIONS` wording); anything else unchanged (trimmed)."""
    entity, sep, relation = (part.strip() for part in step.partition(_KB_STEP))
    if not sep or not entity or not relation:
        return step.strip()
    template = RELATION_QUESTIONS.get(relation.lower(), "What is the {relation} of {entity}?")
    return template.format(relation=relation, entity=entity)


class _GivenPassages:
    """A first stage that always returns the same passages (the gold ones)."""

    name = "gold_paragraphs"

    def __init__(self, docs: Sequence[ScoredDoc]) -> None:
        self.docs = list(docs)

    def search(self, query: str, k: int) -> list[ScoredDoc]:
        return self.docs[:k]


def gold_passages(record: QARecord) -> list[ScoredDoc]:
    """The gold supporting paragraphs of ``record`` as passages, shaped like the pooled corpus
    chunks single-step reads (text ``title + "\\n" + text``, id = paragraph id)."""
    docs = []
    for rank, paragraph in enumerate(
        (p for p in record.paragraphs or () if p.is_supporting), start=1
    ):
        chunk = Chunk(
            id=paragraph.id,
            text=f"{paragraph.title}\n{paragraph.text}",
            title=paragraph.title,
            metadata={"paragraph_id": paragraph.id, "doc_id": paragraph.id},
        )
        docs.append(ScoredDoc(chunk, 1.0, rank=rank))
    return docs


def single_step(
    parts: EvalComponents, question: str, passages: Sequence[ScoredDoc] | None = None
) -> RunResult:
    """``question`` answered by the ``single_step`` pipeline; over ``passages`` (all of them)
    instead of the first stage when given."""
    knobs: dict[str, int] = {}
    if passages is not None:
        _ = parts.chat  # made once, before the copy shares it (with the harness's cache)
        parts = copy.copy(parts)
        parts.inject(first_stage=_GivenPassages(passages))
        knobs["passages"] = len(passages)
    config = parts.config.with_overrides({"agents.abstain": "exemplar"})
    graph = build_pipeline("single_step", config, components=parts, knobs=knobs)
    return run_graph(graph, question)


def _format_failures(trace: dict[str, Any]) -> int:
    value = trace.get("format_failures")
    return int(value) if isinstance(value, int | float) else 0


class GoldEvidence(RecordStrategy):
    """The single-step reader given only the gold supporting paragraphs (no retrieval)."""

    def __init__(self, parts: EvalComponents) -> None:
        self.parts = parts

    def answer_record(self, record: QARecord) -> RunResult:
        docs = gold_passages(record)
        if not docs:
            raise InputError(f"question {record.id} has no gold supporting paragraphs")
        result = single_step(self.parts, record.question, docs)
        trace = dict(result.trace)
        trace.update(
            strategy="gold_evidence",
            retrieval={"first_stage": "gold_paragraphs", "k": len(docs)},
            retrieval_calls=0,
            format_failures=_format_failures(trace),
        )
        return RunResult(answer=result.answer, trace=trace)


class GoldDecomposition(RecordStrategy):
    """The dataset's sub-questions answered in turn by single-step RAG over the first stage.

    ``bridges`` says what replaces ``#k`` in a later sub-question: the answer the reader
    gave at step k (``"predicted"``, strategy ``gold_decomposition``) or step k's gold answer
    (``"gold"``, strategy ``gold_bridges``).
    """

    def __init__(
        self, parts: EvalComponents, *, bridges: Literal["predicted", "gold"] = "predicted"
    ) -> None:
        self.parts = parts
        self.bridges = bridges

    def answer_record(self, record: QARecord) -> RunResult:
        steps = gold_decomposition(record)
        if not steps:
            raise InputError(f"question {record.id} has no gold decomposition")
        started = time.perf_counter()
        bridges: list[str] = []
        hops: list[dict[str, Any]] = []
        evidence: list[dict[str, Any]] = []
        totals = {"llm_calls": 0, "retrieval_calls": 0, "input_tokens": 0, "output_tokens": 0}
        failures = 0
        for step in steps:
            asked = as_question(substitute_answers(step.question, bridges))
            result = single_step(self.parts, asked)
            gold_bridge = self.bridges == "gold" and step.answers
            bridges.append(step.answers[0] if gold_bridge else result.answer)
            evidence.extend(result.trace.get("evidence") or [])
            for key in totals:
                totals[key] += int(result.trace.get(key) or 0)
            failures += _format_failures(result.trace)
            hops.append(
                {
                    "sub_question": step.question,
                    "asked": asked,
                    "answer": result.answer,
                    "gold": list(step.answers),
                    "covered": bool(step.answers) and cover_em(result.answer, step.answers) > 0,
                    "evidence": [item.get("title") for item in result.trace.get("evidence", [])],
                }
            )
        return RunResult(
            answer=hops[-1]["answer"],
            trace={
                "strategy": "gold_bridges" if self.bridges == "gold" else "gold_decomposition",
                "question": record.question,
                "hops": hops,
                "evidence": evidence,
                **totals,
                "format_failures": failures,
                "seconds": round(time.perf_counter() - started, 3),
            },
        )
