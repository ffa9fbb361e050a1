"""SearChain as a LangGraph loop: a global chain of [Query]/[Answer] nodes, each checked
against retrieved evidence.

::

    start → plan ──► retrieve ⇄ explore / requery ──► check ──► retrieve (next node)
             ▲ │                                        │ │
             │ │ final / limit                          │ └─► conclude (all checked + final)
             │ ▼                                        ▼
             │ conclude ──► [mer] ──► finish          plan (corrected / filled / no final)
             └──────────────────────────────────────────┘

``plan`` asks the model for the rest of the chain after the nodes checked so far. Each
proposed node is then verified in order: retrieval for its query, a short answer from the
evidence, and a comparison with the chain's answer (the equivalence of ``models.equivalence``
or containment). A consistent node is ``verified``; a contradicted one is ``corrected`` with
the evidence's answer and an ``[Unsolved Query]`` node is ``filled`` — both drop the nodes
after it and send the chain back to ``plan``. Bounds: ``agents.max_steps`` verified nodes and
``agents.max_steps + 1`` planning rounds.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import START
from langgraph.graph.state import CompiledStateGraph

from ..components import Components
from ..config import Config
from ..text import normalize_answer
from .nodes import (
    UNKNOWN_ANSWER,
    AgentContext,
    ResourceProvider,
    Update,
    add_ending,
    add_retrieval,
    answer_from_evidence,
    ask,
    call_chat,
    compile_graph,
    copied_exemplar,
    costs,
    loop_defaults,
    make_start,
    merge_steps,
    new_graph,
    route_next,
    same_query,
    step_limit,
    steps_of,
)
from .parsers import parse_searchain
from .prompts import searchain as prompt
from .state import AgentState, ChainNodeState

LOOP = "searchain"
EXAMPLE_ANSWERS = prompt.exemplar_answers()


def _checked(chain: list[ChainNodeState]) -> list[ChainNodeState]:
    return [n for n in chain if n.get("status") != "proposed"]


def _pairs(nodes: list[ChainNodeState]) -> list[tuple[str, str]]:
    return [(n.get("query", ""), n.get("answer") or UNKNOWN_ANSWER) for n in nodes]


def consistent(ctx: AgentContext, claimed: str, found: str, query: str) -> bool:
    """Whether the chain's answer agrees with the evidence's (containment or equivalence)."""
    a, b = normalize_answer(claimed), normalize_answer(found)
    if not a or not b:
        return False
    if a in b or b in a:
        return True
    return bool(ctx.parts.equivalence.equivalent(claimed, found, question=query))


def _verify_next(state: AgentState, chain: list[ChainNodeState], ctx: AgentContext) -> Update:
    """Send the first proposed node to retrieval (or conclude at the step limit)."""
    steps = steps_of(state)
    position = next((i for i, n in enumerate(chain) if n.get("status") == "proposed"), None)
    if position is None:
        return {"chain": chain, "next_node": "plan"}
    if reason := step_limit(state, ctx):
        return {"chain": chain, "stop_reason": reason, "next_node": "conclude"}
    index = len(steps)
    node = {**chain[position], "step": index}
    chain = [*chain[:position], node, *chain[position + 1 :]]  # type: ignore[list-item]
    step = {
        "index": index,
        "kind": "chain",
        "sub_question": node.get("query", ""),
        "answer": node.get("answer") or "",
        "status": "proposed",
    }
    return {
        "chain": chain,
        "steps": [*steps, step],
        "next_node": "retrieve",
        **ask(node.get("query", ""), index),
    }


def build_searchain(
    config: Config | None = None,
    *,
    components: Components | None = None,
    retrieval: str | None = None,
    mer: bool | None = None,
    checkpointer: Any = None,
    name: str = LOOP,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The compiled SearChain graph (see the module docstring)."""
    provider = ResourceProvider(
        config, components=components, defaults=loop_defaults(retrieval, mer)
    )

    def plan(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        checked = _checked(list(state.get("chain") or []))
        rounds = state.get("plan_rounds", 0)
        if reason := "max_steps" if rounds > ctx.agents.max_steps else step_limit(state, ctx):
            return {"stop_reason": reason, "next_node": "conclude"}
        reply = call_chat(
            ctx.chat,
            prompt.messages(
                state["question"],
                _pairs(checked),
                exemplars=ctx.agents.exemplars,
                format_hint=bool(state.get("format_hint")),
            ),
            max_tokens=ctx.agents.step_max_tokens * 2,
            stop=prompt.STOP,
        )
        update = costs(state, reply)
        update["plan_rounds"] = rounds + 1
        parsed = parse_searchain(reply.text)
        if parsed.final and copied_exemplar(parsed.final, EXAMPLE_ANSWERS, state):
            parsed.final = ""
        update["candidate_answer"] = parsed.final
        new: list[ChainNodeState] = [
            {"query": n.query, "answer": n.answer, "unsolved": n.unsolved, "status": "proposed"}
            for n in parsed.nodes
            if not any(same_query(n.query, c.get("query", "")) for c in checked)
        ]
        if not new:
            if parsed.final:
                update.update(
                    loop_answer=parsed.final,
                    answer_source="loop",
                    stop_reason="final_answer",
                    next_node="conclude",
                )
                return update
            errors = state.get("format_errors", 0) + 1
            update["format_errors"] = errors
            if errors <= ctx.agents.max_format_errors:
                update.update(format_hint=True, next_node="plan")
                return update
            if checked:
                update.update(stop_reason="format_error", next_node="conclude")
                return update
            new = [
                {"query": state["question"], "answer": None, "unsolved": True, "status": "proposed"}
            ]
        update["format_hint"] = False
        update.update(_verify_next(state, [*checked, *new], ctx))
        return update

    def check(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        index = int(state.get("pending_step", 0))
        chain = [dict(n) for n in state.get("chain") or []]
        position = next(i for i, n in enumerate(chain) if n.get("step") == index)
        node = chain[position]
        reply, found = answer_from_evidence(ctx, state, index)
        update = costs(state, reply)
        claimed = node.get("answer") or ""
        replan = False
        if node.get("unsolved") or not claimed:
            node.update(answer=found or UNKNOWN_ANSWER, status="filled", unsolved=False)
            replan = True
        elif not found:
            node["status"] = "unverifiable"
        elif consistent(ctx, claimed, found, node.get("query", "")):
            node["status"] = "verified"
        else:
            node.update(answer=found, status="corrected", claimed=claimed)
            replan = True
        if replan:
            chain = chain[: position + 1]
        state_steps = merge_steps(
            steps_of(state),
            [{"index": index, "answer": node.get("answer") or "", "status": node["status"]}],
        )
        update["steps"] = state_steps
        typed_chain: list[ChainNodeState] = chain  # type: ignore[assignment]
        if replan:
            update.update(chain=typed_chain, next_node="plan")
            return update
        if any(n.get("status") == "proposed" for n in chain):
            update.update(_verify_next({**state, "steps": state_steps}, typed_chain, ctx))  # type: ignore[typeddict-item]
            return update
        candidate = state.get("candidate_answer", "")
        if candidate:
            update.update(
                chain=typed_chain,
                loop_answer=candidate,
                answer_source="loop",
                stop_reason="final_answer",
                next_node="conclude",
            )
        else:
            update.update(chain=typed_chain, next_node="plan")
        return update

    def conclude(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        if state.get("loop_answer"):
            return {}
        ctx = provider.context(config, runtime)
        checked = _checked(list(state.get("chain") or []))
        reply = call_chat(
            ctx.chat,
            prompt.messages(
                state["question"],
                _pairs(checked),
                exemplars=ctx.agents.exemplars,
                force_final=True,
            ),
            max_tokens=ctx.agents.answer_max_tokens,
            stop=prompt.STOP,
        )
        update = costs(state, reply)
        parsed = parse_searchain(reply.text)
        if parsed.final and not copied_exemplar(parsed.final, EXAMPLE_ANSWERS, state):
            update.update(loop_answer=parsed.final, answer_source="forced_final")
        elif state.get("candidate_answer"):
            update.update(loop_answer=state["candidate_answer"], answer_source="unchecked_final")
        if not state.get("stop_reason"):
            update["stop_reason"] = "max_steps"
        return update

    graph = new_graph()
    graph.add_node("start", make_start(provider, LOOP, name))
    graph.add_node("plan", plan)
    add_retrieval(graph, provider, accept="check")
    graph.add_node("check", check)
    graph.add_node("conclude", conclude)
    add_ending(graph, provider)
    graph.add_edge(START, "start")
    graph.add_edge("start", "plan")
    graph.add_conditional_edges(
        "plan", route_next("plan", "retrieve", "conclude"), ["plan", "retrieve", "conclude"]
    )
    graph.add_conditional_edges(
        "check", route_next("plan", "retrieve", "conclude"), ["plan", "retrieve", "conclude"]
    )
    return compile_graph(graph, name=name, checkpointer=checkpointer)


__all__ = ["LOOP", "build_searchain", "consistent"]
