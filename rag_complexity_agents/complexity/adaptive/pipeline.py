"""The router wired to real components: A, B and C are pipelines of the registry.

:func:`build_adaptive_router` builds the router graph of :mod:`.router` from a
:class:`~rag_complexity_agents.config.Config`: A, B and C are the pipelines named by
``adaptive.a_strategy`` / ``b_strategy`` / ``c_strategy``
(:mod:`rag_complexity_agents.config.pipelines`), built from the same components, so they
share the chat model and the collection (under the harness, also its LLM cache); the
classifier is :func:`~.classifier.classifier_from_config` (the trained model in
``adaptive.model_dir`` if present, else the shipped head on the collection's embedder).
Everything loads on first use. The harness strategy ``adaptive`` is
:func:`rag_complexity_agents.eval.adaptive.build_adaptive_strategy`.
"""

from __future__ import annotations

from typing import Any

from ...agents.context import serve_clients
from ...agents.registry import build_pipeline
from ...agents.run import run_graph
from ...components import Components
from ...config import Config
from ...types import RunResult
from .base import ComplexityClassifier
from .classifier import classifier_from_config
from .labels import LABELS
from .router import RouteHook, StrategyFn, build_router_graph


def pipeline_route(name: str, config: Config, parts: Components) -> StrategyFn:
    """The pipeline ``name`` as a route: its graph run through ``run_graph`` per question."""
    graph = build_pipeline(name, config, components=parts)

    def run(question: str) -> RunResult:
        return run_graph(graph, question)

    return run


def build_adaptive_router(
    config: Config | None = None,
    *,
    components: Components | None = None,
    classifier: ComplexityClassifier | None = None,
    raise_route: RouteHook | None = None,
    name: str = "adaptive_router",
) -> Any:
    """The compiled router graph for ``config`` (nothing loads until the first question)."""
    config = config or (components.config if components is not None else Config())
    parts: Any = components if components is not None else Components(config)
    names = {
        "A": config.adaptive.a_strategy,
        "B": config.adaptive.b_strategy,
        "C": config.adaptive.c_strategy,
    }

    def factory(label: str) -> Any:
        return lambda: pipeline_route(names[label], parts.config, parts)

    def make_classifier() -> ComplexityClassifier:
        if classifier is not None:
            return classifier
        return classifier_from_config(
            config, chat_factory=lambda: parts.chat, embedder_factory=lambda: parts.embedder
        )

    return build_router_graph(
        make_classifier,
        {label: factory(label) for label in LABELS},
        threshold=config.adaptive.threshold,
        strategy_names=names,
        raise_route=raise_route,
        lazy=True,
        name=name,
    )


def studio_router() -> Any:
    """The router for the LangGraph server: :meth:`Config.from_env` (demo collection and
    packaged models unless ``rca.toml`` or ``RCA_*`` say otherwise); runs may change only the
    knobs of the knob table (:func:`~...agents.context.serve_clients`)."""
    serve_clients()
    return build_adaptive_router(Config.from_env())
