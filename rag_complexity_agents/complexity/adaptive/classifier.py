"""Query-complexity classifiers for Adaptive-RAG: A (no retrieval), B (single-step), C (multi-step).

Four interchangeable classifiers, all with ``predict_proba(questions) -> list[dict[label, p]]``:

* :class:`FineTunedClassifier` — a 3-class sequence classifier fine-tuned on CPU from a local
  encoder (default: the packaged all-MiniLM-L6-v2) by :func:`train_classifier`, saved to and
  loaded from a directory (weights + tokenizer + ``adaptive_classifier.json`` with the label
  map and training metadata). *Deviation from the paper:* Jeong et al. fine-tune t5-large
  (lr 3e-5, batch 32, max length 384) to generate the label letter; t5 is not available
  offline and MiniLM (22 M parameters) trains in seconds on CPU, so we use a classification
  head, lr 5e-5, batch 16, max length 64 (questions are short).
* :class:`TfidfClassifier` — TF-IDF word/bigram features + multinomial logistic regression
  (scikit-learn): the cheap non-neural baseline; saves/loads like the fine-tuned one.
* :class:`LLMZeroShotClassifier` — no training: the chat model reads our own prompt and the
  probability of each label is the next-token probability of its letter (one forward pass,
  llama.cpp); backends without next-token probabilities generate a reply that is parsed
  robustly; an unusable reply falls back to the heuristic.
* :class:`HeuristicClassifier` — surface cues of multi-hop questions (nested entities,
  comparisons, length); no model at all.

Training data problems (empty, duplicate questions, a single class) raise
:class:`~rag_complexity_agents.errors.InputError`; a missing or incomplete model directory
raises :class:`~rag_complexity_agents.errors.ModelNotAvailable`.
"""

from __future__ import annotations

import json
import math
import pickle
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ...errors import InputError, ModelNotAvailable
from .labels import LABELS, Label

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from ...config import Config

META_FILE = "adaptive_classifier.json"
TFIDF_FILE = "tfidf.pkl"
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


def _normalise(probs: Mapping[str, float]) -> Probabilities:
    values = {label: max(0.0, float(probs.get(label, 0.0))) for label in LABELS}
    total = sum(values.values())
    if total <= 0.0 or not math.isfinite(total):
        return {label: 1.0 / len(LABELS) for label in LABELS}
    return {label: round(v / total, 6) for label, v in values.items()}


# --------------------------------------------------------------------------------------------
# Training data
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Fine-tuned encoder
# --------------------------------------------------------------------------------------------


def resolve_backbone(backbone: str) -> Path:
    """A packaged embedding name (``all-minilm-l6-v2``) or a local model directory."""
    from ...models.packaged import PACKAGED_EMBEDDINGS, packaged_embedding_path

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


class _TorchThreads:
    """Temporarily set torch's intra-op threads (restored on exit)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.before = 0

    def __enter__(self) -> None:
        import torch

        self.before = torch.get_num_threads()
        torch.set_num_threads(self.n)

    def __exit__(self, *exc: object) -> None:
        import torch

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

    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    started = time.perf_counter()
    label2id = {label: i for i, label in enumerate(LABELS)}
    with _TorchThreads(threads):
        torch.manual_seed(seed)
        tokenizer = AutoTokenizer.from_pretrained(str(source))
        model = AutoModelForSequenceClassification.from_pretrained(
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
    _write_meta(
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


def _write_meta(directory: Path, meta: dict[str, Any]) -> None:
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
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        try:
            self._tokenizer = AutoTokenizer.from_pretrained(str(self.directory))
            model = AutoModelForSequenceClassification.from_pretrained(str(self.directory))
        except (OSError, ValueError) as exc:
            raise ModelNotAvailable(
                f"cannot load the classifier in {self.directory}: {exc}; retrain it"
            ) from exc
        model.eval()
        self._model = model

    def predict_proba(self, questions: Sequence[str]) -> list[Probabilities]:
        import torch

        if not questions:
            return []
        self._load()
        max_length = int(self.meta.get("max_length") or 64)
        id2label = {int(k): v for k, v in self._model.config.id2label.items()}
        out: list[Probabilities] = []
        with _TorchThreads(self.threads), torch.no_grad():
            for start in range(0, len(questions), self.batch_size):
                batch = [q.strip() or "?" for q in questions[start : start + self.batch_size]]
                encoded = self._tokenizer(
                    batch, truncation=True, max_length=max_length, padding=True, return_tensors="pt"
                )
                probs = torch.softmax(self._model(**encoded).logits, dim=-1).tolist()
                for row in probs:
                    out.append(_normalise({id2label[i]: p for i, p in enumerate(row)}))
        return out


# --------------------------------------------------------------------------------------------
# TF-IDF + logistic regression
# --------------------------------------------------------------------------------------------


class TfidfClassifier:
    """TF-IDF (words + bigrams) → logistic regression; the non-neural baseline."""

    name = "tfidf-logreg"
    llm_calls_per_question = 0

    def __init__(self, pipeline: Any) -> None:
        self.pipeline = pipeline

    @classmethod
    def train(cls, pairs: Sequence[tuple[str, str]], *, seed: int = 0) -> TfidfClassifier:
        validate_training_data(pairs)
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline

        pipeline = make_pipeline(
            TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1),
            LogisticRegression(max_iter=2000, C=4.0, random_state=seed),
        )
        pipeline.fit([q for q, _ in pairs], [label for _, label in pairs])
        return cls(pipeline)

    def save(self, directory: str | Path, *, n: int | None = None) -> Path:
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        with open(target / TFIDF_FILE, "wb") as handle:
            pickle.dump(self.pipeline, handle)
        _write_meta(target, {"kind": "tfidf", "labels": list(LABELS), "n": n})
        return target

    @classmethod
    def load(cls, directory: str | Path) -> TfidfClassifier:
        path = Path(directory).expanduser()
        meta = read_meta(path)
        if meta.get("kind") != "tfidf" or not (path / TFIDF_FILE).is_file():
            raise ModelNotAvailable(f"{path} holds no TF-IDF classifier ({TFIDF_FILE} missing)")
        with open(path / TFIDF_FILE, "rb") as handle:
            return cls(pickle.load(handle))  # our own file, written by save()

    def predict_proba(self, questions: Sequence[str]) -> list[Probabilities]:
        if not questions:
            return []
        classes = [str(c) for c in self.pipeline.classes_]
        rows = self.pipeline.predict_proba([q.strip() for q in questions])
        return [_normalise(dict(zip(classes, map(float, row), strict=True))) for row in rows]


# --------------------------------------------------------------------------------------------
# Heuristic (no model)
# --------------------------------------------------------------------------------------------

_NESTING = re.compile(
    r"\b(of the|whose|who (?:was|is|founded|directed|wrote|created|played)|that (?:was|is)|"
    r"where the|the same|both|born first|died first|older|younger|earlier|later|"
    r"before|after|which (?:came|was) first|in the country|of the country|"
    r"performer of|director of|father of|mother of|spouse of|founder of)\b",
    re.IGNORECASE,
)
_POSSESSIVE = re.compile(r"\w's\b")


def multi_hop_score(question: str) -> float:
    """A rough count of multi-hop cues (nested entities, comparisons, length)."""
    words = len(question.split())
    cues = len(_NESTING.findall(question)) + len(_POSSESSIVE.findall(question))
    return cues + max(0.0, (words - 12) / 8.0)


class HeuristicClassifier:
    """Surface cues → P(C) via a logistic of :func:`multi_hop_score`; A gets a small share.

    Not trained and not from the paper: a model-free fallback (``adaptive.classifier=
    heuristic``) and the backstop of the zero-shot LLM classifier when a reply is unusable.
    """

    name = "heuristic"
    llm_calls_per_question = 0

    def predict_proba(self, questions: Sequence[str]) -> list[Probabilities]:
        out = []
        for question in questions:
            p_complex = 1.0 / (1.0 + math.exp(-(multi_hop_score(question) - 1.5) * 1.5))
            out.append(_normalise({"A": 0.1, "B": 0.9 * (1 - p_complex), "C": 0.9 * p_complex}))
        return out


# --------------------------------------------------------------------------------------------
# Zero-shot LLM
# --------------------------------------------------------------------------------------------

ZERO_SHOT_SYSTEM = (
    "You sort questions by how much searching they need before they can be answered. "
    "Reply with one letter.\n"
    "A = a very well-known fact that can be answered from memory.\n"
    "B = one specific fact, found by looking it up in one document.\n"
    "C = several facts from different documents, found one after another: the question "
    "describes a person, place or work through another one, or compares two things."
)

#: Worked examples shown as earlier chat turns (our own questions; data, not prompt text).
ZERO_SHOT_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("What is the capital of Italy?", "A"),
    ("In what year was the Treaty of Ryswick signed?", "B"),
    ("Who is the father of the director of the film Heat?", "C"),
    ("How many legs does a spider have?", "A"),
    ("Which company made the engines of the first Boeing 747?", "B"),
    ("Which was founded earlier, Oxfam or Amnesty International?", "C"),
)

#: The content-free input used to calibrate the letter probabilities (see the class).
CONTENT_FREE = "N/A"


def zero_shot_prompt(question: str) -> str:
    """The user turn for one question (the label definitions are in the system turn)."""
    return f"Question: {question.strip()}\nKind:"


def zero_shot_messages(question: str, examples: int = len(ZERO_SHOT_EXAMPLES)) -> list[Any]:
    """System turn, ``examples`` worked examples as chat turns, then the question."""
    messages: list[Any] = [("system", ZERO_SHOT_SYSTEM)]
    for shown, label in ZERO_SHOT_EXAMPLES[:examples]:
        messages += [("human", zero_shot_prompt(shown)), ("ai", label)]
    messages.append(("human", zero_shot_prompt(question)))
    return messages


_LETTER = re.compile(r"\b([ABC])\b")
_WORDS = (
    ("C", re.compile(r"multi|several|two or more|complex|compar", re.IGNORECASE)),
    ("B", re.compile(r"single|one (?:fact|document)|look(?:ed)? up|retriev", re.IGNORECASE)),
    ("A", re.compile(r"memory|no search|well[- ]known|without", re.IGNORECASE)),
)


def parse_label_reply(reply: str) -> Label | None:
    """The label in a generated reply: a standalone A/B/C first, then telling words."""
    text = reply.strip()
    if not text:
        return None
    head = text.lstrip("*\"'`([ ").upper()
    if head[:1] in LABELS and (len(head) == 1 or not head[1].isalpha()):
        return head[0]  # type: ignore[return-value]
    match = _LETTER.search(text.replace("kind", " "))
    if match:
        return match.group(1)  # type: ignore[return-value]
    for label, pattern in _WORDS:
        if pattern.search(text):
            return label  # type: ignore[return-value]
    return None


class LLMZeroShotClassifier:
    """The chat model as a zero-shot A/B/C classifier (one LLM call per question).

    With a llama.cpp model, P(label) = the next-token probability mass of the letter's
    spellings after the prompt (system turn with the label definitions, six worked examples
    as chat turns, then the question), renormalised over A, B, C; when the model puts under
    ``min_mass`` on the three letters the reply counts as unusable. Small models prefer
    some letters whatever the question, so with ``calibrate`` the probabilities are divided
    by those for a content-free question ("N/A", computed once) and renormalised
    ("calibrate before use", Zhao et al. 2021 — our addition, not in Adaptive-RAG, which
    has no LLM classifier). Other chat models generate a short reply, parsed by
    :func:`parse_label_reply`; a parsed letter gets ``confidence`` and the rest is shared.
    Unusable replies fall back to :class:`HeuristicClassifier` (``fallbacks`` counts them).
    """

    llm_calls_per_question = 1

    def __init__(
        self,
        chat: BaseChatModel,
        *,
        confidence: float = 0.8,
        min_mass: float = 0.05,
        calibrate: bool = True,
        examples: int = len(ZERO_SHOT_EXAMPLES),
        fallback: ComplexityClassifier | None = None,
    ) -> None:
        self.chat = chat
        self.confidence = confidence
        self.min_mass = min_mass
        self.calibrate = calibrate
        self.examples = examples
        self._prior: Probabilities | None = None
        self.fallback = fallback or HeuristicClassifier()
        self.name = f"llm-zero-shot:{getattr(chat, 'model_name', type(chat).__name__)}"
        self.fallbacks = 0

    def _messages(self, question: str) -> list[Any]:
        return zero_shot_messages(question, self.examples)

    def _letter_mass(self, question: str) -> Probabilities | None:
        top = getattr(self.chat, "top_next_tokens", None)
        if not callable(top):
            return None
        mass = dict.fromkeys(LABELS, 0.0)
        for token, logprob in top(self._messages(question), k=40):
            key = token.strip().upper()
            if key in mass:
                mass[key] += math.exp(logprob)
        if sum(mass.values()) < self.min_mass:
            return None
        return _normalise(mass)

    def _from_logprobs(self, question: str) -> Probabilities | None:
        probs = self._letter_mass(question)
        if probs is None or not self.calibrate:
            return probs
        if self._prior is None:
            self._prior = self._letter_mass(CONTENT_FREE) or dict.fromkeys(LABELS, 1.0)
        prior = self._prior
        return _normalise({k: probs[k] / max(prior.get(k, 0.0), 1e-6) for k in LABELS})

    def _from_reply(self, question: str) -> Probabilities | None:
        reply = self.chat.invoke(self._messages(question))
        label = parse_label_reply(str(getattr(reply, "content", reply)))
        if label is None:
            return None
        rest = (1.0 - self.confidence) / (len(LABELS) - 1)
        return {lab: (self.confidence if lab == label else rest) for lab in LABELS}

    def predict_proba(self, questions: Sequence[str]) -> list[Probabilities]:
        out: list[Probabilities] = []
        for question in questions:
            probs = self._from_logprobs(question)
            if probs is None:
                probs = self._from_reply(question)
            if probs is None:
                self.fallbacks += 1
                probs = self.fallback.predict_proba([question])[0]
            out.append(probs)
        return out


# --------------------------------------------------------------------------------------------
# Loading by spec
# --------------------------------------------------------------------------------------------


def default_model_dir(config: Config) -> Path:
    """``adaptive.model_dir``, else ``<models.home>/adaptive/classifier``."""
    return config.adaptive.model_dir or (config.models.home / "adaptive" / "classifier")


def load_classifier(directory: str | Path, *, threads: int = 1) -> ComplexityClassifier:
    """A saved classifier of either kind (ModelNotAvailable if the directory is unusable)."""
    meta = read_meta(directory)
    if meta.get("kind") == "tfidf":
        return TfidfClassifier.load(directory)
    return FineTunedClassifier(directory, threads=threads)


def classifier_from_config(
    config: Config, chat_factory: Callable[[], BaseChatModel] | None = None
) -> ComplexityClassifier:
    """The classifier ``adaptive.classifier`` names.

    ``auto``: the trained model in :func:`default_model_dir` if one is there, else the
    zero-shot LLM classifier (so the router works before anything is trained). ``llm`` needs
    ``chat_factory`` (called lazily once); a path must hold a saved classifier.
    """
    spec = config.adaptive.classifier.strip()
    threads = config.adaptive.torch_threads
    if spec == "heuristic":
        return HeuristicClassifier()
    if spec in {"auto", "llm"}:
        directory = default_model_dir(config)
        if spec == "auto" and (directory / META_FILE).is_file():
            return load_classifier(directory, threads=threads)
        if chat_factory is None:
            raise ModelNotAvailable("the zero-shot LLM classifier needs a chat model")
        return LLMZeroShotClassifier(chat_factory())
    return load_classifier(spec, threads=threads)


__all__ = [
    "META_FILE",
    "ZERO_SHOT_EXAMPLES",
    "ZERO_SHOT_SYSTEM",
    "ComplexityClassifier",
    "FineTunedClassifier",
    "HeuristicClassifier",
    "LLMZeroShotClassifier",
    "TfidfClassifier",
    "TrainReport",
    "best_label",
    "classifier_from_config",
    "default_model_dir",
    "load_classifier",
    "multi_hop_score",
    "parse_label_reply",
    "read_meta",
    "resolve_backbone",
    "train_classifier",
    "validate_training_data",
    "zero_shot_messages",
    "zero_shot_prompt",
]
