"""The TF-IDF + logistic-regression complexity classifier: the cheap non-neural baseline.

Saved without pickle: the fitted numbers go to ``tfidf.npz`` (idf weights, coefficients,
intercepts; read with ``allow_pickle=False``) and the vocabulary and classes to
``tfidf.json``. Loading rebuilds the scikit-learn pipeline from them, so a loaded model
predicts exactly what the saved one did.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ModelNotAvailable
from .base import Probabilities, normalise, read_meta, write_meta
from .labels import LABELS
from .training import validate_training_data

#: Vocabulary (terms in column order) and classes of a saved TF-IDF classifier.
TFIDF_JSON = "tfidf.json"
#: Its arrays: ``idf``, ``coef``, ``intercept``.
TFIDF_ARRAYS = "tfidf.npz"


def _pipeline(seed: int = 0) -> Any:
    """The unfitted pipeline: TF-IDF over words and bigrams → logistic regression."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    return make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1),
        LogisticRegression(max_iter=2000, C=4.0, random_state=seed),
    )


class TfidfClassifier:
    """TF-IDF (words + bigrams) → logistic regression; the non-neural baseline."""

    name = "tfidf-logreg"
    llm_calls_per_question = 0

    def __init__(self, pipeline: Any) -> None:
        self.pipeline = pipeline

    @classmethod
    def train(cls, pairs: Sequence[tuple[str, str]], *, seed: int = 0) -> TfidfClassifier:
        """Fit on (question, label) pairs (InputError for unusable training data)."""
        validate_training_data(pairs)
        pipeline = _pipeline(seed)
        pipeline.fit([q for q, _ in pairs], [label for _, label in pairs])
        return cls(pipeline)

    def save(self, directory: str | Path, *, n: int | None = None) -> Path:
        """Write the model to ``directory`` (arrays + JSON + metadata); returns it."""
        vectorizer, model = (step for _, step in self.pipeline.steps)
        terms = sorted(vectorizer.vocabulary_, key=vectorizer.vocabulary_.__getitem__)
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        np.savez(
            target / TFIDF_ARRAYS,
            idf=vectorizer.idf_,
            coef=model.coef_,
            intercept=model.intercept_,
        )
        state = {"terms": terms, "classes": [str(c) for c in model.classes_]}
        (target / TFIDF_JSON).write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")
        write_meta(target, {"kind": "tfidf", "labels": list(LABELS), "n": n})
        return target

    @classmethod
    def load(cls, directory: str | Path) -> TfidfClassifier:
        """The classifier saved in ``directory`` (ModelNotAvailable if it holds none)."""
        path = Path(directory).expanduser()
        meta = read_meta(path)
        if meta.get("kind") != "tfidf" or not all(
            (path / name).is_file() for name in (TFIDF_JSON, TFIDF_ARRAYS)
        ):
            raise ModelNotAvailable(
                f"{path} holds no TF-IDF classifier ({TFIDF_JSON} and {TFIDF_ARRAYS} are "
                "needed; retrain it with rca adaptive train --kind tfidf)"
            )
        try:
            state = json.loads((path / TFIDF_JSON).read_text(encoding="utf-8"))
            with np.load(path / TFIDF_ARRAYS, allow_pickle=False) as arrays:
                idf, coef, intercept = arrays["idf"], arrays["coef"], arrays["intercept"]
        except (OSError, ValueError, KeyError) as exc:
            raise ModelNotAvailable(f"cannot read the TF-IDF classifier in {path}: {exc}") from exc
        pipeline = _pipeline()
        vectorizer, model = (step for _, step in pipeline.steps)
        vectorizer.vocabulary_ = {term: i for i, term in enumerate(state["terms"])}
        vectorizer.idf_ = idf
        model.coef_, model.intercept_ = coef, intercept
        model.classes_ = np.array(state["classes"])
        return cls(pipeline)

    def predict_proba(self, questions: Sequence[str]) -> list[Probabilities]:
        """A probability for each label per question."""
        if not questions:
            return []
        classes = [str(c) for c in self.pipeline.classes_]
        rows = self.pipeline.predict_proba([q.strip() for q in questions])
        return [normalise(dict(zip(classes, map(float, row), strict=True))) for row in rows]
