"""What every Adaptive-RAG complexity classifier shares: the protocol, label helpers and the
metadata file of a saved classifier."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ...errors import ModelNotAvailable
from .labels import LABELS, Label

#: The metadata file of a saved classifier (kind, labels, training settings).
META_FILE = "adaptive_classifier.json"
Probabilities = dict[str, float]


@runtime_checkable
class ComplexityClassifier(Protocol):
    """Maps questions to a probability for each of the labels A, B, C."""

    name: str
    #: LLM calls spent per classified question (cost accounting in traces and benchmarks).
    llm_calls_per_question: int

    def predict_proba(self, questions: Sequence[str]) -> list[Probabilities]: ...


def best_label(probs: Mapping[str, float]) -> Label:
    """The most probable label; ties go to the more complex one (safer for answers)."""
    best: Label = "C"
    best_p = -1.0
    for label in reversed(LABELS):
        p = float(probs.get(label, 0.0))
        if p > best_p:
            best, best_p = label, p
    return best


def normalise(probs: Mapping[str, float]) -> Probabilities:
    """Non-negative probabilities over A, B, C that sum to 1 (uniform when there is no mass)."""
    values = {label: max(0.0, float(probs.get(label, 0.0))) for label in LABELS}
    total = sum(values.values())
    if total <= 0.0 or not math.isfinite(total):
        return {label: 1.0 / len(LABELS) for label in LABELS}
    return {label: round(v / total, 6) for label, v in values.items()}


def write_meta(directory: Path, meta: dict[str, Any]) -> None:
    """Write a saved classifier's metadata (plus creation time and format version)."""
    meta = {**meta, "created": datetime.now(UTC).isoformat(timespec="seconds"), "format": 1}
    (directory / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def read_meta(directory: str | Path) -> dict[str, Any]:
    """The metadata of a saved classifier (ModelNotAvailable if absent or unreadable)."""
    path = Path(directory).expanduser()
    meta_file = path / META_FILE
    if not path.is_dir() or not meta_file.is_file():
        raise ModelNotAvailable(
            f"no trained complexity classifier in {path} (missing {META_FILE}); train one with "
            "`rca adaptive train LABELS.jsonl --out DIR` or use adaptive.classifier=llm"
        )
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ModelNotAvailable(f"{meta_file} is not valid JSON ({exc.msg}); retrain") from exc
    if not isinstance(meta, dict) or meta.get("labels") != list(LABELS):
        raise ModelNotAvailable(f"{meta_file} does not describe an A/B/C classifier; retrain")
    return meta
