"""ReAct as a LangGraph loop: Thought / Action / Observation with our retrieval node.

::

    start → think ──Search[q]──► retrieve ⇄ explore / requery ──► observe ──► think
              │  └─Lookup[k]──► lookup ──► think
              │ Finish / limit / repeated search / format break
              ▼
           conclude ──► [mer] ──► finish

``Search[q]`` runs the retrieval node for q; the observation is the best passage(s)
(``agents.observation_passages``, cut to ``agents.observation_chars``). ``Lookup[k]`` returns
the next sentence containing k in the passages found so far (no retrieval). For MER's
reasoning path each search is a sub-question and the next thought (or the final answer) its
intermediate answer.
"""

from __future__ import annotations

import re

from ..models.calls import ChatReply
from ..models.schemas import ReActMove, ShortAnswer
from ..models.structured import record_format_failure
from .context import AgentContext
from .parsers import ReActParse, clean_answer, clean_query, parse_react
from .prompts import react as prompt
from .state import AgentState, Step, merge_steps
from .steps import Update, ask, copied_exemplar, same_query, step_docs, steps_of
from .structured import ask_step
from .wiring import Loop, Think

LOOP = "react"
EXAMPLE_ANSWERS = prompt.exemplar_answers()
_SENTENCES = re.compile(r"(?<=[.!?])\s+")


def _turns(steps: list[Step]) -> list[prompt.ReActTurn]:
    return [
        prompt.ReActTurn(
            s.get("thought", ""),
            s.get("action", ""),
            s.get("observation", "") or "(nothing found)",
        )
        for s in steps
    ]


def _observation(texts: list[tuple[str, str]], max_chars: int) -> str:
    parts = []
    for number, (title, text) in enumerate(texts, start=1):
        text = " ".join(text.split())
        if len(text) > max_chars:
            text = text[:max_chars].rsplit(" ", 1)[0] + " …"
        parts.append(f"[{number}] {title + ': ' if title else ''}{text}")
    return " ".join(parts) if parts else "No passages were found."


def _next_turn(state: AgentState, ctx: AgentContext) -> list[tuple[str, str]]:
    return prompt.messages(
        state["question"],
        _turns(steps_of(state)),
        exemplars=ctx.agents.exemplars,
        format_hint=bool(state.get("format_hint")),
    )


def _act(state: AgentState, ctx: AgentContext, reply: ChatReply, parsed: ReActParse) -> Update:
    steps = steps_of(state)
    action, argument = parsed.action, parsed.argument
    if action == "finish" and copied_exemplar(argument, EXAMPLE_ANSWERS, state):
        action, argument = "none", ""
    if action == "finish":
        return {
            "loop_answer": argument,
            "loop_source": "loop",
            "stop_reason": "final_answer",
            "next_node": "conclude",
        }
    update: Update = {}
    if action == "none":
        errors = state.get("format_errors", 0) + 1
        update["format_errors"] = errors
        if errors <= ctx.agents.max_format_errors:
            return {**update, "format_hint": True, "next_node": "think"}
        if steps:
            return {**update, "stop_reason": "format_error", "next_node": "conclude"}
        action, argument = "search", state["question"]
    index = len(steps)
    if action == "search" and any(
        s.get("kind") == "search" and same_query(argument, s.get("sub_question", "")) for s in steps
    ):
        return {**update, "stop_reason": "repeated_query", "next_node": "conclude"}
    label = "Search" if action == "search" else "Lookup"
    step: Step = {
        "index": index,
        "kind": action,
        "thought": parsed.thought or f"I need to {label.lower()} {argument}.",
        "sub_question": argument,
        "action": f"{label}[{argument}]",
        "answer": "",
        "raw": reply.text,
    }
    update["steps"] = [*steps, step]
    update["format_hint"] = False
    if action == "search":
        update.update(ask(argument, index))
        update["next_node"] = "retrieve"
    else:
        update["next_node"] = "lookup"
    return update


def _from_move(move: ReActMove) -> ReActParse:
    """A structured ReAct turn as the parser's result (an empty argument: no action)."""
    thought = " ".join(move.thought.split())[:500]
    value = clean_answer(move.argument) if move.action == "finish" else clean_query(move.argument)
    return ReActParse(thought, move.action if value else "none", value)


def observe(state: AgentState, ctx: AgentContext) -> Update:
    """The observation of a search: the best accepted passage(s), shortened."""
    index = int(state.get("pending_step", 0))
    docs = step_docs(state, index)[: ctx.agents.observation_passages]
    text = _observation(
        [(d.get("title", "") or "", d.get("text", "")) for d in docs],
        ctx.agents.observation_chars,
    )
    return {"steps": merge_steps(steps_of(state), [{"index": index, "observation": text}])}


def lookup(state: AgentState, ctx: AgentContext) -> Update:
    """``Lookup[k]``: the next sentence containing k in the passages found so far."""
    steps = steps_of(state)
    current = steps[-1]
    keyword = current.get("sub_question", "").lower()
    seen: set[str] = set()
    sentences: list[str] = []
    for record in state.get("retrievals") or []:
        for doc in record.get("docs") or []:
            if doc.get("id") in seen:
                continue
            seen.add(str(doc.get("id")))
            for sentence in _SENTENCES.split(" ".join(str(doc.get("text", "")).split())):
                if keyword and keyword in sentence.lower():
                    sentences.append(sentence)
    earlier = sum(
        1
        for s in steps[:-1]
        if s.get("kind") == "lookup" and s.get("sub_question", "").lower() == keyword
    )
    if earlier < len(sentences):
        text = f"(Result {earlier + 1} / {len(sentences)}) {sentences[earlier]}"
    else:
        text = f"No more results for {current.get('sub_question', '')}."
    return {"steps": merge_steps(steps, [{"index": current["index"], "observation": text}])}


def conclude(state: AgentState, ctx: AgentContext) -> Update:
    """A forced ``Finish`` when the loop has no answer, then each search's intermediate
    answer for the reasoning path: what the next thought concluded."""
    steps = steps_of(state)
    update: Update = {}
    answer = state.get("loop_answer", "")
    if not answer:
        move, reply, update = ask_step(
            ctx,
            state,
            prompt.messages(
                state["question"], _turns(steps), exemplars=ctx.agents.exemplars, force_finish=True
            ),
            kind="conclude",
            max_tokens=ctx.agents.step_max_tokens,
            stop=prompt.STOP,
            schema=ShortAnswer,
        )
        if move is not None:
            parsed = ReActParse("", "finish", clean_answer(move.answer))
        else:
            parsed = parse_react(reply.text)
        if parsed.action != "finish" or not parsed.argument:
            record_format_failure("conclude")
        if (
            parsed.action == "finish"
            and parsed.argument
            and not copied_exemplar(parsed.argument, EXAMPLE_ANSWERS, state)
        ):
            answer = parsed.argument
            update.update(loop_answer=answer, loop_source="forced_final")
        if not state.get("stop_reason"):
            update["stop_reason"] = "max_steps"
    filled: list[Step] = []
    for i, step in enumerate(steps):
        nxt = steps[i + 1].get("thought", "") if i + 1 < len(steps) else answer
        filled.append({"index": step["index"], "answer": str(nxt)[:300]})
    update["steps"] = merge_steps(steps, filled)
    return update


REACT = Loop(
    name=LOOP,
    description="ReAct",
    entry="think",
    nodes={
        "think": Think(
            _next_turn,
            parse_react,
            _act,
            stop=prompt.STOP,
            schema=ReActMove,
            convert=_from_move,
            failed=lambda parsed: parsed.action == "none",
        ),
        "observe": observe,
        "lookup": lookup,
        "conclude": conclude,
    },
    accept="observe",
    edges=[("observe", "think"), ("lookup", "think")],
    routes={"think": ("think", "retrieve", "lookup", "conclude")},
)
