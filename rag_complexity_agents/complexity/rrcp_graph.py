"""Retrieval complexity as a LangGraph node and a one-node graph.

``make_rc_node(pipeline)`` returns a node function for any ``StateGraph`` whose state has a
``question`` (and optionally ``references``): it writes ``retrieval_complexity`` (the
:class:`~.rrcp.RCResult` as plain JSON data) so that a conditional edge can route on
``state["retrieval_complexity"]["complex"]`` or its ``score``. ``build_rc_graph`` compiles a
graph with just that node (for Studio, or to call RC through the LangGraph API).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from ..config import Config
from .rrcp import RetrievalComplexity


class RCState(TypedDict, total=False):
    """Input: ``question`` and optional ``references``; output: ``retrieval_complexity``."""

    question: str
    references: list[str]
    retrieval_complexity: dict[str, Any]


class RCNode(Protocol):
    """A LangGraph node: reads ``question`` / ``references``, writes ``retrieval_complexity``."""

    def __call__(self, state: Mapping[str, Any]) -> dict[str, Any]: ...


def make_rc_node(
    pipeline: RetrievalComplexity | Callable[[], RetrievalComplexity],
) -> RCNode:
    """A node computing RC for ``state["question"]``; ``pipeline`` may be a factory (called
    once, on the first run) so that building a graph loads nothing."""
    holder: list[RetrievalComplexity] = []

    def retrieval_complexity(state: Mapping[str, Any]) -> dict[str, Any]:
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

    graph = StateGraph(RCState)
    graph.add_node("retrieval_complexity", make_rc_node(factory), input_schema=RCState)
    graph.add_edge(START, "retrieval_complexity")
    graph.add_edge("retrieval_complexity", END)
    return graph.compile(name=name)


__all__ = ["RCNode", "RCState", "build_rc_graph", "make_rc_node"]
