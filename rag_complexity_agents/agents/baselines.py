"""Baselines as graphs with the same state, trace and knobs as the loops:

* ``no_retrieval`` — the chat model alone (Adaptive-RAG's A);
* ``single_step`` — retrieve once, answer once (B), with any retrieval-node strategy;
* ``cot`` — few-shot chain of thought over the retrieved passages.

They are the pipelines ``no_retrieval``, ``single_step`` and ``cot``, which the evaluation
harness runs as its baselines; the answers use the prompts of :mod:`.prompts.single_step` and
:mod:`.prompts.no_retrieval`.
"""

from __future__ import annotations

from ..models.calls import ChatReply
from .answer import answer_from_evidence
from .context import AgentContext
from .ircot import seed
from .parsers import CoTParse, parse_cot
from .prompts import cot as cot_prompt
from .state import AgentState, doc_from_record, merge_steps
from .steps import Update, copied_exemplar, step_docs, steps_of
from .wiring import Loop, NodeFn, Think

COT_EXAMPLE_ANSWERS = cot_prompt.exemplar_answers()


def answer(state: AgentState, ctx: AgentContext) -> Update:
    """Answer the question from the evidence retrieved for it (or from nothing)."""
    steps = steps_of(state) or [
        {"index": 0, "kind": "question", "sub_question": state["question"], "answer": ""}
    ]
    reply, text, update = answer_from_evidence(ctx, {**state, "steps": steps}, 0)
    return {
        "steps": merge_steps(steps, [{"index": 0, "answer": text, "raw": reply.text}]),
        "loop_answer": text,
        "loop_source": "loop",
        "stop_reason": "single_pass",
        **update,
    }


def conclude(state: AgentState, ctx: AgentContext) -> Update:
    """A single pass ends here."""
    return {} if state.get("stop_reason") else {"stop_reason": "single_pass"}


def _cot_messages(state: AgentState, ctx: AgentContext) -> list[tuple[str, str]]:
    docs = [doc_from_record(d) for d in step_docs(state, 0)[: ctx.config.answer.passages]]
    return cot_prompt.messages(
        state["question"],
        docs,
        exemplars=ctx.agents.exemplars,
        max_chars=ctx.config.answer.passage_chars,
    )


def _cot_answer(state: AgentState, ctx: AgentContext, reply: ChatReply, parsed: CoTParse) -> Update:
    if copied_exemplar(parsed.answer, COT_EXAMPLE_ANSWERS, state):
        parsed = CoTParse(parsed.sentence, "", parsed.reasoning)
    steps = merge_steps(steps_of(state), [{"index": 0, "answer": parsed.answer, "raw": reply.text}])
    if parsed.answer:
        return {
            "steps": steps,
            "loop_answer": parsed.answer,
            "loop_source": "loop",
            "stop_reason": "final_answer",
        }
    return {"steps": steps, "stop_reason": "format_error", "format_errors": 1}


def _single_pass(name: str, description: str, answer_node: NodeFn) -> Loop:
    """retrieve once (seed → retrieval) → answer → conclude."""
    return Loop(
        name=name,
        description=description,
        entry="seed",
        nodes={"seed": seed, "answer": answer_node, "conclude": conclude},
        accept="answer",
        edges=[("seed", "retrieve"), ("answer", "conclude")],
    )


NO_RETRIEVAL = Loop(
    name="no_retrieval",
    description="no-retrieval (the chat model alone; ``retrieval`` is ignored)",
    entry="answer",
    nodes={"answer": answer, "conclude": conclude},
    edges=[("answer", "conclude")],
    retrieval="none",
)
SINGLE_STEP = _single_pass(
    "single_step",
    "single-step (retrieve once with the run's strategy, answer from ``answer.passages`` passages)",
    answer,
)
COT = _single_pass(
    "cot",
    "chain-of-thought (few-shot, over the passages retrieved once for the question)",
    Think(
        _cot_messages,
        parse_cot,
        _cot_answer,
        stop=["\nQ:", "Passages:"],
        max_tokens=lambda ctx: ctx.agents.step_max_tokens * 2,
        limit=None,
    ),
)
