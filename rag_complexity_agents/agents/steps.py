"""What a loop step reads from and writes to the state: the steps and their evidence, the
hand-over to the retrieval node, the step limits, the cost counters and the run's budget;
and :func:`cancellable`, the graph node that stops when its run is cancelled.

**Budget** (``agents.max_llm_calls``, ``agents.max_output_tokens``, ``agents.max_seconds``):
checked between steps (:func:`step_limit`) and before each ASU batch (:func:`asu_allowed`,
with the counts of the retrieval node under way, :func:`spending`). A spent budget ends the
loop like ``max_steps`` does, with ``stop_reason == "budget"`` and the best answer so far.

**Cancellation.** The LangGraph server cancels a run by cancelling its asyncio task; a sync
node runs in a worker thread that the cancellation does not reach. :func:`cancellable` runs
the node in that thread with an event that the cancellation sets, and every model call
checks it first (:func:`~..models.calls.check_cancelled`), so the thread stops before its
next model call; the cancelled task waits for it, so the run counts as ended only once its
thread has stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import Runnable
from langgraph._internal._runnable import RunnableCallable

from ..models.calls import ChatReply, cancel_on, check_cancelled
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
    ``agents.max_steps`` steps were taken, ``"budget"`` once the run's budget is spent,
    ``"recursion_limit"`` near LangGraph's limit, else None."""
    if len(steps_of(state)) >= ctx.agents.max_steps:
        return "max_steps"
    if Spend.of(state, ctx).spent():
        return "budget"
    if near_recursion_limit(state, ctx):
        return "recursion_limit"
    return None


BUDGET = "budget"
"""The ``stop_reason`` of a run whose budget was spent."""


@dataclass
class Spend:
    """A run's use of its budget: the state's counters (plus the ASU prompts of the
    retrieval node under way) against the limits of ``agents``."""

    llm_calls: int
    output_tokens: int
    started_at: float | None
    max_llm_calls: int | None = None
    max_output_tokens: int | None = None
    max_seconds: float | None = None

    @classmethod
    def of(cls, state: AgentState, ctx: AgentContext) -> Spend:
        agents = ctx.agents
        return cls(
            llm_calls=int(state.get("llm_calls", 0) or 0),
            output_tokens=int(state.get("output_tokens", 0) or 0),
            started_at=state.get("started_at"),
            max_llm_calls=agents.max_llm_calls,
            max_output_tokens=agents.max_output_tokens,
            max_seconds=agents.max_seconds,
        )

    def spent(self) -> bool:
        """Whether any limit is reached."""
        if self.max_llm_calls is not None and self.llm_calls >= self.max_llm_calls:
            return True
        if self.max_output_tokens is not None and self.output_tokens >= self.max_output_tokens:
            return True
        return (
            self.max_seconds is not None
            and self.started_at is not None
            and time.time() - self.started_at >= self.max_seconds
        )


_SPEND: ContextVar[Spend | None] = ContextVar("rca_spend", default=None)


@contextlib.contextmanager
def spending(state: AgentState, ctx: AgentContext) -> Iterator[Spend]:
    """The budget of the node under way (the retrieval node): ASU batches inside the block
    count against it and stop once it is spent (:func:`asu_allowed`)."""
    spend = Spend.of(state, ctx)
    token = _SPEND.set(spend)
    try:
        yield spend
    finally:
        _SPEND.reset(token)


def asu_allowed() -> bool:
    """Before an ASU batch's samples: RunCancelled when the run was cancelled; False when the
    budget of the node under way (:func:`spending`) is spent (the batch keeps its scorer
    scores), else True and the batch's prompt is counted."""
    check_cancelled()
    spend = _SPEND.get()
    if spend is None:
        return True
    if spend.spent():
        return False
    spend.llm_calls += 1
    return True


def cancellable(fn: Callable[..., Any], name: str) -> Runnable[Any, Any]:
    """The graph node ``name`` running the sync function ``fn``: called synchronously (a sync
    graph, or a graph nested in a node) it checks first that its run was not cancelled; run
    by an async graph (the LangGraph server) it runs in a worker thread under an event that a
    cancellation of the run's task sets (:func:`~..models.calls.cancel_on`), then waits for
    the thread to stop (before its next model call) and re-raises the cancellation."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        check_cancelled()
        return fn(*args, **kwargs)

    def in_thread(event: threading.Event, args: Any, kwargs: Any) -> Any:
        with cancel_on(event):
            return run(*args, **kwargs)

    async def arun(*args: Any, **kwargs: Any) -> Any:
        event = threading.Event()
        call = functools.partial(contextvars.copy_context().run, in_thread, event, args, kwargs)
        future = asyncio.get_running_loop().run_in_executor(None, call)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            event.set()
            with contextlib.suppress(BaseException):  # RunCancelled, or a second cancel
                await future
            raise

    return RunnableCallable(run, arun, name=name, trace=False)


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
