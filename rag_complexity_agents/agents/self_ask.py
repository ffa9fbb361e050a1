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
answer). The loop ends on an accepted final answer, after ``agents.max_steps`` follow-ups, on
a repeated follow-up, or after ``agents.max_format_errors`` replies that break the format (the
first one is retried with a format reminder; with no follow-up yet, the question itself
becomes the only follow-up). ``conclude`` makes sure there is an answer: the loop's, else a
forced final line, else the last intermediate answer.

**Hops** (bridge and hop pool: not in the paper, both on by default). With ``agents.bridge``
a follow-up that does not mention the previous intermediate answer (the bridge entity) is
retrieved for and answered with it added; with ``agents.hop_pool`` (NAR strategies) each hop
re-ranks its own fresh search together with the earlier hops' documents; each sub-question is
answered from its top ``answer.sub_passages`` passages.

**Stopping** (``agents.stop``). ``model`` (the paper's): the model's first final answer ends
the loop. ``evidence`` (not in the paper): a final answer is accepted only when a passage the
steps were answered from contains it (:func:`~.answer.supported`) and it is more than the
answer of a single sub-question that is not the question itself (a multi-hop question's first
hop finds the bridge entity, not the answer). A first-hop answer makes the loop ask the model
once for the missing follow-up question (``follow_up_hint``); otherwise, and when that reply
is a final answer the evidence still rejects, while steps remain and the question was not
looked up yet, the loop looks up the question itself with the last intermediate answer added
(a ``lookup`` step) and asks again. Whether the final answer stands or becomes "not found" is
decided for every loop at the end (:mod:`.abstain`).
"""

from __future__ import annotations

from ..models.calls import ChatReply, line_grammar
from ..models.schemas import SelfAskMove, ShortAnswer
from ..text import cover_em
from .answer import answer_sub, supported
from .context import AgentContext
from .parsers import SelfAskParse, clean_answer, clean_query, parse_self_ask
from .prompts import self_ask as prompt
from .retrieve import bridge_query
from .state import AgentState
from .steps import Update, ask, copied_exemplar, same_query, step_limit, steps_of
from .wiring import Loop, Think, has_answer

LOOP = "self_ask"
EXAMPLE_ANSWERS = prompt.exemplar_answers()
FINAL_LINE_GRAMMAR = line_grammar(prompt.FINAL)
"""The forced final line (``conclude``): a model that takes a grammar (llama.cpp) writes it
under this one, so it always parses (without one, the 1.5B model's forced line did not parse
on one 2Wiki question of 50)."""


def _path(state: AgentState) -> list[tuple[str, str]]:
    return [(s.get("sub_question", ""), s.get("answer", "")) for s in steps_of(state)]


def _next_line(state: AgentState, ctx: AgentContext) -> list[tuple[str, str]]:
    return prompt.messages(
        state["question"],
        _path(state),
        exemplars=ctx.agents.exemplars,
        force_follow_up=bool(state.get("follow_up_hint")),
        format_hint=bool(state.get("format_hint")),
    )


def not_done(answer: str, state: AgentState, ctx: AgentContext) -> str | None:
    """Why the evidence does not let ``answer`` end the loop (``agents.stop = "evidence"``):
    ``"unsupported"`` (no passage the steps were answered from contains it),
    ``"first_hop_only"`` (it is the answer of the only sub-question, which is not the question
    itself); None when it may end the loop, and always without retrieval (no evidence)."""
    if ctx.strategy == "none":
        return None
    if not supported(answer, state, ctx):
        return "unsupported"
    steps = steps_of(state)
    if len(steps) == 1 and steps[0].get("kind") == "follow_up":
        first = str(steps[0].get("answer") or "")
        if first and (cover_em(answer, first) or cover_em(first, answer)):
            return "first_hop_only"
    return None


def _lookup(state: AgentState, ctx: AgentContext, why: str, proposed: str) -> Update | None:
    """The ``lookup`` step for a rejected final answer: the question itself with the last
    intermediate answer added; None when the step limit is reached or it was looked up."""
    steps = steps_of(state)
    question = state["question"]
    if step_limit(state, ctx) or any(
        same_query(question, s.get("sub_question", "")) for s in steps
    ):
        return None
    last = str(steps[-1].get("answer") or "") if steps else ""
    query = bridge_query(question, last)
    index = len(steps)
    new_step = {
        "index": index,
        "kind": "lookup",
        "sub_question": question,
        "answer": "",
        "rejected": {"answer": proposed, "reason": why},
        **({"query": query} if query != question else {}),
    }
    return {**ask(query, index), "steps": [*steps, new_step], "next_node": "retrieve"}


def _decide(state: AgentState, ctx: AgentContext, reply: ChatReply, parsed: SelfAskParse) -> Update:
    steps = steps_of(state)
    if parsed.kind == "final" and copied_exemplar(parsed.answer, EXAMPLE_ANSWERS, state):
        parsed = SelfAskParse("none")
    if parsed.kind == "final" and not steps:
        # a retrieval loop looks something up at least once: the question itself
        parsed = SelfAskParse("follow_up", follow_up=state["question"], lenient=True)
    if parsed.kind == "final":
        why = not_done(parsed.answer, state, ctx) if ctx.agents.stop == "evidence" else None
        if why == "first_hop_only" and not state.get("follow_up_hint"):
            # a bridge entity, not the answer: ask once for the missing follow-up question
            return {"follow_up_hint": True, "format_hint": False, "next_node": "decompose"}
        lookup = _lookup(state, ctx, why, parsed.answer) if why else None
        if lookup is not None:
            return {**lookup, "format_hint": False}
        return {
            "loop_answer": parsed.answer,
            "loop_source": "loop",
            "stop_reason": "final_answer",
            "next_node": "conclude",
        }
    update: Update = {}
    follow_up = parsed.follow_up
    if parsed.kind == "none":
        errors = state.get("format_errors", 0) + 1
        update["format_errors"] = errors
        if errors <= ctx.agents.max_format_errors:
            return {**update, "format_hint": True, "next_node": "decompose"}
        if steps:
            return {**update, "stop_reason": "format_error", "next_node": "conclude"}
        follow_up = state["question"]  # degrade to retrieving for the question itself
    if any(same_query(follow_up, s.get("sub_question", "")) for s in steps):
        return {**update, "stop_reason": "repeated_query", "next_node": "conclude"}
    index = len(steps)
    kind = "question" if parsed.kind == "none" or follow_up == state["question"] else "follow_up"
    previous = str(steps[-1].get("answer") or "") if steps else ""
    query = bridge_query(follow_up, previous) if ctx.agents.bridge else follow_up
    new_step = {
        "index": index,
        "kind": kind,
        "sub_question": follow_up,
        "answer": "",
        "raw": reply.text,
        **({"query": query} if query != follow_up else {}),
    }
    update.update(ask(query, index))
    update.update(
        steps=[*steps, new_step], format_hint=False, follow_up_hint=False, next_node="retrieve"
    )
    return update


def _from_move(move: SelfAskMove) -> SelfAskParse:
    """A structured Self-Ask line as the parser's result (empty text: no move). A text that
    is itself a marked scratchpad line ('So the final answer is: …', 'Follow up: …') counts
    as what its marker says: a small model sometimes writes the line format into the field."""
    marked = parse_self_ask(move.text)
    if marked.kind != "none" and not marked.lenient:
        return marked
    if move.kind == "follow_up" and (query := clean_query(move.text)):
        return SelfAskParse("follow_up", follow_up=query)
    if move.kind == "final" and (answer := clean_answer(move.text)):
        return SelfAskParse("final", answer=answer)
    return SelfAskParse("none")


def _final_line(state: AgentState, ctx: AgentContext) -> list[tuple[str, str]]:
    return prompt.messages(
        state["question"], _path(state), exemplars=ctx.agents.exemplars, force_final=True
    )


def _forced(state: AgentState, ctx: AgentContext, reply: ChatReply, parsed: SelfAskParse) -> Update:
    update: Update = {}
    if (
        parsed.kind == "final"
        and parsed.answer
        and not copied_exemplar(parsed.answer, EXAMPLE_ANSWERS, state)
    ):
        update.update(loop_answer=parsed.answer, loop_source="forced_final")
    if not state.get("stop_reason"):
        update["stop_reason"] = "max_steps"
    return update


SELF_ASK = Loop(
    name=LOOP,
    description="Self-Ask",
    entry="decompose",
    nodes={
        "decompose": Think(
            _next_line,
            parse_self_ask,
            _decide,
            stop=prompt.STOP,
            schema=SelfAskMove,
            convert=_from_move,
            failed=lambda parsed: parsed.kind == "none",
        ),
        "answer_sub": answer_sub,
        "conclude": Think(
            _final_line,
            parse_self_ask,
            _forced,
            stop=prompt.STOP,
            max_tokens=lambda ctx: ctx.agents.answer_max_tokens,
            limit=None,
            skip=has_answer,
            schema=ShortAnswer,
            convert=lambda final: SelfAskParse("final", answer=clean_answer(final.answer)),
            failed=lambda parsed: parsed.kind != "final" or not parsed.answer,
            grammar=FINAL_LINE_GRAMMAR,
        ),
    },
    accept="answer_sub",
    edges=[("answer_sub", "decompose")],
    routes={"decompose": ("decompose", "retrieve", "conclude")},
)
