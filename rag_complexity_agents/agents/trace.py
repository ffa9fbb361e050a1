"""The run's JSON trace, built from the final state (or a partial one when a run was cut
short).

Format keys: ``format_failures`` is the run's total of replies that could not be read as
their step's structure (each failed reply counts, also one a retry repaired; the definition
is in :mod:`~rag_complexity_agents.models.structured`), ``format_failures_by_step`` the same
per step kind, and ``format_errors`` the loop's own count of format breaks it retried or
stopped on (``agents.max_format_errors``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from .answer import final_answer
from .state import TRACE_VERSION, Trace, plain, without_text
from .steps import reasoning_path


def build_trace(state: Mapping[str, Any], *, passages: int | None = None) -> Trace:
    """The run's JSON trace (also built from a partial state when a run was cut short)."""
    options = dict(state.get("options") or {})
    retrievals = list(state.get("retrievals") or [])
    shown = passages or int(options.get("passages") or 3)
    steps = []
    used: dict[str, dict[str, Any]] = {}
    for step in state.get("steps") or []:
        index = step.get("index")
        rounds = [r for r in retrievals if r.get("step") == index]
        entry: dict[str, Any] = {k: v for k, v in step.items() if k != "raw"}
        if step.get("raw"):
            entry["raw"] = str(step["raw"])[:500]
        if rounds:
            evidence = without_text(rounds[-1].get("docs") or [])[:shown]
            entry["retrieval"] = {
                "strategy": rounds[-1].get("strategy"),
                "rounds": [
                    {
                        "round": r.get("round"),
                        "reason": r.get("reason"),
                        "query": r.get("query"),
                        "c": r.get("c"),
                        "all_uncertain": r.get("all_uncertain", False),
                        "unexplored": r.get("unexplored", 0),
                        "batches": r.get("batches") or [],
                        "seconds": r.get("seconds"),
                        "retriever": r.get("nar") or {},
                    }
                    for r in rounds
                ],
                "evidence": evidence,
            }
            for doc in evidence:
                used.setdefault(str(doc.get("id")), doc)
        steps.append(entry)
    mer = dict(state.get("mer") or {})
    for doc in mer.get("evidence") or []:
        used.setdefault(str(doc.get("id")), doc)
    answer, source = final_answer(state)
    started = state.get("started_at")
    by_step = {k: int(v) for k, v in sorted((state.get("format_failures") or {}).items()) if v}
    trace: Trace = plain(
        {
            "version": TRACE_VERSION,
            "pipeline": options.get("pipeline"),
            "strategy": options.get("graph") or options.get("loop"),
            "loop": options.get("loop"),
            "retrieval": options.get("retrieval"),
            "mer_enabled": options.get("mer"),
            "question": state.get("question"),
            "answer": state.get("answer") or answer,
            "answer_source": state.get("answer_source") or source,
            "loop_answer": state.get("loop_answer", ""),
            "stop_reason": state.get("stop_reason") or "unfinished",
            "format_errors": state.get("format_errors", 0),
            "format_failures": sum(by_step.values()),
            "format_failures_by_step": by_step,
            "notes": list(state.get("notes") or []),
            "steps": steps,
            "sub_questions": [s.get("sub_question") for s in steps if s.get("sub_question")],
            "reasoning_path": [list(p) for p in reasoning_path(state)],  # type: ignore[arg-type]
            "mer": mer or None,
            "evidence": list(used.values()),
            "llm_calls": state.get("llm_calls", 0),
            "asu_samples": state.get("asu_samples", 0),
            "retrieval_calls": state.get("retrieval_calls", 0),
            "input_tokens": state.get("input_tokens", 0),
            "output_tokens": state.get("output_tokens", 0),
            "seconds": round(time.time() - started, 3) if started else None,
            "options": options,
        }
    )
    return trace
