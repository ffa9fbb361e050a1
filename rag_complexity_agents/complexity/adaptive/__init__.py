"""Adaptive-RAG (Jeong et al. 2024): automatic complexity labels, a trainable classifier and a
LangGraph router over no retrieval (A), single-step retrieval (B) and a multi-step loop (C).

Modules: :mod:`.labels` (auto-labelling through the evaluation harness), :mod:`.classifier`
(fine-tuned encoder, TF-IDF baseline, zero-shot LLM, heuristic), :mod:`.router` (the graph),
:mod:`.strategy` (wiring to real components; the harness strategy ``adaptive``, found through
its entry point).
"""

from __future__ import annotations

from .classifier import (
    ComplexityClassifier,
    FineTunedClassifier,
    HeuristicClassifier,
    LLMZeroShotClassifier,
    TfidfClassifier,
    classifier_from_config,
    load_classifier,
    train_classifier,
)
from .labels import LABELS, auto_label, bias_label, collect_labels, label_from_runs
from .router import build_router_graph, decide_route
from .strategy import build_adaptive_router, build_adaptive_strategy

__all__ = [
    "LABELS",
    "ComplexityClassifier",
    "FineTunedClassifier",
    "HeuristicClassifier",
    "LLMZeroShotClassifier",
    "TfidfClassifier",
    "auto_label",
    "bias_label",
    "build_adaptive_router",
    "build_adaptive_strategy",
    "build_router_graph",
    "classifier_from_config",
    "collect_labels",
    "decide_route",
    "label_from_runs",
    "load_classifier",
    "train_classifier",
]
