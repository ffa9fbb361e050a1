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
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..components import Components
from ..config import Config
from ..errors import ConfigError, InputError, RCAError
from ..types import RunResult
from .cache import LLMCallCache, with_llm_cache
from .datasets import QARecord

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

ENTRY_POINT_GROUP = "rag_complexity_agents.strategies"


@runtime_checkable
class Strategy(Protocol):
    """Answers one question; the trace is JSON-serialisable (see the module docstring)."""

    def __call__(self, question: str) -> RunResult: ...


class RecordStrategy(ABC):
    """A strategy that reads the gold record of its question (gold paragraphs, gold
    sub-questions): the harness calls :meth:`answer_record`. Called with the question text
    alone it raises InputError, since there is no gold to read."""

    def __call__(self, question: str) -> RunResult:
        raise InputError(
            f"{type(self).__name__} reads the gold record of a dataset question; run it "
            "through the evaluation harness (rca eval run), not on a bare question"
        )

    @abstractmethod
    def answer_record(self, record: QARecord) -> RunResult:
        """Answer ``record.question`` using the gold fields of ``record``."""


StrategyBuilder = Callable[["EvalComponents"], Strategy]


class EvalComponents(Components):
    """:class:`Components` whose chat model goes through the harness's LLM call cache.

    Everything stays lazy: a strategy that never touches the chat model or the collection
    loads neither.
    """

    def __init__(self, config: Config | None = None, *, llm_cache: LLMCallCache | None = None):
        super().__init__(config)
        self.llm_cache = llm_cache

    @cached_property
    def chat(self) -> BaseChatModel:
        base = Components.chat.func(self)  # type: ignore[attr-defined]
        self._cached_chat = with_llm_cache(base, self.llm_cache)
        return self._cached_chat

    def owns_chat(self) -> bool:
        """Whether the chat model in use came from ``models.*`` (also through the cache)."""
        chat = vars(self).get("chat")
        return (chat is not None and chat is vars(self).get("_cached_chat")) or super().owns_chat()

    @cached_property
    def paragraph_resolver(self) -> Callable[[str], str | None]:
        """chunk id → the ``paragraph_id`` / ``doc_id`` in its metadata (None if unknown)."""
        state: dict[str, bool] = {"broken": False}

        def resolve(chunk_id: str) -> str | None:
            if state["broken"]:
                return None
            try:
                chunk = self.store.chunk(chunk_id)
            except RCAError:
                state["broken"] = True  # no collection: nothing to resolve against
                return None
            except (KeyError, IndexError):
                return None
            value = chunk.metadata.get("paragraph_id") or chunk.metadata.get("doc_id")
            return str(value) if value else None

        return resolve


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
    return builder


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


def _build_no_retrieval(parts: EvalComponents) -> Strategy:
    from ..agents.no_retrieval import answer_no_retrieval

    def run(question: str) -> RunResult:
        return answer_no_retrieval(question, parts.chat)

    return run


def _build_single_step(parts: EvalComponents) -> Strategy:
    from ..agents.single_step import answer_single_step

    k = parts.config.answer.passages
    chars = parts.config.answer.passage_chars

    def run(question: str) -> RunResult:
        return answer_single_step(question, parts.first_stage, parts.chat, k=k, passage_chars=chars)

    return run


register_strategy(
    "no_retrieval",
    _build_no_retrieval,
    description="the chat model alone, no evidence (Adaptive-RAG A)",
    uses_retrieval=False,
)
register_strategy(
    "single_step",
    _build_single_step,
    description="retrieve answer.passages passages once, answer once (Adaptive-RAG B)",
)


# --------------------------------------------------------------------------------------------
# Decomposition loops (LangGraph graphs from rag_complexity_agents.agents.registry)
# --------------------------------------------------------------------------------------------

AGENT_STRATEGIES: dict[str, str] = {
    "self_ask": "Self-Ask loop with first-stage retrieval",
    "self_ask_nar": "Self-Ask + NAR (SUNAR_R)",
    "self_ask_nar_mer": "Self-Ask + NAR + MER (SUNAR without ASU)",
    "self_ask_sunar": "Self-Ask + NAR + ASU (SUNAR without MER)",
    "self_ask_sunar_mer": "Self-Ask + NAR + ASU + MER (full SUNAR)",
    "plan_execute": "Plan-and-execute: sub-questions planned first, first-stage retrieval",
    "plan_execute_nar": "Plan-and-execute + NAR",
    "plan_execute_sunar": "Plan-and-execute + NAR + ASU",
    "react": "ReAct loop with first-stage retrieval",
    "react_sunar": "ReAct + NAR + ASU",
    "react_sunar_mer": "ReAct + NAR + ASU + MER",
    "searchain": "SearChain loop with first-stage retrieval",
    "searchain_sunar": "SearChain + NAR + ASU",
    "searchain_sunar_mer": "SearChain + NAR + ASU + MER",
    "ircot": "IRCoT loop with first-stage retrieval (Adaptive-RAG C)",
    "ircot_nar": "IRCoT + NAR",
    "ircot_sunar": "IRCoT + NAR + ASU",
    "ircot_sunar_mer": "IRCoT + NAR + ASU + MER",
    "cot": "few-shot chain of thought over first-stage passages",
    "cot_sunar": "few-shot chain of thought over SUNAR passages",
    "single_step_sunar": "single-step RAG over SUNAR passages (graph)",
}
"""Loop presets registered as strategies (each name is an ``agents.registry.PRESETS`` key)."""


def _graph_strategy(preset: str) -> StrategyBuilder:
    def build(parts: EvalComponents) -> Strategy:
        from ..agents.registry import build_preset
        from ..agents.run import run_graph

        graph = build_preset(preset, parts.config, components=parts)

        def run(question: str) -> RunResult:
            return run_graph(graph, question)

        return run

    return build


for _name, _description in AGENT_STRATEGIES.items():
    register_strategy(_name, _graph_strategy(_name), description=_description)


# --------------------------------------------------------------------------------------------
# Ceilings (gold evidence / gold sub-questions) and peers (other frameworks' multi-hop)
# --------------------------------------------------------------------------------------------


def _build_gold_evidence(parts: EvalComponents) -> Strategy:
    from .ceilings import GoldEvidence

    return GoldEvidence(parts)


def _build_gold_decomposition(parts: EvalComponents) -> Strategy:
    from .ceilings import GoldDecomposition

    return GoldDecomposition(parts)


def _build_gold_bridges(parts: EvalComponents) -> Strategy:
    from .ceilings import GoldDecomposition

    return GoldDecomposition(parts, bridges="gold")


def _build_subquestion(parts: EvalComponents) -> Strategy:
    from .peers import SubQuestionPeer

    return SubQuestionPeer(parts)


def _build_react_agent(parts: EvalComponents) -> Strategy:
    from .peers import ReactAgentPeer

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


__all__ = [
    "AGENT_STRATEGIES",
    "ENTRY_POINT_GROUP",
    "EvalComponents",
    "RecordStrategy",
    "Strategy",
    "StrategyBuilder",
    "StrategySpec",
    "available_strategies",
    "build_strategy",
    "get_strategy_spec",
    "register_strategy",
]
