"""Retrieval complexity as a LangGraph node and a one-node graph.

``make_rc_node(pipeline)`` returns a node function for any ``StateGraph`` whose state has a
``question`` (and optionally ``references``): it writes ``retrieval_complexity`` (the
:class:`~.rrcp.RCResult` as plain JSON data) so that a conditional edge can route on
``state["retrieval_complexity"]["complex"]`` or its ``score``. ``build_rc_graph`` compiles a
graph with just that node (for Studio, or to call RC through the LangGraph API).

The graph takes no run options: its settings are the config it was built with, so a run that
passes any option of ours (a knob, ``overrides``, ``collection``, ``chat_model``, …) in its
``configurable`` or context is refused with a ConfigError naming them, before anything loads.
A cancelled run stops before its next model call (:func:`~..agents.steps.cancellable`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict  # pydantic's JSON schema (Studio) needs it on 3.11

from ..agents.context import given_options
from ..agents.steps import cancellable
from ..config import Config
from ..errors import ConfigError
from .rrcp import RetrievalComplexity

RC_RUN_OPTIONS: frozenset[str] = frozenset()
"""The run options the graph accepts (none: its config decides everything)."""


def check_run_options(config: RunnableConfig | None, context: Any = None) -> None:
    """A ConfigError naming the run's options of ours outside :data:`RC_RUN_OPTIONS`."""
    refused = sorted(k for k in given_options(config, context) if k not in RC_RUN_OPTIONS)
    if refused:
        raise ConfigError(
            f"the graph retrieval_complexity does not accept the run option(s) "
            f"{', '.join(refused)}; it takes no run options (its settings are the server's)"
        )


class RCInput(TypedDict, total=False):
    """What a run gives the graph (Studio's input form): the question, optional references."""

    question: str
    references: list[str]


class RCState(TypedDict, total=False):
    """Input: ``question`` and optional ``references``; output: ``retrieval_complexity``."""

    question: str
    references: list[str]
    retrieval_complexity: dict[str, Any]


class RCRunOptions(TypedDict, total=False):
    """The graph's context schema: no fields, as it takes no run options
    (:data:`RC_RUN_OPTIONS`); Studio shows an empty form instead of none."""


class RCNode(Protocol):
    """A LangGraph node: reads ``question`` / ``references``, writes ``retrieval_complexity``."""

    def __call__(
        self, state: Mapping[str, Any], config: RunnableConfig, runtime: Any = None
    ) -> dict[str, Any]: ...


def make_rc_node(
    pipeline: RetrievalComplexity | Callable[[], RetrievalComplexity],
) -> RCNode:
    """A node computing RC for ``state["question"]``; ``pipeline`` may be a factory (called
    once, on the first run) so that building a graph loads nothing."""
    holder: list[RetrievalComplexity] = []

    def retrieval_complexity(
        state: Mapping[str, Any], config: RunnableConfig, runtime: Any = None
    ) -> dict[str, Any]:
        check_run_options(config, getattr(runtime, "context", None))
        if not holder:
            holder.append(pipeline if isinstance(pipeline, RetrievalComplexity) else pipeline())
        references = [str(r) for r in state.get("references") or []]
        result = holder[0].score(str(state.get("question", "")), references)
        return {"retrieval_complexity": result.to_dict()}

    return retrieval_complexity


def build_rc_graph(
    config: Config | None = None,
    *,
    components: Any = None,
    pipeline: RetrievalComplexity | None = None,
    name: str = "retrieval_complexity",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """START → retrieval_complexity → END, with the configured RRCP pipeline (built lazily)."""
    cfg = config or Config()

    def factory() -> RetrievalComplexity:
        return pipeline or RetrievalComplexity.from_config(cfg, components)

    graph = StateGraph(RCState, context_schema=RCRunOptions, input_schema=RCInput)
    node = cancellable(make_rc_node(factory), "retrieval_complexity")
    graph.add_node("retrieval_complexity", node, input_schema=RCState)
    graph.add_edge(START, "retrieval_complexity")
    graph.add_edge("retrieval_complexity", END)
    return graph.compile(name=name)
