"""What a loop step reads from and writes to the state: the steps and their evidence, the
hand-over to the retrieval node, the step limits and the cost counters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..models.calls import ChatReply
from ..text import normalize_answer
from .state import AgentState, DocRecord, RetrievalRecord, Step

if TYPE_CHECKING:
    from .context import AgentContext

Update = dict[str, Any]
"""What a node returns: the new values of the state keys it changes."""


def steps_of(state: AgentState) -> list[Step]:
    """The run's steps so far (a new list)."""
    return list(state.get("steps") or [])


def accepted_retrieval(state: AgentState, step: int) -> RetrievalRecord | None:
    """The last retrieval of ``step`` (the one the loop went on with)."""
    for record in reversed(state.get("retrievals") or []):
        if record.get("step") == step:
            return record
    return None


def step_docs(state: AgentState, step: int) -> list[DocRecord]:
    """The evidence the loop accepted for ``step`` (best first)."""
    record = accepted_retrieval(state, step)
    return list(record.get("docs") or []) if record else []


def sub_question(state: AgentState, step: int) -> str:
    """The sub-question of ``step`` ('' if it has none)."""
    return next((s.get("sub_question", "") for s in steps_of(state) if s.get("index") == step), "")


def reasoning_path(state: AgentState) -> list[tuple[str, str]]:
    """(sub-question, intermediate answer) of every step that asked something."""
    return [
        (s.get("sub_question", ""), s.get("answer", ""))
        for s in steps_of(state)
        if s.get("sub_question")
    ]


def ask(query: str, step: int) -> Update:
    """Hand ``query`` to the retrieval node for ``step`` (resets the ASU-edge counters)."""
    return {
        "pending_query": query,
        "pending_step": step,
        "explore_rounds": 0,
        "requeries": 0,
        "extra_budget": 0,
        "retrieval_reason": "initial",
    }


def superstep_reserve(ctx: AgentContext) -> int:
    """Supersteps one more loop step may take and still reach ``finish``: the retrieval
    round trip with every ASU edge taken, the step's own nodes, conclude, MER, finish."""
    return 8 + 2 * (ctx.agents.max_explore + ctx.agents.max_requery)


def near_recursion_limit(state: AgentState, ctx: AgentContext) -> bool:
    """True when another loop step could hit LangGraph's recursion limit: the loop then
    concludes instead, so a GraphRecursionError never surfaces."""
    remaining = state.get("remaining_steps")
    return remaining is not None and remaining < superstep_reserve(ctx)


def step_limit(state: AgentState, ctx: AgentContext) -> str | None:
    """Why the loop must conclude instead of taking another step: ``"max_steps"`` once
    ``agents.max_steps`` steps were taken, ``"recursion_limit"`` near LangGraph's limit, else
    None."""
    if len(steps_of(state)) >= ctx.agents.max_steps:
        return "max_steps"
    if near_recursion_limit(state, ctx):
        return "recursion_limit"
    return None


def costs(state: AgentState, reply: ChatReply | None = None, **more: int) -> Update:
    """Counter updates for one chat call (and any other counters given)."""
    update: Update = {}
    if reply is not None:
        update["llm_calls"] = state.get("llm_calls", 0) + 1
        update["input_tokens"] = state.get("input_tokens", 0) + reply.input_tokens
        update["output_tokens"] = state.get("output_tokens", 0) + reply.output_tokens
    for key, value in more.items():
        update[key] = update.get(key, state.get(key, 0)) + value
    return update


def copied_exemplar(answer: str, exemplar_answers: set[str], state: AgentState) -> bool:
    """True when ``answer`` is one of the exemplars' answers that nothing in this run (the
    question, the evidence, the intermediate answers) mentions: a small model copying the
    prompt's examples instead of answering."""
    norm = normalize_answer(answer)
    if not norm or norm not in {normalize_answer(a) for a in exemplar_answers}:
        return False
    seen = [state.get("question", "")]
    seen += [s.get("answer", "") for s in steps_of(state)]
    seen += [s.get("sub_question", "") for s in steps_of(state)]
    for record in state.get("retrievals") or []:
        seen += [
            str(d.get("text", "")) + " " + str(d.get("title", "")) for d in record.get("docs") or []
        ]
    return not any(norm in normalize_answer(text) for text in seen)


def same_query(a: str, b: str) -> bool:
    """Whether two queries are the same once normalised."""
    return normalize_answer(a) == normalize_answer(b)


__all__ = [
    "Update",
    "accepted_retrieval",
    "ask",
    "copied_exemplar",
    "costs",
    "near_recursion_limit",
    "reasoning_path",
    "same_query",
    "step_docs",
    "step_limit",
    "steps_of",
    "sub_question",
    "superstep_reserve",
]
