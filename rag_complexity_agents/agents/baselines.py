"""Baselines as graphs with the same state, trace and knobs as the loops:

* ``no_retrieval`` — the chat model alone (Adaptive-RAG's A);
* ``single_step`` — retrieve once, answer once (B), with any retrieval-node strategy;
* ``cot`` — few-shot chain of thought over the retrieved passages.

They reuse the prompts of :mod:`.no_retrieval` and :mod:`.single_step` (the plain-function
versions used by the harness's ``no_retrieval`` / ``single_step`` strategies). MER is off by
default here (``mer=True`` turns it on).
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import START
from langgraph.graph.state import CompiledStateGraph

from ..components import Components
from ..config import Config
from .ircot import seed_node
from .nodes import (
    ResourceProvider,
    Update,
    add_ending,
    add_retrieval,
    answer_from_evidence,
    call_chat,
    compile_graph,
    copied_exemplar,
    costs,
    loop_defaults,
    make_start,
    merge_steps,
    new_graph,
    step_docs,
    steps_of,
)
from .parsers import CoTParse, parse_cot
from .prompts import cot as cot_prompt
from .state import AgentState, doc_from_record


def _answer_node(provider: ResourceProvider) -> Any:
    def answer(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        steps = steps_of(state) or [
            {"index": 0, "kind": "question", "sub_question": state["question"], "answer": ""}
        ]
        reply, text = answer_from_evidence(ctx, {**state, "steps": steps}, 0)  # type: ignore[typeddict-item]
        return {
            "steps": merge_steps(steps, [{"index": 0, "answer": text, "raw": reply.text}]),
            "loop_answer": text,
            "answer_source": "loop",
            "stop_reason": "single_pass",
            **costs(state, reply),
        }

    return answer


def _conclude(state: AgentState) -> Update:
    return {} if state.get("stop_reason") else {"stop_reason": "single_pass"}


def _build(
    name: str,
    loop: str,
    config: Config | None,
    components: Components | None,
    retrieval: str | None,
    mer: bool | None,
    checkpointer: Any,
    *,
    uses_retrieval: bool,
    reason: Any,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    if not uses_retrieval:
        retrieval = "none"
    provider = ResourceProvider(
        config, components=components, defaults=loop_defaults(retrieval, bool(mer))
    )
    graph = new_graph()
    graph.add_node("start", make_start(provider, loop, name))
    graph.add_node("answer", reason(provider))
    graph.add_node("conclude", _conclude)
    add_ending(graph, provider)
    graph.add_edge(START, "start")
    if uses_retrieval:
        graph.add_node("seed", seed_node(provider))
        add_retrieval(graph, provider, accept="answer")
        graph.add_edge("start", "seed")
        graph.add_edge("seed", "retrieve")
    else:
        graph.add_edge("start", "answer")
    graph.add_edge("answer", "conclude")
    return compile_graph(graph, name=name, checkpointer=checkpointer)


def build_no_retrieval(
    config: Config | None = None,
    *,
    components: Components | None = None,
    retrieval: str | None = None,
    mer: bool | None = None,
    checkpointer: Any = None,
    name: str = "no_retrieval",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The chat model alone (``retrieval`` is ignored: always ``none``)."""
    return _build(
        name,
        "no_retrieval",
        config,
        components,
        retrieval,
        mer,
        checkpointer,
        uses_retrieval=False,
        reason=_answer_node,
    )


def build_single_step(
    config: Config | None = None,
    *,
    components: Components | None = None,
    retrieval: str | None = None,
    mer: bool | None = None,
    checkpointer: Any = None,
    name: str = "single_step",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Retrieve once with the run's strategy and answer from ``answer.passages`` passages."""
    return _build(
        name,
        "single_step",
        config,
        components,
        retrieval,
        mer,
        checkpointer,
        uses_retrieval=True,
        reason=_answer_node,
    )


def _cot_node(provider: ResourceProvider) -> Any:
    def answer(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        docs = [doc_from_record(d) for d in step_docs(state, 0)[: ctx.config.answer.passages]]
        reply = call_chat(
            ctx.chat,
            cot_prompt.messages(
                state["question"],
                docs,
                exemplars=ctx.agents.exemplars,
                max_chars=ctx.config.answer.passage_chars,
            ),
            max_tokens=ctx.agents.step_max_tokens * 2,
            stop=["\nQ:", "Passages:"],
        )
        parsed = parse_cot(reply.text)
        if copied_exemplar(parsed.answer, cot_prompt.exemplar_answers(), state):
            parsed = CoTParse(parsed.sentence, "", parsed.reasoning)
        steps = merge_steps(
            steps_of(state), [{"index": 0, "answer": parsed.answer, "raw": reply.text}]
        )
        update: Update = {"steps": steps, **costs(state, reply)}
        if parsed.answer:
            update.update(
                loop_answer=parsed.answer, answer_source="loop", stop_reason="final_answer"
            )
        else:
            update.update(stop_reason="format_error", format_errors=1)
        return update

    return answer


def build_cot(
    config: Config | None = None,
    *,
    components: Components | None = None,
    retrieval: str | None = None,
    mer: bool | None = None,
    checkpointer: Any = None,
    name: str = "cot",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Few-shot chain of thought over the passages retrieved once for the question."""
    return _build(
        name,
        "cot",
        config,
        components,
        retrieval,
        mer,
        checkpointer,
        uses_retrieval=True,
        reason=_cot_node,
    )


__all__ = ["build_cot", "build_no_retrieval", "build_single_step"]
