"""Self-Ask as a LangGraph loop (the decomposition SUNAR uses for its main results).

::

    start → decompose ──follow-up──► retrieve ⇄ explore / requery (ASU edges)
               ▲  │                     │ accept
               │  │ final / limit       ▼
               │  │ / format break   answer_sub ──► decompose
               │  ▼
               └ conclude ──► [mer] ──► finish

``decompose`` asks the chat model for the next line. A follow-up question goes to the
retrieval node and ``answer_sub`` answers it from the accepted evidence (the intermediate
answer). The loop ends on a final answer, after ``agents.max_steps`` follow-ups, on a repeated
follow-up, or after ``agents.max_format_errors`` replies that break the format (the first
one is retried with a format reminder; with no follow-up yet, the question itself becomes
the only follow-up). ``conclude`` makes sure there is an answer: the loop's, else a forced
final line, else the last intermediate answer.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import START
from langgraph.graph.state import CompiledStateGraph

from ..components import Components
from ..config import Config
from .nodes import (
    ResourceProvider,
    Update,
    add_ending,
    add_retrieval,
    ask,
    call_chat,
    compile_graph,
    copied_exemplar,
    costs,
    loop_defaults,
    make_answer_sub,
    make_start,
    new_graph,
    route_next,
    same_query,
    step_limit,
    steps_of,
)
from .parsers import SelfAskParse, parse_self_ask
from .prompts import self_ask as prompt
from .state import AgentState

LOOP = "self_ask"
EXAMPLE_ANSWERS = prompt.exemplar_answers()


def _path(state: AgentState) -> list[tuple[str, str]]:
    return [(s.get("sub_question", ""), s.get("answer", "")) for s in steps_of(state)]


def build_self_ask(
    config: Config | None = None,
    *,
    components: Components | None = None,
    retrieval: str | None = None,
    mer: bool | None = None,
    checkpointer: Any = None,
    name: str = LOOP,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The compiled Self-Ask graph. ``retrieval`` / ``mer`` set this graph's defaults (else
    ``agents.retrieval`` / ``agents.mer``); runs can still change them (``configurable``)."""
    provider = ResourceProvider(
        config, components=components, defaults=loop_defaults(retrieval, mer)
    )

    def decompose(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        if reason := step_limit(state, ctx):
            return {"stop_reason": reason, "next_node": "conclude"}
        steps = steps_of(state)
        reply = call_chat(
            ctx.chat,
            prompt.messages(
                state["question"],
                _path(state),
                exemplars=ctx.agents.exemplars,
                format_hint=bool(state.get("format_hint")),
            ),
            max_tokens=ctx.agents.step_max_tokens,
            stop=prompt.STOP,
        )
        update = costs(state, reply)
        parsed = parse_self_ask(reply.text)
        if parsed.kind == "final" and copied_exemplar(parsed.answer, EXAMPLE_ANSWERS, state):
            parsed = SelfAskParse("none")
        if parsed.kind == "final" and not steps:
            # a retrieval loop looks something up at least once: the question itself
            parsed = SelfAskParse("follow_up", follow_up=state["question"], lenient=True)
        if parsed.kind == "final":
            update.update(
                loop_answer=parsed.answer,
                answer_source="loop",
                stop_reason="final_answer",
                next_node="conclude",
            )
            return update
        follow_up = parsed.follow_up
        if parsed.kind == "none":
            errors = state.get("format_errors", 0) + 1
            update["format_errors"] = errors
            if errors <= ctx.agents.max_format_errors:
                update.update(format_hint=True, next_node="decompose")
                return update
            if steps:
                update.update(stop_reason="format_error", next_node="conclude")
                return update
            follow_up = state["question"]  # degrade to retrieving for the question itself
        if any(same_query(follow_up, s.get("sub_question", "")) for s in steps):
            update.update(stop_reason="repeated_query", next_node="conclude")
            return update
        index = len(steps)
        kind = (
            "question" if parsed.kind == "none" or follow_up == state["question"] else ("follow_up")
        )
        new_step = {
            "index": index,
            "kind": kind,
            "sub_question": follow_up,
            "answer": "",
            "raw": reply.text,
        }
        update.update(ask(follow_up, index))
        update.update(steps=[*steps, new_step], format_hint=False, next_node="retrieve")
        return update

    def conclude(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        if state.get("loop_answer"):
            return {}
        ctx = provider.context(config, runtime)
        reply = call_chat(
            ctx.chat,
            prompt.messages(
                state["question"], _path(state), exemplars=ctx.agents.exemplars, force_final=True
            ),
            max_tokens=ctx.agents.answer_max_tokens,
            stop=prompt.STOP,
        )
        update = costs(state, reply)
        parsed = parse_self_ask(reply.text)
        if (
            parsed.kind == "final"
            and parsed.answer
            and not copied_exemplar(parsed.answer, EXAMPLE_ANSWERS, state)
        ):
            update.update(loop_answer=parsed.answer, answer_source="forced_final")
        if not state.get("stop_reason"):
            update["stop_reason"] = "max_steps"
        return update

    graph = new_graph()
    graph.add_node("start", make_start(provider, LOOP, name))
    graph.add_node("decompose", decompose)
    add_retrieval(graph, provider, accept="answer_sub")
    graph.add_node("answer_sub", make_answer_sub(provider))
    graph.add_node("conclude", conclude)
    add_ending(graph, provider)
    graph.add_edge(START, "start")
    graph.add_edge("start", "decompose")
    graph.add_conditional_edges(
        "decompose",
        route_next("decompose", "retrieve", "conclude"),
        ["decompose", "retrieve", "conclude"],
    )
    graph.add_edge("answer_sub", "decompose")
    return compile_graph(graph, name=name, checkpointer=checkpointer)


__all__ = ["LOOP", "build_self_ask"]
