"""Training the fine-tuned complexity classifier on CPU, and checking training data.

*Deviation from the paper:* Jeong et al. fine-tune t5-large (lr 3e-5, batch 32, max length
384) to generate the label letter; t5 is not available offline and MiniLM (22 M parameters)
trains in seconds on CPU, so we use a classification head, lr 5e-5, batch 16, max length 64
(questions are short).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import InputError, ModelNotAvailable
from ...models.packaged import PACKAGED_EMBEDDINGS, packaged_embedding_path
from ...optional import LazyModule
from .base import write_meta
from .labels import LABELS

if TYPE_CHECKING:
    import torch
    import transformers
else:  # only training needs them, and they come with the [local] extra
    torch = LazyModule("torch", "training the complexity classifier")
    transformers = LazyModule("transformers", "training the complexity classifier")


def _key(question: str) -> str:
    return " ".join(question.casefold().split())


def validate_training_data(pairs: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Check (question, label) pairs; returns the label counts.

    InputError for: no data, an empty question, a label outside A/B/C, the same question
    twice (after case/space normalisation; conflicting or not, duplicates would leak between
    train and test splits and skew the loss), or fewer than two distinct labels.
    """
    if not pairs:
        raise InputError("no training data: give at least two labelled questions")
    seen: dict[str, int] = {}
    for index, (question, label) in enumerate(pairs):
        if not isinstance(question, str) or not question.strip():
            raise InputError(f"training example {index}: empty question")
        if label not in LABELS:
            raise InputError(f"training example {index}: label {label!r} is not one of A, B, C")
        key = _key(question)
        if key in seen:
            raise InputError(
                f"duplicate training question (examples {seen[key]} and {index}): "
                f"{question.strip()[:80]!r}; remove duplicates before training"
            )
        seen[key] = index
    counts = Counter(label for _, label in pairs)
    if len(counts) < 2:
        only = next(iter(counts))
        raise InputError(
            f"all {len(pairs)} training questions have label {only!r}; a classifier needs at "
            "least two classes (add questions of other complexity, e.g. from another dataset)"
        )
    return {label: counts.get(label, 0) for label in LABELS}


def resolve_backbone(backbone: str) -> Path:
    """A packaged embedding name (``all-minilm-l6-v2``) or a local model directory."""
    if backbone in PACKAGED_EMBEDDINGS:
        return packaged_embedding_path(backbone)
    path = Path(backbone).expanduser()
    if not (path / "config.json").is_file():
        raise ModelNotAvailable(
            f"backbone {backbone!r} is neither a packaged model "
            f"({', '.join(PACKAGED_EMBEDDINGS)}) nor a local Hugging Face model directory "
            "with a config.json"
        )
    return path


@dataclass
class TrainReport:
    """What :func:`train_classifier` did: per-epoch mean loss, counts, time."""

    kind: str
    directory: str
    n: int
    label_counts: dict[str, int]
    epoch_losses: list[float] = field(default_factory=list)
    initial_loss: float | None = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "directory": self.directory,
            "n": self.n,
            "label_counts": self.label_counts,
            "epoch_losses": self.epoch_losses,
            "initial_loss": self.initial_loss,
            "seconds": round(self.seconds, 2),
        }


class TorchThreads:
    """Temporarily set torch's intra-op threads (restored on exit)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.before = 0

    def __enter__(self) -> None:
        self.before = torch.get_num_threads()
        torch.set_num_threads(self.n)

    def __exit__(self, *exc: object) -> None:
        torch.set_num_threads(self.before)


def train_classifier(
    pairs: Sequence[tuple[str, str]],
    out_dir: str | Path,
    *,
    backbone: str = "all-minilm-l6-v2",
    epochs: int = 3,
    learning_rate: float = 5e-5,
    batch_size: int = 16,
    max_length: int = 64,
    seed: int = 0,
    threads: int = 1,
    progress: bool = False,
    on_epoch: Callable[[int, float], None] | None = None,
) -> TrainReport:
    """Fine-tune ``backbone`` + a 3-way head on (question, label) pairs; save to ``out_dir``.

    Plain PyTorch loop: AdamW, shuffled mini-batches, cross-entropy over the three labels
    (labels absent from the data simply never appear as targets). ``initial_loss`` is the
    mean loss of the untrained head over the data, so callers can check that training
    helped.
    """
    counts = validate_training_data(pairs)
    if epochs < 1 or batch_size < 1 or max_length < 8:
        raise InputError("epochs and batch_size must be >= 1 and max_length >= 8")
    source = resolve_backbone(backbone)

    started = time.perf_counter()
    label2id: dict[str, int] = {label: i for i, label in enumerate(LABELS)}
    with TorchThreads(threads):
        torch.manual_seed(seed)
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(source))
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            str(source),
            num_labels=len(LABELS),
            id2label=dict(enumerate(LABELS)),
            label2id=label2id,
        )
        texts = [q.strip() for q, _ in pairs]
        targets = torch.tensor([label2id[label] for _, label in pairs])
        encoded = tokenizer(
            texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt"
        )

        def mean_loss() -> float:
            model.eval()
            total = 0.0
            with torch.no_grad():
                for start in range(0, len(texts), 64):
                    sl = slice(start, start + 64)
                    out = model(
                        input_ids=encoded["input_ids"][sl],
                        attention_mask=encoded["attention_mask"][sl],
                        labels=targets[sl],
                    )
                    total += float(out.loss) * len(targets[sl])
            return total / len(texts)

        report = TrainReport("finetuned", str(out_dir), len(pairs), counts)
        report.initial_loss = round(mean_loss(), 6)
        optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
        order = list(range(len(texts)))
        rng = random.Random(seed)
        for epoch in range(epochs):
            model.train()
            rng.shuffle(order)
            total, seen = 0.0, 0
            for start in range(0, len(order), batch_size):
                idx = torch.tensor(order[start : start + batch_size])
                out = model(
                    input_ids=encoded["input_ids"][idx],
                    attention_mask=encoded["attention_mask"][idx],
                    labels=targets[idx],
                )
                optimizer.zero_grad()
                out.loss.backward()
                optimizer.step()
                total += float(out.loss.detach()) * len(idx)
                seen += len(idx)
            loss = total / max(seen, 1)
            report.epoch_losses.append(round(loss, 6))
            if on_epoch is not None:
                on_epoch(epoch + 1, loss)
            if progress:
                print(f"epoch {epoch + 1}/{epochs}: mean training loss {loss:.4f}", flush=True)
        model.eval()
        target = Path(out_dir)
        target.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(str(target))
        tokenizer.save_pretrained(str(target))
    report.seconds = time.perf_counter() - started
    write_meta(
        target,
        {
            "kind": "finetuned",
            "labels": list(LABELS),
            "backbone": backbone,
            "backbone_path": str(source),
            "max_length": max_length,
            "epochs": epochs,
            "learning_rate": learning_rate,
            "batch_size": batch_size,
            "seed": seed,
            "train": report.to_json(),
        },
    )
    return report
