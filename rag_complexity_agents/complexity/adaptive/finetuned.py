"""The fine-tuned encoder classifier: a 3-class sequence classifier saved by
:func:`~.training.train_classifier` (weights + tokenizer + metadata in one directory)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import ModelNotAvailable
from ...optional import LazyModule
from .base import Probabilities, normalise, read_meta
from .training import TorchThreads

if TYPE_CHECKING:
    import torch
    import transformers
else:  # only a prediction needs them, and they come with the [local] extra
    torch = LazyModule("torch", "the fine-tuned complexity classifier")
    transformers = LazyModule("transformers", "the fine-tuned complexity classifier")


class FineTunedClassifier:
    """A saved fine-tuned encoder classifier (loads lazily on first prediction)."""

    llm_calls_per_question = 0

    def __init__(self, directory: str | Path, *, threads: int = 1, batch_size: int = 32):
        self.directory = Path(directory).expanduser()
        self.meta = read_meta(self.directory)
        if self.meta.get("kind") != "finetuned":
            raise ModelNotAvailable(f"{self.directory} holds a {self.meta.get('kind')} model")
        self.name = f"finetuned:{self.meta.get('backbone', '?')}"
        self.threads = threads
        self.batch_size = batch_size
        self._model: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        if self._model is not None:
            return
        try:
            self._tokenizer = transformers.AutoTokenizer.from_pretrained(str(self.directory))
            model = transformers.AutoModelForSequenceClassification.from_pretrained(
                str(self.directory)
            )
        except (OSError, ValueError) as exc:
            raise ModelNotAvailable(
                f"cannot load the classifier in {self.directory}: {exc}; retrain it"
            ) from exc
        model.eval()
        self._model = model

    def predict_proba(self, questions: Sequence[str]) -> list[Probabilities]:
        if not questions:
            return []
        self._load()
        max_length = int(self.meta.get("max_length") or 64)
        id2label = {int(k): v for k, v in self._model.config.id2label.items()}
        out: list[Probabilities] = []
        with TorchThreads(self.threads), torch.no_grad():
            for start in range(0, len(questions), self.batch_size):
                batch = [q.strip() or "?" for q in questions[start : start + self.batch_size]]
                encoded = self._tokenizer(
                    batch, truncation=True, max_length=max_length, padding=True, return_tensors="pt"
                )
                probs = torch.softmax(self._model(**encoded).logits, dim=-1).tolist()
                for row in probs:
                    out.append(normalise({id2label[i]: p for i, p in enumerate(row)}))
        return out
