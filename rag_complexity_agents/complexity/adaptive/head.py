"""The router the package ships: a logistic head on the retrieval embedder.

A question's sentence embedding (the collection's embedder, already loaded for retrieval)
goes through one linear layer and a softmax over the head's labels. The weights are package
data (``head.json``: labels, weights, bias, the embedding spec they belong to and how they
were trained), so routing needs no training run and no LLM call; a classification costs
one query embedding.

Not in the paper: Adaptive-RAG fine-tunes a T5 classifier on labels from running A, B and
C. The shipped head is trained by ``benchmarks/adaptive.py --write-head`` on dataset-bias
labels (one-fact datasets → B, multi-hop datasets → C), so it never predicts A and it
recognises the datasets' question styles rather than measured complexity.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InputError, ModelNotAvailable
from ...models.base import Embedder
from .base import Probabilities, normalise
from .labels import LABELS

HEAD_FILE = Path(__file__).with_name("head.json")
"""The shipped head's weights."""


def fit_head(
    vectors: np.ndarray, labels: Sequence[str], *, l2: float = 1e-3, steps: int = 500
) -> dict[str, Any]:
    """Multinomial logistic regression by full-batch gradient descent (numpy only).

    ``vectors``: one row per question; ``labels``: its label (two or more distinct ones).
    Returns ``{"labels", "weights", "bias"}`` (lists, ready for JSON)."""
    classes = sorted(set(labels))
    if len(classes) < 2 or any(label not in LABELS for label in classes):
        raise InputError(f"the head needs at least two of the labels {LABELS}, got {classes}")
    if len(vectors) != len(labels):
        raise InputError(f"{len(vectors)} vectors for {len(labels)} labels")
    x = np.asarray(vectors, dtype=np.float64)
    y = np.zeros((len(labels), len(classes)))
    y[np.arange(len(labels)), [classes.index(label) for label in labels]] = 1.0
    w = np.zeros((len(classes), x.shape[1]))
    b = np.zeros(len(classes))
    rate = 1.0
    for _ in range(steps):
        p = _softmax(x @ w.T + b)
        grad = (p - y) / len(x)
        w -= rate * (grad.T @ x + l2 * w)
        b -= rate * grad.sum(axis=0)
    return {"labels": classes, "weights": w.round(6).tolist(), "bias": b.round(6).tolist()}


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max(axis=1, keepdims=True))
    out: np.ndarray = z / z.sum(axis=1, keepdims=True)
    return out


class EmbeddingHeadClassifier:
    """``adaptive.classifier = "head"``: the shipped head over the embedder's vectors.

    ``embedder`` is called once, on the first question (the embedder loads lazily)."""

    name = "head"
    llm_calls_per_question = 0

    def __init__(self, embedder: Callable[[], Embedder], head: dict[str, Any]) -> None:
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self.labels: list[str] = list(head["labels"])
        self.weights = np.asarray(head["weights"], dtype=np.float64)
        self.bias = np.asarray(head["bias"], dtype=np.float64)

    @classmethod
    def shipped(
        cls, embedder: Callable[[], Embedder], embedding: str, path: Path = HEAD_FILE
    ) -> EmbeddingHeadClassifier:
        """The head in ``path``; ModelNotAvailable unless it was trained on ``embedding``'s
        vectors (the spec of ``models.embedding``)."""
        try:
            head = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelNotAvailable(f"no usable complexity head at {path}: {exc}") from exc
        if head.get("embedding") != embedding:
            raise ModelNotAvailable(
                f"the shipped complexity head reads {head.get('embedding')!r} vectors, "
                f"not models.embedding = {embedding!r}"
            )
        return cls(embedder, head)

    def predict_proba(self, questions: Sequence[str]) -> list[Probabilities]:
        if not questions:
            return []
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        vectors = np.asarray(self._embedder.encode(list(questions)), dtype=np.float64)
        probs = _softmax(vectors @ self.weights.T + self.bias)
        return [normalise(dict(zip(self.labels, row.tolist(), strict=True))) for row in probs]
