"""Question-answering datasets in the common JSONL schema, and the pooled retrieval corpus.

Every file described in ``../shared/data/SOURCES.md`` (MuSiQue, 2WikiMultiHopQA, HotpotQA,
SQuAD, NQ-open, TriviaQA, Bamboogle, Compositional Celebrities) loads into one typed record,
:class:`QARecord`. Paragraphs get a content id, :func:`paragraph_id` of (title, text), so the
same paragraph has the same id in every question and every dataset: the pooled corpus
(:func:`build_pooled_corpus`) stores one document per distinct paragraph under that id, and
retrieval metrics compare the paragraph ids behind the evidence a strategy used with
``QARecord.supporting_ids``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..corpus.documents import SourceDocument
from ..errors import CorpusError, InputError

#: Short names for the files of the shared data directory (``rca eval run --dataset NAME``).
DATASET_FILES: dict[str, str] = {
    "musique": "musique_dev_ctx.jsonl",
    "musique_qa": "musique_dev_qa.jsonl",
    "2wikimultihopqa": "2wikimultihopqa_dev_ctx.jsonl",
    "hotpotqa": "hotpotqa_dev_distractor_ctx.jsonl",
    "hotpotqa_fullwiki": "hotpotqa_dev_fullwiki_ctx.jsonl",
    "squad": "squad_v1.1_dev.jsonl",
    "nq_open": "nq_open_dev.jsonl",
    "triviaqa": "triviaqa_subset.jsonl",
    "bamboogle": "bamboogle.jsonl",
    "compositional_celebrities": "compositional_celebrities_subset.jsonl",
}
DATASET_ALIASES: dict[str, str] = {
    "2wiki": "2wikimultihopqa",
    "hotpot": "hotpotqa",
    "nq": "nq_open",
    "trivia": "triviaqa",
    "cc": "compositional_celebrities",
}


@dataclass(frozen=True)
class DatasetSubset:
    """The questions of one dataset file that have one of ``qtypes`` (``QARecord.qtype``),
    in file order; usable wherever a dataset name is (``rca eval run --dataset NAME``)."""

    name: str
    dataset: str
    qtypes: tuple[str, ...]

    def select(self, records: Iterable[QARecord]) -> list[QARecord]:
        return [r for r in records if r.qtype in self.qtypes]


#: Named subsets (a key of :data:`DATASET_FILES` + question types).
DATASET_SUBSETS: dict[str, DatasetSubset] = {
    "2wikimultihopqa_compositional": DatasetSubset(
        "2wikimultihopqa_compositional", "2wikimultihopqa", ("compositional",)
    ),
}
_SUBSET_ALIASES: dict[str, str] = {"2wiki_compositional": "2wikimultihopqa_compositional"}

_PARAGRAPH_ID_PREFIX = "p"
_PARAGRAPH_ID_HEX = 16


def paragraph_id(title: str, text: str) -> str:
    """Stable content id of a paragraph: equal (title, text) after stripping ⇔ equal id."""
    digest = hashlib.sha256(f"{title.strip()}\x00{text.strip()}".encode()).hexdigest()
    return _PARAGRAPH_ID_PREFIX + digest[:_PARAGRAPH_ID_HEX]


def is_paragraph_id(value: object) -> bool:
    """Whether ``value`` looks like an id made by :func:`paragraph_id`."""
    if not isinstance(value, str) or len(value) != _PARAGRAPH_ID_HEX + 1:
        return False
    if not value.startswith(_PARAGRAPH_ID_PREFIX):
        return False
    return all(ch in "0123456789abcdef" for ch in value[1:])


@dataclass(frozen=True, slots=True)
class Paragraph:
    """One context paragraph of a question (``idx`` is its position in the record)."""

    id: str
    idx: int
    title: str
    text: str
    is_supporting: bool


@dataclass(frozen=True, slots=True)
class DecompositionStep:
    """A gold sub-question. MuSiQue steps use ``#k`` back-references to earlier answers."""

    question: str
    answers: tuple[str, ...]
    support_idx: int | None = None
    support_title: str | None = None
    support_id: str | None = None


@dataclass(frozen=True, slots=True)
class QARecord:
    """One question of any dataset, in the harness's common form.

    ``answers`` is the primary answer followed by its aliases (scoring takes the maximum over
    them). ``supporting_ids`` are :func:`paragraph_id` values of the gold supporting
    paragraphs present in ``paragraphs``; ``supporting_titles`` also covers datasets that name
    gold paragraphs without shipping them (MuSiQue ``*_qa``, HotpotQA fullwiki).
    ``hops`` is set where the dataset states it (MuSiQue, Bamboogle, Compositional
    Celebrities). ``extra`` keeps the dataset-specific fields (``type``, ``supporting_facts``,
    ``category``, ...).
    """

    id: str
    dataset: str
    question: str
    answers: tuple[str, ...]
    split: str = ""
    dev_index: int | None = None
    qtype: str | None = None
    hops: int | None = None
    supporting_ids: tuple[str, ...] = ()
    supporting_titles: tuple[str, ...] = ()
    paragraphs: tuple[Paragraph, ...] | None = None
    decomposition: tuple[DecompositionStep, ...] | None = None
    source_file: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def answer(self) -> str:
        """The primary gold answer."""
        return self.answers[0] if self.answers else ""

    @property
    def has_retrieval_gold(self) -> bool:
        return bool(self.supporting_ids or self.supporting_titles)


# --------------------------------------------------------------------------------------------
# Locating files
# --------------------------------------------------------------------------------------------


def default_data_dir() -> Path:
    """``$RCA_DATA_DIR``, else ``../shared/data`` beside the repository root, else ``./data``.

    The repository root is the parent of the installed package (editable installs) or the
    current directory.
    """
    env = os.environ.get("RCA_DATA_DIR")
    if env:
        return Path(env).expanduser()
    candidates = [
        Path(__file__).resolve().parents[2] / ".." / "shared" / "data",
        Path.cwd() / ".." / "shared" / "data",
        Path.cwd() / "data",
    ]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    return candidates[0].resolve()


def canonical_dataset_name(name: str) -> str | None:
    """The key of :data:`DATASET_FILES` for a short name or alias, or None."""
    key = name.strip().lower().replace("-", "_")
    key = DATASET_ALIASES.get(key, key)
    return key if key in DATASET_FILES else None


def dataset_subset(name: str | Path) -> DatasetSubset | None:
    """The :class:`DatasetSubset` called ``name`` (or an alias), or None."""
    key = str(name).strip().lower().replace("-", "_")
    return DATASET_SUBSETS.get(_SUBSET_ALIASES.get(key, key))


def resolve_dataset(name_or_path: str | Path, data_dir: str | Path | None = None) -> Path:
    """A dataset file from a path or a short name (``musique``, ``2wiki``, ``squad``, ...)."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    key = canonical_dataset_name(str(name_or_path))
    if key is not None:
        directory = Path(data_dir).expanduser() if data_dir else default_data_dir()
        candidate = directory / DATASET_FILES[key]
        if candidate.is_file():
            return candidate
        raise CorpusError(
            f"dataset {name_or_path!r} should be {candidate}, which does not exist; pass "
            "--data DIR (or set eval.data_dir / RCA_DATA_DIR) to the directory holding "
            f"{DATASET_FILES[key]}"
        )
    names = ", ".join(sorted(DATASET_FILES))
    raise CorpusError(
        f"{name_or_path} is neither a file nor a known dataset name; use a path to a JSONL "
        f"file in the shared schema or one of: {names}"
    )


# --------------------------------------------------------------------------------------------
# Parsing records
# --------------------------------------------------------------------------------------------

_COMMON_KEYS = frozenset(
    {
        "dataset",
        "split",
        "id",
        "dev_index",
        "question",
        "answer",
        "answer_aliases",
        "answers",
        "paragraphs",
        "source",
        "decomposition",
        "type",
        "num_hops",
    }
)


def _answers(raw: Mapping[str, Any], where: str) -> tuple[str, ...]:
    values: list[Any] = []
    if raw.get("answer") is not None:
        values.append(raw["answer"])
    values.extend(raw.get("answers") or [])
    values.extend(raw.get("answer_aliases") or [])
    out: list[str] = []
    for value in values:
        text = str(value).strip()  # Compositional Celebrities has integer answers (latitudes)
        if text and text not in out:
            out.append(text)
    if not out:
        raise CorpusError(f"{where}: the record has no gold answer")
    return tuple(out)


def _paragraphs(raw: Mapping[str, Any], where: str) -> tuple[Paragraph, ...] | None:
    items = raw.get("paragraphs")
    if items is None:
        return None
    if not isinstance(items, list):
        raise CorpusError(f"{where}: 'paragraphs' must be a list or null")
    out = []
    for position, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("text"), str):
            raise CorpusError(f"{where}: paragraph {position} has no string 'text'")
        title = str(item.get("title") or "").strip()
        text = item["text"].strip()
        out.append(
            Paragraph(
                id=paragraph_id(title, text),
                idx=int(item.get("idx", position)),
                title=title,
                text=text,
                is_supporting=bool(item.get("is_supporting", False)),
            )
        )
    return tuple(out)


def _decomposition(
    raw: Mapping[str, Any], paragraphs: Sequence[Paragraph] | None
) -> tuple[DecompositionStep, ...] | None:
    items = raw.get("decomposition")
    if not items:
        return None
    by_idx = {p.idx: p for p in paragraphs or ()}
    steps = []
    for item in items:
        answers = item.get("answers")
        if answers is None:
            answers = [item.get("answer")] if item.get("answer") is not None else []
        support_idx = item.get("paragraph_support_idx")
        support = by_idx.get(int(support_idx)) if support_idx is not None and by_idx else None
        title = item.get("support_title") or (support.title if support else None)
        steps.append(
            DecompositionStep(
                question=str(item.get("question", "")),
                answers=tuple(str(a) for a in answers),
                support_idx=int(support_idx) if support_idx is not None else None,
                support_title=str(title) if title else None,
                support_id=support.id if support else None,
            )
        )
    return tuple(steps)


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for value in values:
        if value:
            seen.setdefault(value, None)
    return tuple(seen)


def parse_record(raw: Mapping[str, Any], *, where: str = "record") -> QARecord:
    """One JSON object of the shared schema → :class:`QARecord` (CorpusError if unusable)."""
    if not isinstance(raw, Mapping):
        raise CorpusError(f"{where}: expected a JSON object")
    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        raise CorpusError(f"{where}: the record has no question")
    if raw.get("id") is None:
        raise CorpusError(f"{where}: the record has no id")
    dataset = str(raw.get("dataset") or "unknown")
    paragraphs = _paragraphs(raw, where)
    decomposition = _decomposition(raw, paragraphs)

    supporting = [p for p in paragraphs or () if p.is_supporting]
    titles: list[str] = [p.title for p in supporting]
    facts = raw.get("supporting_facts") or []
    titles.extend(str(fact[0]).strip() for fact in facts if fact)
    if decomposition and not paragraphs:
        titles.extend(step.support_title for step in decomposition if step.support_title)

    hops: int | None = None
    if raw.get("num_hops") is not None:
        hops = int(raw["num_hops"])
    elif decomposition and dataset in {"bamboogle", "compositional_celebrities"}:
        hops = len(decomposition)

    dev_index = raw.get("dev_index")
    return QARecord(
        id=str(raw["id"]),
        dataset=dataset,
        question=question.strip(),
        answers=_answers(raw, where),
        split=str(raw.get("split") or ""),
        dev_index=int(dev_index) if dev_index is not None else None,
        qtype=str(raw["type"]) if raw.get("type") is not None else raw.get("category"),
        hops=hops,
        supporting_ids=_unique(p.id for p in supporting),
        supporting_titles=_unique(titles),
        paragraphs=paragraphs,
        decomposition=decomposition,
        source_file=where.rsplit(":", 1)[0],
        extra={k: v for k, v in raw.items() if k not in _COMMON_KEYS},
    )


def gold_decomposition(record: QARecord) -> tuple[DecompositionStep, ...] | None:
    """The dataset's own sub-questions of ``record``, or None when it has none.

    MuSiQue ships them (``decomposition``). For 2WikiMultiHopQA *compositional* questions they
    are read off the chain of ``evidences`` triples (subject, relation, object): step 1 is
    ``"<subject> >> <relation>"`` and step k > 1 ``"#<k-1> >> <relation>"`` (MuSiQue's form,
    ``#k`` standing for the answer of step k), each with the triple's object as gold answer.
    The other 2Wiki types (comparison, inference) are not chains, so they get None.
    """
    if record.decomposition:
        return record.decomposition
    triples = record.extra.get("evidences")
    if record.qtype != "compositional" or not isinstance(triples, list) or len(triples) < 2:
        return None
    steps = []
    for position, triple in enumerate(triples):
        if not isinstance(triple, list | tuple) or len(triple) != 3:
            return None
        subject, relation, obj = (str(part).strip() for part in triple)
        head = subject if position == 0 else f"#{position}"
        steps.append(DecompositionStep(question=f"{head} >> {relation}", answers=(obj,)))
    return tuple(steps)


def iter_records(path: str | Path) -> Iterator[QARecord]:
    """Records of one JSONL file in file order; CorpusError names the file and line."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise CorpusError(f"{path} does not exist")
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path.name}:{line_no}"
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(f"{where}: not valid JSON ({exc.msg})") from exc
            yield parse_record(raw, where=where)


def load_records(path: str | Path, *, offset: int = 0, limit: int | None = None) -> list[QARecord]:
    """Records ``offset .. offset + limit`` of a file (all with ``limit=None``).

    Raises CorpusError on duplicate ids (the harness keys results by id) and InputError for
    a negative offset or limit.
    """
    if offset < 0 or (limit is not None and limit < 0):
        raise InputError("--offset and --limit must be zero or positive")
    records = list(iter_records(path))
    seen: set[str] = set()
    for record in records:
        if record.id in seen:
            raise CorpusError(f"{path}: id {record.id!r} occurs twice; ids must be unique")
        seen.add(record.id)
    end = None if limit is None else offset + limit
    return records[offset:end]


# --------------------------------------------------------------------------------------------
# The pooled corpus
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PooledCorpus:
    """Distinct paragraphs of several datasets, one :class:`SourceDocument` each.

    A document's id is the paragraph's :func:`paragraph_id`; its metadata holds
    ``paragraph_id`` and ``datasets`` (comma-separated, where it occurs). ``raw_paragraphs`` counts
    paragraphs before de-duplication; ``fingerprint`` changes whenever the content does.
    """

    documents: tuple[SourceDocument, ...]
    raw_paragraphs: int
    per_dataset: Mapping[str, int]
    fingerprint: str

    def __len__(self) -> int:
        return len(self.documents)


def build_pooled_corpus(records: Iterable[QARecord], *, title_in_text: bool = True) -> PooledCorpus:
    """Pool the paragraphs of ``records`` (deduplicated by title + text) into documents.

    With ``title_in_text`` the indexed text is ``title + "\\n" + text`` so that the dense
    encoder sees the title too (BM25 indexes the title either way), as in
    ``benchmarks/retrieval.py``. Records without paragraphs contribute nothing.
    """
    order: dict[str, Paragraph] = {}
    datasets: dict[str, list[str]] = {}
    per_dataset: dict[str, int] = {}
    raw = 0
    for record in records:
        for paragraph in record.paragraphs or ():
            raw += 1
            per_dataset[record.dataset] = per_dataset.get(record.dataset, 0) + 1
            order.setdefault(paragraph.id, paragraph)
            seen_in = datasets.setdefault(paragraph.id, [])
            if record.dataset not in seen_in:
                seen_in.append(record.dataset)
    digest = hashlib.sha256(f"title_in_text={title_in_text}".encode())
    documents = []
    for pid, paragraph in order.items():
        digest.update(pid.encode())
        text = f"{paragraph.title}\n{paragraph.text}" if title_in_text else paragraph.text
        documents.append(
            SourceDocument(
                id=pid,
                text=text,
                title=paragraph.title,
                metadata={"paragraph_id": pid, "datasets": ",".join(datasets[pid])},
            )
        )
    return PooledCorpus(
        documents=tuple(documents),
        raw_paragraphs=raw,
        per_dataset=per_dataset,
        fingerprint=digest.hexdigest()[:12],
    )
