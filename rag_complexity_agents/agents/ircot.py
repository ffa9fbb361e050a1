"""IRCoT (Trivedi et al. 2023) as a LangGraph loop: one chain-of-thought sentence per step,
each used as the next retrieval query, until a sentence contains the answer pattern.

::

    start → seed ──► retrieve ⇄ explore / requery ──► reason ──► retrieve (next sentence)
                                                        │ answer / limit / no progress
                                                        ▼
                                                     conclude ──► [mer] ──► finish

The passages shown to the model accumulate across steps (at most ``agents.ircot_passages``;
the newest retrieval's best passages replace the oldest ones). Step i's sub-question is the
query it retrieved for (the question, then the previous sentence) and its intermediate
answer the sentence written from that evidence.
"""

from __future__ import annotations

from ..models.calls import ChatReply
from ..models.schemas import CoTStep
from .context import AgentContext
from .parsers import CoTParse, parse_cot, parse_ircot
from .prompts import cot as prompt
from .state import AgentState, DocRecord, doc_from_record, merge_steps
from .steps import Update, ask, copied_exemplar, same_query, step_docs, step_limit, steps_of
from .wiring import Loop, Think, has_answer

LOOP = "ircot"
EXAMPLE_ANSWERS = prompt.exemplar_answers()


def update_pool(pool: list[DocRecord], new: list[DocRecord], cap: int) -> list[DocRecord]:
    """Keep at most ``cap`` passages, oldest first in the list: the newest retrieval's best
    passages not shown yet take at least half the places (at least one) and every place the
    earlier passages leave free (so step 0 fills the pool); the earlier passages keep the
    remaining places, newest first, so the oldest are dropped first."""
    known = {d.get("id") for d in pool}
    unseen = [d for d in new if d.get("id") not in known]
    fresh = unseen[: max(max(1, cap // 2), cap - len(pool))]
    room = max(0, cap - len(fresh))
    keep = pool[len(pool) - room :] if room else []
    return [*keep, *fresh][:cap]


def seed(state: AgentState, ctx: AgentContext) -> Update:
    """Step 0 retrieves for the question itself."""
    step = {"index": 0, "kind": "cot", "sub_question": state["question"], "answer": ""}
    return {"steps": [step], **ask(state["question"], 0)}


def _pool(state: AgentState, ctx: AgentContext) -> list[DocRecord]:
    """The passages shown with the pending step's evidence added."""
    index = int(state.get("pending_step", 0))
    return update_pool(
        list(state.get("pool") or []), step_docs(state, index), ctx.agents.ircot_passages
    )


def _messages(
    state: AgentState, ctx: AgentContext, pool: list[DocRecord], force: bool
) -> list[tuple[str, str]]:
    return prompt.ircot_messages(
        state["question"],
        [doc_from_record(d) for d in pool],
        list(state.get("sentences") or []),
        exemplars=ctx.agents.exemplars,
        max_chars=ctx.config.answer.passage_chars,
        force_answer=force,
    )


def _reason(state: AgentState, ctx: AgentContext, reply: ChatReply, parsed: CoTParse) -> Update:
    index = int(state.get("pending_step", 0))
    update: Update = {"pool": _pool(state, ctx)}
    if parsed.answer and copied_exemplar(parsed.answer, EXAMPLE_ANSWERS, state):
        parsed = CoTParse(parsed.sentence, "", parsed.reasoning)
    sentences = list(state.get("sentences") or [])
    steps = steps_of(state)
    if parsed.sentence:
        sentences.append(parsed.sentence)
    update["sentences"] = sentences
    update["steps"] = merge_steps(
        steps, [{"index": index, "answer": parsed.sentence, "raw": reply.text}]
    )
    if parsed.answer:
        return {
            **update,
            "loop_answer": parsed.answer,
            "loop_source": "loop",
            "stop_reason": "final_answer",
            "next_node": "conclude",
        }
    if not parsed.sentence or any(same_query(parsed.sentence, s) for s in sentences[:-1]):
        errors = state.get("format_errors", 0) + 1
        return {
            **update,
            "format_errors": errors,
            "stop_reason": "no_progress",
            "next_node": "conclude",
        }
    if reason := step_limit(state, ctx):
        return {**update, "stop_reason": reason, "next_node": "conclude"}
    new_index = len(steps)
    update["steps"] = [
        *update["steps"],
        {"index": new_index, "kind": "cot", "sub_question": parsed.sentence, "answer": ""},
    ]
    update.update(ask(parsed.sentence, new_index))
    update["next_node"] = "retrieve"
    return update


def _forced(state: AgentState, ctx: AgentContext, reply: ChatReply, parsed: CoTParse) -> Update:
    answer = parsed.answer or parse_cot(parsed.reasoning or reply.text).answer
    if answer and not copied_exemplar(answer, EXAMPLE_ANSWERS, state):
        return {"loop_answer": answer, "loop_source": "forced_final"}
    return {}


IRCOT = Loop(
    name=LOOP,
    description="IRCoT",
    entry="seed",
    nodes={
        "seed": seed,
        "reason": Think(
            lambda state, ctx: _messages(state, ctx, _pool(state, ctx), False),
            parse_ircot,
            _reason,
            stop=prompt.IRCOT_STOP,
            limit=None,
            schema=CoTStep,
            convert=lambda step: parse_ircot(step.sentence),
            failed=lambda parsed: not parsed.sentence and not parsed.answer,
        ),
        "conclude": Think(
            lambda state, ctx: _messages(state, ctx, list(state.get("pool") or []), True),
            parse_ircot,
            _forced,
            stop=prompt.IRCOT_STOP,
            limit=None,
            skip=has_answer,
            schema=CoTStep,
            convert=lambda step: parse_ircot(step.sentence),
            failed=lambda parsed: not parsed.sentence and not parsed.answer,
        ),
    },
    accept="reason",
    edges=[("seed", "retrieve")],
    routes={"reason": ("retrieve", "conclude")},
)
