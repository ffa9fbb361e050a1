"""The pluggable retrieval node and its ASU edges.

``retrieve`` runs the run's retrieval strategy (:mod:`.context`) for ``pending_query`` and
records the round. With ``agents.hop_pool`` a NAR strategy's pool R also holds the documents
accepted for the earlier steps (:func:`carried_ids`), so each hop re-ranks its own fresh
first-stage list, the question's and the earlier hops' evidence together.

**ASU edges** (``sunar`` only; not in the paper): a batch is *uncertain* when its s > 1 and
s ≥ ``agents.uncertain_fraction`` · m. If every batch was uncertain the evidence found so far
probably lacks the answer, so the graph goes to ``explore`` (run NAR again with the budget c
raised by ``agents.explore_budget``; the ASU results of batches already seen are reused)
while documents are left unexplored and ``agents.max_explore`` allows, then to ``requery`` (a
new query: the original question's missing words, or one written by the chat model) while
``agents.max_requery`` allows, and otherwise accepts what it has.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from ..config.pipelines import NAR_STRATEGIES
from ..models.calls import call_chat
from ..text import STOPWORDS, cover_em, normalize_answer
from .context import AgentContext
from .parsers import clean_query
from .prompts import requery as requery_prompt
from .state import AgentState, BatchRecord, RetrievalRecord, doc_record, plain
from .steps import Spend, Update, costs, same_query, spending, step_docs, sub_question

UNANSWERED = frozenset({"unknown", "not found", "none", "n a"})
"""Normalised answers that name nothing (no bridge entity to carry)."""


def _batches(trace: Mapping[str, Any], m: int, fraction: float) -> list[BatchRecord]:
    out: list[BatchRecord] = []
    for batch in (trace.get("nar") or {}).get("batches") or []:
        hook = batch.get("hook") or {}
        s = hook.get("s")
        record: BatchRecord = {
            "index": int(batch.get("index", len(out))),
            "pool": str(batch.get("pool", "")),
            "ids": list(batch.get("ids") or []),
            "s": s,
        }
        if s is not None:
            record["semantic_entropy"] = hook.get("semantic_entropy")
            record["answers"] = list(hook.get("answers") or [])
            record["cluster_answers"] = list(hook.get("cluster_answers") or [])
            record["clusters"] = [list(c) for c in hook.get("clusters") or []]
            record["uncertain"] = bool(s > 1 and s >= fraction * m)
        out.append(record)
    return out


def _nar_summary(trace: Mapping[str, Any]) -> dict[str, Any]:
    nar = dict(trace.get("nar") or {})
    nar.pop("batches", None)
    keep = {k: v for k, v in trace.items() if k not in ("nar", "returned", "query")}
    summary: dict[str, Any] = plain({**keep, **({"nar": nar} if nar else {})})
    return summary


def carried_ids(state: AgentState, step: int) -> list[str]:
    """Ids of the documents the loop accepted for the steps before ``step``: the latest
    hop's best first (the pool a hop shares with the earlier hops, ``agents.hop_pool``)."""
    ids: list[str] = []
    for earlier in sorted({int(r.get("step", 0)) for r in state.get("retrievals") or []}):
        if earlier < step:
            ids[:0] = [str(d.get("id")) for d in step_docs(state, earlier) if d.get("id")]
    return list(dict.fromkeys(ids))


def bridge_query(query: str, previous_answer: str) -> str:
    """``query`` with the previous hop's answer (the bridge entity) added when the query does
    not already mention it as a whole run of tokens; ``query`` for an empty or unknown
    answer."""
    norm = normalize_answer(previous_answer)
    if not norm or norm in UNANSWERED or cover_em(query, previous_answer):
        return query
    return f"{query} ({previous_answer.strip()})"


def retrieve(state: AgentState, ctx: AgentContext) -> Update:
    """The retrieval node: runs the run's strategy for ``pending_query`` (with the earlier
    hops' documents in NAR's pool when ``agents.hop_pool``)."""
    query = state.get("pending_query") or state["question"]
    step = int(state.get("pending_step", 0))
    previous = [r for r in state.get("retrievals") or [] if r.get("step") == step]
    reason = state.get("retrieval_reason") or "initial"
    tick = time.perf_counter()
    extra = int(state.get("extra_budget", 0))
    carried = carried_ids(state, step) if ctx.agents.hop_pool else []
    with spending(state, ctx):
        result = ctx.retrieve(query, state["question"], extra_budget=extra, carried=carried)
    batches = _batches(result.trace, ctx.config.asu.m, ctx.agents.uncertain_fraction)
    focus = query if ctx.config.answer.passage_cut == "question" else ""
    # a cut for the question is the reader's (answer.passage_chars); MER reads its start
    keep = ctx.config.answer.passage_chars if focus else ctx.keep_chars
    asu = [b for b in batches if b.get("s") is not None]
    nar = (result.trace.get("nar") or {}) if isinstance(result.trace, dict) else {}
    record: RetrievalRecord = {
        "step": step,
        "round": len(previous),
        "reason": reason,  # type: ignore[typeddict-item]
        "query": query,
        "strategy": ctx.strategy,
        "c": ctx.budget(extra) if ctx.strategy in NAR_STRATEGIES else None,
        "docs": [doc_record(d, max_chars=keep, focus=focus) for d in result.docs],
        "batches": batches,
        "all_uncertain": bool(asu) and all(b.get("uncertain") for b in asu),
        "unexplored": int(nar.get("neighbour_pool_left", 0) or 0)
        + int(nar.get("backfilled", 0) or 0),
        "nar": _nar_summary(result.trace),
        "seconds": round(time.perf_counter() - tick, 3),
    }
    update: Update = {"retrievals": [*(state.get("retrievals") or []), record]}
    skipped = _skipped_batches(result.trace)
    if skipped:
        note = f"budget spent: ASU skipped {skipped} batch(es) of step {step} (scorer order kept)"
        update["notes"] = [*(state.get("notes") or []), note]
    update.update(
        costs(
            state,
            retrieval_calls=0 if ctx.strategy == "none" else 1,
            llm_calls=result.asu_prompts,
            asu_samples=result.asu_prompts * ctx.config.asu.m,
        )
    )
    return update


def _skipped_batches(trace: Mapping[str, Any]) -> int:
    """NAR batches whose ASU samples the spent budget skipped."""
    batches = (trace.get("nar") or {}).get("batches") or []
    return sum(1 for b in batches if (b.get("hook") or {}).get("skipped") == "budget")


def after_retrieve(state: AgentState, ctx: AgentContext, accept: str) -> str:
    """The ASU edges: ``explore`` / ``requery`` while every batch is uncertain, else
    ``accept`` (also once the run's budget is spent)."""
    records = state.get("retrievals") or []
    record = records[-1] if records else None
    if not record or ctx.strategy != "sunar" or not record.get("all_uncertain"):
        return accept
    if Spend.of(state, ctx).spent():
        return accept
    agents = ctx.agents
    if state.get("explore_rounds", 0) < agents.max_explore and record.get("unexplored", 0) > 0:
        return "explore"
    if state.get("requeries", 0) < agents.max_requery:
        return "requery"
    return accept


def explore(state: AgentState, ctx: AgentContext) -> Update:
    """Raise the NAR budget c for the same query (ASU edge)."""
    budget = ctx.agents.explore_budget or ctx.config.nar.b
    return {
        "explore_rounds": state.get("explore_rounds", 0) + 1,
        "extra_budget": state.get("extra_budget", 0) + budget,
        "retrieval_reason": "explore",
    }


_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def expand_query(query: str, original: str) -> str:
    """``query`` plus the content words of ``original`` it lacks ('' if it lacks none)."""
    have = {w.lower() for w in _WORD.findall(query)}
    extra = []
    for word in _WORD.findall(original):
        low = word.lower()
        if low not in have and low not in STOPWORDS:
            extra.append(word)
            have.add(low)
    return f"{query} {' '.join(extra)}" if extra else ""


def requery(state: AgentState, ctx: AgentContext) -> Update:
    """A new query for the same step (ASU edge: every batch stayed uncertain)."""
    query = state.get("pending_query") or state["question"]
    sub = sub_question(state, int(state.get("pending_step", 0)))
    update: Update = {
        "requeries": state.get("requeries", 0) + 1,
        "extra_budget": 0,
        "retrieval_reason": "requery",
    }
    new = expand_query(query, state["question"]) if ctx.agents.requery == "expand" else ""
    if not new:
        reply = call_chat(
            ctx.chat,
            requery_prompt.messages(sub or query, query, state["question"]),
            max_tokens=32,
            stop=["\n"],
        )
        update.update(costs(state, reply))
        new = clean_query(reply.text)
    update["pending_query"] = new if new and not same_query(new, query) else query
    return update
