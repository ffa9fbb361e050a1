"""The typed graph state shared by every loop, and the run options Studio can edit.

The state is plain JSON data (strings, numbers, lists, dicts) so that it checkpoints to
SQLite, shows in LangGraph Studio and round-trips through the LangGraph server. Evidence is
kept as :class:`DocRecord` dicts (``ScoredDoc.to_trace()`` plus the passage text);
:func:`doc_from_record` turns one back into a :class:`~rag_complexity_agents.types.ScoredDoc`.

No reducers: every node returns the new value of what it changes (the loops are
sequential), so the start node can reset a thread that is reused with a checkpointer.
:func:`merge_steps` helps a node update one step of the list.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, TypedDict, Union, cast, get_args

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps
from pydantic import Field
from typing_extensions import TypedDict as TypedDictX  # pydantic's JSON schema needs it (3.11)

from ..config.knobs import KNOBS, bounds, field_of
from ..text import cut_passage
from ..types import CITATION_KEYS, Chunk, ScoredDoc

StopReason = Literal[
    "final_answer",
    "max_steps",
    "format_error",
    "repeated_query",
    "no_progress",
    "recursion_limit",
    "single_pass",
]


class DocRecord(TypedDictX, total=False):
    """A retrieved passage with provenance (see ``ScoredDoc.to_trace``) and its text: the
    state's evidence and a run's ``sources``."""

    id: str
    doc_id: str | None
    title: str
    text: str
    score: float
    source: str  # first_stage | neighbour | backfill
    rank: int | None
    batch: int | None
    via: str | None


class BatchRecord(TypedDict, total=False):
    """One NAR batch with its ASU outcome (``s`` clusters over m sampled answers)."""

    index: int
    pool: str  # R (first stage) or N (neighbours)
    ids: list[str]
    s: int | None
    semantic_entropy: float | None
    answers: list[str]
    cluster_answers: list[str]
    clusters: list[list[int]]
    uncertain: bool


class RetrievalRecord(TypedDict, total=False):
    """One call of the retrieval node for one step."""

    step: int
    round: int  # 0 = first try; then exploration / re-query rounds
    reason: Literal["initial", "explore", "requery"]
    query: str
    strategy: str
    c: int | None
    docs: list[DocRecord]
    batches: list[BatchRecord]
    all_uncertain: bool
    unexplored: int  # neighbours / first-stage documents left unscored
    nar: dict[str, Any]
    seconds: float


class Step(TypedDict, total=False):
    """One loop step: a sub-question (Self-Ask), an action (ReAct), a chain node (SearChain)
    or a reasoning sentence (IRCoT), with the answer the loop settled on."""

    index: int
    kind: str
    sub_question: str
    query: str  # what the step retrieved and was answered for, if not its sub-question
    answer: str
    raw: str
    thought: str
    action: str
    observation: str
    status: str  # SearChain: proposed | verified | corrected | filled
    vote: dict[str, Any]  # plan-and-execute's bridge vote (agents/votes.py)


class ChainNodeState(TypedDict, total=False):
    """A SearChain node; ``status``: proposed | verified | corrected | filled | unverifiable."""

    query: str
    answer: str | None
    unsolved: bool
    status: str
    step: int  # the step that verified it
    claimed: str  # the chain's answer before a correction


def merge_steps(left: list[Step] | None, right: list[Step] | None) -> list[Step]:
    """Steps with a known ``index`` are updated in place, others appended (new list)."""
    merged = [dict(step) for step in (left or [])]
    for step in right or []:
        index = step.get("index")
        for existing in merged:
            if index is not None and existing.get("index") == index:
                existing.update(step)
                break
        else:
            merged.append(dict(step))
    return merged  # type: ignore[return-value]


class InputState(TypedDictX, total=False):
    """What a run needs: the question, or a chat whose last human message is the question."""

    question: Annotated[str, Field(description="The question to answer.")]
    messages: Annotated[
        list[AnyMessage],
        add_messages,
        Field(description="A chat; its last human message is the question."),
    ]


TRACE_VERSION = 1
"""Version of :class:`Trace`'s layout (raised when a key changes meaning or goes away)."""


class Trace(TypedDictX, total=False):
    """A run's JSON trace (:func:`~.trace.build_trace`): what the loop did and what it cost."""

    version: int
    pipeline: str
    strategy: str  # the graph's name
    loop: str
    retrieval: str
    mer_enabled: bool
    question: str
    answer: str
    answer_source: str
    loop_answer: str
    stop_reason: str
    format_errors: int
    format_failures: int
    format_failures_by_step: dict[str, int]
    notes: list[str]
    steps: list[dict[str, Any]]
    sub_questions: list[str]
    reasoning_path: list[list[str]]
    mer: dict[str, Any] | None
    evidence: list[dict[str, Any]]
    llm_calls: int
    asu_samples: int
    retrieval_calls: int
    input_tokens: int
    output_tokens: int
    seconds: float | None
    options: dict[str, Any]


class OutputState(TypedDictX, total=False):
    """What a run returns: the answer, the passages it was drawn from, the trace, and the
    chat with the answer appended as an ``AIMessage``."""

    answer: str
    sources: list[DocRecord]
    trace: Trace
    messages: Annotated[list[AnyMessage], add_messages]


class AgentState(TypedDict, total=False):
    """Everything a loop keeps between nodes."""

    question: str
    messages: Annotated[list[AnyMessage], add_messages]
    asked_by_messages: bool  # the question came as the last human message
    options: dict[str, Any]  # the resolved knobs of this run (for the trace)
    started_at: float
    steps: list[Step]
    retrievals: list[RetrievalRecord]
    # the query the retrieval node works on, and the ASU-edge bookkeeping for it
    pending_query: str
    pending_step: int
    explore_rounds: int
    requeries: int
    extra_budget: int
    retrieval_reason: str  # initial | explore | requery
    next_node: str  # where the loop node wants to go next
    # loop-specific
    chain: list[ChainNodeState]
    plan: list[str]  # plan-and-execute: the simple questions, #k for earlier answers
    plan_rounds: int
    sentences: list[str]
    pool: list[DocRecord]
    candidate_answer: str
    format_errors: int
    format_failures: dict[str, int]  # replies not readable as their step's structure, per kind
    format_hint: bool
    follow_up_hint: bool  # Self-Ask: ask for one more follow-up (a first-hop final answer)
    # outcome
    loop_answer: str
    loop_source: str  # how the loop reached loop_answer: "loop", "forced_final", …
    answer_source: str  # where the final answer came from (set by finish)
    stop_reason: str
    mer: dict[str, Any]
    answer: str
    sources: list[DocRecord]
    trace: Trace
    # what the chat model cannot do and how the run made up for it
    notes: list[str]
    # costs
    llm_calls: int
    asu_samples: int
    retrieval_calls: int
    input_tokens: int
    output_tokens: int
    # supersteps left before LangGraph's recursion limit (managed by LangGraph, read-only)
    remaining_steps: RemainingSteps


def _run_options() -> type:
    fields: dict[str, Any] = {}
    for knob in KNOBS:
        info = field_of(knob)
        low, high = bounds(knob)
        alias = f" Paper symbol: {knob.symbol}." if knob.symbol else ""
        described = Field(description=f"{info.description or ''}{alias}", ge=low, le=high)
        fields[knob.name] = Annotated[_without_none(info.annotation), described]
    make: Any = TypedDictX  # the functional form, with fields read from the knob table
    options: type = make("RunOptions", fields, total=False)
    return options


def _without_none(annotation: Any) -> Any:
    """``X | None`` → ``X`` (an absent knob is the unset one)."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    return Union[tuple(args)] if args and type(None) in get_args(annotation) else annotation  # noqa: UP007


RunOptions = _run_options()
"""Per-run knobs (``config["configurable"]`` or the run context), all optional: the graph's
context schema, built from the knob table (:mod:`~rag_complexity_agents.config.knobs`).
LangGraph Studio shows each as a form field with its description and bounds."""


def plain(value: Any) -> Any:
    """``value`` as plain JSON data: numpy scalars/arrays become Python numbers/lists,
    non-finite floats become None, tuples become lists, unknown objects their ``str``."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return plain(value.tolist())
    if hasattr(value, "item"):
        return plain(value.item())
    return str(value)


def doc_record(doc: ScoredDoc, *, max_chars: int, focus: str = "") -> DocRecord:
    """A ScoredDoc as state data, its text cut to ``max_chars``: at the start, or where it
    answers ``focus`` best (:func:`~..text.cut_passage`)."""
    record = cast(DocRecord, plain(doc.to_trace()))
    record["text"] = cut_passage(doc.chunk.text, max_chars, focus, doc.chunk.title)
    return record


def doc_from_record(record: DocRecord) -> ScoredDoc:
    """The ScoredDoc a :class:`DocRecord` describes (enough for prompts and MER)."""
    metadata = {"doc_id": record.get("doc_id")} if record.get("doc_id") else {}
    chunk = Chunk(
        id=str(record.get("id", "")),
        text=str(record.get("text", "")),
        title=str(record.get("title", "") or ""),
        metadata=metadata,
    )
    known = {"id", "doc_id", "title", "text", "score", "source", "rank", "batch", "via"}
    score = record.get("score")
    source = record.get("source", "first_stage")
    return ScoredDoc(
        chunk,
        float(score) if isinstance(score, int | float) else 0.0,
        source=source if source in ("first_stage", "neighbour", "backfill") else "first_stage",  # type: ignore[arg-type]
        rank=record.get("rank"),
        batch=record.get("batch"),
        via=record.get("via"),
        extra={k: v for k, v in record.items() if k not in known},
    )


def without_text(records: Sequence[DocRecord]) -> list[dict[str, Any]]:
    """Evidence for traces: the records without their passage text."""
    return [{k: v for k, v in r.items() if k != "text"} for r in records]


def sources_of(state: Mapping[str, Any], trace: Mapping[str, Any]) -> list[DocRecord]:
    """The passages of the trace's evidence with their text (from the run's retrievals)."""
    texts: dict[str, str] = {}
    for record in state.get("retrievals") or []:
        for doc in record.get("docs") or []:
            texts.setdefault(str(doc.get("id")), str(doc.get("text") or ""))
    keys = ("id", "doc_id", "title", "score", "source", "via", *CITATION_KEYS)
    sources = []
    for doc in trace.get("evidence") or []:
        source = {k: doc[k] for k in keys if k in doc}
        source["text"] = texts.get(str(doc.get("id")), "")
        sources.append(cast(DocRecord, source))
    return sources
