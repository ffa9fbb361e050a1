"""End-to-end benchmark: single-step, our loops, ceilings and peers on MuSiQue and 2Wiki.

Corpus: all paragraphs of ``musique_dev_ctx.jsonl`` and ``2wikimultihopqa_dev_ctx.jsonl``
pooled and deduplicated by (title, text) into one collection (one chunk per paragraph,
indexed text ``title + "\\n" + text``), built once in a cache directory outside the
repository. Every question retrieves from the same pool. Relevance for the evidence metrics =
the gold supporting paragraphs.

Datasets: ``musique`` (all 134 questions of the file) and ``2wikimultihopqa_compositional``
(the file's 202 compositional questions, in file order).

The plan, one row per (dataset, strategy, model):

* main rows, n = 134: ``single_step`` and the best loops (``--best-loops``: plan-and-execute
  and the default pipeline, the same loop with MER;
  Self-Ask + SUNAR, SUNAR's parts inside our Self-Ask loop with additions not in the paper
  (``docs/pipelines.md``), is an ablation row: on MuSiQue it scored no better than
  plan-and-execute at three times the LLM calls);
* ceiling rows, n = 134: ``gold_evidence`` (the reader given the gold paragraphs),
  ``gold_decomposition`` (the dataset's sub-questions through our retrieval and reader) and
  ``gold_bridges`` (the same with the gold answers as bridge entities);
* ablation rows, n = 50: no retrieval, Self-Ask + NAR, Self-Ask + SUNAR, Self-Ask + SUNAR +
  MER;
* peer rows, n = 50: LlamaIndex ``SubQuestionQueryEngine`` and LangGraph's
  ``create_react_agent`` over the same first stage and model;
* strong-model rows, n = 134: single-step, the best loop(s), the best loop's variants
  (:data:`VARIANTS`: the loop with one of its parts switched), the ceilings and
  the peers with ``--strong-model`` (the optional packaged Qwen2.5-Coder-1.5B), so "our loop
  beats the peers" is measured with the model whose loop beats single-step; the Self-Ask
  ablation rows run with it too (n = 50).

Every row is one resumable run file of the harness (``<runs-dir>/<model>/<dataset>__<strategy>
__<fingerprint>.jsonl``), so the command can be stopped at any time and rerun to continue;
LLM calls are cached on disk. ``--roles``, ``--strategies``, ``--datasets`` and ``--models``
choose the rows to *run*; the results always cover every row of the plan that has a run
file, so each call rewrites ``benchmarks/results/end_to_end.json`` and ``.md`` with
everything finished so far. ``--report-only`` runs nothing (rebuild the tables from the run
files at any time); ``--markdown-only`` rewrites only the markdown from the ``--out`` JSON.
``benchmarks/run_end_to_end.sh`` runs the whole plan in order.
A row whose run file is gone (a new machine, a cleared cache) is carried over from the
previous ``--out`` file when that row was computed from a run file of the same name, i.e. the
same model, dataset, strategy and configuration fingerprint, or, since a new setting changes
every fingerprint, with the same values of the settings the row lists (:func:`carries_over`);
the markdown marks it, and paired
intervals against it are left empty until it is rerun, since they need its per-question lines.
A pooled comparison that cannot be computed again for that reason is carried over too while
every row it pairs comes from a run file of the same name as then (:func:`carried_pooled`).

Each row carries cover-EM / EM / F1 with bootstrap 95% intervals, ``vs_single_step`` (the
cover-EM difference to single-step of the same model on the same questions, with a paired
bootstrap interval, fixed seed), ``vs_best_loop`` likewise against the first best loop,
evidence R@5, LLM calls, seconds per question (cache hits at their original cost), the mean
load average while it ran, ``format_failures`` and the peers' ``breaks``. Text between the
``<!-- analysis:start -->`` / ``<!-- analysis:end -->`` markers of the markdown is kept.
``--smoke`` pools only the selected questions' paragraphs (seconds to index) and is meant for
checking the wiring with ``--limit 2`` and ``--out`` / ``--runs-dir`` elsewhere::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/end_to_end.py \\
        --data ../shared/data --smoke --limit 2 --strategies gold_evidence \\
        --out /tmp/e2e/end_to_end.json --runs-dir /tmp/e2e/runs
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from _common import ANALYSIS_END, ANALYSIS_START, REPO, machine, read_analysis

from rag_complexity_agents.agents.context import derive_components
from rag_complexity_agents.agents.plan_execute import is_bridge
from rag_complexity_agents.config import Config, default_home
from rag_complexity_agents.config.pipelines import DEFAULT_PIPELINE, PIPELINES, get_pipeline
from rag_complexity_agents.corpus.store import CorpusStore
from rag_complexity_agents.errors import RCAError
from rag_complexity_agents.eval.datasets import (
    QARecord,
    build_pooled_corpus,
    dataset_subset,
    load_records,
    resolve_dataset,
)
from rag_complexity_agents.eval.harness import evaluate, run_fingerprint
from rag_complexity_agents.eval.metrics import Estimate, cover_em
from rag_complexity_agents.eval.report import paired_delta, summarize
from rag_complexity_agents.eval.runner import read_run
from rag_complexity_agents.eval.strategies import (
    EvalComponents,
    available_strategies,
)
from rag_complexity_agents.models.cache import open_llm_cache

#: Datasets of the plan (a dataset file's short name or a subset name).
DATASETS: tuple[str, ...] = ("musique", "2wikimultihopqa_compositional")
#: Dataset files whose paragraphs form the corpus (fixed: the corpus is in every fingerprint).
POOL: tuple[str, ...] = ("musique", "2wikimultihopqa")

Role = Literal["main", "ceiling", "ablation", "peer", "strong"]
ROLE_LIMITS: dict[str, int] = {
    "main": 134,
    "ceiling": 134,
    "ablation": 50,
    "peer": 50,
    "strong": 134,
}
ROLE_ORDER: tuple[str, ...] = ("main", "ceiling", "strong", "ablation", "peer")

DEFAULT_MODEL = "llamacpp:qwen2.5-0.5b"
STRONG_MODEL = "llamacpp:qwen2.5-coder-1.5b"
DEFAULT_BEST_LOOPS = "plan_execute,plan_execute_mer"

_RETRIEVAL = ("retrieval.mode", "answer.passages", "answer.passage_chars")
_NAR = (*_RETRIEVAL, "retrieval.first_stage_k", "nar.b", "nar.c", "nar.neighbours_per_doc")
_SUNAR = (*_NAR, "asu.m", "asu.temperature", "asu.max_passage_chars")
_MER = (*_SUNAR, "mer.l", "mer.max_evidence_chars")
_LOOP = (*_MER, "agents.max_steps")
_PLAN = (
    *_RETRIEVAL,
    "answer.sub_passages",
    "agents.plan_checks",
    "agents.plan_rules",
    "agents.tidy_plans",
    "agents.one_step_exemplar",
    "agents.split_steps",
    "agents.quote_evidence",
    "agents.bridge_votes",
    "agents.reject_echo",
    "agents.check_kind",
    "agents.reread_unsupported",
    "agents.plan_samples",
    "agents.mer",
)

_PLAN_MER = (
    *_PLAN,
    "mer.l",
    "mer.max_evidence_chars",
    "mer.after_one_step_plan",
    "mer.after_chain",
)

#: Strategy → (label, the settings that cost or matter); loops not listed get _LOOP.
STRATEGY_INFO: dict[str, tuple[str, tuple[str, ...]]] = {
    "single_step": ("Single-step", _RETRIEVAL),
    "gold_evidence": ("Ceiling: gold evidence", ("answer.passage_chars",)),
    "gold_decomposition": ("Ceiling: gold decomposition", _RETRIEVAL),
    "gold_bridges": ("Ceiling: gold decomposition + gold bridges", _RETRIEVAL),
    "no_retrieval": ("No retrieval", ("models.max_tokens",)),
    "self_ask": ("Self-Ask", _RETRIEVAL),
    "self_ask_nar": ("Self-Ask + NAR", _NAR),
    "self_ask_sunar": ("Self-Ask + SUNAR", _SUNAR),
    "self_ask_sunar_mer": ("Self-Ask + SUNAR + MER", _MER),
    "plan_execute": ("Plan-and-execute", _PLAN),
    **{
        name: (label, _PLAN)
        for name, label in (
            ("plan_execute_2_passages", "Plan-and-execute, 2 passages a step"),
            ("plan_execute_quote", "Plan-and-execute, last step quotes its evidence"),
            ("plan_execute_quote_all", "Plan-and-execute, every step quotes its evidence"),
            (
                "plan_execute_2_passages_quote",
                "Plan-and-execute, 2 passages a step, last step quotes its evidence",
            ),
            ("plan_execute_rules", "Plan-and-execute, planning rules"),
            ("plan_execute_votes", "Plan-and-execute + bridge votes (m = 5)"),
            (
                "plan_execute_checks",
                "Plan-and-execute + plan checks, reread (the default without MER)",
            ),
        )
    },
    **{
        name: (label, _PLAN_MER)
        for name, label in (
            ("plan_execute_mer", "Plan-and-execute + MER (default)"),
            ("plan_execute_mer_2_passages", "Plan-and-execute + MER, 2 passages a step"),
            ("plan_execute_mer_quote", "Plan-and-execute + MER, last step quotes its evidence"),
            ("plan_execute_mer_split", "Plan-and-execute + MER, a chained step planned again"),
            ("plan_execute_mer_tidy", "Plan-and-execute + MER, plans checked before they run"),
            ("plan_execute_mer_one_step", "Plan-and-execute + MER, a one-step exemplar first"),
            ("plan_execute_mer_echo", "Plan-and-execute + MER, echoed answers asked again"),
            ("plan_execute_mer_kind", "Plan-and-execute + MER, wrong-kind answers asked again"),
            (
                "plan_execute_mer_no_reread",
                "Plan-and-execute + MER, answers off the query not read again",
            ),
            ("plan_execute_mer_resample", "Plan-and-execute + MER, flawed plans resampled (k = 4)"),
            ("plan_execute_mer_votes", "Plan-and-execute + MER, bridge votes (m = 5)"),
            (
                "plan_execute_mer_chain_quote",
                "Plan-and-execute, a chain's quoting last step answers, MER after other plans",
            ),
        )
    },
    "plan_execute_nar": ("Plan-and-execute + NAR", (*_NAR, *_PLAN[len(_RETRIEVAL) :])),
    "plan_execute_nar_mer": (
        "Plan-and-execute + NAR + MER",
        (*_NAR, *_PLAN_MER[len(_RETRIEVAL) :]),
    ),
    "adaptive": (
        "Router (shipped head): single-step or the default",
        (*_PLAN, "adaptive.classifier", "adaptive.c_strategy"),
    ),
    "plan_execute_sunar": ("Plan-and-execute + SUNAR", _SUNAR),
    "llamaindex_subquestion": ("Peer: LlamaIndex SubQuestionQueryEngine", _RETRIEVAL),
    "langgraph_react_agent": (
        "Peer: LangGraph create_react_agent",
        (*_RETRIEVAL, "agents.max_steps"),
    ),
}
#: The settings that make plan-and-execute the loop as it was before the plan checks and
#: the reading again of off-topic answers.
_LOOP_AS_IT_WAS: dict[str, Any] = {"agents.plan_checks": False, "agents.reread_unsupported": False}
#: Settings of a registered strategy's own row and of its variants: plan-and-execute is the
#: named baseline, the loop as it was, and its NAR row is that loop with NAR.
BASELINES: dict[str, dict[str, Any]] = {
    name: _LOOP_AS_IT_WAS for name in ("plan_execute", "plan_execute_nar")
}
#: Rows that run a registered strategy with settings of their own: name → (strategy, the
#: config overrides): the best loop (plan-and-execute without MER) with one part switched.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "plan_execute_checks": (
        "plan_execute",
        {"agents.plan_checks": True, "agents.reread_unsupported": True},
    ),
    "plan_execute_votes": ("plan_execute", {"agents.bridge_votes": 5}),
    "plan_execute_2_passages": ("plan_execute", {"answer.sub_passages": 2}),
    "plan_execute_quote": ("plan_execute", {"agents.quote_evidence": "final"}),
    "plan_execute_quote_all": ("plan_execute", {"agents.quote_evidence": "all"}),
    "plan_execute_rules": ("plan_execute", {"agents.plan_rules": True}),
    "plan_execute_2_passages_quote": (
        "plan_execute",
        {"answer.sub_passages": 2, "agents.quote_evidence": "final"},
    ),
    "plan_execute_mer_2_passages": ("plan_execute_mer", {"answer.sub_passages": 2}),
    "plan_execute_mer_quote": ("plan_execute_mer", {"agents.quote_evidence": "final"}),
    "plan_execute_mer_split": ("plan_execute_mer", {"agents.split_steps": True}),
    "plan_execute_mer_tidy": ("plan_execute_mer", {"agents.tidy_plans": True}),
    "plan_execute_mer_one_step": ("plan_execute_mer", {"agents.one_step_exemplar": True}),
    "plan_execute_mer_echo": ("plan_execute_mer", {"agents.reject_echo": True}),
    "plan_execute_mer_kind": ("plan_execute_mer", {"agents.check_kind": True}),
    "plan_execute_mer_no_reread": ("plan_execute_mer", {"agents.reread_unsupported": False}),
    "plan_execute_mer_resample": ("plan_execute_mer", {"agents.plan_samples": 4}),
    "plan_execute_mer_votes": ("plan_execute_mer", {"agents.bridge_votes": 5}),
    "plan_execute_mer_chain_quote": (
        "plan_execute_mer",
        {"agents.quote_evidence": "final", "mer.after_chain": False},
    ),
}
CEILINGS = ("gold_evidence", "gold_decomposition", "gold_bridges")
#: The variant that is the default pipeline with MER switched off (MER's pooled comparison).
DEFAULT_WITHOUT_MER = "plan_execute_checks"


def harness_strategy(name: str) -> str:
    """The harness strategy a plan row runs (a variant's registered strategy)."""
    return VARIANTS.get(name, (name, {}))[0]


def with_retrieval(name: str, retrieval: str) -> str:
    """The registered pipeline that is pipeline ``name`` with ``retrieval`` instead."""
    pipeline = get_pipeline(name)
    return next(
        p.name
        for p in PIPELINES.values()
        if (p.loop, p.retrieval, p.mer, p.router) == (pipeline.loop, retrieval, pipeline.mer, False)
    )


def nar_row(loop: str) -> str:
    """The registered pipeline that is ``loop`` (a pipeline name) with NAR retrieval."""
    return with_retrieval(loop, "nar")


def varied(name: str) -> str:
    """The strategy a variant or NAR row changes one part of (its pooled comparison)."""
    return VARIANTS[name][0] if name in VARIANTS else with_retrieval(name, "first_stage")


def row_overrides(name: str) -> dict[str, Any]:
    """The config overrides a row runs with: its strategy's :data:`BASELINES`, then its
    variant's own."""
    strategy, variant = VARIANTS.get(name, (name, {}))
    return BASELINES.get(strategy, {}) | variant


ABLATIONS = ("no_retrieval", "self_ask_nar", "self_ask_sunar", "self_ask_sunar_mer")
PEERS = ("llamaindex_subquestion", "langgraph_react_agent")


@dataclass(frozen=True)
class Planned:
    """One row of the plan: what runs, with which model, on how many questions."""

    dataset: str
    strategy: str
    model: str
    role: Role
    limit: int

    @property
    def label(self) -> str:
        return STRATEGY_INFO.get(self.strategy, (self.strategy, ()))[0]

    @property
    def settings(self) -> tuple[str, ...]:
        return STRATEGY_INFO.get(self.strategy, ("", _LOOP))[1]


def build_plan(
    *,
    model: str,
    strong_model: str | None,
    best_loops: Sequence[str],
    datasets: Sequence[str] = DATASETS,
    limits: dict[str, int] | None = None,
) -> list[Planned]:
    """Every row of the plan in run order: cheap rows first within each role."""
    limits = {**ROLE_LIMITS, **(limits or {})}
    ablations = [s for s in ABLATIONS if s not in best_loops]
    by_role: list[tuple[Role, str, Sequence[str]]] = [
        ("main", model, ["single_step", *best_loops, "adaptive"]),
        ("ceiling", model, CEILINGS),
        ("ablation", model, ablations),
        ("peer", model, PEERS),
    ]
    if strong_model:
        variants = [name for name, (loop, _) in VARIANTS.items() if loop in best_loops]
        nar = [nar_row(loop) for loop in best_loops] if variants else []
        strong = [
            "single_step",
            *best_loops,
            "adaptive",
            *variants[:2],
            *nar,
            *variants[2:],
            "gold_evidence",
            "gold_decomposition",
            "gold_bridges",
            *PEERS,
        ]
        by_role.insert(2, ("strong", strong_model, strong))
        by_role.append(("ablation", strong_model, ablations))
    plan = []
    for role, spec, strategies in sorted(by_role, key=lambda item: ROLE_ORDER.index(item[0])):
        for strategy in dict.fromkeys(strategies):
            for dataset in datasets:
                plan.append(Planned(dataset, strategy, spec, role, limits[role]))
    return plan


def settings_of(config: Config, keys: Sequence[str]) -> dict[str, Any]:
    """The values of ``keys`` the run used."""
    flat: dict[str, Any] = {}
    dumped = config.model_dump(mode="json")
    for key in keys:
        node: Any = dumped
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        flat[key] = node
    return flat


# --------------------------------------------------------------------------------------------
# Datasets and corpus
# --------------------------------------------------------------------------------------------


def dataset_label(name: str, data: str | Path) -> str | Path:
    """What identifies a dataset in run fingerprints: a subset's name, else the file."""
    subset = dataset_subset(name)
    return subset.name if subset else resolve_dataset(name, data)


def dataset_records(name: str, data: str | Path) -> list[QARecord]:
    """The questions of a plan dataset in order (a subset's selection of its file)."""
    subset = dataset_subset(name)
    records = load_records(resolve_dataset(subset.dataset if subset else name, data))
    return subset.select(records) if subset else records


def build_collection(
    records: Sequence[QARecord], config: Config, *, label: str, index: bool
) -> tuple[str, dict[str, Any]]:
    """Name of the collection of the pooled paragraphs of ``records``; indexed when ``index``
    and not yet complete (``index=False`` only names it, for reports)."""
    pooled = build_pooled_corpus(records)
    name = f"e2e-{label}-{pooled.fingerprint}"
    info: dict[str, Any] = {
        "collection": name,
        "raw_paragraphs": pooled.raw_paragraphs,
        "distinct_paragraphs": len(pooled),
        "chunk_size": config.corpus.chunk_size,
        "graph_k": config.graph.k,
        "datasets": dict(pooled.per_dataset),
    }
    if index:
        store = CorpusStore.open_or_create(name, config)
        if len(store) < len(pooled):
            print(f"indexing {len(pooled)} paragraphs into {store.directory}", flush=True)
            store.ingest(pooled.documents, progress=True)
        info["chunks"] = len(store)
    return name, info


# --------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------


def _mean(value: Estimate | None, digits: int = 4) -> float | None:
    return None if value is None else round(value.mean, digits)


def _ci(value: Estimate | None) -> list[float] | None:
    return None if value is None else [round(value.lo, 4), round(value.hi, 4)]


def paired(lines: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]] | None) -> Any:
    """``{"delta", "ci_low", "ci_high", "n"}`` of cover-EM minus the baseline's on shared
    questions (paired bootstrap, fixed seed); all None without a baseline."""
    estimate = paired_delta(lines, baseline) if baseline else None
    return {
        "metric": "cover_em",
        "delta": _mean(estimate),
        "ci_low": None if estimate is None else round(estimate.lo, 4),
        "ci_high": None if estimate is None else round(estimate.hi, 4),
        "n": 0 if estimate is None else estimate.n,
    }


def first_hop(
    lines: Sequence[dict[str, Any]], records: dict[str, QARecord]
) -> dict[str, Any] | None:
    """How often the first step's answer covers the dataset's first intermediate answer
    (MuSiQue's decomposition), and how often the final answer is right on those questions:
    the diagnosis that splits a loop's loss between its first hop and the rest. None for
    rows without steps (single-step) or datasets without a decomposition."""
    right = final_given_right = counted = 0
    for line in lines:
        record, trace = records.get(line["id"]), line.get("trace") or {}
        steps = trace.get("steps") or trace.get("hops")
        if record is None or not record.decomposition or not steps:
            continue
        counted += 1
        if cover_em(steps[0].get("answer") or "", record.decomposition[0].answers):
            right += 1
            final_given_right += int(line["metrics"]["cover_em"] > 0)
    if not counted:
        return None
    return {"n": counted, "right": right, "final_right_when_first_hop_right": final_given_right}


def bridge_hops(
    lines: Sequence[dict[str, Any]], records: dict[str, QARecord]
) -> dict[str, Any] | None:
    """How many of a plan's bridge answers (a step whose answer a later step uses as ``#k``)
    cover one of the dataset's intermediate answers (MuSiQue's decomposition, all hops but
    the last). The ceilings' hops (the dataset's own sub-questions) count the same way, so
    their row is what the reader does with bridges asked as the dataset asks them. None for
    rows without steps or datasets without a decomposition."""
    right = counted = 0
    for line in lines:
        record, trace = records.get(line["id"]), line.get("trace") or {}
        steps = trace.get("steps") or trace.get("hops") or []
        if record is None or len(record.decomposition or ()) < 2:
            continue
        plan = [str(s.get("planned") or s.get("sub_question") or "") for s in steps]
        golds = [a for hop in record.decomposition[:-1] for a in hop.answers]
        for index, step in enumerate(steps):
            if is_bridge(plan, index):
                counted += 1
                right += int(cover_em(str(step.get("answer") or ""), golds) > 0)
    return {"n": counted, "right": right} if counted else None


def result_row(planned: Planned, lines: list[dict[str, Any]], config: Config) -> dict[str, Any]:
    """The JSON row of one plan row from its finished run-file lines."""
    summary = summarize(lines, run=f"{planned.dataset}/{planned.strategy}")
    a, c, r = summary.answer, summary.cost, summary.retrieval
    evidence = {key: _mean(value) for key, value in r.items()}
    return {
        "dataset": planned.dataset,
        "strategy": planned.strategy,
        "label": planned.label,
        "role": planned.role,
        "model": planned.model,
        "n": summary.n,
        "planned_n": planned.limit,
        "cover_em": _mean(a["cover_em"]),
        "em": _mean(a["em"]),
        "f1": _mean(a["f1"]),
        "acc": _mean(a["acc"]),
        "cover_em_ci95": _ci(a["cover_em"]),
        "em_ci95": _ci(a["em"]),
        "f1_ci95": _ci(a["f1"]),
        "evidence_recall_at_5": evidence.get("recall@5"),
        "llm_calls": _mean(c["llm_calls"], 3),
        "retrieval_calls": _mean(c["retrieval_calls"], 3),
        "seconds_per_question": _mean(c["seconds"], 2),
        "load_average": summary.load_average,
        "input_tokens": _mean(c["input_tokens"], 1),
        "output_tokens": _mean(c["output_tokens"], 1),
        "format_failures": summary.format_failures,
        "breaks": summary.breaks,
        "errors": summary.errors,
        "evidence": evidence,
        "cache_hit_rate": summary.cache_hit_rate,
        "settings": settings_of(config, planned.settings),
    }


def attach_comparisons(
    rows: list[dict[str, Any]], lines: dict[int, list[dict[str, Any]]], best_loop: str | None
) -> None:
    """Add ``vs_single_step`` (every row) and ``vs_best_loop`` (rows other than it) to the
    rows that have per-question ``lines``; carried-over rows (no lines) keep their own."""

    def baseline(row: dict[str, Any], strategy: str) -> list[dict[str, Any]] | None:
        for index, other in enumerate(rows):
            if (other["dataset"], other["model"], other["strategy"]) == (
                row["dataset"],
                row["model"],
                strategy,
            ):
                return lines.get(index)
        return None

    for index, row in enumerate(rows):
        if index not in lines:
            continue
        row["vs_single_step"] = paired(lines[index], baseline(row, "single_step"))
        if best_loop and row["strategy"] != best_loop:
            row["vs_best_loop"] = paired(lines[index], baseline(row, best_loop))


def pooled_comparisons(
    rows: Sequence[dict[str, Any]], lines: dict[int, list[dict[str, Any]]], best_loop: str | None
) -> list[dict[str, Any]]:
    """Paired comparisons pooled over both datasets (on the questions both rows answered, 268
    when both are complete): the default pipeline against every other strategy of the same
    model but the ceilings and the best loop's variants; the best loop against single-step;
    each variant (:data:`VARIANTS`) against the strategy it varies, the best loop's NAR row
    against the best loop; the default against :data:`DEFAULT_WITHOUT_MER`. Items
    ``{"strategy", "vs", "model", "n", "delta", "ci_low", "ci_high"}``; only strategies with
    per-question lines on every dataset take part."""

    def pooled_lines(model: str, strategy: str) -> list[dict[str, Any]] | None:
        found = [
            lines[i]
            for i, row in enumerate(rows)
            if (row["model"], row["strategy"]) == (model, strategy) and i in lines
        ]
        return [line for part in found for line in part] if len(found) == len(DATASETS) else None

    variants = {*VARIANTS, *(nar_row(s) for s in (best_loop, DEFAULT_PIPELINE) if s)}
    out: list[dict[str, Any]] = []
    for model in dict.fromkeys(row["model"] for row in rows):
        strategies = [r["strategy"] for r in rows if r["model"] == model]
        pairs = [
            (DEFAULT_PIPELINE, other)
            for other in dict.fromkeys(strategies)
            if other not in (DEFAULT_PIPELINE, *CEILINGS, *variants)
        ]
        if DEFAULT_WITHOUT_MER in strategies:
            pairs += [(DEFAULT_PIPELINE, DEFAULT_WITHOUT_MER)]
        if best_loop and best_loop != DEFAULT_PIPELINE:
            pairs += [(best_loop, "single_step")]
            pairs += [(v, varied(v)) for v in dict.fromkeys(strategies) if v in variants]
        for ours, other in pairs:
            a, b = pooled_lines(model, ours), pooled_lines(model, other)
            if a is None or b is None:
                continue
            comparison = paired(a, b)
            out.append(
                {"strategy": ours, "vs": other, "model": model}
                | {k: comparison[k] for k in ("n", "delta", "ci_low", "ci_high")}
            )
    return out


def _pooled_lines(result: dict[str, Any]) -> list[str]:
    pooled = result.get("pooled") or []
    if not pooled:
        return []
    return [
        "",
        "Pooled over both datasets (paired on the questions both answered):",
        "",
        "| model | strategy | vs | n | Δ cover-EM [paired 95% CI] |",
        "|---|---|---|---|---|",
        *(
            f"| {_short_model(p['model'])} | {p['strategy']} | {p['vs']} | {p['n']}"
            f"{'†' if p.get('carried_over') else ''} | {_delta(p)} |"
            for p in pooled
        ),
    ]


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------


def _pct(value: float | None, ci: Sequence[float] | None = None) -> str:
    if value is None:
        return "–"
    text = f"{value * 100:.1f}"
    return f"{text} [{ci[0] * 100:.0f}, {ci[1] * 100:.0f}]" if ci else text


def _delta(comparison: dict[str, Any] | None) -> str:
    if not comparison or comparison.get("delta") is None:
        return "–"
    return (
        f"{comparison['delta'] * 100:+.1f} [{comparison['ci_low'] * 100:+.0f}, "
        f"{comparison['ci_high'] * 100:+.0f}]"
    )


def _short_model(spec: str) -> str:
    return spec.removeprefix("llamacpp:").removeprefix("ollama:")


def _settings_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per strategy: the settings its rows ran with (the same for both models)."""
    by_label: dict[str, dict[str, Any]] = {}
    for row in rows:
        by_label.setdefault(row["label"], row.get("settings") or {})
    return [
        f"* {label}: " + (", ".join(f"`{k}={v}`" for k, v in values.items()) or "–")
        for label, values in by_label.items()
    ]


def _hop_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The MuSiQue hop diagnosis of the rows that cover their whole dataset: the first hop
    and, for plan-and-execute rows, the bridges (:func:`bridge_hops`)."""

    def bridges(row: dict[str, Any]) -> str:
        hop = row.get("bridge_hops")
        return (
            f"{hop['right']} of {hop['n']} ({hop['right'] / hop['n'] * 100:.0f}%)" if hop else "–"
        )

    table = [
        f"| {row['label']} | {_short_model(row['model'])} | {hop['n']} | {hop['right']} | "
        f"{hop['final_right_when_first_hop_right']} | {bridges(row)} |"
        for row in rows
        if (hop := row.get("first_hop")) and row["n"] >= ROLE_LIMITS["main"]
    ]
    if not table:
        return []
    return [
        "",
        "Hops on MuSiQue, rows with all questions: the first hop is right when the first step's "
        "answer covers the dataset's first intermediate answer; a bridge answer (a planned "
        "step whose answer a later step uses; for the ceilings, every hop of the dataset's "
        "own decomposition but the last) when it covers one of the intermediate answers.",
        "",
        "| strategy | model | n | first hop right | final answer right of those "
        "| bridge answers right |",
        "|---|---|---|---|---|---|",
        *table,
    ]


def render_markdown(result: dict[str, Any], analysis: str) -> str:
    corpus = result["corpus"]
    lines = [
        "# End-to-end benchmark: single-step, loops, ceilings and peers on MuSiQue and 2Wiki",
        "",
        f"Models: {', '.join(f'`{m}`' for m in result['models'])}; pooled corpus "
        f"`{corpus['collection']}` ({corpus['distinct_paragraphs']} distinct paragraphs of "
        f"{corpus['raw_paragraphs']}); {result['machine']}; {result['date']}. Best loop: "
        f"`{result['best_loop'] or '–'}`.",
        "",
        "Reproduce or continue (resumable; LLM calls are cached): `benchmarks/run_end_to_end.sh`, "
        "or the last call:",
        "",
        "```bash",
        result["command"],
        "```",
        "",
        "| dataset | role | strategy | model | n | cover-EM % [95% CI] | Δ vs single-step "
        "[paired 95% CI] | Δ vs best loop | EM % | F1 % | evidence R@5 % | LLM calls "
        "| s/question | load | format failures | breaks / errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        n = f"{row['n']}" + ("" if row["n"] >= row["planned_n"] else f" of {row['planned_n']}")
        n += "†" if row.get("carried_over") else ""
        lines.append(
            f"| {row['dataset']} | {row['role']} | {row['label']} | "
            f"{_short_model(row['model'])} | {n} | "
            f"{_pct(row['cover_em'], row['cover_em_ci95'])} | {_delta(row['vs_single_step'])} | "
            f"{_delta(row.get('vs_best_loop'))} | {_pct(row['em'])} | {_pct(row['f1'])} | "
            f"{_pct(row['evidence_recall_at_5'])} | {row['llm_calls']} | "
            f"{row['seconds_per_question']} | {row['load_average'] or '–'} | "
            f"{row['format_failures']} | {row['breaks']} / {row['errors']} |"
        )
    if result["pending"]:
        groups: dict[tuple[str, str, int], list[str]] = {}
        for p in result["pending"]:
            key = (p["strategy"], _short_model(p["model"]), p["limit"])
            groups.setdefault(key, []).append(p["dataset"])
        waiting = "; ".join(
            f"{strategy} ({model}, n={limit}: {', '.join(datasets)})"
            for (strategy, model, limit), datasets in groups.items()
        )
        lines += ["", f"Not run yet: {waiting}."]
    lines += [
        "",
        "Settings per strategy (the `cpu` preset; `--set` values of the command apply to "
        "every row):",
        "",
        *_settings_lines(result["rows"]),
        *_hop_lines(result["rows"]),
        *_pooled_lines(result),
    ]
    lines += [
        "",
        "cover-EM: the normalised gold answer (or an alias) occurs as a whole run of tokens in "
        "the prediction; EM/F1: SQuAD. CIs: percentile bootstrap over questions; Δ columns: "
        "cover-EM difference in points on the questions both rows answered, paired bootstrap "
        "(2000 resamples, seed 0). s/question includes the time LLM-cache hits originally "
        "took; load: mean 1-minute load average when the row's questions finished (2 cores). "
        "Evidence R@5: share of gold supporting paragraphs among the first five distinct "
        "paragraphs the strategy used (none for gold evidence and no retrieval). Format "
        "failures: replies that broke the structured format (from the traces; 0 where a "
        "strategy does not report them). Breaks: questions on which a peer framework raised "
        "on the model's output (counted as wrong); errors: other failed questions.",
        *(
            [
                "",
                "† Carried over from the previous results file: this row's run file (same "
                "model, dataset, strategy and configuration fingerprint, or the same values of "
                "the settings listed below when a setting was added since, which its run did "
                "not have) is not on the machine that wrote this table, so its figures are as "
                "last computed and a paired interval against it stays empty until it is "
                "rerun. A pooled n marked † is a "
                "comparison carried over likewise: as computed from the run files of the same "
                "names on that machine.",
            ]
            if any(row.get("carried_over") for row in result["rows"])
            else []
        ),
        *(
            [
                "",
                "Self-Ask + NAR / + SUNAR / + SUNAR + MER: SUNAR's parts inside our Self-Ask "
                "loop with additions not in the paper ([docs/pipelines.md]"
                "(../../docs/pipelines.md#not-in-the-paper)), not the paper's system.",
            ]
            if any(str(row["label"]).startswith("Self-Ask +") for row in result["rows"])
            else []
        ),
        "",
        ANALYSIS_START,
        analysis.strip() or "_Analysis pending: written after the full run._",
        ANALYSIS_END,
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO / ".." / "shared" / "data"))
    parser.add_argument("--model", default=DEFAULT_MODEL, help="chat model of every role")
    parser.add_argument(
        "--strong-model",
        default=STRONG_MODEL,
        help="chat model of the 'strong' rows (single-step + best loops); '' for none",
    )
    parser.add_argument(
        "--best-loops",
        default=DEFAULT_BEST_LOOPS,
        help="comma-separated loop strategies of the main rows (the first is 'the' best loop)",
    )
    parser.add_argument("--roles", default="", help=f"rows to run, of {', '.join(ROLE_ORDER)}")
    parser.add_argument("--strategies", default="", help="rows to run: these strategies only")
    parser.add_argument("--datasets", default="", help="rows to run: these datasets only")
    parser.add_argument("--models", default="", help="rows to run: these model specs only")
    parser.add_argument("--limit", type=int, default=None, help="cap on every row's n")
    parser.add_argument(
        "--role-limit",
        action="append",
        default=[],
        metavar="ROLE=N",
        help=f"questions per row of a role (repeatable); defaults {ROLE_LIMITS}",
    )
    parser.add_argument(
        "--passages", type=int, default=None, help="evidence passages per prompt (answer.passages)"
    )
    parser.add_argument("--graph-k", type=int, default=100, help="neighbours stored per chunk")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="any config override"
    )
    parser.add_argument("--cache", default=str(default_home() / "benchmarks"))
    parser.add_argument("--runs-dir", default=None, help="default: <cache>/end_to_end_runs")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "end_to_end.json"))
    parser.add_argument("--smoke", action="store_true", help="pool only the selected questions")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: rebuild the JSON and markdown from the run files that exist",
    )
    parser.add_argument(
        "--markdown-only",
        action="store_true",
        help="run nothing: rewrite the markdown from the --out JSON as it is",
    )
    return parser.parse_args(list(argv))


def make_config(args: argparse.Namespace, model: str) -> Config:
    overrides: dict[str, Any] = {
        "models.chat": model,
        "answer.passages": args.passages,
        "corpus.home": args.cache,
        "corpus.chunk_size": 4096,  # one chunk per paragraph
        "corpus.chunk_overlap": 0,
        "graph.k": args.graph_k,
        "eval.concurrency": args.concurrency,
        "eval.data_dir": args.data,
    }
    for pair in args.set:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set expects KEY=VALUE, got {pair!r}")
        try:
            overrides[key] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[key] = raw
    return Config.from_env().with_overrides(overrides)


def _csv(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def selected(plan: Iterable[Planned], args: argparse.Namespace) -> list[Planned]:
    """The rows of ``plan`` that this call runs (all filters must pass)."""
    filters = {
        "role": set(_csv(args.roles)),
        "strategy": set(_csv(args.strategies)),
        "dataset": set(_csv(args.datasets)),
        "model": set(_csv(args.models)),
    }
    return [
        p
        for p in plan
        if all(not wanted or getattr(p, key) in wanted for key, wanted in filters.items())
    ]


def run_file(args: argparse.Namespace, config: Config, planned: Planned) -> Path:
    runs_dir = Path(args.runs_dir or Path(args.cache) / "end_to_end_runs")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", planned.model)
    label = dataset_label(planned.dataset, args.data)
    fingerprint = run_fingerprint(config, harness_strategy(planned.strategy), label)
    return runs_dir / slug / f"{planned.dataset}__{planned.strategy}__{fingerprint}.jsonl"


def previous_rows(path: Path) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    """The rows of an earlier results file by (dataset, strategy, model, role): what a row
    whose run file is gone may carry over (:func:`carries_over`). Rows without a ``run`` name
    (older files) are not carried."""
    if not path.is_file():
        return {}
    rows = json.loads(path.read_text(encoding="utf-8")).get("rows", [])
    return {
        (row["dataset"], row["strategy"], row["model"], row["role"]): row
        for row in rows
        if row.get("run")
    }


def carries_over(kept: dict[str, Any], planned: Planned, run_name: str, config: Config) -> bool:
    """Whether an earlier row stands for ``planned`` while its run file is gone: same run file
    name (model, dataset, strategy and configuration fingerprint), or the same size and the
    same values of every setting the earlier row lists. The second case keeps rows across a
    new setting (a new key changes every fingerprint): the earlier run did not have it."""
    if kept["planned_n"] != planned.limit:
        return False
    listed = kept.get("settings") or {}
    return kept["run"] == run_name or settings_of(config, list(listed)) == listed


def carried_pooled(
    rows: Sequence[dict[str, Any]], pooled: list[dict[str, Any]], path: Path
) -> list[dict[str, Any]]:
    """``pooled`` plus the pooled items of an earlier results file that could not be computed
    again (some row they pair is carried over: its per-question lines are gone) although
    every row they pair comes from a run file of the same name as then (carried over, or
    recomputed from it); such items are marked ``carried_over``."""
    if not path.is_file():
        return pooled
    previous = json.loads(path.read_text(encoding="utf-8"))
    earlier = previous.get("pooled") or []
    runs = {
        (r["dataset"], r["model"], r["strategy"]): r.get("run") for r in previous.get("rows", [])
    }
    done = {(p["strategy"], p["vs"], p["model"]) for p in pooled}

    def carried(model: str, strategy: str) -> bool:
        found = [r for r in rows if (r["model"], r["strategy"]) == (model, strategy)]
        return len(found) == len(DATASETS) and all(
            r.get("carried_over") or r.get("run") == runs.get((r["dataset"], model, strategy))
            for r in found
        )

    kept = [
        {**item, "carried_over": True}
        for item in earlier
        if (item["strategy"], item["vs"], item["model"]) not in done
        and carried(item["model"], item["strategy"])
        and carried(item["model"], item["vs"])
    ]
    return pooled + kept


def _plan_entry(planned: Planned) -> dict[str, Any]:
    return {
        "dataset": planned.dataset,
        "strategy": planned.strategy,
        "model": planned.model,
        "role": planned.role,
        "limit": planned.limit,
    }


def run(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, Any]:
    role_limits = {role: int(n) for role, _, n in (pair.partition("=") for pair in args.role_limit)}
    best_loops = _csv(args.best_loops)
    plan = build_plan(
        model=args.model,
        strong_model=args.strong_model or None,
        best_loops=best_loops,
        limits=role_limits,
    )
    if args.limit is not None:
        plan = [replace(p, limit=min(p.limit, args.limit)) for p in plan]
    registered = {spec.name for spec in available_strategies()}
    registered |= {name for name, (strategy, _) in VARIANTS.items() if strategy in registered}
    todo = [] if args.report_only else selected(plan, args)
    unknown = sorted({p.strategy for p in todo} - registered)
    if unknown:
        raise SystemExit(f"not registered in the harness: {', '.join(unknown)}")

    records = {d: dataset_records(d, args.data) for d in DATASETS}
    if args.smoke:
        biggest = max((p.limit for p in todo or plan), default=0)
        pool = [r for d in DATASETS for r in records[d][:biggest]]
    else:
        pool = [r for d in POOL for r in load_records(resolve_dataset(d, args.data))]
    base = make_config(args, args.model)
    collection, corpus = build_collection(
        pool, base, label="smoke" if args.smoke else "pooled", index=bool(todo)
    )

    configs = {
        spec: make_config(args, spec).with_overrides({"collection": collection})
        for spec in dict.fromkeys(p.model for p in plan)
    }

    def config_of(planned: Planned) -> Config:
        overrides = row_overrides(planned.strategy)
        base = configs[planned.model]
        return base.with_overrides(overrides) if overrides else base

    failed: list[str] = []
    for spec in dict.fromkeys(p.model for p in todo):
        config = configs[spec]
        parts = EvalComponents(config, llm_cache=open_llm_cache(config))
        for planned in (p for p in todo if p.model == spec):
            out = run_file(args, config_of(planned), planned)
            print(
                f"== {planned.dataset} × {planned.label} × {spec}: {planned.limit} questions "
                f"→ {out}",
                flush=True,
            )
            row_config = config_of(planned)
            try:
                evaluate(
                    row_config,
                    harness_strategy(planned.strategy),
                    planned.dataset,
                    out=out,
                    limit=planned.limit,
                    progress=not args.quiet,
                    # a variant's graph is built from its components' config
                    components=derive_components(parts, row_config),
                )
            except RCAError as exc:  # e.g. a strategy that cannot run here: go on with the rest
                print(f"error: {planned.dataset} × {planned.strategy}: {exc}", flush=True)
                failed.append(f"{planned.dataset} × {planned.strategy} × {spec}")
        del parts  # one model's weights and index at a time

    earlier = previous_rows(Path(args.out))
    rows: list[dict[str, Any]] = []
    row_lines: dict[int, list[dict[str, Any]]] = {}
    pending: list[dict[str, Any]] = []
    for planned in plan:
        if planned.strategy not in registered:  # e.g. a best loop not merged yet
            pending.append(_plan_entry(planned))
            continue
        out = run_file(args, config_of(planned), planned)
        run_name = f"{out.parent.name}/{out.name}"
        wanted = {r.id for r in records[planned.dataset][: planned.limit]}
        lines = [line for line in read_run(out) if line["id"] in wanted] if out.is_file() else []
        if not lines:
            kept = earlier.get((planned.dataset, planned.strategy, planned.model, planned.role))
            if kept is not None and carries_over(kept, planned, run_name, config_of(planned)):
                rows.append({**kept, "carried_over": True})
            else:
                pending.append(_plan_entry(planned))
            continue
        row_lines[len(rows)] = lines
        row = result_row(planned, lines, config_of(planned))
        by_id = {r.id: r for r in records[planned.dataset]}
        row["first_hop"] = first_hop(lines, by_id)
        row["bridge_hops"] = bridge_hops(lines, by_id)
        rows.append({**row, "run": run_name})
    attach_comparisons(rows, row_lines, best_loops[0] if best_loops else None)
    pooled = pooled_comparisons(rows, row_lines, best_loops[0] if best_loops else None)
    pooled = carried_pooled(rows, pooled, Path(args.out))

    command = " ".join(
        [
            "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/end_to_end.py",
            *(arg for arg in argv if arg != "--report-only"),
        ]
    )
    return {
        "model": args.model,
        "models": list(dict.fromkeys(p.model for p in plan)),
        "best_loop": best_loops[0] if best_loops else None,
        "plan": [_plan_entry(p) for p in plan],
        "rows": rows,
        "pooled": pooled,
        "pending": pending,
        "failed": failed,
        "corpus": corpus,
        "command": command.strip(),
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.markdown_only:
        out = Path(args.out)
        md_path = out.with_suffix(".md")
        result = json.loads(out.read_text(encoding="utf-8"))
        md_path.write_text(render_markdown(result, read_analysis(md_path)), encoding="utf-8")
        print(f"wrote {md_path}")
        return 0
    try:
        result = run(args, argv)
    except RCAError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to continue", file=sys.stderr)
        return 130
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    md_path = out.with_suffix(".md")
    md_path.write_text(render_markdown(result, read_analysis(md_path)), encoding="utf-8")
    print(f"wrote {out} and {md_path}")
    if result["failed"]:
        print(f"rows that failed this time: {', '.join(result['failed'])}", file=sys.stderr)
    for row in result["rows"]:
        print(
            f"{row['dataset']:30s} {row['strategy']:24s} {_short_model(row['model']):20s} "
            f"n={row['n']:3d} cover-EM={row['cover_em']} Δ={row['vs_single_step']['delta']} "
            f"R@5={row['evidence_recall_at_5']} calls={row['llm_calls']} "
            f"s/q={row['seconds_per_question']} breaks={row['breaks']} errors={row['errors']}"
        )
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
