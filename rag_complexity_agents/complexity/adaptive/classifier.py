"""Query-complexity classifiers for Adaptive-RAG: A (no retrieval), B (single-step), C (multi-step).

Five interchangeable classifiers, all with ``predict_proba(questions) -> list[dict[label, p]]``:

* :class:`FineTunedClassifier` (:mod:`.finetuned`) — a 3-class sequence classifier
  fine-tuned on CPU from a local encoder (default: the packaged all-MiniLM-L6-v2) by
  :func:`train_classifier` (:mod:`.training`), saved to and loaded from a directory
  (weights + tokenizer + ``adaptive_classifier.json`` with the label map and training
  metadata).
* :class:`TfidfClassifier` (:mod:`.tfidf`) — TF-IDF word/bigram features + multinomial
  logistic regression (scikit-learn): the cheap non-neural baseline; saves/loads like the
  fine-tuned one (arrays + JSON, no pickle).
* :class:`LLMZeroShotClassifier` (:mod:`.zero_shot`) — no training: the chat model reads
  our own prompt and the probability of each label is the next-token probability of its
  letter (one forward pass, llama.cpp); backends without next-token probabilities generate a
  reply that is parsed robustly; an unusable reply falls back to the heuristic.
* :class:`HeuristicClassifier` (:mod:`.heuristic`) — surface cues of multi-hop questions
  (nested entities, comparisons, length); no model at all.
* :class:`EmbeddingHeadClassifier` (:mod:`.head`) — the shipped logistic head on the
  retrieval embedder's vectors: no training run, no LLM call.

This module loads a classifier by spec (:func:`classifier_from_config`) and gathers the
classifiers' public names in one place. Training data problems (empty, duplicate questions,
a single class) raise :class:`~rag_complexity_agents.errors.InputError`; a missing or
incomplete model directory raises :class:`~rag_complexity_agents.errors.ModelNotAvailable`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import ModelNotAvailable
from .base import META_FILE, ComplexityClassifier, read_meta
from .finetuned import FineTunedClassifier
from .head import EmbeddingHeadClassifier
from .heuristic import HeuristicClassifier
from .tfidf import TfidfClassifier
from .zero_shot import LLMZeroShotClassifier

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from ...config import Config
    from ...models.base import Embedder


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
    config: Config,
    chat_factory: Callable[[], BaseChatModel] | None = None,
    embedder_factory: Callable[[], Embedder] | None = None,
) -> ComplexityClassifier:
    """The classifier ``adaptive.classifier`` names.

    ``auto``: the trained model in :func:`default_model_dir` if one is there, else the shipped
    head (:mod:`.head`) when it fits ``models.embedding`` and ``embedder_factory`` is given,
    else the zero-shot LLM classifier. ``head`` and ``llm`` need their factory (each called
    lazily once); a path must hold a saved classifier.
    """
    spec = config.adaptive.classifier.strip()
    threads = config.adaptive.torch_threads
    if spec == "heuristic":
        return HeuristicClassifier()
    directory = default_model_dir(config)
    if spec == "auto" and (directory / META_FILE).is_file():
        return load_classifier(directory, threads=threads)
    if spec in {"auto", "head"}:
        if embedder_factory is None and spec == "head":
            raise ModelNotAvailable("the complexity head needs the embedder")
        if embedder_factory is not None:
            try:
                return EmbeddingHeadClassifier.shipped(embedder_factory, config.models.embedding)
            except ModelNotAvailable:
                if spec == "head":
                    raise
    if spec in {"auto", "llm"}:
        if chat_factory is None:
            raise ModelNotAvailable("the zero-shot LLM classifier needs a chat model")
        return LLMZeroShotClassifier(chat_factory())
    return load_classifier(spec, threads=threads)
