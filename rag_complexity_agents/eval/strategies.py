"""What the harness runs: a :class:`Strategy` (question → RunResult) built by name.

A strategy is any callable ``strategy(question) -> RunResult`` whose trace follows the
common keys: ``llm_calls``, ``retrieval_calls``, ``input_tokens``, ``output_tokens``,
``seconds`` and ``evidence`` — the evidence it actually used, as a list of
``ScoredDoc.to_trace()`` dicts (``id``, ``title``, ...) in order of use; multi-step loops put
the evidence of all steps there. Anything else (sub-questions, ASU clusters, ...) is kept as
is in the run file.

Strategies are built from :class:`EvalComponents` by a registered builder::

    from rag_complexity_agents.eval.strategies import register_strategy

    register_strategy("self_ask", lambda parts: SelfAsk(parts), description="Self-Ask loop")

A strategy that needs the question's gold record (the ceiling rows: gold evidence, gold
decomposition) subclasses :class:`RecordStrategy`; the harness then calls its
``answer_record(record)``.

Names resolve in this order: the registry (built-ins below, then registrations), installed
entry points of the group ``rag_complexity_agents.strategies``, and ``module:function``
paths to a builder (for experiments: ``--strategy mypkg.loops:build``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from typing import cast

from ..agents.registry import build_pipeline
from ..agents.run import run_graph
from ..config.pipelines import PIPELINES
from ..errors import ConfigError
from ..types import RunResult
from .base import EvalComponents, Strategy, StrategyBuilder
from .ceilings import GoldDecomposition, GoldEvidence
from .peers import ReactAgentPeer, SubQuestionPeer

ENTRY_POINT_GROUP = "rag_complexity_agents.strategies"


@dataclass(frozen=True)
class StrategySpec:
    """A named way of answering: how to build it and what it needs."""

    name: str
    build: StrategyBuilder
    description: str = ""
    uses_retrieval: bool = True


_REGISTRY: dict[str, StrategySpec] = {}


def register_strategy(
    name: str,
    build: StrategyBuilder,
    *,
    description: str = "",
    uses_retrieval: bool = True,
    replace: bool = False,
) -> StrategySpec:
    """Add a strategy under ``name`` (ConfigError if taken, unless ``replace``)."""
    if not name or ":" in name:
        raise ConfigError(f"invalid strategy name {name!r} (non-empty, no ':')")
    if name in _REGISTRY and not replace:
        raise ConfigError(f"a strategy named {name!r} is already registered")
    spec = StrategySpec(name, build, description, uses_retrieval)
    _REGISTRY[name] = spec
    return spec


def available_strategies() -> list[StrategySpec]:
    """Registered strategies plus those installed as entry points, by name."""
    specs = dict(_REGISTRY)
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name not in specs:
            specs[entry.name] = StrategySpec(entry.name, _lazy_entry_point(entry), "(plugin)")
    return [specs[name] for name in sorted(specs)]


def _lazy_entry_point(entry: importlib.metadata.EntryPoint) -> StrategyBuilder:
    def build(parts: EvalComponents) -> Strategy:
        builder: StrategyBuilder = entry.load()
        return builder(parts)

    return build


def _import_builder(path: str) -> StrategyBuilder:
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r} for strategy {path!r}: {exc}") from exc
    builder = getattr(module, attr, None)
    if not callable(builder):
        raise ConfigError(f"{path!r}: {module_name} has no callable {attr!r}")
    return cast(StrategyBuilder, builder)


def get_strategy_spec(name: str) -> StrategySpec:
    """The spec for a registered name, an entry point, or a ``module:function`` path."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    if ":" in name:
        return StrategySpec(name, _import_builder(name), f"builder {name}")
    for spec in available_strategies():
        if spec.name == name:
            return spec
    known = ", ".join(spec.name for spec in available_strategies())
    raise ConfigError(
        f"unknown strategy {name!r}; available: {known} (or a module:function path to a "
        "builder taking EvalComponents)"
    )


def build_strategy(name: str, parts: EvalComponents) -> Strategy:
    """Build the strategy ``name`` from ``parts`` (ConfigError if the builder fails to)."""
    strategy = get_strategy_spec(name).build(parts)
    if not callable(strategy):
        raise ConfigError(f"the builder of strategy {name!r} did not return a callable")
    return strategy


# --------------------------------------------------------------------------------------------
# Built-in strategies
# --------------------------------------------------------------------------------------------


def _pipeline_strategy(name: str) -> StrategyBuilder:
    def build(parts: EvalComponents) -> Strategy:
        graph = build_pipeline(name, parts.config, components=parts)

        def run(question: str) -> RunResult:
            return run_graph(graph, question)

        return run

    return build


for _pipeline in PIPELINES.values():
    if not _pipeline.router:  # the router registers itself (entry point "adaptive")
        register_strategy(
            _pipeline.name,
            _pipeline_strategy(_pipeline.name),
            description=_pipeline.description,
            uses_retrieval=_pipeline.retrieval != "none",
        )


# --------------------------------------------------------------------------------------------
# Ceilings (gold evidence / gold sub-questions) and peers (other frameworks' multi-hop)
# --------------------------------------------------------------------------------------------


def _build_gold_evidence(parts: EvalComponents) -> Strategy:
    return GoldEvidence(parts)


def _build_gold_decomposition(parts: EvalComponents) -> Strategy:
    return GoldDecomposition(parts)


def _build_gold_bridges(parts: EvalComponents) -> Strategy:
    return GoldDecomposition(parts, bridges="gold")


def _build_subquestion(parts: EvalComponents) -> Strategy:
    return SubQuestionPeer(parts)


def _build_react_agent(parts: EvalComponents) -> Strategy:
    return ReactAgentPeer(parts)


register_strategy(
    "gold_evidence",
    _build_gold_evidence,
    description="ceiling: the single-step reader given only the gold supporting paragraphs",
)
register_strategy(
    "gold_decomposition",
    _build_gold_decomposition,
    description="ceiling: the dataset's sub-questions, each answered by single-step RAG",
)
register_strategy(
    "gold_bridges",
    _build_gold_bridges,
    description="ceiling: the dataset's sub-questions with the gold answers as bridge "
    "entities, each answered by single-step RAG",
)
register_strategy(
    "llamaindex_subquestion",
    _build_subquestion,
    description="peer: LlamaIndex SubQuestionQueryEngine over the first stage",
)
register_strategy(
    "langgraph_react_agent",
    _build_react_agent,
    description="peer: LangGraph's prebuilt create_react_agent with first-stage search",
)
