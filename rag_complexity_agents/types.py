"""Plain data types shared by every layer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Provenance = Literal["first_stage", "neighbour", "backfill"]

#: Chunk metadata that places a passage inside its file (a PDF page, an HTML section, a CSV
#: row); traces carry them so that citations can name the place.
CITATION_KEYS = ("page", "section", "row")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One stored passage: the unit of retrieval."""

    id: str
    text: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ScoredDoc:
    """A retrieved chunk with its score and where it came from.

    ``source`` is ``first_stage`` for documents of the initial ranking, ``neighbour`` for
    documents reached through the corpus graph and ``backfill`` for unscored first-stage
    documents appended after the budget ran out. ``batch`` is the NAR batch that scored it
    and ``via`` the id of the document whose neighbours brought it in.
    """

    chunk: Chunk
    score: float
    source: Provenance = "first_stage"
    rank: int | None = None
    batch: int | None = None
    via: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.chunk.id

    @property
    def text(self) -> str:
        return self.chunk.text

    def to_trace(self) -> dict[str, Any]:
        """JSON-serialisable view for traces."""
        return {
            "id": self.chunk.id,
            "doc_id": self.chunk.metadata.get("doc_id"),
            "title": self.chunk.title,
            "score": float(self.score),
            "source": self.source,
            "rank": self.rank,
            "batch": self.batch,
            "via": self.via,
            **{k: self.chunk.metadata[k] for k in CITATION_KEYS if k in self.chunk.metadata},
            **self.extra,
        }


@dataclass(slots=True)
class RunResult:
    """What every strategy returns: the answer, a JSON-serialisable trace and, when the
    strategy knows them, the passages the answer was drawn from."""

    answer: str
    trace: dict[str, Any] = field(default_factory=dict)
    sources: list[dict[str, Any]] = field(default_factory=list)

    @property
    def format_failures(self) -> int:
        """Replies of the run that could not be read as their step's structure (the trace's
        ``format_failures``; 0 when the trace does not count them)."""
        return int(self.trace.get("format_failures") or 0)
