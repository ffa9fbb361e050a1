"""RRCP benchmark: retrieval-complexity classification (the task of the paper's Table 3) and
the correlation of RC with answer correctness of the end-to-end runs (in the style of the
paper's Table 4).

Labels come from dataset structure. The paper's task is the within-dataset row
``musique_subq``: MuSiQue questions (multi-hop, *complex*) against MuSiQue's own first gold
sub-questions (one-hop, *not complex*; natural-language ones only, answered by a paragraph in
the corpus). HotpotQA's levels, the paper's other split, cannot be used: the dev files hold
one level only. Cross-dataset rows pair the questions of MuSiQue, 2WikiMultiHopQA and
HotpotQA (distractor) with the same SQuAD v1.1 questions (gold paragraph in the corpus) as
negatives; a classifier can also tell those classes apart by dataset style.

Corpus: the pooled, deduplicated paragraphs of every question used (one chunk per
paragraph), indexed once under ``<cache>/collections``. Retrieval: hybrid BM25 + MiniLM (RRF),
top k. Token relevance: MaxSim over MiniLM token embeddings (``MaxSimTokenRelevance``).

Methods per dataset: ``ans_only`` (complex iff Ans = 0), ``com_only`` (Com = 1), ``rrcp``
(both), each cross-fitted: thresholds grid-searched for F1 on one half of the questions
(even positions) predict the other half (odd positions) and the other way round, so every
question is reported once, out of sample; ``llm_baseline``: the prompted classifier,
P(yes) >= 0.5, on the first ``--n-baseline`` per class.
Evaluators: ``lexical`` (reference containment; every row) and ``llm`` (P(yes) of a chat
model; the first ``--n-llm`` questions per class of the ``--llm-rows`` rows, by default the
paper's task only, because every (question, document) costs one forward pass).
``--model`` takes several chat models (comma-separated), scored one after the other; every
LLM row names its model.

Table-4 style: for every harness run file found under ``--runs`` (default: the end-to-end
benchmark's), correctness (cover-EM) of the questions RRCP (lexical, thresholds calibrated on
that dataset's row) calls complex vs not complex, and Pearson correlations.

All scores are cached in ``<cache>/rrcp/<corpus fingerprint>/scores.sqlite`` (the package's
LLM call cache, keyed by score kind, chat model and question): rerunning resumes. LLM
questions are scored round robin over the datasets, and the results are rewritten every
``--write-every`` newly scored questions, so a stopped run leaves rows over what it scored
(``n_test`` < ``n_test_planned``); ``--cached-only`` writes them from the cache without
loading a model (e.g. while a run is still going). The corpus does not
depend on the run files (``--run-questions`` fixes which questions' paragraphs it pools), so
a rerun after the end-to-end runs grew only scores the new questions. Run from the
repository root::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RCA_MODELS__N_THREADS=1 OMP_NUM_THREADS=1 \\
        .venv/bin/python benchmarks/rrcp.py --data ../shared/data

Writes ``benchmarks/results/rrcp.json`` and ``rrcp.md`` (text between the analysis markers
of an existing ``rrcp.md`` is kept).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _common import ANALYSIS_END, ANALYSIS_START, REPO, machine, write_results

from rag_complexity_agents.complexity.rrcp import (
    METHODS,
    Scored,
    calibrate,
    classification_metrics,
    completeness_score,
    predict,
)
from rag_complexity_agents.complexity.rrcp_evaluators import (
    LexicalAnswerEvaluator,
    LLMAnswerEvaluator,
    LLMComplexityClassifier,
    MaxSimTokenRelevance,
)
from rag_complexity_agents.config import Config, default_home
from rag_complexity_agents.corpus.store import CorpusStore
from rag_complexity_agents.errors import RCAError
from rag_complexity_agents.eval.datasets import (
    QARecord,
    build_pooled_corpus,
    load_records,
    resolve_dataset,
)
from rag_complexity_agents.eval.metrics import paired_difference
from rag_complexity_agents.models.cache import CacheEntry, LLMCallCache
from rag_complexity_agents.retrieval.first_stage import HybridFirstStage

COMPLEX = ("musique", "2wikimultihopqa", "hotpotqa")
FILES = {
    "musique": "musique",
    "2wikimultihopqa": "2wikimultihopqa",
    "hotpotqa": "hotpotqa",
    "squad": "squad",
}


@dataclass(frozen=True)
class Item:
    """One labelled question."""

    key: str  # unique cache key
    dataset: str  # the record's dataset (squad, musique, musique_subq, ...)
    question: str
    references: tuple[str, ...]
    label: bool


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def _natural_first_step(record: QARecord) -> Item | None:
    if not record.decomposition:
        return None
    step = record.decomposition[0]
    text = step.question.strip()
    if ">>" in text or "#" in text or len(text.split()) < 4 or not step.answers:
        return None
    if not text.endswith("?"):
        text += "?"
    return Item(f"musique_subq:{record.id}", "musique_subq", text, tuple(step.answers), False)


def select(args: argparse.Namespace) -> tuple[dict[str, list[Item]], list[QARecord]]:
    """Items per benchmark row and every record whose paragraphs form the corpus."""
    records = {name: load_records(resolve_dataset(f, args.data)) for name, f in FILES.items()}
    n = args.n
    chosen: dict[str, list[QARecord]] = {}
    for name in COMPLEX:
        chosen[name] = records[name][:n]
    squad = records["squad"]
    stride = max(1, len(squad) // n)  # spread over articles
    chosen["squad"] = squad[::stride][:n]
    corpus_records = [r for rs in chosen.values() for r in rs]
    known = {r.id for r in corpus_records}
    # the questions the end-to-end runs may cover, for the correlation table: a fixed prefix
    # of each file, so the corpus (and every cached score) does not change as runs grow
    for name in COMPLEX:
        corpus_records += [r for r in records[name][: args.run_questions] if r.id not in known]
        known.update(r.id for r in records[name][: args.run_questions])
    negatives = [
        Item(f"squad:{r.id}", "squad", r.question, r.answers, False) for r in chosen["squad"]
    ]
    rows: dict[str, list[Item]] = {}
    for name in COMPLEX:
        positives = [
            Item(f"{name}:{r.id}", name, r.question, r.answers, True) for r in chosen[name]
        ]
        rows[name] = interleave(positives, negatives)
    subq_pairs = [(r, i) for r in records["musique"] if (i := _natural_first_step(r))][:n]
    subq = [i for _, i in subq_pairs]
    corpus_records += [r for r, _ in subq_pairs if r.id not in known]
    musique_pos = [
        Item(f"musique:{r.id}", "musique", r.question, r.answers, True) for r in chosen["musique"]
    ]
    rows["musique_subq"] = interleave(musique_pos[: len(subq)], subq)
    return rows, corpus_records


def interleave(positives: Sequence[Item], negatives: Sequence[Item]) -> list[Item]:
    """p0, n0, p1, n1, …: position parity then splits each class in half."""
    out: list[Item] = []
    for i in range(max(len(positives), len(negatives))):
        if i < len(positives):
            out.append(positives[i])
        if i < len(negatives):
            out.append(negatives[i])
    return out


def split(items: Sequence[Item]) -> tuple[list[Item], list[Item]]:
    """Calibration half / report half, per class by alternating position."""
    halves: tuple[list[Item], list[Item]] = ([], [])
    seen = {True: 0, False: 0}
    for item in items:
        halves[seen[item.label] % 2].append(item)
        seen[item.label] += 1
    return halves


def iter_run_lines(runs: str | None) -> list[dict[str, Any]]:
    if not runs:
        return []
    lines = []
    for path in sorted(Path(runs).expanduser().glob("*/*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line of a run that is being written
            if isinstance(record, dict) and "id" in record:
                record["_run"] = f"{path.parent.name}/{path.stem}"
                lines.append(record)
    return lines


# --------------------------------------------------------------------------------------------
# Scoring (cached)
# --------------------------------------------------------------------------------------------


def cached_score(cache: LLMCallCache, item: Item, kind: str, compute: Callable[[], Any]) -> Any:
    """The score ``kind`` of ``item`` from the cache, else computed and stored."""
    return cache.memo(f"rrcp:{kind}:{item.key}", compute, kind=f"rrcp.{kind}").value


class Scorer:
    """Retrieval, MaxSim token relevance and lexical s_i of a question (no chat model)."""

    def __init__(self, args: argparse.Namespace, config: Config, store: CorpusStore) -> None:
        self.args = args
        self.config = config
        self.store = store
        self.first_stage = HybridFirstStage(store, rrf_k=config.retrieval.rrf_k)
        self.relevance = MaxSimTokenRelevance(store.embedder, temperature=args.tau)
        self.lexical = LexicalAnswerEvaluator()

    def base(self, item: Item, cache: LLMCallCache) -> dict[str, Any]:
        """Retrieval + token similarities + lexical s_i (cheap)."""

        def compute() -> dict[str, Any]:
            docs = self.first_stage.search(item.question, self.args.k)[: self.args.k]
            passages = [d.text[: self.args.passage_chars] for d in docs]
            words, sims = self.relevance.raw_similarities(item.question, passages)
            lexical = self.lexical.answer_scores(item.question, item.references, passages)
            return {
                "doc_ids": [d.id for d in docs],
                "words": words,
                "sims": sims.round(5).tolist(),
                "lexical": lexical.round(5).tolist(),
            }

        return cached_score(cache, item, "base", compute)

    def lexical_full(self, item: Item, cache: LLMCallCache) -> list[float]:
        """Lexical s_i on the whole passages (containment is free; the cut to
        ``--passage-chars`` only exists to bound LLM prompts)."""

        def compute() -> list[float]:
            base = self.base(item, cache)
            passages = [self.store.chunk(i).text for i in base["doc_ids"]]
            return self.lexical.answer_scores(item.question, item.references, passages).tolist()

        return cached_score(cache, item, "lexical_full", compute)


class LLMScores:
    """The LLM scores of one chat model (``spec``), cached per (model, question).

    ``evaluator`` (s_i of the first ``--llm-k`` passages) and ``baseline`` (P(yes) of the
    prompted classifier) compute and store a missing score, loading the model on first use;
    with ``compute=False`` they only read the cache (None when the score is not there), so a
    report can be written while another process is still scoring.
    """

    def __init__(self, spec: str, scorer: Scorer, cache: LLMCallCache) -> None:
        self.spec = spec
        self.scorer = scorer
        self.cache = cache
        args = scorer.args
        self.evaluator_kind = f"llm_k{args.llm_k}_c{args.passage_chars}@{spec}"
        self.baseline_kind = f"llm_baseline@{spec}"
        self._chat: Any = None

    @property
    def chat(self) -> Any:
        if self._chat is None:
            from rag_complexity_agents.models.chat import load_chat_model

            models = self.scorer.config.models
            self._chat = load_chat_model(self.spec, models, models.home)
        return self._chat

    def _score(
        self, item: Item, kind: str, compute: Callable[[], Any], *, live: bool
    ) -> CacheEntry | None:
        if live:
            return self.cache.memo(f"rrcp:{kind}:{item.key}", compute, kind=f"rrcp.{kind}")
        return self.cache.get(f"rrcp:{kind}:{item.key}")

    def evaluator(self, item: Item, *, compute: bool = True) -> CacheEntry | None:
        """s_i of the first ``--llm-k`` retrieved passages (list of floats)."""

        def run() -> list[float]:
            args, store = self.scorer.args, self.scorer.store
            base = self.scorer.base(item, self.cache)
            passages = [
                store.chunk(i).text[: args.passage_chars] for i in base["doc_ids"][: args.llm_k]
            ]
            evaluator = LLMAnswerEvaluator(self.chat, passage_chars=args.passage_chars)
            return evaluator.answer_scores(item.question, item.references, passages).tolist()

        return self._score(item, self.evaluator_kind, run, live=compute)

    def baseline(self, item: Item, *, compute: bool = True) -> CacheEntry | None:
        """P(yes) of the prompted complexity classifier (a float)."""

        def run() -> float:
            return LLMComplexityClassifier(self.chat).probability(item.question)

        return self._score(item, self.baseline_kind, run, live=compute)


def s_d(sims: Sequence[Sequence[float]], tau: float, k: int) -> float:
    """S_D from raw MaxSim cosines (softmax with temperature tau), first k documents."""
    m = np.asarray(sims, dtype=np.float64)[:k]
    if m.size == 0:
        return completeness_score(m)[0]
    logits = m / tau
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    return completeness_score(weights / weights.sum(axis=1, keepdims=True))[0]


def scored(base: dict[str, Any], s: Sequence[float], label: bool, tau: float, k: int) -> Scored:
    return Scored(max(s[:k], default=0.0), s_d(base["sims"], tau, k), label)


# --------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------


def evaluate_rows(
    dataset: str, evaluator: str, cal: list[Scored], test: list[Scored]
) -> list[dict[str, Any]]:
    """Rows per method, cross-fitted: thresholds grid-searched on ``cal`` predict ``test``
    and those searched on ``test`` predict ``cal``, so every question is reported once, out
    of sample. ``T_ans``/``T_com`` are the thresholds of the first fold, ``folds`` both."""
    rows = []
    both = test + cal
    gold = [x.label for x in both]
    right: dict[str, list[float]] = {}
    for method in METHODS:
        c, c_swapped = calibrate(cal, method), calibrate(test, method)
        predicted = predict(test, c.T_ans, c.T_com, method)
        predicted += predict(cal, c_swapped.T_ans, c_swapped.T_com, method)
        right[method] = [float(p == g) for p, g in zip(predicted, gold, strict=True)]
        m = classification_metrics(predicted, gold)
        paper_m = classification_metrics(predict(both, 0.15, 0.80, method), gold)
        rows.append(
            {
                "dataset": dataset,
                "method": method,
                "evaluator": evaluator,
                "accuracy": round(m["accuracy"], 4),
                "f1": round(m["f1"], 4),
                "precision": round(m["precision"], 4),
                "recall": round(m["recall"], 4),
                "n_test": len(both),
                "T_ans": round(c.T_ans, 4),
                "T_com": round(c.T_com, 4),
                "folds": [
                    {"T_ans": round(f.T_ans, 4), "T_com": round(f.T_com, 4), "f1": round(f.f1, 4)}
                    for f in (c, c_swapped)
                ],
                "paper_thresholds": {
                    "accuracy": round(paper_m["accuracy"], 4),
                    "f1": round(paper_m["f1"], 4),
                },
            }
        )
    # does completeness add to answerability: accuracy of rrcp minus ans_only, paired
    gain = paired_difference(right["rrcp"], right["ans_only"]) if both else None
    for row in rows:
        if row["method"] == "rrcp" and gain is not None:
            row["accuracy_vs_ans_only"] = {
                "delta": round(gain.mean, 4),
                "ci_low": round(gain.lo, 4),
                "ci_high": round(gain.hi, 4),
            }
    return rows


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    a, b = np.asarray(x, float), np.asarray(y, float)
    if len(a) < 3 or a.std() == 0 or b.std() == 0:
        return None
    return round(float(np.corrcoef(a, b)[0, 1]), 4)


def correlation_rows(
    run_lines: list[dict[str, Any]],
    items_by_id: dict[str, tuple[Item, dict[str, Any]]],
    thresholds: dict[str, tuple[float, float]],
    args: argparse.Namespace,
) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for line in run_lines:
        groups.setdefault(line["_run"], []).append(line)
    rows = []
    for run, lines in sorted(groups.items()):
        complex_flags, correct, scores = [], [], []
        dataset = lines[0].get("dataset", "")
        t_ans, t_com = thresholds.get(dataset, (0.15, 0.80))
        for line in lines:
            found = items_by_id.get(f"{line.get('dataset')}:{line['id']}")
            if found is None or line.get("error"):
                continue
            item, base = found
            x = scored(base, base["lexical"], item.label, args.tau, args.k)
            flag = predict([x], t_ans, t_com, "rrcp")[0]
            complex_flags.append(float(flag))
            correct.append(float((line.get("metrics") or {}).get("cover_em", 0.0)))
            scores.append(0.5 * ((1 - x.max_s) + x.S_D))
        if not correct:
            continue
        c = [ok for ok, f in zip(correct, complex_flags, strict=True) if f]
        nc = [ok for ok, f in zip(correct, complex_flags, strict=True) if not f]
        rows.append(
            {
                "run": run,
                "dataset": dataset,
                "strategy": lines[0].get("strategy"),
                "n": len(correct),
                "n_complex": len(c),
                "acc_complex": round(sum(c) / len(c), 4) if c else None,
                "acc_not_complex": round(sum(nc) / len(nc), 4) if nc else None,
                "pcc_complex_vs_correct": pearson(complex_flags, correct),
                "pcc_rc_score_vs_correct": pearson(scores, correct),
                "T_ans": t_ans,
                "T_com": t_com,
            }
        )
    return rows


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


def gain(entry: dict[str, float] | None) -> str:
    """A paired accuracy difference in points with its interval, or a dash."""
    if not entry:
        return "–"
    return (
        f"{entry['delta'] * 100:+.1f} [{entry['ci_low'] * 100:+.1f}, {entry['ci_high'] * 100:+.1f}]"
    )


def fmt(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def render_markdown(result: dict[str, Any], analysis: str) -> str:
    lines = [
        "# RRCP benchmark: retrieval-complexity classification and RC vs answer correctness",
        "",
        f"Corpus `{result['corpus']['collection']}` ({result['corpus']['distinct_paragraphs']} "
        f"distinct paragraphs); hybrid BM25 + MiniLM first stage, k = {result['settings']['k']} "
        f"(LLM evaluator: first {result['settings']['llm_k']}); passages cut to "
        f"{result['settings']['passage_chars']} characters; MaxSim token relevance, "
        f"τ = {result['settings']['tau']}; chat model(s) "
        f"{', '.join(f'`{m}`' for m in result['settings']['models']) or '–'}; "
        f"{result['machine']}; {result['date']}.",
        "",
        "Reproduce (resumable; scores are cached):",
        "",
        "```bash",
        result["command"],
        "```",
        "",
        "## Complex-question identification",
        "",
        "Positives: the multi-hop dataset's questions; negatives: for `musique_subq` (the "
        "paper's task) MuSiQue's first gold sub-questions, for the other rows SQuAD questions "
        "(gold paragraph in the corpus). "
        "Thresholds grid-searched for F1 on one half of the questions predict the other half "
        "and the other way round (two folds), so `n` counts every question, each predicted "
        "out of sample; T_ans / T_com: the first fold's. `paper T` = the paper's thresholds "
        "(0.15, 0.80) without calibration. The LLM baseline uses P(yes) >= 0.5. LLM rows "
        "of a run still in progress cover the questions scored so far (`n of planned`); "
        "s/q: seconds per question of the LLM evaluator (all its passages; shared machine, "
        "an upper bound). `Δ acc vs ans_only`: the rrcp row's accuracy minus Answerability "
        "alone on the same questions, paired bootstrap 95% interval (does completeness add?). "
        "The paper's Table 3 separates one-hop from multi-hop questions within MuSiQue and "
        "HotpotQA with a GenEval T5-XXL evaluator; only `musique_subq` poses that task. The "
        "rows with SQuAD negatives can also be told apart by dataset style.",
        "",
        "| dataset | evaluator | model | method | n | accuracy | Δ acc vs ans_only | F1 | T_ans "
        "| T_com | paper T: acc / F1 | s/q |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        pt = row.get("paper_thresholds") or {}
        n = str(row["n_test"])
        if row.get("n_test_planned", row["n_test"]) > row["n_test"]:
            n += f" of {row['n_test_planned']}"
        model = str(row.get("model", "–")).removeprefix("llamacpp:")
        lines.append(
            f"| {row['dataset']} | {row.get('evaluator', '–')} | {model} | {row['method']} | "
            f"{n} | {fmt(row['accuracy'])} | {gain(row.get('accuracy_vs_ans_only'))} | "
            f"{fmt(row['f1'])} | {fmt(row.get('T_ans'))} | {fmt(row.get('T_com'))} | "
            f"{fmt(pt.get('accuracy'))} / {fmt(pt.get('f1'))} | "
            f"{fmt(row.get('seconds_per_question'))} |"
        )
    lines += [
        "",
        "## RC vs answer correctness of the end-to-end runs",
        "",
        "RRCP with the lexical evaluator and the thresholds calibrated on the dataset's row; "
        "correctness = cover-EM of the run's prediction. PCC: Pearson correlation of "
        "correctness with the complex flag and with the continuous RC score "
        "(1 - max s_i + S_D) / 2 (negative = more complex, less often correct). With the "
        "lexical evaluator and the calibrated T_ans of 1.0, a question is complex only when no "
        "top-5 passage contains a gold answer whole, so its link to cover-EM (the gold answer "
        "in the prediction) is near circular; not the paper's Table 4 setting. A row is a run "
        "file found when the page was computed, whatever its n.",
        "",
        "| run | n | complex | acc complex | acc not complex | PCC flag | PCC score |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["correlation"]:
        lines.append(
            f"| {row['run']} | {row['n']} | {row['n_complex']} | {fmt(row['acc_complex'])} | "
            f"{fmt(row['acc_not_complex'])} | {fmt(row['pcc_complex_vs_correct'])} | "
            f"{fmt(row['pcc_rc_score_vs_correct'])} |"
        )
    if not result["correlation"]:
        lines.append("| (no run files found) | | | | | | |")
    lines += [
        "",
        ANALYSIS_START,
        analysis.strip() or "_Analysis pending._",
        ANALYSIS_END,
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    cache = default_home() / "benchmarks"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO / ".." / "shared" / "data"))
    parser.add_argument("--n", type=int, default=100, help="questions per class per dataset")
    parser.add_argument(
        "--n-llm",
        type=int,
        default=100,
        help="per class, LLM evaluator (at most; musique_subq has 91)",
    )
    parser.add_argument("--n-baseline", type=int, default=50, help="per class, LLM baseline")
    parser.add_argument("--k", type=int, default=5, help="documents retrieved (|D|)")
    parser.add_argument("--llm-k", type=int, default=5, help="documents the LLM judges")
    parser.add_argument("--passage-chars", type=int, default=400)
    parser.add_argument("--tau", type=float, default=0.05, help="MaxSim softmax temperature")
    parser.add_argument(
        "--model",
        default="llamacpp:qwen2.5-0.5b",
        help="chat model(s) of the LLM rows, comma-separated (scored one after the other)",
    )
    parser.add_argument("--no-llm", action="store_true", help="lexical evaluator only")
    parser.add_argument(
        "--llm-rows",
        default="musique_subq",
        help="the rows scored with the LLM evaluator (comma-separated; default: the paper's "
        "within-MuSiQue task; an empty value: every row)",
    )
    parser.add_argument(
        "--cached-only",
        action="store_true",
        help="score nothing with an LLM: LLM rows from the scores cached so far (while a run "
        "is still going, or after it was stopped)",
    )
    parser.add_argument(
        "--write-every",
        type=int,
        default=40,
        help="rewrite the results after this many newly LLM-scored questions",
    )
    parser.add_argument("--cache", default=str(cache))
    parser.add_argument("--runs", default=str(cache / "end_to_end_runs"))
    parser.add_argument(
        "--run-questions",
        type=int,
        default=134,
        help="first questions of each multi-hop file pooled into the corpus for the "
        "correlation with the end-to-end runs (fixed, so the corpus does not follow the runs)",
    )
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "rrcp.json"))
    return parser.parse_args(list(argv))


def progress(label: str, done: int, total: int, started: float) -> None:
    if done == total or done % 10 == 0:
        rate = (time.time() - started) / max(done, 1)
        print(f"  {label}: {done}/{total} ({rate:.1f} s each)", flush=True)


def run(
    args: argparse.Namespace, argv: Sequence[str], write: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """Score everything (cached), calling ``write`` with the results so far at checkpoints of
    the LLM scoring; returns the final results."""
    config = Config().with_overrides(
        {
            "corpus.home": args.cache,
            "corpus.chunk_size": 4096,  # one chunk per paragraph
            "corpus.chunk_overlap": 0,
            "graph.k": 8,
        }
    )
    rows_items, corpus_records = select(args)
    pooled = build_pooled_corpus(corpus_records)
    name = f"rrcp-{pooled.fingerprint}"
    store = CorpusStore.open_or_create(name, config)
    if len(store) < len(pooled):
        print(f"indexing {len(pooled)} paragraphs into {store.directory}", flush=True)
        store.ingest(pooled.documents, progress=True)
    cache = LLMCallCache(Path(args.cache) / "rrcp" / pooled.fingerprint / "scores.sqlite")
    scorer = Scorer(args, config, store)

    unique = {i.key: i for items in rows_items.values() for i in items}
    run_lines = iter_run_lines(args.runs)
    records_by_key = {f"{r.dataset}:{r.id}": r for r in corpus_records}
    for line in run_lines:  # questions of the end-to-end runs
        key = f"{line.get('dataset')}:{line['id']}"
        if key not in unique and key in records_by_key:
            r = records_by_key[key]
            unique[key] = Item(key, r.dataset, r.question, r.answers, True)
    started = time.time()
    bases = {}
    for n, item in enumerate(unique.values(), start=1):
        bases[item.key] = dict(scorer.base(item, cache))
        bases[item.key]["lexical"] = scorer.lexical_full(item, cache)
        progress("retrieval + relevance + lexical", n, len(unique), started)

    result_rows: list[dict[str, Any]] = []
    thresholds: dict[str, tuple[float, float]] = {}
    for dataset, items in rows_items.items():
        cal, test = split(items)
        to_s = [
            scored(bases[i.key], bases[i.key]["lexical"], i.label, args.tau, args.k) for i in cal
        ]
        te_s = [
            scored(bases[i.key], bases[i.key]["lexical"], i.label, args.tau, args.k) for i in test
        ]
        rows = evaluate_rows(dataset, "lexical", to_s, te_s)
        result_rows += rows
        rrcp_row = next(r for r in rows if r["method"] == "rrcp")
        thresholds[dataset] = (rrcp_row["T_ans"], rrcp_row["T_com"])

    models = [] if args.no_llm else _csv(args.model)
    scores = {spec: LLMScores(spec, scorer, cache) for spec in models}

    def report() -> dict[str, Any]:
        """Every row from what is scored so far (LLM rows: the cached prefix of each set)."""
        llm = [row for spec in models for row in llm_rows(rows_items, bases, scores[spec], args)]
        items_by_id = {key: (item, bases[key]) for key, item in unique.items()}
        return {
            "rows": result_rows + llm,
            "correlation": correlation_rows(run_lines, items_by_id, thresholds, args),
            "corpus": {
                "collection": name,
                "distinct_paragraphs": len(pooled),
                "raw_paragraphs": pooled.raw_paragraphs,
            },
            "settings": {
                "k": args.k,
                "llm_k": args.llm_k,
                "n_per_class": args.n,
                "n_llm_per_class": args.n_llm,
                "n_baseline_per_class": args.n_baseline,
                "passage_chars": args.passage_chars,
                "tau": args.tau,
                "models": models,
                "retrieval": "hybrid (BM25 + MiniLM, RRF)",
                "relevance": scorer.relevance.name,
            },
            "command": command(argv),
            "machine": machine(),
            "date": time.strftime("%Y-%m-%d"),
        }

    if not args.cached_only:
        for spec in models:
            score_with_llm(
                scores[spec], rows_items, args, lambda: write(report()), every=args.write_every
            )
    return report()


def command(argv: Sequence[str]) -> str:
    """The command that runs (or continues) the benchmark: ``argv`` without --cached-only."""
    return " ".join(
        [
            "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RCA_MODELS__N_THREADS=1 OMP_NUM_THREADS=1 "
            ".venv/bin/python benchmarks/rrcp.py",
            *(arg for arg in argv if arg != "--cached-only"),
        ]
    ).strip()


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def llm_sets(
    rows_items: dict[str, list[Item]], args: argparse.Namespace
) -> dict[str, tuple[list[Item], list[Item]]]:
    """Per dataset (those of ``--llm-rows`` when given): the LLM evaluator's questions (the
    first ``--n-llm`` of each class) and the LLM baseline's (the first ``--n-baseline`` of
    each class)."""
    sets = {
        dataset: (
            subset_per_class(items, args.n_llm),
            subset_per_class(items, args.n_baseline),
        )
        for dataset, items in rows_items.items()
    }
    if not args.llm_rows:
        return sets
    unknown = set(_csv(args.llm_rows)) - set(sets)
    if unknown:
        raise SystemExit(f"--llm-rows: no row {sorted(unknown)}; rows: {', '.join(sets)}")
    return {dataset: sets[dataset] for dataset in _csv(args.llm_rows)}


def round_robin(lists: Sequence[Sequence[Item]]) -> list[Item]:
    """The distinct items of ``lists`` in round-robin order (position 0 of every list, then
    position 1, ...), so that a run stopped early has covered every dataset alike."""
    out: dict[str, Item] = {}
    for position in range(max((len(items) for items in lists), default=0)):
        for items in lists:
            if position < len(items):
                out.setdefault(items[position].key, items[position])
    return list(out.values())


def score_with_llm(
    llm: LLMScores,
    rows_items: dict[str, list[Item]],
    args: argparse.Namespace,
    checkpoint: Callable[[], None],
    *,
    every: int,
) -> None:
    """Score (and cache) the LLM baseline and then the LLM evaluator questions of every
    dataset with one model; ``checkpoint`` (write the results so far) runs after every
    ``every`` newly scored questions and at the end."""
    sets = llm_sets(rows_items, args)
    steps: list[tuple[str, list[Item], Callable[[Item], CacheEntry | None]]] = [
        ("llm baseline", round_robin([b for _, b in sets.values()]), llm.baseline),
        ("llm evaluator", round_robin([e for e, _ in sets.values()]), llm.evaluator),
    ]
    for label, items, score in steps:
        started, computed = time.time(), 0
        for done, item in enumerate(items, start=1):
            entry = score(item)
            if entry is not None and not entry.hit:
                computed += 1
                if computed % every == 0:
                    checkpoint()
            if done == len(items) or done <= 5 or (computed and done % 10 == 0):
                rate = (time.time() - started) / max(computed, 1)
                load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                print(
                    f"  {time.strftime('%H:%M:%S')} {llm.spec} {label}: {done}/{len(items)} "
                    f"({computed} scored now, {rate:.1f} s each; load {load})",
                    flush=True,
                )
    checkpoint()


def cached_prefix(
    items: Sequence[Item], score: Callable[..., CacheEntry | None]
) -> list[CacheEntry]:
    """The cached scores of ``items`` up to the first one not scored yet."""
    out = []
    for item in items:
        entry = score(item, compute=False)
        if entry is None:
            break
        out.append(entry)
    return out


def llm_rows(
    rows_items: dict[str, list[Item]],
    bases: dict[str, dict[str, Any]],
    llm: LLMScores,
    args: argparse.Namespace,
) -> list[dict[str, Any]]:
    """The LLM baseline and LLM evaluator rows of one model from its cached scores (a run
    still in progress gives rows over the questions scored so far: ``n_test`` <
    ``n_test_planned``)."""
    rows: list[dict[str, Any]] = []
    for dataset, (evaluated, baselined) in llm_sets(rows_items, args).items():
        probs = [float(e.value) for e in cached_prefix(baselined, llm.baseline)]
        if probs:
            test = baselined[: len(probs)]
            m = classification_metrics([p >= 0.5 for p in probs], [i.label for i in test])
            rows.append(
                {
                    "dataset": dataset,
                    "method": "llm_baseline",
                    "evaluator": "llm",
                    "model": llm.spec,
                    "accuracy": round(m["accuracy"], 4),
                    "f1": round(m["f1"], 4),
                    "precision": round(m["precision"], 4),
                    "recall": round(m["recall"], 4),
                    "n_test": len(test),
                    "n_test_planned": len(baselined),
                    "mean_p_yes": {
                        "complex": mean([p for p, i in zip(probs, test, strict=True) if i.label]),
                        "not_complex": mean(
                            [p for p, i in zip(probs, test, strict=True) if not i.label]
                        ),
                    },
                }
            )
        entries = cached_prefix(evaluated, llm.evaluator)
        done = evaluated[: len(entries)]
        cal, test = split(done)
        if len(cal) < 2 or len(test) < 2:
            continue
        s = {item.key: entry.value for item, entry in zip(done, entries, strict=True)}
        cal_s = [scored(bases[i.key], s[i.key], i.label, args.tau, args.llm_k) for i in cal]
        test_s = [scored(bases[i.key], s[i.key], i.label, args.tau, args.llm_k) for i in test]
        extra = {
            "model": llm.spec,
            "n_test_planned": len(evaluated),
            "seconds_per_question": mean([e.seconds for e in entries]),
        }
        rows += [{**row, **extra} for row in evaluate_rows(dataset, "llm", cal_s, test_s)]
    return rows


def mean(values: Sequence[float]) -> float | None:
    return round(float(np.mean(values)), 4) if values else None


def subset_per_class(items: Sequence[Item], n: int) -> list[Item]:
    """The first n items of each class, in the original (interleaved) order."""
    counts = {True: 0, False: 0}
    out = []
    for item in items:
        if counts[item.label] < n:
            out.append(item)
            counts[item.label] += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass
    out = Path(args.out)
    try:
        result = run(args, argv, lambda partial: write_results(partial, out, render_markdown))
    except RCAError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to continue", file=sys.stderr)
        return 130
    write_results(result, out, render_markdown)
    if not all(math.isfinite(r["f1"]) for r in result["rows"]):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
