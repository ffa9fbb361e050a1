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
from .parsers import parse_react
from .prompts import react as prompt
from .state import AgentState, Step

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


def build_react(
    config: Config | None = None,
    *,
    components: Components | None = None,
    retrieval: str | None = None,
    mer: bool | None = None,
    checkpointer: Any = None,
    name: str = LOOP,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The compiled ReAct graph (see the module docstring)."""
    provider = ResourceProvider(
        config, components=components, defaults=loop_defaults(retrieval, mer)
    )

    def think(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        if reason := step_limit(state, ctx):
            return {"stop_reason": reason, "next_node": "conclude"}
        steps = steps_of(state)
        reply = call_chat(
            ctx.chat,
            prompt.messages(
                state["question"],
                _turns(steps),
                exemplars=ctx.agents.exemplars,
                format_hint=bool(state.get("format_hint")),
            ),
            max_tokens=ctx.agents.step_max_tokens,
            stop=prompt.STOP,
        )
        update = costs(state, reply)
        parsed = parse_react(reply.text)
        action, argument = parsed.action, parsed.argument
        if action == "finish" and copied_exemplar(argument, EXAMPLE_ANSWERS, state):
            action, argument = "none", ""
        if action == "finish":
            update.update(
                loop_answer=argument,
                answer_source="loop",
                stop_reason="final_answer",
                next_node="conclude",
            )
            return update
        if action == "none":
            errors = state.get("format_errors", 0) + 1
            update["format_errors"] = errors
            if errors <= ctx.agents.max_format_errors:
                update.update(format_hint=True, next_node="think")
                return update
            if steps:
                update.update(stop_reason="format_error", next_node="conclude")
                return update
            action, argument = "search", state["question"]
        index = len(steps)
        if action == "search" and any(
            s.get("kind") == "search" and same_query(argument, s.get("sub_question", ""))
            for s in steps
        ):
            update.update(stop_reason="repeated_query", next_node="conclude")
            return update
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

    def observe(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        index = int(state.get("pending_step", 0))
        docs = step_docs(state, index)[: ctx.agents.observation_passages]
        text = _observation(
            [(d.get("title", "") or "", d.get("text", "")) for d in docs],
            ctx.agents.observation_chars,
        )
        return {"steps": merge_steps(steps_of(state), [{"index": index, "observation": text}])}

    def lookup(state: AgentState) -> Update:
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

    def conclude(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        steps = steps_of(state)
        update: Update = {}
        answer = state.get("loop_answer", "")
        if not answer:
            reply = call_chat(
                ctx.chat,
                prompt.messages(
                    state["question"],
                    _turns(steps),
                    exemplars=ctx.agents.exemplars,
                    force_finish=True,
                ),
                max_tokens=ctx.agents.step_max_tokens,
                stop=prompt.STOP,
            )
            update.update(costs(state, reply))
            parsed = parse_react(reply.text)
            if (
                parsed.action == "finish"
                and parsed.argument
                and not copied_exemplar(parsed.argument, EXAMPLE_ANSWERS, state)
            ):
                answer = parsed.argument
                update.update(loop_answer=answer, answer_source="forced_final")
            if not state.get("stop_reason"):
                update["stop_reason"] = "max_steps"
        # intermediate answers for the reasoning path: what the next thought concluded
        filled = []
        for i, step in enumerate(steps):
            nxt = steps[i + 1].get("thought", "") if i + 1 < len(steps) else answer
            filled.append({"index": step["index"], "answer": str(nxt)[:300]})
        update["steps"] = merge_steps(steps, filled)
        return update

    graph = new_graph()
    graph.add_node("start", make_start(provider, LOOP, name))
    graph.add_node("think", think)
    add_retrieval(graph, provider, accept="observe")
    graph.add_node("observe", observe)
    graph.add_node("lookup", lookup)
    graph.add_node("conclude", conclude)
    add_ending(graph, provider)
    graph.add_edge(START, "start")
    graph.add_edge("start", "think")
    graph.add_conditional_edges(
        "think",
        route_next("think", "retrieve", "lookup", "conclude"),
        ["think", "retrieve", "lookup", "conclude"],
    )
    graph.add_edge("observe", "think")
    graph.add_edge("lookup", "think")
    return compile_graph(graph, name=name, checkpointer=checkpointer)


__all__ = ["LOOP", "build_react"]
