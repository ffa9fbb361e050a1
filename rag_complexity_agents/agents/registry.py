"""Name → graph builder, and the named presets (loop + retrieval strategy + MER).

Loops: ``self_ask``, ``plan_execute``, ``react``, ``searchain``, ``ircot`` and the baselines
``cot``, ``single_step``, ``no_retrieval``. A preset fixes a loop's default retrieval strategy and
MER flag, e.g. ``self_ask_sunar_mer`` = Self-Ask + NAR + ASU + MER (SUNAR as in the paper).
Runs can still override every knob through ``configurable``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from langgraph.graph.state import CompiledStateGraph

from ..components import Components
from ..config import Config
from ..errors import ConfigError
from ..profiles import PROFILES
from .baselines import build_cot, build_no_retrieval, build_single_step
from .context import check_strategy, serve_clients
from .ircot import build_ircot
from .plan_execute import build_plan_execute
from .react import build_react
from .searchain import build_searchain
from .self_ask import build_self_ask

Graph = CompiledStateGraph[Any, Any, Any, Any]


class GraphBuilder(Protocol):
    def __call__(
        self,
        config: Config | None = None,
        *,
        components: Components | None = None,
        retrieval: str | None = None,
        mer: bool | None = None,
        checkpointer: Any = None,
        name: str = ...,
    ) -> Graph: ...


LOOPS: dict[str, tuple[GraphBuilder, str]] = {
    "self_ask": (build_self_ask, "Self-Ask: follow-up questions and intermediate answers"),
    "plan_execute": (
        build_plan_execute,
        "Plan-and-execute: the chain of simple questions written first, then answered in turn",
    ),
    "react": (build_react, "ReAct: Thought / Search[...] / Lookup[...] / Finish[...]"),
    "searchain": (build_searchain, "SearChain: a [Query]/[Answer] chain checked on evidence"),
    "ircot": (build_ircot, "IRCoT: one CoT sentence per retrieval"),
    "cot": (build_cot, "few-shot chain of thought over passages retrieved once"),
    "single_step": (build_single_step, "retrieve once, answer once"),
    "no_retrieval": (build_no_retrieval, "the chat model alone"),
}


@dataclass(frozen=True)
class Preset:
    """A named loop configuration."""

    name: str
    loop: str
    retrieval: str | None
    mer: bool
    description: str


def _presets() -> dict[str, Preset]:
    out: dict[str, Preset] = {}

    def add(name: str, loop: str, retrieval: str | None, mer: bool, description: str) -> None:
        out[name] = Preset(name, loop, retrieval, mer, description)

    labels = {
        "self_ask": "Self-Ask",
        "plan_execute": "Plan-and-execute",
        "react": "ReAct",
        "searchain": "SearChain",
        "ircot": "IRCoT",
    }
    for loop, label in labels.items():
        add(loop, loop, "first_stage", False, f"{label} with first-stage retrieval")
        add(f"{loop}_nar", loop, "nar", False, f"{label} + NAR (SUNAR_R)")
        add(f"{loop}_nar_mer", loop, "nar", True, f"{label} + NAR + MER (SUNAR without ASU)")
        add(f"{loop}_sunar", loop, "sunar", False, f"{label} + NAR + ASU (SUNAR without MER)")
        add(f"{loop}_sunar_mer", loop, "sunar", True, f"{label} + NAR + ASU + MER (full SUNAR)")
    add("cot", "cot", "first_stage", False, "few-shot CoT over first-stage passages")
    add("cot_sunar", "cot", "sunar", False, "few-shot CoT over SUNAR passages")
    add("single_step_graph", "single_step", "first_stage", False, "single-step RAG as a graph")
    add("single_step_sunar", "single_step", "sunar", False, "single-step RAG over SUNAR")
    add("no_retrieval_graph", "no_retrieval", "none", False, "the chat model alone, as a graph")
    return out


PRESETS: dict[str, Preset] = _presets()


def build_graph(
    loop: str,
    config: Config | None = None,
    *,
    components: Components | None = None,
    retrieval: str | None = None,
    mer: bool | None = None,
    checkpointer: Any = None,
    name: str | None = None,
) -> Graph:
    """The compiled graph of ``loop`` (ConfigError for unknown loops or strategies)."""
    if loop not in LOOPS:
        raise ConfigError(f"unknown loop {loop!r}; available: {', '.join(LOOPS)}")
    if retrieval is not None:
        check_strategy(retrieval)
    builder = LOOPS[loop][0]
    return builder(
        config,
        components=components,
        retrieval=retrieval,
        mer=mer,
        checkpointer=checkpointer,
        name=name or loop,
    )


def build_preset(
    name: str,
    config: Config | None = None,
    *,
    components: Components | None = None,
    checkpointer: Any = None,
) -> Graph:
    """The compiled graph of the preset ``name`` (see :data:`PRESETS`)."""
    preset = PRESETS.get(name)
    if preset is None:
        raise ConfigError(f"unknown preset {name!r}; available: {', '.join(PRESETS)}")
    return build_graph(
        preset.loop,
        config,
        components=components,
        retrieval=preset.retrieval,
        mer=preset.mer,
        checkpointer=checkpointer,
        name=name,
    )


def studio_graph(name: str) -> Graph:
    """A preset graph with the default config (demo collection, packaged model, CPU profile;
    ``RCA_*`` environment variables and ``rca.toml`` apply) for the LangGraph server: runs may
    change only the answer-shaping knobs (:data:`~.context.SERVED_KNOBS`). Nothing loads until
    a run."""
    serve_clients()
    return build_preset(name, Config())


def available() -> list[tuple[str, str]]:
    """(name, description) of every loop and preset."""
    items = {name: desc for name, (_, desc) in LOOPS.items()}
    items.update({p.name: p.description for p in PRESETS.values()})
    return sorted(items.items())


__all__ = [
    "LOOPS",
    "PRESETS",
    "PROFILES",
    "GraphBuilder",
    "Preset",
    "available",
    "build_graph",
    "build_preset",
    "studio_graph",
]
