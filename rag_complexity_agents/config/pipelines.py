"""The pipeline registry: every named way of answering a question, and the default.

A pipeline is a loop (the LangGraph state machine), a retrieval strategy for its retrieval
node, whether the Meta Evidence Reasoner writes the final answer, and whether the
Adaptive-RAG router sits in front. Every surface reads this table: the CLI (``--pipeline``),
:func:`~rag_complexity_agents.create_rag_agent`, the Studio graphs, the LangChain and
LlamaIndex adapters, Adaptive-RAG's routes and the evaluation harness's strategies.

:data:`DEFAULT_PIPELINE` is the one measured best end to end
(``benchmarks/results/end_to_end.md``); every entry point runs it unless told otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from ..errors import ConfigError

LoopName = Literal[
    "plan_execute", "self_ask", "react", "searchain", "ircot", "cot", "single_step", "no_retrieval"
]
RetrievalName = Literal["none", "first_stage", "rerank", "nar", "sunar"]

LOOP_NAMES: tuple[str, ...] = get_args(LoopName)
RETRIEVAL_STRATEGIES: tuple[str, ...] = get_args(RetrievalName)
NAR_STRATEGIES: tuple[str, ...] = ("rerank", "nar", "sunar")
"""Retrieval strategies that run NAR's Algorithm 1 (``rerank``: without graph neighbours)."""
MULTI_STEP_LOOPS: tuple[str, ...] = ("plan_execute", "self_ask", "react", "searchain", "ircot")
"""Loops that decompose a question into steps (the others answer in one pass)."""


@dataclass(frozen=True)
class Pipeline:
    """A named pipeline: ``loop`` × ``retrieval`` × ``mer``, optionally behind the router."""

    name: str
    loop: LoopName
    retrieval: RetrievalName
    mer: bool
    description: str
    router: bool = False

    @property
    def parts(self) -> frozenset[str]:
        """The parts that act in this pipeline (what a knob needs in order to change
        anything; see :class:`~.knobs.Knob`)."""
        return active_parts(self.loop, self.retrieval, self.mer, router=self.router)


def active_parts(loop: str, retrieval: str, mer: bool, *, router: bool = False) -> frozenset[str]:
    """Parts of a pipeline that run: ``answer`` always; ``retrieval`` unless it is ``none``;
    ``nar`` for NAR strategies, ``graph`` when NAR reads graph neighbours, ``asu`` for
    ``sunar``; ``loop`` for a multi-step loop; ``mer``; ``router``."""
    parts = {"answer"}
    if loop != "no_retrieval" and retrieval != "none":
        parts.add("retrieval")
        if retrieval in NAR_STRATEGIES:
            parts.add("nar")
        if retrieval in ("nar", "sunar"):
            parts.add("graph")
        if retrieval == "sunar":
            parts.add("asu")
    if loop in MULTI_STEP_LOOPS:
        parts.add("loop")
    if mer:
        parts.add("mer")
    if router:
        parts |= {"router", "loop"}
    return frozenset(parts)


DEFAULT_PIPELINE = "plan_execute_mer"
"""The pipeline every entry point runs by default: plan-and-execute over first-stage
retrieval with the Meta Evidence Reasoner writing the final answer, the best of the
end-to-end benchmark with the packaged 1.5B model (``benchmarks/results/end_to_end.md``)."""

_LOOP_LABELS = {
    "plan_execute": "Plan-and-execute",
    "self_ask": "Self-Ask",
    "react": "ReAct",
    "searchain": "SearChain",
    "ircot": "IRCoT",
}
_VARIANTS: tuple[tuple[str, RetrievalName, bool, str], ...] = (
    ("", "first_stage", False, "first-stage retrieval"),
    ("_mer", "first_stage", True, "first-stage retrieval + MER"),
    ("_nar", "nar", False, "NAR"),
    ("_nar_mer", "nar", True, "NAR + MER"),
    ("_sunar", "sunar", False, "NAR + ASU"),
    ("_sunar_mer", "sunar", True, "NAR + ASU + MER (SUNAR's three parts)"),
)


def _registry() -> dict[str, Pipeline]:
    table: list[Pipeline] = [
        Pipeline(f"{loop}{suffix}", loop, retrieval, mer, f"{label} with {what}")  # type: ignore[arg-type]
        for loop, label in _LOOP_LABELS.items()
        for suffix, retrieval, mer, what in _VARIANTS
    ]
    table += [
        Pipeline("single_step", "single_step", "first_stage", False, "retrieve once, answer once"),
        Pipeline("single_step_sunar", "single_step", "sunar", False, "single-step over SUNAR"),
        Pipeline("cot", "cot", "first_stage", False, "few-shot chain of thought, one retrieval"),
        Pipeline("cot_sunar", "cot", "sunar", False, "few-shot chain of thought over SUNAR"),
        Pipeline("no_retrieval", "no_retrieval", "none", False, "the chat model alone"),
    ]
    default = next(p for p in table if p.name == DEFAULT_PIPELINE)
    table.append(
        Pipeline(
            "adaptive",
            default.loop,
            default.retrieval,
            default.mer,
            "Adaptive-RAG: a complexity router sends each question to no_retrieval, "
            "single_step or the default pipeline",
            router=True,
        )
    )
    return {pipeline.name: pipeline for pipeline in table}


PIPELINES: dict[str, Pipeline] = _registry()
"""Every named pipeline."""


def get_pipeline(name: str) -> Pipeline:
    """The pipeline ``name``; a ConfigError that lists the names otherwise."""
    pipeline = PIPELINES.get(name)
    if pipeline is None:
        raise ConfigError(f"unknown pipeline {name!r}; use one of: {', '.join(PIPELINES)}")
    return pipeline
