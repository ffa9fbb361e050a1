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
evidence, and a comparison with the chain's answer (a whole-token-run match or the equivalence
of ``models.equivalence``). A consistent node is ``verified``; a contradicted one is
``corrected`` with the evidence's answer and an ``[Unsolved Query]`` node is ``filled`` — both
drop the nodes after it and send the chain back to ``plan``. Bounds: ``agents.max_steps``
verified nodes and ``agents.max_steps + 1`` planning rounds.
"""

from __future__ import annotations

from ..models.calls import ChatReply
from ..models.schemas import SearChainPlan, ShortAnswer
from ..text import cover_em, normalize_answer
from .answer import UNKNOWN_ANSWER, answer_from_evidence
from .context import AgentContext
from .parsers import ChainNode, SearChainParse, clean_answer, clean_query, parse_searchain
from .prompts import searchain as prompt
from .state import AgentState, ChainNodeState, merge_steps
from .steps import Update, ask, copied_exemplar, same_query, step_limit, steps_of
from .wiring import Loop, Think, has_answer

LOOP = "searchain"
EXAMPLE_ANSWERS = prompt.exemplar_answers()


def _checked(chain: list[ChainNodeState]) -> list[ChainNodeState]:
    return [n for n in chain if n.get("status") != "proposed"]


def _pairs(nodes: list[ChainNodeState]) -> list[tuple[str, str]]:
    return [(n.get("query", ""), n.get("answer") or UNKNOWN_ANSWER) for n in nodes]


def consistent(ctx: AgentContext, claimed: str, found: str, query: str) -> bool:
    """Whether the chain's answer agrees with the evidence's: one normalised answer is a whole
    run of the other's tokens (cover-EM's match, so "no" is not found in "Norway"), or the
    run's equivalence says they mean the same."""
    if not normalize_answer(claimed) or not normalize_answer(found):
        return False
    if cover_em(claimed, found) or cover_em(found, claimed):
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
    node: ChainNodeState = {**chain[position], "step": index}
    chain = [*chain[:position], node, *chain[position + 1 :]]
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


def _plan_limit(state: AgentState, ctx: AgentContext) -> str | None:
    if state.get("plan_rounds", 0) > ctx.agents.max_steps:
        return "max_steps"
    return step_limit(state, ctx)


def _rest_of_chain(state: AgentState, ctx: AgentContext) -> list[tuple[str, str]]:
    return prompt.messages(
        state["question"],
        _pairs(_checked(list(state.get("chain") or []))),
        exemplars=ctx.agents.exemplars,
        format_hint=bool(state.get("format_hint")),
    )


def _plan(state: AgentState, ctx: AgentContext, reply: ChatReply, parsed: SearChainParse) -> Update:
    checked = _checked(list(state.get("chain") or []))
    update: Update = {"plan_rounds": state.get("plan_rounds", 0) + 1}
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
            return {
                **update,
                "loop_answer": parsed.final,
                "loop_source": "loop",
                "stop_reason": "final_answer",
                "next_node": "conclude",
            }
        errors = state.get("format_errors", 0) + 1
        update["format_errors"] = errors
        if errors <= ctx.agents.max_format_errors:
            return {**update, "format_hint": True, "next_node": "plan"}
        if checked:
            return {**update, "stop_reason": "format_error", "next_node": "conclude"}
        new = [{"query": state["question"], "answer": None, "unsolved": True, "status": "proposed"}]
    update["format_hint"] = False
    update.update(_verify_next(state, [*checked, *new], ctx))
    return update


def check(state: AgentState, ctx: AgentContext) -> Update:
    """Compare the pending node's answer with the one its evidence gives."""
    index = int(state.get("pending_step", 0))
    chain: list[ChainNodeState] = [ChainNodeState(**n) for n in state.get("chain") or []]
    position = next(i for i, n in enumerate(chain) if n.get("step") == index)
    node = chain[position]
    _, found, update = answer_from_evidence(ctx, state, index)
    claimed = node.get("answer") or ""
    replan = False
    if node.get("unsolved") or not claimed:
        node.update({"answer": found or UNKNOWN_ANSWER, "status": "filled", "unsolved": False})
        replan = True
    elif not found:
        node["status"] = "unverifiable"
    elif consistent(ctx, claimed, found, node.get("query", "")):
        node["status"] = "verified"
    else:
        node.update({"answer": found, "status": "corrected", "claimed": claimed})
        replan = True
    if replan:
        chain = chain[: position + 1]
    state_steps = merge_steps(
        steps_of(state),
        [{"index": index, "answer": node.get("answer") or "", "status": node["status"]}],
    )
    update["steps"] = state_steps
    if replan:
        update.update(chain=chain, next_node="plan")
        return update
    if any(n.get("status") == "proposed" for n in chain):
        update.update(_verify_next({**state, "steps": state_steps}, chain, ctx))
        return update
    candidate = state.get("candidate_answer", "")
    if candidate:
        update.update(
            chain=chain,
            loop_answer=candidate,
            loop_source="loop",
            stop_reason="final_answer",
            next_node="conclude",
        )
    else:
        update.update(chain=chain, next_node="plan")
    return update


def _from_plan(plan: SearChainPlan) -> SearChainParse:
    """A structured chain as the parser's result (a node without an answer is unsolved)."""
    nodes = [
        ChainNode(query, clean_answer(n.answer) or None, not clean_answer(n.answer))
        for n in plan.nodes
        if (query := clean_query(n.query))
    ]
    return SearChainParse(nodes, clean_answer(plan.final_answer))


def _final_line(state: AgentState, ctx: AgentContext) -> list[tuple[str, str]]:
    return prompt.messages(
        state["question"],
        _pairs(_checked(list(state.get("chain") or []))),
        exemplars=ctx.agents.exemplars,
        force_final=True,
    )


def _forced(
    state: AgentState, ctx: AgentContext, reply: ChatReply, parsed: SearChainParse
) -> Update:
    update: Update = {}
    if parsed.final and not copied_exemplar(parsed.final, EXAMPLE_ANSWERS, state):
        update.update(loop_answer=parsed.final, loop_source="forced_final")
    elif state.get("candidate_answer"):
        update.update(loop_answer=state["candidate_answer"], loop_source="unchecked_final")
    if not state.get("stop_reason"):
        update["stop_reason"] = "max_steps"
    return update


SEARCHAIN = Loop(
    name=LOOP,
    description="SearChain",
    entry="plan",
    nodes={
        "plan": Think(
            _rest_of_chain,
            parse_searchain,
            _plan,
            stop=prompt.STOP,
            max_tokens=lambda ctx: ctx.agents.step_max_tokens * 2,
            limit=_plan_limit,
            schema=SearChainPlan,
            convert=_from_plan,
            failed=lambda parsed: parsed.kind == "none",
        ),
        "check": check,
        "conclude": Think(
            _final_line,
            parse_searchain,
            _forced,
            stop=prompt.STOP,
            max_tokens=lambda ctx: ctx.agents.answer_max_tokens,
            limit=None,
            skip=has_answer,
            schema=ShortAnswer,
            convert=lambda final: SearChainParse(final=clean_answer(final.answer)),
            failed=lambda parsed: not parsed.final,
        ),
    },
    accept="check",
    routes={
        "plan": ("plan", "retrieve", "conclude"),
        "check": ("plan", "retrieve", "conclude"),
    },
)
