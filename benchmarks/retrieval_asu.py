"""The ASU rows of the retrieval benchmark: NAR against SUNAR (NAR + ASU) on the same queries.

ASU needs the chat model (m answers sampled per NAR batch), so this part runs on a few queries
(``--asu N``: the first N of the chosen MuSiQue query set) with the agents' ``cpu`` profile
sizes unless given (b = 2, c = 8, first stage R = 20, m = 3 samples of at most 12 tokens over
passages cut to 300 characters). Rows per scorer:

* ``nar``: Algorithm 1 alone;
* ``sunar``: NAR with ASU re-scoring every batch by the library's default rule
  (``asu.rescore = batch``: 1/s on the batch's min-max normalised scores; not the paper's);
* ``sunar (paper: score / s)``: the same samples, every score divided by s (the paper's rule,
  ``asu.rescore = paper``);
* ``sunar (LLM judge)``: the default rule with answers clustered by the chat model's
  two-way entailment judgement (``models.equivalence = llm``, the paper's bidirectional
  entailment) instead of the lexical match.

Sub-questions use the ``union`` pool (their own list and the original question's), original
questions their own list. ``ASU batches`` counts the batches re-scored (memoised samples
included), ``s/query`` the wall time per query.

Samples are memoised per prompt, so the SUNAR variants share the LLM's answers wherever they
score the same batch. Recall is measured at 5 and 10 on the paragraphs' ids; Δ is the paired
difference against ``nar`` (and, for the paper's rule and the judge, against ``sunar``) with a
bootstrap 95% interval.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rag_complexity_agents.config import Config, ModelsConfig
from rag_complexity_agents.models.chat import load_chat_model
from rag_complexity_agents.models.equivalence import LexicalEquivalence, LLMJudgeEquivalence
from rag_complexity_agents.retrieval.asu import (
    AnswerSemanticUncertainty,
    RescoreMode,
    draw_samples,
)
from rag_complexity_agents.retrieval.nar import BatchHook, NARParams
from rag_complexity_agents.retrieval.sunar import SunarRetriever
from rag_complexity_agents.types import ScoredDoc

Sampler = Callable[[Any, int], list[str]]


def memo_sampler(chat: Any, *, temperature: float, max_tokens: int, seed: int) -> Sampler:
    """m samples per distinct prompt, drawn once (seeds ``seed .. seed + m - 1``)."""
    memo: dict[tuple[Any, ...], list[str]] = {}

    def sample(messages: Any, m: int) -> list[str]:
        key = (tuple(tuple(x) for x in messages), m)
        if key not in memo:
            memo[key] = draw_samples(
                chat, messages, m, temperature=temperature, seed=seed, max_tokens=max_tokens
            )
        return list(memo[key])

    return sample


def _recall(ranking: Sequence[str], relevant: set[str], k: int) -> float:
    return len(relevant & set(ranking[:k])) / len(relevant) if relevant else 0.0


def run_asu(
    args: argparse.Namespace,
    corpus: Any,
    store: Any,
    first_stage: Any,
    scorers: dict[str, Any],
    paragraph_ranking: Callable[[Sequence[ScoredDoc]], list[str]],
    bootstrap: Callable[[np.ndarray, int, int], dict[str, float]],
) -> dict[str, Any]:
    """NAR vs SUNAR rows for the first ``args.asu`` queries of ``args.asu_queries``."""
    started = time.time()
    config = Config()
    models = ModelsConfig(chat=args.asu_model, n_threads=1)
    chat = load_chat_model(args.asu_model, models, config.models.home)
    sampler = memo_sampler(chat, temperature=0.3, max_tokens=args.asu_max_tokens, seed=0)
    queries = [q for q in corpus.queries if q.dataset == "musique" and q.kind == args.asu_queries][
        : args.asu
    ]
    params = NARParams(b=args.asu_b, c=args.asu_c, neighbours_per_doc=args.neighbours)
    rows: list[dict[str, Any]] = []
    for scorer_name, scorer in scorers.items():

        def asu(equivalence: Any, rescore: RescoreMode = "batch") -> AnswerSemanticUncertainty:
            return AnswerSemanticUncertainty(
                equivalence,
                sampler=sampler,
                m=args.asu_m,
                rescore_mode=rescore,
                max_passage_chars=args.asu_passage_chars,
            )

        hooks: dict[str, BatchHook | None] = {
            "nar": None,
            "sunar": asu(LexicalEquivalence()),
            "sunar (paper: score / s)": asu(LexicalEquivalence(), "paper"),
        }
        if args.asu_judge:
            hooks["sunar (LLM judge)"] = asu(LLMJudgeEquivalence(chat))
        per: dict[str, dict[str, list[float]]] = {}
        for label, hook in hooks.items():
            retriever = SunarRetriever(
                first_stage,
                scorer,
                store.graph,
                store.chunk,
                params=params,
                first_stage_k=args.asu_first_stage_k,
                pool="union",
                asu=hook,
                collection_size=len(store),
            )
            r5, r10, calls = [], [], 0
            tick = time.perf_counter()
            for query in queries:
                result = retriever.run(query.text, original_query=query.original)
                calls += len(result.trace.batches) if hook is not None else 0
                ranking = paragraph_ranking(result.docs)
                r5.append(_recall(ranking, query.relevant, 5))
                r10.append(_recall(ranking, query.relevant, 10))
            per[label] = {"r5": r5, "r10": r10}
            rows.append(
                {
                    "scorer": scorer_name,
                    "strategy": label,
                    "n_queries": len(queries),
                    "recall_at_5": float(np.mean(r5)) if r5 else None,
                    "recall_at_10": float(np.mean(r10)) if r10 else None,
                    "asu_batches": calls,
                    "seconds_per_query": round((time.perf_counter() - tick) / max(1, len(r5)), 2),
                }
            )
            print(f"  asu {scorer_name} {label}: {rows[-1]}", flush=True)
        for row in rows[-len(hooks) :]:
            against = [] if row["strategy"] == "nar" else ["nar"]
            if row["strategy"] not in ("nar", "sunar"):
                against.append("sunar")
            for base in against:
                for name, key in (("recall_at_5", "r5"), ("recall_at_10", "r10")):
                    diffs = np.asarray(per[row["strategy"]][key]) - np.asarray(per[base][key])
                    row[f"{name}_vs_{base}"] = bootstrap(diffs, args.bootstrap, args.seed)
    return {
        "queries": f"musique/{args.asu_queries}",
        "n_queries": len(queries),
        "model": args.asu_model,
        "pool": "union" if args.asu_queries == "subquestions" else "own",
        "b": args.asu_b,
        "c": args.asu_c,
        "first_stage_k": args.asu_first_stage_k,
        "m": args.asu_m,
        "max_tokens": args.asu_max_tokens,
        "max_passage_chars": args.asu_passage_chars,
        "equivalence": "lexical (the LLM judge row: the chat model)",
        "collection": args.asu_collection,
        "rows": rows,
        "command": "python benchmarks/retrieval.py " + " ".join(args.argv),
        "wall_seconds": round(time.time() - started, 1),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "date": time.strftime("%Y-%m-%d"),
    }


def _pct(value: Any) -> str:
    return "–" if value is None else f"{value * 100:.1f}"


def _delta(entry: dict[str, float] | None) -> str:
    if not entry:
        return "–"
    return f"{entry['mean'] * 100:+.1f} [{entry['lo'] * 100:+.1f}, {entry['hi'] * 100:+.1f}]"


def render_asu(section: dict[str, Any]) -> list[str]:
    """The markdown lines of the ASU rows."""
    corpus = section.get("collection") or "this benchmark's pooled collection"
    lines = [
        f"## ASU: NAR vs SUNAR ({section['queries']}, first {section['n_queries']} queries)",
        "",
        f"Reproduce: `HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 nice -n 5 .venv/bin/"
        f"{section['command']}` ({section['wall_seconds'] / 60:.0f} min, {section['machine']}, "
        f"{section['date']}). Chat model `{section['model']}` (one llama.cpp thread); pool "
        f"{section['pool']}, R = {section['first_stage_k']}, b = {section['b']}, c = "
        f"{section['c']}, m = {section['m']} samples of at most {section['max_tokens']} tokens, "
        f"passages cut to {section['max_passage_chars']} characters, {section['equivalence']} "
        f"equivalence; corpus: {corpus}. Δ = paired difference against `nar` (or `sunar`) in "
        "points, bootstrap 95% interval.",
        "",
        "| scorer | strategy | R@5 | Δ R@5 vs nar | Δ R@5 vs sunar | R@10 | Δ R@10 vs nar | "
        "Δ R@10 vs sunar | ASU batches | s/query |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in section["rows"]:
        lines.append(
            f"| {r['scorer']} | {r['strategy']} | {_pct(r['recall_at_5'])} | "
            f"{_delta(r.get('recall_at_5_vs_nar'))} | {_delta(r.get('recall_at_5_vs_sunar'))} | "
            f"{_pct(r['recall_at_10'])} | {_delta(r.get('recall_at_10_vs_nar'))} | "
            f"{_delta(r.get('recall_at_10_vs_sunar'))} | {r['asu_batches']} | "
            f"{r['seconds_per_query']} |"
        )
    lines.append("")
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--asu*`` options."""
    parser.add_argument(
        "--asu",
        type=int,
        default=0,
        help="run only the ASU rows on this many MuSiQue queries (needs the chat model) and "
        "add them to the existing results",
    )
    parser.add_argument("--asu-queries", default="original", choices=("original", "subquestions"))
    parser.add_argument(
        "--asu-collection",
        default=None,
        help="run the ASU rows on this existing pooled collection under --cache (e.g. "
        "end_to_end.py's e2e-pooled-…) instead of building this benchmark's",
    )
    parser.add_argument("--asu-graph-k", type=int, default=100, help="that collection's graph k")
    parser.add_argument("--asu-model", default="llamacpp:qwen2.5-0.5b")
    parser.add_argument("--asu-b", type=int, default=2)
    parser.add_argument("--asu-c", type=int, default=8)
    parser.add_argument("--asu-first-stage-k", type=int, default=20)
    parser.add_argument("--asu-m", type=int, default=3)
    parser.add_argument("--asu-max-tokens", type=int, default=12)
    parser.add_argument("--asu-passage-chars", type=int, default=300)
    parser.add_argument(
        "--asu-judge",
        action="store_true",
        help="add the row that clusters by the chat model's two-way entailment judgement",
    )


__all__ = ["add_arguments", "memo_sampler", "render_asu", "run_asu"]
