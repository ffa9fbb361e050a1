"""The fine-tuned complexity classifier needs torch and transformers (the [local] extra):
without them, training and predicting fail with one line naming the extra."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rag_complexity_agents.complexity.adaptive import finetuned, training
from rag_complexity_agents.complexity.adaptive.base import write_meta
from rag_complexity_agents.errors import MissingDependency
from rag_complexity_agents.optional import LOCAL_EXTRA


@pytest.fixture
def without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch and transformers cannot be imported (and nothing imported them yet)."""
    for name in ("torch", "transformers"):
        monkeypatch.setitem(sys.modules, name, None)
    for module in (finetuned, training):
        for lazy in (module.torch, module.transformers):
            monkeypatch.setattr(lazy, "_loaded", None)


def test_prediction_without_torch_names_the_extra(without_torch: None, tmp_path: Path) -> None:
    meta = {"kind": "finetuned", "backbone": "all-minilm-l6-v2", "labels": ["A", "B", "C"]}
    write_meta(tmp_path, meta)
    classifier = finetuned.FineTunedClassifier(tmp_path)
    with pytest.raises(MissingDependency, match=r"the fine-tuned complexity classifier needs"):
        classifier.predict_proba(["Who wrote Emma?"])


def test_training_without_torch_names_the_extra(without_torch: None, tmp_path: Path) -> None:
    pairs = [("Who wrote Emma?", "A"), ("Where was the author of Emma born?", "B")]
    with pytest.raises(MissingDependency) as info:
        training.train_classifier(pairs, tmp_path / "model")
    assert LOCAL_EXTRA in str(info.value) and "\n" not in str(info.value)
