"""The records of GRADE's generation pipeline and their JSONL output.

:class:`Sentence` and :class:`Claim` flow between the stages; :class:`GradeQuestion` is one
validated question with its difficulty coordinates and provenance; :class:`GenerationResult`
is what a run returns. :func:`write_jsonl` writes questions in the shared dataset schema.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .kg import Triple


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of a document and the evaluation-setting chunk it lies in."""

    id: str
    doc_id: str
    title: str
    text: str
    chunk_id: str


@dataclass(frozen=True, slots=True)
class Claim:
    """A decontextualised claim written for one sentence (same id)."""

    id: str
    sentence: Sentence
    text: str


@dataclass(frozen=True, slots=True)
class GradeQuestion:
    """One validated question with its difficulty coordinates and provenance."""

    id: str
    question: str
    answer: str
    aliases: tuple[str, ...]
    hops: int
    path: tuple[str, ...]
    triples: tuple[Triple, ...]
    equivalence_links: tuple[int, ...]
    supporting: tuple[dict[str, str], ...]
    dr: float
    dr_mean: float
    dr_power: float
    validation: float | None

    def to_record(self) -> dict[str, Any]:
        """A JSONL record in the shared dataset schema (``rca eval run --dataset FILE`` reads
        it: ``num_hops``, ``answers`` and the supporting chunks as ``paragraphs``)."""
        return {
            "dataset": "grade",
            "id": self.id,
            "question": self.question,
            "answer": self.answer,
            "answers": [self.answer, *self.aliases],
            "num_hops": self.hops,
            "type": f"{self.hops}hop",
            "path": list(self.path),
            "triples": [t.to_dict() for t in self.triples],
            "equivalence_links": list(self.equivalence_links),
            "paragraphs": [
                {"title": s["title"], "text": s["text"], "is_supporting": True, "chunk_id": s["id"]}
                for s in self.supporting
            ],
            "dr": round(self.dr, 6),
            "dr_mean": round(self.dr_mean, 6),
            "dr_power": round(self.dr_power, 6),
            "validation": None if self.validation is None else round(self.validation, 4),
        }


@dataclass(slots=True)
class GenerationResult:
    """The questions of a run, what was skipped (reason → count) and per-stage statistics."""

    questions: list[GradeQuestion]
    skipped: Counter[str]
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def by_hops(self) -> dict[int, int]:
        """Number of questions per hop count."""
        return dict(sorted(Counter(q.hops for q in self.questions).items()))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary: counts, skipped reasons and the statistics."""
        return {
            "questions": len(self.questions),
            "by_hops": {str(k): v for k, v in self.by_hops.items()},
            "skipped": dict(sorted(self.skipped.items())),
            **self.stats,
        }


def write_jsonl(questions: Sequence[GradeQuestion], out: str | Path) -> None:
    """Write the questions as JSONL records (see :meth:`GradeQuestion.to_record`)."""
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8") as handle:
        for q in questions:
            handle.write(json.dumps(q.to_record(), ensure_ascii=False) + "\n")
