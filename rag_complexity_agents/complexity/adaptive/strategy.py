"""The router wired to real components: a preset graph and the harness strategy ``adaptive``.

:func:`build_adaptive_router` builds the router graph of :mod:`.router` from a
:class:`~rag_complexity_agents.config.Config`: A, B and C are the harness strategies named by
``adaptive.a_strategy`` / ``b_strategy`` / ``c_strategy`` (built from the same components,
so they share the chat model, the collection and — under the harness — the LLM cache), and
the classifier is :func:`~.classifier.classifier_from_config` (the trained model in
``adaptive.model_dir`` if present, else the zero-shot LLM). Everything loads on first use.

:func:`build_adaptive_strategy` is the harness builder (``rca eval run --strategy adaptive``),
found through its entry point of the group ``rag_complexity_agents.strategies`` in
``pyproject.toml``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...components import Components
from ...config import Config
from ...types import RunResult
from .classifier import ComplexityClassifier, classifier_from_config
from .labels import LABELS
from .router import RouteHook, build_router_graph

if TYPE_CHECKING:
    from ...eval.strategies import EvalComponents, Strategy


def build_adaptive_router(
    config: Config | None = None,
    *,
    components: Components | None = None,
    classifier: ComplexityClassifier | None = None,
    raise_route: RouteHook | None = None,
    name: str = "adaptive_router",
) -> Any:
    """The compiled router graph for ``config`` (nothing loads until the first question)."""
    from ...eval.strategies import build_strategy

    config = config or (components.config if components is not None else Config())
    parts: Any = components if components is not None else Components(config)
    names = {
        "A": config.adaptive.a_strategy,
        "B": config.adaptive.b_strategy,
        "C": config.adaptive.c_strategy,
    }

    def factory(label: str) -> Any:
        return lambda: build_strategy(names[label], parts)

    def make_classifier() -> ComplexityClassifier:
        if classifier is not None:
            return classifier
        return classifier_from_config(config, chat_factory=lambda: parts.chat)

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
    """The router with the default config (demo collection, packaged model, CPU profile)."""
    return build_adaptive_router(Config())


def build_adaptive_strategy(parts: EvalComponents) -> Strategy:
    """Harness builder: the router graph run through ``run_graph`` per question."""
    from ...agents.run import run_graph

    graph = build_adaptive_router(parts.config, components=parts)

    def run(question: str) -> RunResult:
        return run_graph(graph, question)

    return run


__all__ = ["build_adaptive_router", "build_adaptive_strategy", "studio_router"]
