"""Run a loop graph for one question and get a :class:`~rag_complexity_agents.types.RunResult`
(answer + JSON trace), synchronously or asynchronously, or stream its progress.

Per-run knobs go in ``options`` (:class:`~.state.RunOptions`: retrieval, mer, chat_model, b,
c, m, l, max_steps, …); they are passed as ``configurable`` so the same call works against a
graph served by ``langgraph dev``. A ``GraphRecursionError`` (a ``recursion_limit`` below what
one loop step needs) never reaches the caller: the run ends with the best answer of the
state reached so far and ``trace["stop_reason"] == "recursion_limit"``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StreamMode

from ..types import RunResult
from .answer import final_answer
from .trace import build_trace

Graph = CompiledStateGraph[Any, Any, Any, Any]


def run_config(
    options: Mapping[str, Any] | None = None,
    *,
    config: RunnableConfig | None = None,
    thread_id: str | None = None,
    recursion_limit: int | None = None,
) -> RunnableConfig:
    """A RunnableConfig with ``options`` in ``configurable`` (and a thread id when given)."""
    merged: dict[str, Any] = dict(config or {})
    configurable = dict(merged.get("configurable") or {})
    configurable.update({k: v for k, v in (options or {}).items() if v is not None})
    if thread_id is not None:
        configurable["thread_id"] = thread_id
    merged["configurable"] = configurable
    if recursion_limit is not None:
        merged["recursion_limit"] = recursion_limit
    return merged  # type: ignore[return-value]


def _needs_thread(graph: Graph, config: RunnableConfig) -> RunnableConfig:
    if graph.checkpointer is not None and "thread_id" not in (config.get("configurable") or {}):
        config["configurable"]["thread_id"] = uuid.uuid4().hex
    return config


def _merge(state: dict[str, Any], update: Mapping[str, Any]) -> None:
    """Fold one ``updates`` event into ``state``: every node returns the new value of what
    it changes (no reducers), so the folded updates are the run's whole internal state, which
    a run cut short needs for its partial trace (the graph's output is only its answer)."""
    for changes in update.values():
        if isinstance(changes, Mapping):
            state.update(changes)


def _result(state: Mapping[str, Any], started: float, *, cut_short: bool) -> RunResult:
    seconds = round(time.perf_counter() - started, 3)
    if not cut_short and state.get("trace"):
        trace: dict[str, Any] = dict(state["trace"])
        trace["seconds"] = seconds
        answer = str(state.get("answer") or trace.get("answer", ""))
        return RunResult(answer, trace, [dict(s) for s in state.get("sources") or []])
    partial = dict(state)
    partial["stop_reason"] = "recursion_limit"
    answer, source = final_answer(partial)
    partial.update(answer=answer, answer_source=source)
    partial_trace: dict[str, Any] = dict(build_trace(partial))
    partial_trace["seconds"] = seconds
    return RunResult(answer, partial_trace)


def run_graph(
    graph: Graph,
    question: str,
    *,
    options: Mapping[str, Any] | None = None,
    config: RunnableConfig | None = None,
    thread_id: str | None = None,
    recursion_limit: int | None = None,
) -> RunResult:
    """Answer ``question`` with ``graph``; errors of our own (InputError, ModelServerError,
    …) propagate with their message, a recursion limit does not."""
    cfg = _needs_thread(
        graph,
        run_config(options, config=config, thread_id=thread_id, recursion_limit=recursion_limit),
    )
    started = time.perf_counter()
    state: dict[str, Any] = {"question": question}
    try:
        for update in graph.stream({"question": question}, cfg, stream_mode="updates"):
            _merge(state, update)
    except GraphRecursionError:
        return _result(state, started, cut_short=True)
    return _result(state, started, cut_short=False)


async def arun_graph(
    graph: Graph,
    question: str,
    *,
    options: Mapping[str, Any] | None = None,
    config: RunnableConfig | None = None,
    thread_id: str | None = None,
    recursion_limit: int | None = None,
) -> RunResult:
    """The async twin of :func:`run_graph`."""
    cfg = _needs_thread(
        graph,
        run_config(options, config=config, thread_id=thread_id, recursion_limit=recursion_limit),
    )
    started = time.perf_counter()
    state: dict[str, Any] = {"question": question}
    try:
        async for update in graph.astream({"question": question}, cfg, stream_mode="updates"):
            _merge(state, update)
    except GraphRecursionError:
        return _result(state, started, cut_short=True)
    return _result(state, started, cut_short=False)


def stream_graph(
    graph: Graph,
    question: str,
    *,
    stream_mode: Sequence[StreamMode] = ("updates", "messages"),
    options: Mapping[str, Any] | None = None,
    config: RunnableConfig | None = None,
    thread_id: str | None = None,
) -> Iterator[tuple[str, Any]]:
    """(mode, payload) pairs: ``updates`` = {node: changes} after each node, ``messages`` =
    (token chunk, metadata) while the chat model generates, ``values`` = the full state."""
    cfg = _needs_thread(graph, run_config(options, config=config, thread_id=thread_id))
    try:
        for mode, payload in graph.stream(
            {"question": question}, cfg, stream_mode=list(stream_mode)
        ):
            yield str(mode), payload
    except GraphRecursionError:
        yield "error", {"stop_reason": "recursion_limit"}


async def astream_graph(
    graph: Graph,
    question: str,
    *,
    stream_mode: Sequence[StreamMode] = ("updates", "messages"),
    options: Mapping[str, Any] | None = None,
    config: RunnableConfig | None = None,
    thread_id: str | None = None,
) -> AsyncIterator[tuple[str, Any]]:
    """The async twin of :func:`stream_graph`."""
    cfg = _needs_thread(graph, run_config(options, config=config, thread_id=thread_id))
    try:
        async for mode, payload in graph.astream(
            {"question": question}, cfg, stream_mode=list(stream_mode)
        ):
            yield str(mode), payload
    except GraphRecursionError:
        yield "error", {"stop_reason": "recursion_limit"}
