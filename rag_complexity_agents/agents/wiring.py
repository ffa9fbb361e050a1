"""The loop scaffold: a loop module declares its nodes (:class:`Think` steps and plain node
functions) and edges as a :class:`Loop`; :func:`build_loop` wires them into a LangGraph graph
with the shared parts every loop has::

    START → start → <the loop's entry> … → conclude → [mer] → finish → END
                         ⇅
                      retrieve ⇄ explore / requery ──► <the loop's accept node>

Node functions take ``(state, ctx)``: the scaffold resolves the run's
:class:`~.context.AgentContext` (:class:`~.context.ResourceProvider`) before calling them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import set_config_context
from langgraph.constants import TAG_NOSTREAM
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel

from ..components import Components
from ..config import Config
from ..config.pipelines import Pipeline
from ..models.calls import ChatReply, call_notes
from ..models.structured import format_failures, record_format_failure
from ..text import validate_question
from .abstain import NOT_FOUND
from .answer import echoes_question, final_answer, mer_node, repeats_the_chain
from .context import AgentContext, ResourceProvider
from .retrieve import after_retrieve, explore, requery, retrieve
from .state import AgentState, InputState, OutputState, RunOptions, sources_of
from .steps import BUDGET, Update, cancellable, costs, step_limit
from .structured import ask_step, model_notes
from .trace import build_trace
from .turns import appended, question_of, streamed_answer

Graph = CompiledStateGraph[Any, Any, Any, Any]
NodeFn = Callable[[AgentState, AgentContext], Update]
"""A loop node: the state and the run's context in, the state changes out."""
Messages = list[tuple[str, str]]

P = TypeVar("P")


def _step_tokens(ctx: AgentContext) -> int:
    return ctx.agents.step_max_tokens


@dataclass(frozen=True)
class Think(Generic[P]):
    """A node that asks the chat model for the loop's next move: unless ``skip`` holds, stop
    at ``limit`` (→ conclude), else call the chat model with ``messages``, count the call,
    ``parse`` the reply and let the loop's ``step`` turn it into state changes.

    With a ``schema`` (and ``convert`` from a schema object to the parse result) the step
    asks for structured output first when the model supports it
    (:mod:`~.structured`); the text reply and ``parse`` are the fallback. ``failed`` says
    when a parse result holds no usable move: that reply is a format failure of ``kind``
    (:func:`build_loop` sets ``kind`` to the node's name). ``grammar`` (GBNF) constrains the
    text reply of a model that takes one (:func:`~..models.calls.line_grammar`)."""

    messages: Callable[[AgentState, AgentContext], Messages]
    parse: Callable[[str], P]
    step: Callable[[AgentState, AgentContext, ChatReply, P], Update]
    stop: Sequence[str]
    max_tokens: Callable[[AgentContext], int] = _step_tokens
    limit: Callable[[AgentState, AgentContext], str | None] | None = step_limit
    skip: Callable[[AgentState], bool] | None = None
    schema: type[BaseModel] | None = None
    convert: Callable[[Any], P] | None = None
    failed: Callable[[P], bool] | None = None
    grammar: str | None = None
    kind: str = "step"

    def __call__(self, state: AgentState, ctx: AgentContext) -> Update:
        if self.skip is not None and self.skip(state):
            return {}
        if state.get("stop_reason") == BUDGET:
            return {}  # the run's budget is spent: no further model call
        if self.limit is not None and (reason := self.limit(state, ctx)):
            return {"stop_reason": reason, "next_node": "conclude"}
        obj, reply, update = ask_step(
            ctx,
            state,
            self.messages(state, ctx),
            kind=self.kind,
            max_tokens=self.max_tokens(ctx),
            stop=self.stop,
            schema=self.schema if self.convert is not None else None,
            grammar=self.grammar,
        )
        parsed = self.convert(obj) if obj is not None and self.convert else self.parse(reply.text)
        if self.failed is not None and self.failed(parsed):
            record_format_failure(self.kind)
        return {**update, **self.step(state, ctx, reply, parsed)}


def has_answer(state: AgentState) -> bool:
    """A ``skip`` for conclude steps: the loop already has its answer."""
    return bool(state.get("loop_answer"))


def _concluded(state: AgentState) -> bool:
    """Whether the loop has an answer that does more than repeat the question
    (:func:`~.answer.echoes_question`): one that only repeats it answers nothing, and MER
    reads the passages again."""
    answer = state.get("loop_answer") or ""
    return bool(answer) and not echoes_question(answer, state["question"])


def one_step_plan(state: AgentState) -> bool:
    """Whether plan-and-execute planned one step and has concluded (:func:`_concluded`): MER
    would have no hops to combine (``mer.after_one_step_plan``)."""
    return len(state.get("plan") or []) == 1 and _concluded(state)


def chain_answered(state: AgentState) -> bool:
    """Whether plan-and-execute ran a chain whose last step gave the loop's answer
    (``loop_source`` "loop" with a plan, set only for chains), which has concluded
    (:func:`_concluded`) and does more than repeat its own step's query or an earlier step's
    answer (:func:`~.answer.repeats_the_chain`), for ``mer.after_chain``."""
    return (
        bool(state.get("plan"))
        and state.get("loop_source") == "loop"
        and _concluded(state)
        and not repeats_the_chain(str(state.get("loop_answer")), state)
    )


@dataclass(frozen=True)
class Loop:
    """A loop's own part of the graph.

    ``nodes`` (in order; one is ``conclude``) are added after ``start``, with the retrieval
    node and its ASU edges just before ``accept``, the node the retrieval node hands accepted
    evidence to (None: the loop never retrieves). ``edges`` are fixed edges; ``routes`` maps
    a node to the nodes its ``next_node`` may pick (the last one is the fallback).
    ``retrieval`` forces a retrieval strategy whatever the pipeline or a knob says.
    """

    name: str
    description: str
    entry: str
    nodes: Mapping[str, NodeFn]
    accept: str | None = None
    edges: Sequence[tuple[str, str]] = ()
    routes: Mapping[str, Sequence[str]] = field(default_factory=dict)
    retrieval: str | None = None


STEP_TAG = "rca:step"
"""Tag of every chat call inside a loop (planning, sub-answers, ASU samples, MER, …), beside
``rca:<node>``. Unless a run's ``configurable`` has ``stream_steps: True``, those calls are
also tagged ``nostream``, so LangGraph's ``stream_mode="messages"`` shows only the final
answer, streamed in pieces by the finish node (:func:`~.turns.streamed_answer`);
``astream_events(..., include_tags=[STEP_TAG])`` shows them either way."""

STREAM_STEPS = "stream_steps"
"""The ``configurable`` key that lets a run's internal chat calls stream as messages."""


def _bind(provider: ResourceProvider, fn: NodeFn, name: str) -> Runnable[Any, Any]:
    """The graph node ``name`` of ``fn``: resolves the run's context, tags the chat calls
    ``fn`` makes (:data:`STEP_TAG`) and adds the format failures of those calls
    (:func:`~..models.structured.format_failures`) to the state's; a cancelled run stops
    before its next model call (:func:`~.steps.cancellable`)."""

    def node(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        shown = bool((config.get("configurable") or {}).get(STREAM_STEPS))
        tags = [STEP_TAG, f"rca:{name}", *([] if shown else [TAG_NOSTREAM])]
        tagged: RunnableConfig = {**config, "tags": [*(config.get("tags") or []), *tags]}
        with format_failures() as tally, call_notes() as notes, set_config_context(tagged) as calls:
            update = calls.run(fn, state, provider.context(config, runtime))
        known = list(update.get("notes", state.get("notes")) or [])
        if any(note not in known for note in notes):
            update = {**update, "notes": [*known, *(n for n in notes if n not in known)]}
        if tally:
            counts = dict(update.get("format_failures", state.get("format_failures") or {}))
            for kind, count in tally.items():
                counts[kind] = counts.get(kind, 0) + count
            update = {**update, "format_failures": counts}
        return update

    return cancellable(node, name)


def start_node(pipeline: Pipeline, name: str) -> NodeFn:
    """Validates the question and resets the run (threads may be reused)."""

    def start(state: AgentState, ctx: AgentContext) -> Update:
        asked, rewrite, by_messages = question_of(state, ctx)
        question = validate_question(asked, max_chars=ctx.config.max_question_chars)
        # fail before any LLM call when the collection or the model spec is unusable
        if ctx.strategy != "none":
            _ = ctx.parts.first_stage
        _ = ctx.parts.chat
        notes = [*model_notes(ctx), *ctx.knob_notes()]
        if rewrite is not None:
            notes.append(f"the follow-up was asked as: {question}")
        fresh: AgentState = {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0}
        return {
            "question": question,
            "asked_by_messages": by_messages,
            "options": {
                "graph": name,
                "pipeline": pipeline.name,
                "loop": pipeline.loop,
                "retrieval": ctx.strategy,
                "mer": ctx.mer,
                **ctx.options,
            },
            "started_at": time.time(),
            "steps": [],
            "retrievals": [],
            "pending_query": "",
            "pending_step": 0,
            "explore_rounds": 0,
            "requeries": 0,
            "extra_budget": 0,
            "retrieval_reason": "initial",
            "chain": [],
            "plan": [],
            "plan_rounds": 0,
            "sentences": [],
            "pool": [],
            "candidate_answer": "",
            "format_errors": 0,
            "format_failures": {},
            "format_hint": False,
            "follow_up_hint": False,
            "loop_answer": "",
            "loop_source": "",
            "answer_source": "",
            "stop_reason": "",
            "mer": {},
            "answer": "",
            "trace": {},
            "notes": notes,
            "asu_samples": 0,
            "retrieval_calls": 0,
            **fresh,
            **costs(fresh, rewrite),
        }

    return start


def finish(state: AgentState, ctx: AgentContext) -> Update:
    """The answer (MER's when it gave one, else the loop's) and the JSON trace."""
    answer, source = final_answer(state, ctx.agents.abstain)
    empty = getattr(ctx.parts, "empty_store_note", None)  # a user's store with no documents
    note = empty() if callable(empty) and ctx.strategy != "none" else None
    if note:
        answer, source = NOT_FOUND, f"abstained: {note}"
        state = {**state, "notes": [*(state.get("notes") or []), note]}
    state = {**state, "answer": answer, "answer_source": source}
    trace = build_trace(state, passages=ctx.config.answer.passages)
    by_messages = bool(state.get("asked_by_messages"))
    return {
        "answer": answer,
        "answer_source": source,
        "trace": trace,
        "sources": sources_of(state, trace),
        "messages": appended(
            streamed_answer(state["question"], answer, hidden_tags=[STEP_TAG, "rca:finish"]),
            state["question"],
            by_messages=by_messages,
        ),
    }


def route_next(*allowed: str) -> Callable[[AgentState], str]:
    """A conditional edge that follows ``state["next_node"]`` (one of ``allowed``)."""

    def route(state: AgentState) -> str:
        target = state.get("next_node") or allowed[-1]
        return target if target in allowed else allowed[-1]

    return route


def _add_retrieval(
    graph: StateGraph[Any, Any, Any, Any], provider: ResourceProvider, accept: str
) -> None:
    """The retrieval node, its ASU edges (explore / requery) and the edge to ``accept``."""

    def route(state: AgentState, config: RunnableConfig, runtime: Any = None) -> str:
        return after_retrieve(state, provider.context(config, runtime), accept)

    graph.add_node("retrieve", _bind(provider, retrieve, "retrieve"))
    graph.add_node("explore", _bind(provider, explore, "explore"))
    graph.add_node("requery", _bind(provider, requery, "requery"))
    graph.add_conditional_edges(
        "retrieve", route, {"explore": "explore", "requery": "requery", accept: accept}
    )
    graph.add_edge("explore", "retrieve")
    graph.add_edge("requery", "retrieve")


def build_loop(
    loop: Loop,
    pipeline: Pipeline,
    config: Config | None = None,
    *,
    components: Components | None = None,
    checkpointer: Any = None,
    knobs: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> Graph:
    """The compiled graph of ``loop`` run as ``pipeline`` (its retrieval strategy and MER);
    ``knobs`` are the graph's own knob values, which runs can change (``configurable``);
    ``name`` names the graph (default: the pipeline's name)."""
    provider = ResourceProvider(
        pipeline, config, components=components, knobs=knobs, retrieval=loop.retrieval
    )

    def bind(fn: NodeFn, name: str) -> Runnable[Any, Any]:
        return _bind(provider, fn, name)

    graph = StateGraph(
        AgentState,
        context_schema=RunOptions,
        input_schema=InputState,
        output_schema=OutputState,
    )
    graph.add_node("start", bind(start_node(pipeline, name or pipeline.name), "start"))
    for node, fn in loop.nodes.items():
        if node == loop.accept:
            _add_retrieval(graph, provider, node)
        if isinstance(fn, Think) and fn.kind == "step":
            fn = replace(fn, kind=node)
        graph.add_node(node, bind(fn, node))

    def after_conclude(state: AgentState, config: RunnableConfig, runtime: Any = None) -> str:
        if state.get("stop_reason") == BUDGET:
            return "finish"  # the budget is spent: MER's model call is skipped too
        ctx = provider.context(config, runtime)
        mer = ctx.config.mer
        if (
            not ctx.mer
            or (one_step_plan(state) and not mer.after_one_step_plan)
            or (chain_answered(state) and not mer.after_chain)
        ):
            return "finish"
        return "mer"

    graph.add_node("mer", bind(mer_node, "mer"))
    graph.add_node("finish", bind(finish, "finish"))
    graph.add_conditional_edges("conclude", after_conclude, {"mer": "mer", "finish": "finish"})
    graph.add_edge("mer", "finish")
    graph.add_edge("finish", END)
    graph.add_edge(START, "start")
    graph.add_edge("start", loop.entry)
    for source, target in loop.edges:
        graph.add_edge(source, target)
    for source, targets in loop.routes.items():
        graph.add_conditional_edges(source, route_next(*targets), list(targets))
    return graph.compile(checkpointer=checkpointer, name=name or pipeline.name)
