"""Adaptive-RAG (Jeong et al. 2024): automatic complexity labels, a trainable classifier and a
LangGraph router over no retrieval (A), single-step retrieval (B) and a multi-step loop (C).

Modules: :mod:`.labels` (automatic labels from harness run lines), :mod:`.classifier`
(fine-tuned encoder, the shipped embedder head of :mod:`.head`, TF-IDF baseline, zero-shot
LLM, heuristic), :mod:`.router` (the graph), :mod:`.pipeline` (the router over pipelines of
the registry, wired to real components). The harness strategy ``adaptive`` and the labelling
run live with the harness, in :mod:`rag_complexity_agents.eval.adaptive`.
"""

from __future__ import annotations

from .base import ComplexityClassifier
from .classifier import classifier_from_config, load_classifier
from .finetuned import FineTunedClassifier
from .head import EmbeddingHeadClassifier
from .heuristic import HeuristicClassifier
from .labels import LABELS, auto_label, bias_label, label_from_runs
from .pipeline import build_adaptive_router
from .router import build_router_graph, decide_route
from .tfidf import TfidfClassifier
from .training import train_classifier
from .zero_shot import LLMZeroShotClassifier

__all__ = [
    "LABELS",
    "ComplexityClassifier",
    "EmbeddingHeadClassifier",
    "FineTunedClassifier",
    "HeuristicClassifier",
    "LLMZeroShotClassifier",
    "TfidfClassifier",
    "auto_label",
    "bias_label",
    "build_adaptive_router",
    "build_router_graph",
    "classifier_from_config",
    "decide_route",
    "label_from_runs",
    "load_classifier",
    "train_classifier",
]
