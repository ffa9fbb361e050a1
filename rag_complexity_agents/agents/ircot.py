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
    make_start,
    merge_steps,
    new_graph,
    route_next,
    same_query,
    step_docs,
    step_limit,
    steps_of,
)
from .parsers import CoTParse, parse_cot, parse_ircot
from .prompts import cot as prompt
from .state import AgentState, DocRecord, doc_from_record

LOOP = "ircot"
EXAMPLE_ANSWERS = prompt.exemplar_answers()


def update_pool(pool: list[DocRecord], new: list[DocRecord], cap: int) -> list[DocRecord]:
    """Keep at most ``cap`` passages: the newest retrieval's best ones first in line for a
    place (up to half the pool), the earlier ones after them, oldest dropped first."""
    known = {d.get("id") for d in pool}
    fresh = [d for d in new if d.get("id") not in known][: max(1, cap // 2)]
    keep = pool[: max(0, cap - len(fresh))]
    return [*keep, *fresh][:cap]


def seed_node(provider: ResourceProvider) -> Any:
    """Step 0 retrieves for the question itself."""

    def seed(state: AgentState) -> Update:
        step = {"index": 0, "kind": "cot", "sub_question": state["question"], "answer": ""}
        return {"steps": [step], **ask(state["question"], 0)}

    return seed


def build_ircot(
    config: Config | None = None,
    *,
    components: Components | None = None,
    retrieval: str | None = None,
    mer: bool | None = None,
    checkpointer: Any = None,
    name: str = LOOP,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The compiled IRCoT graph (see the module docstring)."""
    provider = ResourceProvider(
        config, components=components, defaults=loop_defaults(retrieval, mer)
    )

    def _messages(state: AgentState, pool: list[DocRecord], force: bool, ctx: Any) -> Any:
        return prompt.ircot_messages(
            state["question"],
            [doc_from_record(d) for d in pool],
            list(state.get("sentences") or []),
            exemplars=ctx.agents.exemplars,
            max_chars=ctx.config.answer.passage_chars,
            force_answer=force,
        )

    def reason(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        index = int(state.get("pending_step", 0))
        pool = update_pool(
            list(state.get("pool") or []), step_docs(state, index), ctx.agents.ircot_passages
        )
        reply = call_chat(
            ctx.chat,
            _messages(state, pool, False, ctx),
            max_tokens=ctx.agents.step_max_tokens,
            stop=prompt.IRCOT_STOP,
        )
        update = costs(state, reply)
        update["pool"] = pool
        parsed = parse_ircot(reply.text)
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
            update.update(
                loop_answer=parsed.answer,
                answer_source="loop",
                stop_reason="final_answer",
                next_node="conclude",
            )
            return update
        if not parsed.sentence or any(same_query(parsed.sentence, s) for s in sentences[:-1]):
            errors = state.get("format_errors", 0) + 1
            update.update(format_errors=errors, stop_reason="no_progress", next_node="conclude")
            return update
        if reason := step_limit(state, ctx):
            update.update(stop_reason=reason, next_node="conclude")
            return update
        new_index = len(steps)
        update["steps"] = [
            *update["steps"],
            {"index": new_index, "kind": "cot", "sub_question": parsed.sentence, "answer": ""},
        ]
        update.update(ask(parsed.sentence, new_index))
        update["next_node"] = "retrieve"
        return update

    def conclude(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        if state.get("loop_answer"):
            return {}
        ctx = provider.context(config, runtime)
        reply = call_chat(
            ctx.chat,
            _messages(state, list(state.get("pool") or []), True, ctx),
            max_tokens=ctx.agents.step_max_tokens,
            stop=prompt.IRCOT_STOP,
        )
        update = costs(state, reply)
        parsed = parse_ircot(reply.text)
        answer = parsed.answer or parse_cot(reply.text).answer
        if answer and not copied_exemplar(answer, EXAMPLE_ANSWERS, state):
            update.update(loop_answer=answer, answer_source="forced_final")
        return update

    graph = new_graph()
    graph.add_node("start", make_start(provider, LOOP, name))
    graph.add_node("seed", seed_node(provider))
    add_retrieval(graph, provider, accept="reason")
    graph.add_node("reason", reason)
    graph.add_node("conclude", conclude)
    add_ending(graph, provider)
    graph.add_edge(START, "start")
    graph.add_edge("start", "seed")
    graph.add_edge("seed", "retrieve")
    graph.add_conditional_edges(
        "reason", route_next("retrieve", "conclude"), ["retrieve", "conclude"]
    )
    return compile_graph(graph, name=name, checkpointer=checkpointer)


__all__ = ["LOOP", "build_ircot", "seed_node", "update_pool"]
