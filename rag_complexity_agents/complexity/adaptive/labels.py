"""Adaptive-RAG automatic labels (Jeong et al. 2024, §3.3 "Training Strategy").

A question's complexity label is the *simplest* strategy that answered it correctly:
A (no retrieval) over B (single-step retrieval) over C (multi-step loop). Questions that no
strategy answered get the inductive bias of their dataset: single-hop datasets (SQuAD,
NQ-open, TriviaQA) → B, multi-hop datasets (MuSiQue, HotpotQA, 2WikiMultiHopQA, and here also
Bamboogle and Compositional Celebrities) → C.

:func:`auto_label` and :func:`bias_label` are pure; :func:`label_from_runs` combines run-file
lines of the evaluation harness and :func:`write_labels` writes the labelled JSONL file (one
``{"id", "dataset", "question", "label", "source", "correct"}`` object per question).
:func:`rag_complexity_agents.eval.adaptive.collect_labels` runs A, B and C through the
harness (resumable run files, LLM cache) to produce those lines.

"Answered correctly" uses ``cover_em`` by default (SUNAR's cover exact match: the normalised
gold answer occurs in the prediction as a whole run of tokens); ``metric`` /
``adaptive.correct_metric`` can switch to ``acc`` (the Adaptive-RAG paper's "Acc": the
normalised gold answer is a character substring of the prediction, see
:mod:`rag_complexity_agents.eval.metrics`), ``em`` or ``f1`` (with ``min_score``).

Strategy C defaults to the package's default pipeline (``DEFAULT_STRATEGIES``,
``adaptive.c_strategy``); the paper's C is IRCoT, available as the ``ircot`` preset
(``ircot_nar``, ``ircot_sunar``, ``ircot_sunar_mer`` add SUNAR's parts).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ...config.pipelines import DEFAULT_PIPELINE
from ...errors import InputError

if TYPE_CHECKING:
    from ...config import Config

Label = Literal["A", "B", "C"]
LABELS: tuple[Label, ...] = ("A", "B", "C")
"""Labels from the simplest to the most complex strategy."""

LabelSource = Literal["outcome", "bias", "none"]

SINGLE_HOP_DATASETS: frozenset[str] = frozenset({"squad", "nq_open", "nq", "triviaqa", "trivia"})
MULTI_HOP_DATASETS: frozenset[str] = frozenset(
    {
        "musique",
        "hotpotqa",
        "hotpotqa_fullwiki",
        "2wikimultihopqa",
        "2wiki",
        "bamboogle",
        "compositional_celebrities",
    }
)

#: Pipelines of A, B and C (each configurable: ``adaptive.a_strategy`` …); C is the default
#: pipeline.
DEFAULT_STRATEGIES: dict[Label, str] = {
    "A": "no_retrieval",
    "B": "single_step",
    "C": DEFAULT_PIPELINE,
}


def bias_label(dataset: str, hops: int | None = None) -> Label | None:
    """The dataset's inductive-bias label: single-hop → B, multi-hop → C, unknown → None.

    For an unknown dataset a stated hop count decides (1 → B, ≥ 2 → C).
    """
    key = dataset.strip().lower().replace("-", "_")
    if key in SINGLE_HOP_DATASETS:
        return "B"
    if key in MULTI_HOP_DATASETS:
        return "C"
    if hops is not None:
        return "B" if hops <= 1 else "C"
    return None


def auto_label(
    correct: Mapping[str, bool | None], bias: Label | None
) -> tuple[Label | None, LabelSource]:
    """(label, source) from which strategies answered correctly.

    ``correct`` maps "A"/"B"/"C" to True/False (None or missing = not run). The first
    strategy in A, B, C order that was correct wins (source ``outcome``); otherwise the bias
    label (source ``bias``), or ``(None, "none")`` without one.
    """
    unknown = set(correct) - set(LABELS)
    if unknown:
        raise InputError(f"unknown strategy labels {sorted(unknown)}; use A, B, C")
    for label in LABELS:
        if correct.get(label):
            return label, "outcome"
    if bias is not None:
        return bias, "bias"
    return None, "none"


def is_correct(line: Mapping[str, Any], metric: str = "cover_em", min_score: float = 1.0) -> bool:
    """Whether one run-file line counts as answered correctly (errors never do)."""
    if line.get("error"):
        return False
    value = (line.get("metrics") or {}).get(metric)
    try:
        return value is not None and float(value) >= min_score
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class LabelledQuestion:
    """One line of a labelled JSONL file."""

    id: str
    dataset: str
    question: str
    label: Label
    source: LabelSource
    correct: dict[str, bool]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def label_from_runs(
    runs: Mapping[str, Mapping[str, Mapping[str, Any]]],
    *,
    metric: str = "cover_em",
    min_score: float = 1.0,
    questions: Sequence[Mapping[str, Any]] | None = None,
) -> list[LabelledQuestion]:
    """Label every question found in the run lines ``runs[label][question id]``.

    ``questions`` (``{"id", "dataset", "question", "hops"?}``) fixes the order and the set;
    by default the union of the ids in the runs, in first-seen order. Questions without any
    correct answer and without a bias label are skipped.
    """
    if questions is None:
        seen: dict[str, Mapping[str, Any]] = {}
        for route in LABELS:
            for qid, line in (runs.get(route) or {}).items():
                seen.setdefault(qid, line)
        questions = list(seen.values())
    out: list[LabelledQuestion] = []
    for item in questions:
        qid = str(item["id"])
        dataset = str(item.get("dataset") or "")
        correct: dict[str, bool] = {}
        for route in LABELS:
            run_line = (runs.get(route) or {}).get(qid)
            if run_line is not None:
                correct[route] = is_correct(run_line, metric, min_score)
        hops = item.get("hops")
        label, source = auto_label(
            correct, bias_label(dataset, hops if isinstance(hops, int) else None)
        )
        if label is None:
            continue
        out.append(
            LabelledQuestion(qid, dataset, str(item.get("question") or ""), label, source, correct)
        )
    return out


def write_labels(items: Iterable[LabelledQuestion], path: str | Path) -> Path:
    """Write labelled questions as JSONL (atomically replaces ``path``)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item.to_json(), ensure_ascii=False) + "\n")
    tmp.replace(target)
    return target


def read_labelled(path: str | Path) -> list[tuple[str, Label]]:
    """(question, label) pairs of a labelled JSONL file (``question`` + ``label`` keys).

    Raises InputError for a missing file, bad JSON or a label outside A/B/C.
    """
    source = Path(path)
    if not source.is_file():
        raise InputError(
            f"labelled data {source} does not exist; create it with `rca adaptive label`"
        )
    pairs: list[tuple[str, Label]] = []
    with open(source, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{source.name}:{number}: not valid JSON ({exc.msg})") from exc
            question = obj.get("question") if isinstance(obj, dict) else None
            label = obj.get("label") if isinstance(obj, dict) else None
            if not isinstance(question, str) or not question.strip():
                raise InputError(f"{source.name}:{number}: no 'question' text")
            if label not in LABELS:
                raise InputError(f"{source.name}:{number}: label {label!r} is not one of A, B, C")
            pairs.append((question.strip(), label))
    return pairs


def strategies_for(config: Config) -> dict[Label, str]:
    """Harness strategy names of A, B, C from ``config.adaptive``."""
    section = config.adaptive
    return {"A": section.a_strategy, "B": section.b_strategy, "C": section.c_strategy}
