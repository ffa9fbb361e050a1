"""Adaptive-RAG benchmark: the complexity classifier and the router's cost/quality.

Part (i), classifier: dataset-inductive-bias labels (single-hop SQuAD / NQ-open / TriviaQA → B,
multi-hop MuSiQue / 2WikiMultiHopQA / HotpotQA → C) for up to ``--clf-per-dataset``
questions per dataset, split by a seeded shuffle into train / held-apart test
(``--test-share``); questions of the mixed sample below are excluded from both. Compared:
the fine-tuned packaged MiniLM (``minilm``), the logistic head on the retrieval embedder
(``head``; ``--write-head`` writes it into the package as the shipped router), TF-IDF +
logistic regression (``tfidf``), the heuristic and the zero-shot chat-model classifier
(``llm``, on the first ``--llm-test`` test questions, since it costs one LLM call each).
Accuracy and macro-F1 over the classes present in the test labels.

Part (ii), routing: a mixed sample of ``--per-side`` one-fact questions (SQuAD, which ships
its gold paragraph, one question per article; NQ-open and TriviaQA, which ship none, so only
the model's own knowledge answers them; evenly spaced, a third each) and ``--per-side``
multi-hop questions (MuSiQue, 2WikiMultiHopQA, HotpotQA distractor, evenly spaced, a third
each). The
corpus is the pooled paragraphs of the sampled questions. A = ``no_retrieval``, B =
``single_step``, C = ``--c-strategy`` (default: the default pipeline ``plan_execute_mer``, the
end-to-end benchmark's best: sub-questions planned first, first-stage retrieval, MER writes
the final answer; the cpu preset; the chat model: ``--model``, default the packaged 1.5B)
each run through the evaluation harness over the whole sample (resumable run files, on-disk
LLM cache). The adaptive and oracle rows are then *computed*
from those per-question results, without running anything again:

* adaptive: the classifier (trained on the part-(i) training split only) picks a route per
  question, with the router's threshold escalation (:func:`decide_route`); the question gets
  the chosen strategy's answer and cost, plus the classifier's own cost (its measured wall
  time per question, and one LLM call per question for the zero-shot LLM classifier);
* oracle: the route is the question's automatic label (:func:`auto_label`: the simplest
  strategy that answered correctly, else the dataset's bias label), with no classifier cost.

Part (iii), outcome labels as the paper trains its classifier: the first
``--label-per-dataset`` questions of each dataset in part (i)'s training split (then its test
split, for a dataset short of questions), over their pooled paragraphs; A and B run on all
of them, C on those neither answered (the label is the simplest strategy that answered, so C
decides only there), labelled by :func:`auto_label`.
MiniLM, the head and TF-IDF trained on these labels (``+outcome``) join the routing rows, and
every classifier's routes on the mixed sample are scored against its outcome labels.

Run from the repository root (resumable; ``--runs-only`` stops after the harness runs)::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \\
        .venv/bin/python benchmarks/adaptive.py --data ../shared/data

Writes ``benchmarks/results/adaptive.json`` (``{"classifier": [{"model", "accuracy",
"macro_f1", ...}], "rows": [{"strategy", "n", "cover_em", "f1", "llm_calls",
"retrieval_calls", "seconds", ...}], ...}``) and ``adaptive.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

from _common import ANALYSIS_END, ANALYSIS_START, REPO, machine, read_analysis

from rag_complexity_agents.config import Config, default_home
from rag_complexity_agents.config.pipelines import DEFAULT_PIPELINE, PIPELINES
from rag_complexity_agents.corpus.store import CorpusStore
from rag_complexity_agents.errors import RCAError
from rag_complexity_agents.eval.datasets import (
    QARecord,
    build_pooled_corpus,
    load_records,
    resolve_dataset,
)
from rag_complexity_agents.eval.harness import evaluate
from rag_complexity_agents.eval.runner import read_run
from rag_complexity_agents.eval.strategies import EvalComponents
from rag_complexity_agents.models.cache import LLMCallCache, open_llm_cache

SINGLE_HOP_FILES = {"squad": "squad", "nq_open": "nq_open", "triviaqa": "triviaqa"}
MULTI_HOP_FILES = {
    "musique": "musique",
    "2wikimultihopqa": "2wikimultihopqa",
    "hotpotqa": "hotpotqa",
}
ROUTES = ("A", "B", "C")
THRESHOLDS = (0.0, 0.6, 0.8, 0.9, 0.95)


# --------------------------------------------------------------------------------------------
# Samples
# --------------------------------------------------------------------------------------------


def _spread(items: Sequence[Any], n: int) -> list[Any]:
    """``n`` items evenly spaced over ``items`` (deterministic; all when fewer)."""
    if n >= len(items):
        return list(items)
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def raw_lines(path: Path) -> dict[str, dict[str, Any]]:
    """Question id → the raw JSON object of a dataset file."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            obj = json.loads(line)
            out[str(obj["id"])] = obj
    return out


def mixed_sample(data: str, per_side: int) -> list[tuple[QARecord, dict[str, Any]]]:
    """(record, raw JSON object) pairs: ``per_side`` one-fact questions (SQuAD, NQ-open,
    TriviaQA, a third each) + ``per_side`` multi-hop questions (MuSiQue, 2Wiki, HotpotQA)."""
    picked: list[tuple[QARecord, dict[str, Any]]] = []

    def shares(names: Sequence[str]) -> list[int]:
        k = len(names)
        return [per_side // k + (1 if i < per_side % k else 0) for i in range(k)]

    for name, share in zip(SINGLE_HOP_FILES, shares(list(SINGLE_HOP_FILES)), strict=True):
        path = resolve_dataset(SINGLE_HOP_FILES[name], data)
        records = load_records(path)
        raw = raw_lines(path)
        if name == "squad":  # the first question of each article, then evenly spaced articles
            by_article: dict[str, QARecord] = {}
            for record in records:
                by_article.setdefault(str(raw[record.id].get("title")), record)
            records = list(by_article.values())
        picked += [(r, raw[r.id]) for r in _spread(records, share)]

    for name, share in zip(MULTI_HOP_FILES, shares(list(MULTI_HOP_FILES)), strict=True):
        path = resolve_dataset(MULTI_HOP_FILES[name], data)
        records = [r for r in load_records(path) if r.paragraphs and r.supporting_ids]
        raw = raw_lines(path)
        picked += [(r, raw[r.id]) for r in _spread(records, share)]
    return picked


def write_mixed_file(
    pairs: Sequence[tuple[QARecord, dict[str, Any]]], cache: Path, kind: str = "mixed"
) -> Path:
    """A sample as one JSONL file of the shared schema, in the cache (not the repo)."""
    ids = "\n".join(r.id for r, _ in pairs)
    digest = hashlib.sha256(ids.encode()).hexdigest()[:10]
    path = cache / "adaptive" / f"adaptive_{kind}_{digest}.jsonl"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(json.dumps(raw, ensure_ascii=False) + "\n" for _, raw in pairs)
        path.write_text(body, encoding="utf-8")
    return path


Item = tuple[str, str, str, str]
"""(question, bias label, dataset, question id)."""


def classifier_split(
    data: str, per_dataset: int, test_share: float, exclude: set[str], seed: int
) -> tuple[list[Item], list[Item]]:
    """Items for train and held-apart test."""
    from rag_complexity_agents.complexity.adaptive.labels import bias_label

    rng = random.Random(seed)
    train: list[Item] = []
    test: list[Item] = []
    seen: set[str] = set()  # repeated questions (e.g. SQuAD) would leak across the split
    for name in (*SINGLE_HOP_FILES, *MULTI_HOP_FILES):
        records = []
        for record in load_records(resolve_dataset(name, data)):
            key = " ".join(record.question.casefold().split())
            if record.id not in exclude and key not in seen:
                seen.add(key)
                records.append(record)
        rng.shuffle(records)
        records = records[:per_dataset]
        cut = round(len(records) * (1 - test_share))
        for i, record in enumerate(records):
            label = bias_label(record.dataset)
            assert label is not None, record.dataset
            item = (record.question, label, record.dataset, record.id)
            (train if i < cut else test).append(item)
    rng.shuffle(train)
    rng.shuffle(test)
    return train, test


# --------------------------------------------------------------------------------------------
# Harness runs
# --------------------------------------------------------------------------------------------


def build_collection(records: Sequence[QARecord], config: Config) -> tuple[str, dict[str, Any]]:
    pooled = build_pooled_corpus(records)
    name = f"adaptive-mixed-{pooled.fingerprint}"
    store = CorpusStore.open_or_create(name, config)
    if len(store) < len(pooled):
        print(f"indexing {len(pooled)} paragraphs into {store.directory}", flush=True)
        store.ingest(pooled.documents, progress=True)
    info = {
        "collection": name,
        "raw_paragraphs": pooled.raw_paragraphs,
        "distinct_paragraphs": len(pooled),
        "datasets": dict(pooled.per_dataset),
    }
    return name, info


def make_config(args: argparse.Namespace) -> Config:
    overrides: dict[str, Any] = {
        "models.chat": args.model,
        "corpus.home": args.cache,
        "corpus.chunk_size": 4096,  # one chunk per paragraph
        "corpus.chunk_overlap": 0,
        "graph.k": args.graph_k,
        "eval.concurrency": 1,
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


def run_strategies(
    args: argparse.Namespace, config: Config, mixed: Path, strategies: dict[str, str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Route → {question id → run-file line} for the three strategies (resumable)."""
    runs_dir = Path(args.cache) / "adaptive_runs" / re.sub(r"[^A-Za-z0-9_.-]+", "-", args.model)
    parts = EvalComponents(config, llm_cache=open_llm_cache(config))
    out: dict[str, dict[str, dict[str, Any]]] = {}
    wanted = set(load_records_ids(mixed))
    for route, strategy in strategies.items():
        if args.routes and route not in args.routes:
            continue
        target = runs_dir / f"{mixed.stem}__{strategy}.jsonl"
        done = {line["id"] for line in read_run(target)} if target.is_file() else set()
        print(f"== {route} = {strategy} → {target} ({len(done & wanted)} done)", flush=True)
        if not wanted <= done and not args.read_only:
            # A finished run file is read as is: the harness's settings fingerprint also
            # covers config sections added later (e.g. by other plugins), which would
            # otherwise refuse to "resume" a run that has nothing left to do.
            evaluate(config, strategy, mixed, out=target, progress=not args.quiet, components=parts)
        out[route] = {line["id"]: line for line in read_run(target)} if target.is_file() else {}
    return out


def load_records_ids(path: Path) -> list[str]:
    return [r.id for r in load_records(path)]


# --------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------


def line_cost(line: dict[str, Any]) -> tuple[float, float, float]:
    """(LLM calls, retrieval calls, seconds) of one run-file line.

    Seconds = wall time + the time LLM-cache hits originally took (as ``eval/report.py``).
    """
    trace = line.get("trace") or {}
    cache = line.get("llm_cache") or {}
    seconds = float(line.get("wall_seconds") or trace.get("seconds") or 0.0)
    seconds += float(cache.get("saved_seconds") or 0.0)
    return (
        float(trace.get("llm_calls") or 0),
        float(trace.get("retrieval_calls") or 0),
        seconds,
    )


def routed_row(
    name: str,
    routes: dict[str, str],
    runs: dict[str, dict[str, dict[str, Any]]],
    ids: Sequence[str],
    *,
    extra_llm: float = 0.0,
    extra_seconds: float = 0.0,
    **info: Any,
) -> dict[str, Any]:
    """Aggregate the lines chosen by ``routes`` (question id → A/B/C) plus per-question costs."""
    em = f1 = calls = retrievals = seconds = 0.0
    for qid in ids:
        line = runs[routes[qid]][qid]
        metrics = line.get("metrics") or {}
        em += float(metrics.get("cover_em") or 0.0)
        f1 += float(metrics.get("f1") or 0.0)
        c, r, s = line_cost(line)
        calls += c + extra_llm
        retrievals += r
        seconds += s + extra_seconds
    n = len(ids)
    counts = {route: sum(1 for q in ids if routes[q] == route) for route in ROUTES}
    return {
        "strategy": name,
        "n": n,
        "cover_em": round(em / n, 4),
        "f1": round(f1 / n, 4),
        "llm_calls": round(calls / n, 3),
        "retrieval_calls": round(retrievals / n, 3),
        "seconds": round(seconds / n, 2),
        "routes": counts,
        **info,
    }


def paired_routes(
    ours: dict[str, str],
    theirs: dict[str, str],
    runs: dict[str, dict[str, dict[str, Any]]],
    ids: Sequence[str],
) -> dict[str, float] | None:
    """cover-EM of the routes ``ours`` minus ``theirs``, paired over ``ids``, in points with
    a bootstrap 95% interval."""
    from rag_complexity_agents.eval.metrics import paired_difference

    def em(routes: dict[str, str]) -> list[float]:
        return [float(runs[routes[q]][q]["metrics"]["cover_em"]) for q in ids]

    gain = paired_difference(em(ours), em(theirs))
    if gain is None:
        return None
    return {
        "delta": round(gain.mean * 100, 1),
        "lo": round(gain.lo * 100, 1),
        "hi": round(gain.hi * 100, 1),
    }


def per_side(
    routes: dict[str, str], runs: dict[str, dict[str, dict[str, Any]]], ids: Sequence[str]
) -> dict[str, float]:
    """cover-EM on the single-hop and multi-hop halves (for the analysis)."""
    out = {}
    for side, names in (("single_hop", SINGLE_HOP_FILES), ("multi_hop", MULTI_HOP_FILES)):
        chosen = [q for q in ids if runs["A"][q]["dataset"] in names]
        if chosen:
            hits = sum(float(runs[routes[q]][q]["metrics"]["cover_em"]) for q in chosen)
            out[side] = round(hits / len(chosen), 4)
    return out


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO / ".." / "shared" / "data"))
    parser.add_argument("--model", default="llamacpp:qwen2.5-coder-1.5b", help="chat model spec")
    parser.add_argument("--per-side", type=int, default=60, help="one-fact (= multi-hop) n")
    parser.add_argument("--c-strategy", default=DEFAULT_PIPELINE, help="harness strategy for C")
    parser.add_argument("--clf-per-dataset", type=int, default=150)
    parser.add_argument(
        "--label-per-dataset",
        type=int,
        default=100,
        help="questions per dataset labelled by running A, B and C (0: none)",
    )
    parser.add_argument("--test-share", type=float, default=0.3)
    parser.add_argument("--llm-test", type=int, default=60, help="test questions for the LLM")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threshold", type=float, default=0.0, help="adaptive.threshold")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--graph-k", type=int, default=100)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--cache", default=str(default_home() / "benchmarks"))
    parser.add_argument("--runs-only", action="store_true", help="stop after the A/B/C runs")
    parser.add_argument("--routes", default="", help="run only these of A,B,C (e.g. C)")
    parser.add_argument("--lr", type=float, default=5e-5, help="MiniLM learning rate")
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="use the run files as they are (no harness runs; partial rows if unfinished)",
    )
    parser.add_argument(
        "--classifiers-only", action="store_true", help="part (i) only (no harness runs)"
    )
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "adaptive.json"))
    parser.add_argument(
        "--write-head",
        action="store_true",
        help="write the embedder head trained on part (i)'s training split into the package",
    )
    parser.add_argument("--quiet", action="store_true")
    return parser.parse_args(list(argv))


def run(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, Any] | None:
    config = make_config(args)
    cache = Path(args.cache)
    pairs = mixed_sample(args.data, args.per_side)
    mixed = write_mixed_file(pairs, cache)
    records = [r for r, _ in pairs]
    ids = [r.id for r in records]
    name, corpus = build_collection(records, config)
    config = config.with_overrides({"collection": name})
    strategies = {"A": "no_retrieval", "B": "single_step", "C": args.c_strategy}
    if args.classifiers_only:
        runs: dict[str, dict[str, dict[str, Any]]] = {}
    else:
        runs = run_strategies(args, config, mixed, strategies)
    labels = None
    if args.label_per_dataset and not args.classifiers_only:
        labels = label_runs(args, config, set(ids))
    if args.runs_only:
        return None
    parts = EvalComponents(config, llm_cache=open_llm_cache(config))
    classifiers, clf_rows, test = classifier_part(args, parts, set(ids))
    result: dict[str, Any] = {
        "model": args.model,
        "classifier": clf_rows,
        "rows": [],
        "split": {"train": args.clf_per_dataset, "test_share": args.test_share, "test_n": test},
    }
    if labels is not None:
        classifiers.update(outcome_classifiers(args, parts, labels[0]))
        result.update(outcome_labels=labels[1], label_per_dataset=args.label_per_dataset)
    if not args.classifiers_only:
        result.update(routing_part(args, config, records, runs, strategies, classifiers))
    result.update(
        corpus=corpus,
        command=" ".join(
            [
                "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/adaptive.py",
                *argv,
            ]
        ).strip(),
        machine=machine(),
        date=time.strftime("%Y-%m-%d"),
    )
    return result


# --------------------------------------------------------------------------------------------
# Part (i): classifiers
# --------------------------------------------------------------------------------------------


class CachedLLMClassifier:
    """The zero-shot LLM classifier with its predictions (and their seconds) in the package's
    LLM call cache, keyed by ``key`` (model and prompt) and the question."""

    llm_calls_per_question = 1

    def __init__(self, inner: Any, cache: LLMCallCache, key: str) -> None:
        self.inner = inner
        self.name = inner.name
        self.cache = cache
        self.key = key
        self.seconds_of: dict[str, float] = {}

    def predict_proba(self, questions: Sequence[str]) -> list[dict[str, float]]:
        out = []
        for question in questions:
            entry = self.cache.memo(
                f"adaptive.llm:{self.key}:{question}",
                lambda q=question: self.inner.predict_proba([q])[0],
                kind="adaptive.llm",
            )
            self.seconds_of[question] = entry.seconds
            out.append(entry.value)
        return out

    def seconds(self, questions: Sequence[str]) -> float:
        """Mean seconds per question the predictions originally took."""
        return sum(self.seconds_of[q] for q in questions) / max(len(questions), 1)


def scores(gold: Sequence[str], pred: Sequence[str]) -> dict[str, Any]:
    """Accuracy, macro-F1 over the classes present in ``gold``, and per-class F1."""
    from sklearn.metrics import f1_score

    present = [label for label in ROUTES if label in set(gold)]
    per_class = f1_score(gold, pred, labels=list(ROUTES), average=None, zero_division=0)
    return {
        "accuracy": round(sum(g == p for g, p in zip(gold, pred, strict=True)) / len(gold), 4),
        "macro_f1": round(
            float(f1_score(gold, pred, labels=present, average="macro", zero_division=0)), 4
        ),
        "f1_per_class": {
            label: (round(float(f), 4) if label in present else None)
            for label, f in zip(ROUTES, per_class, strict=True)
        },
        "predicted": {label: sum(p == label for p in pred) for label in ROUTES},
    }


def classifier_part(
    args: argparse.Namespace, parts: EvalComponents, exclude: set[str]
) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """Train/evaluate the three classifiers; returns them (for routing) and the score rows."""
    from rag_complexity_agents.complexity.adaptive.base import best_label, read_meta
    from rag_complexity_agents.complexity.adaptive.classifier import (
        EmbeddingHeadClassifier,
        HeuristicClassifier,
        LLMZeroShotClassifier,
        TfidfClassifier,
        load_classifier,
    )
    from rag_complexity_agents.complexity.adaptive.head import HEAD_FILE
    from rag_complexity_agents.complexity.adaptive.zero_shot import (
        ZERO_SHOT_EXAMPLES,
        ZERO_SHOT_SYSTEM,
    )

    train, test = classifier_split(
        args.data, args.clf_per_dataset, args.test_share, exclude, args.seed
    )
    train_pairs = [(q, y) for q, y, _, _ in train]
    model_dir = finetuned_minilm(args, train_pairs)
    minilm = load_classifier(model_dir)
    started = time.perf_counter()
    tfidf = TfidfClassifier.train(train_pairs, seed=args.seed)
    tfidf_train_s = time.perf_counter() - started
    started = time.perf_counter()
    head_data = {
        **head_weights(parts, train_pairs),
        "trained": {
            "labels": "dataset bias: SQuAD, NQ-open, TriviaQA → B; MuSiQue, 2Wiki, HotpotQA → C",
            "n": len(train_pairs),
            "command": "benchmarks/adaptive.py --write-head",
        },
    }
    head_train_s = time.perf_counter() - started
    head = EmbeddingHeadClassifier(lambda: parts.embedder, head_data)
    if args.write_head:
        HEAD_FILE.write_text(json.dumps(head_data) + "\n", encoding="utf-8")
        print(f"wrote {HEAD_FILE}", flush=True)
    inner = LLMZeroShotClassifier(parts.chat)
    prompt_key = hashlib.sha256(
        json.dumps([ZERO_SHOT_SYSTEM, ZERO_SHOT_EXAMPLES, inner.calibrate]).encode()
    ).hexdigest()[:8]
    llm = CachedLLMClassifier(
        inner,
        LLMCallCache(Path(args.cache) / "adaptive" / "llm_preds.sqlite"),
        f"{args.model}:{prompt_key}",
    )
    questions = [q for q, _, _, _ in test]
    gold = [y for _, y, _, _ in test]
    rows = []
    for key, clf, n in (
        ("minilm", minilm, len(test)),
        ("head", head, len(test)),
        ("tfidf", tfidf, len(test)),
        ("heuristic", HeuristicClassifier(), len(test)),
        ("llm", llm, min(args.llm_test, len(test))),
    ):
        started = time.perf_counter()
        probs = clf.predict_proba(questions[:n])
        seconds = time.perf_counter() - started
        if key == "llm":
            seconds = llm.seconds(questions[:n]) * n
        pred = [best_label(p) for p in probs]
        row = {
            "model": key,
            "name": clf.name,
            "n": n,
            **scores(gold[:n], pred),
            "seconds_per_question": round(seconds / n, 4),
        }
        if key == "minilm":
            row["train"] = read_meta(model_dir).get("train")
        if key == "tfidf":
            row["train"] = {"n": len(train_pairs), "seconds": round(tfidf_train_s, 2)}
        if key == "head":
            row["train"] = {"n": len(train_pairs), "seconds": round(head_train_s, 2)}
        if key == "llm":
            row["llm_calls_per_question"] = 1
        rows.append(row)
        print(f"classifier {key}: {row}", flush=True)
    if len(test) > args.llm_test:  # the neural/tf-idf scores on the LLM's subset, for a fair view
        n = args.llm_test
        for key, clf in (("minilm", minilm), ("head", head), ("tfidf", tfidf)):
            pred = [best_label(p) for p in clf.predict_proba(questions[:n])]
            rows.append({"model": f"{key}@llm-subset", "n": n, **scores(gold[:n], pred)})
    classifiers = {
        "minilm": minilm,
        "head": head,
        "tfidf": tfidf,
        "heuristic": HeuristicClassifier(),
        "llm": llm,
    }
    return classifiers, rows, len(test)


# --------------------------------------------------------------------------------------------
# Part (iii): outcome labels, as the paper trains its classifier
# --------------------------------------------------------------------------------------------


def label_sample(
    args: argparse.Namespace, exclude: set[str]
) -> list[tuple[QARecord, dict[str, Any]]]:
    """The first ``--label-per-dataset`` questions of each dataset in the classifier's
    training split, then its test split (a dataset short of questions, like MuSiQue, gives
    all it has), in the splits' shuffled order (so a partial run covers every dataset).
    The outcome-trained classifiers are scored on the mixed sample only, never on the
    bias-label test split."""
    train, test = classifier_split(
        args.data, args.clf_per_dataset, args.test_share, exclude, args.seed
    )
    taken: dict[str, int] = {}
    order: list[str] = []
    for _, _, dataset, qid in (*train, *test):
        if taken.get(dataset, 0) < args.label_per_dataset:
            taken[dataset] = taken.get(dataset, 0) + 1
            order.append(qid)
    found: dict[str, tuple[QARecord, dict[str, Any]]] = {}
    for name in (*SINGLE_HOP_FILES, *MULTI_HOP_FILES):
        path = resolve_dataset(name, args.data)
        raw = raw_lines(path)
        found.update((r.id, (r, raw[r.id])) for r in load_records(path))
    return [found[qid] for qid in order]


def label_runs(
    args: argparse.Namespace, config: Config, exclude: set[str]
) -> tuple[list[Any], dict[str, Any]] | None:
    """Run A and B on the labelling sample, C where neither answered (the label is the
    simplest strategy that answers, so C decides only there); None until all have run."""
    from rag_complexity_agents.complexity.adaptive.labels import is_correct, label_from_runs

    pairs = label_sample(args, exclude)
    sample = write_mixed_file(pairs, Path(args.cache), "labels")
    records = [r for r, _ in pairs]
    name, corpus = build_collection(records, config)
    config = config.with_overrides({"collection": name})
    runs = run_strategies(args, config, sample, {"A": "no_retrieval", "B": "single_step"})
    if not all(r.id in runs.get(x, {}) for r in records for x in ("A", "B")):
        return None
    open_ = [
        (r, raw)
        for r, raw in pairs
        if not (is_correct(runs["A"][r.id]) or is_correct(runs["B"][r.id]))
    ]
    hard = write_mixed_file(open_, Path(args.cache), "labels_c")
    runs.update(run_strategies(args, config, hard, {"C": args.c_strategy}))
    if not all(r.id in runs.get("C", {}) for r, _ in open_):
        return None
    items = [{"id": r.id, "dataset": r.dataset, "question": r.question} for r in records]
    labelled = label_from_runs(runs, questions=items)

    def counts(chosen: Sequence[Any]) -> dict[str, int]:
        return {
            **{y: sum(x.label == y for x in chosen) for y in ROUTES},
            "bias": sum(x.source == "bias" for x in chosen),
        }

    info = {
        "n": len(labelled),
        "c_runs": len(open_),
        "corpus": corpus,
        "labels": counts(labelled),
        "by_dataset": {
            d: counts([x for x in labelled if x.dataset == d])
            for d in sorted({x.dataset for x in labelled})
        },
    }
    return labelled, info


def outcome_classifiers(
    args: argparse.Namespace, parts: EvalComponents, labelled: Sequence[Any]
) -> dict[str, Any]:
    """MiniLM, the embedding head and TF-IDF trained on the outcome labels."""
    from rag_complexity_agents.complexity.adaptive.classifier import (
        EmbeddingHeadClassifier,
        TfidfClassifier,
        load_classifier,
    )

    pairs = [(x.question, x.label) for x in labelled]
    head = head_weights(parts, pairs)
    return {
        "minilm+outcome": load_classifier(finetuned_minilm(args, pairs, "outcome")),
        "head+outcome": EmbeddingHeadClassifier(lambda: parts.embedder, head),
        "tfidf+outcome": TfidfClassifier.train(pairs, seed=args.seed),
    }


def finetuned_minilm(args: argparse.Namespace, pairs: Sequence[tuple[str, str]], *tag: str) -> Path:
    """The directory of MiniLM fine-tuned on ``pairs`` (trained once, then reused: the
    directory is named by the pairs, the epochs, the seed and ``tag``)."""
    from rag_complexity_agents.complexity.adaptive.base import META_FILE
    from rag_complexity_agents.complexity.adaptive.training import train_classifier

    key = json.dumps([list(pairs), args.epochs, args.seed, *tag])
    model_dir = (
        Path(args.cache) / "adaptive" / f"minilm_{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    )
    if not (model_dir / META_FILE).is_file():
        print(f"fine-tuning MiniLM on {len(pairs)} questions → {model_dir}", flush=True)
        train_classifier(
            pairs,
            model_dir,
            epochs=args.epochs,
            learning_rate=args.lr,
            seed=args.seed,
            threads=1,
            progress=True,
        )
    return model_dir


def head_weights(parts: EvalComponents, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The logistic head on the retrieval embedder, fitted on ``pairs``."""
    from rag_complexity_agents.complexity.adaptive.head import fit_head

    vectors = parts.embedder.encode([q for q, _ in pairs])
    return {"embedding": parts.config.models.embedding, **fit_head(vectors, [y for _, y in pairs])}


# --------------------------------------------------------------------------------------------
# Part (ii): routing on the mixed sample
# --------------------------------------------------------------------------------------------


def routing_part(
    args: argparse.Namespace,
    config: Config,
    records: Sequence[QARecord],
    runs: dict[str, dict[str, dict[str, Any]]],
    strategies: dict[str, str],
    classifiers: dict[str, Any],
) -> dict[str, Any]:
    from rag_complexity_agents.complexity.adaptive.labels import label_from_runs
    from rag_complexity_agents.complexity.adaptive.router import decide_route

    ids = [r.id for r in records if all(r.id in runs[route] for route in ROUTES)]
    missing = len(records) - len(ids)
    questions = {r.id: r.question for r in records}
    rows = [routed_row(route, dict.fromkeys(ids, route), runs, ids) for route in ROUTES]
    by_side: dict[str, dict[str, float]] = {
        route: per_side(dict.fromkeys(ids, route), runs, ids) for route in ROUTES
    }
    adaptive_rows = []
    routes_of: dict[str, dict[str, str]] = {}
    for key, clf in classifiers.items():
        if key == "llm":  # classify the whole sample once (cached), even if runs are partial
            clf.predict_proba([r.question for r in records])
        texts = [questions[q] for q in ids]
        started = time.perf_counter()
        probs = clf.predict_proba(texts)
        spent = (time.perf_counter() - started) / len(ids)
        if key == "llm":
            spent = clf.seconds(texts)
        routes = {q: decide_route(p, args.threshold)[1] for q, p in zip(ids, probs, strict=True)}
        row = routed_row(
            "adaptive",
            routes,
            runs,
            ids,
            extra_llm=float(clf.llm_calls_per_question),
            extra_seconds=spent,
            classifier=key,
            threshold=args.threshold,
            classifier_seconds=round(spent, 4),
        )
        adaptive_rows.append(row)
        routes_of[key] = routes
        by_side[f"adaptive:{key}"] = per_side(routes, runs, ids)
    minilm_probs = classifiers["minilm"].predict_proba([questions[q] for q in ids])
    sweep = []
    for threshold in THRESHOLDS:
        routes = {q: decide_route(p, threshold)[1] for q, p in zip(ids, minilm_probs, strict=True)}
        sweep.append(routed_row("adaptive", routes, runs, ids, threshold=threshold))
    items = [{"id": q, "dataset": runs["A"][q]["dataset"], "question": questions[q]} for q in ids]
    labelled = {x.id: x for x in label_from_runs(runs, questions=items)}
    oracle_routes = {q: labelled[q].label if q in labelled else "C" for q in ids}
    label_scores = []  # each classifier's routes against the questions' outcome labels
    gold = [oracle_routes[q] for q in ids]
    for key, chosen in routes_of.items():
        label_scores.append({"model": key, "n": len(ids), **scores(gold, [chosen[q] for q in ids])})
    oracle = routed_row("oracle", oracle_routes, runs, ids)
    oracle["label_sources"] = {
        source: sum(1 for x in labelled.values() if x.source == source)
        for source in ("outcome", "bias")
    }
    by_side["oracle"] = per_side(oracle_routes, runs, ids)
    c_config = config.model_dump(mode="json")
    c_settings = {
        "retrieval.first_stage_k": c_config["retrieval"]["first_stage_k"],
        "nar.b": c_config["nar"]["b"],
        "nar.c": c_config["nar"]["c"],
        "agents.max_steps": c_config["agents"]["max_steps"],
        "agents.exemplars": c_config["agents"]["exemplars"],
        "answer.passages": c_config["answer"]["passages"],
    }
    primary = next(r for r in adaptive_rows if r["classifier"] == "minilm")
    c_row = rows[2]
    target = {
        "llm_call_ratio": round(primary["llm_calls"] / c_row["llm_calls"], 4)
        if c_row["llm_calls"]
        else None,
        "cover_em_gap_points": round((c_row["cover_em"] - primary["cover_em"]) * 100, 2),
    }
    target["met"] = bool(
        target["llm_call_ratio"] is not None
        and target["llm_call_ratio"] <= 0.5
        and target["cover_em_gap_points"] <= 2.0
    )
    best = max(rows[1:], key=lambda r: r["cover_em"])  # the better of B and C
    mixed_target = []
    for row in (rows[2], *adaptive_rows):
        gap = round((best["cover_em"] - row["cover_em"]) * 100, 2)
        ratio = round(row["llm_calls"] / c_row["llm_calls"], 4) if c_row["llm_calls"] else None
        chosen = routes_of.get(row.get("classifier") or "", dict.fromkeys(ids, "C"))
        mixed_target.append(
            {
                "strategy": row["strategy"],
                "classifier": row.get("classifier"),
                "cover_em_gap_to_best_points": gap,
                "best": best["strategy"],
                "llm_call_ratio": ratio,
                "vs_B": paired_routes(chosen, dict.fromkeys(ids, "B"), runs, ids),
                "vs_C": paired_routes(chosen, dict.fromkeys(ids, "C"), runs, ids),
                # an outcome-trained router against the same classifier on bias labels
                **(
                    {"vs_bias": paired_routes(chosen, routes_of[bias], runs, ids)}
                    if (bias := str(row.get("classifier") or "").removesuffix("+outcome"))
                    != row.get("classifier")
                    and bias in routes_of
                    else {}
                ),
                "met": ratio is not None and gap <= 1.0 and ratio <= 0.6,
            }
        )
    return {
        "rows": [*rows, *adaptive_rows, oracle],
        "mixed_target": mixed_target,
        "strategies": strategies,
        "c_settings": c_settings,
        "mixed_sample": {
            "n": len(ids),
            "missing": missing,
            "datasets": {
                d: sum(1 for q in ids if runs["A"][q]["dataset"] == d)
                for d in sorted({runs["A"][q]["dataset"] for q in ids})
            },
        },
        "cover_em_by_side": by_side,
        "threshold_sweep": sweep,
        "target": target,
        "label_scores": label_scores,
    }


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}"


def _paired(entry: dict[str, float] | None) -> str:
    if not entry:
        return "–"
    return f"{entry['delta']:+.1f} [{entry['lo']:+.1f}, {entry['hi']:+.1f}]"


def _description(strategy: str) -> str:
    """What a pipeline strategy is (its registry description), else its name."""
    pipeline = PIPELINES.get(strategy)
    return pipeline.description if pipeline is not None else strategy


def render_markdown(result: dict[str, Any], analysis: str) -> str:
    lines = [
        "# Adaptive-RAG benchmark: complexity classifier and router",
        "",
        f"Chat model `{result['model']}`; {result['machine']}; {result['date']}.",
        "",
        "Reproduce (resumable: harness run files + LLM cache; the LLM classifier's "
        "predictions are cached too):",
        "",
        "```bash",
        result["command"],
        "```",
        "",
        "## (i) Classifier on held-apart dataset-bias labels",
        "",
        f"Up to {result['split']['train']} questions per dataset from SQuAD, NQ-open, "
        "TriviaQA (label B) and MuSiQue, 2WikiMultiHopQA, HotpotQA (label C), minus the "
        f"routing sample; seeded split, {result['split']['test_share']:.0%} held apart "
        f"({result['split']['test_n']} test questions). Only B and C occur in bias labels, "
        "so macro-F1 is over B and C. A bias label is the question's dataset, so this "
        "measures how well a classifier tells the datasets' question styles apart, not "
        "single- from multi-hop questions as such, and nothing about A.",
        "",
        "| classifier | n test | accuracy % | macro-F1 % | F1 B % | F1 C % | s/question |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["classifier"]:
        f1 = row.get("f1_per_class") or {}
        lines.append(
            f"| {row['model']} | {row['n']} | {_pct(row['accuracy'])} | "
            f"{_pct(row['macro_f1'])} | {_pct(f1.get('B'))} | {_pct(f1.get('C'))} | "
            f"{row.get('seconds_per_question', '–')} |"
        )
    if result.get("rows"):
        strategies = result["strategies"]
        settings = ", ".join(f"{k}={v}" for k, v in result["c_settings"].items())
        sample = result["mixed_sample"]
        lines += [
            "",
            "## (ii) Routing on a mixed sample",
            "",
            f"{sample['n']} questions: "
            + ", ".join(f"{d} {n}" for d, n in sample["datasets"].items())
            + "; corpus = their pooled paragraphs "
            f"({result['corpus']['distinct_paragraphs']} distinct). A = `{strategies['A']}`, "
            f"B = `{strategies['B']}`, **C = `{strategies['C']}` "
            f"({_description(strategies['C'])}; the cpu preset: "
            f"{settings})**.",
            "",
            *(
                [
                    f"**Partial:** {sample['missing']} sampled questions have not finished all "
                    "three runs yet; the rows cover the finished ones (rerun to complete).",
                    "",
                ]
                if sample.get("missing")
                else []
            ),
            "| strategy | classifier | n | cover-EM % | F1 % | LLM calls | retrieval calls "
            "| s/question | routes A/B/C |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in result["rows"]:
            routes = row.get("routes") or {}
            lines.append(
                f"| {row['strategy']} | {row.get('classifier', '–')} | {row['n']} | "
                f"{_pct(row['cover_em'])} | {_pct(row['f1'])} | {row['llm_calls']} | "
                f"{row['retrieval_calls']} | {row['seconds']} | "
                f"{routes.get('A', 0)}/{routes.get('B', 0)}/{routes.get('C', 0)} |"
            )
        t = result["target"]
        lines += [
            "",
            "Adaptive rows are computed from the per-question results of the A, B and C runs "
            "(the chosen strategy's answer, LLM calls, retrieval calls and seconds) plus the "
            "classifier's own cost: its measured seconds per question, and one LLM call per "
            "question for the zero-shot LLM classifier. Oracle = each question's automatic "
            "label (simplest strategy that answered correctly, else the dataset's bias "
            "label), no classifier cost. Seconds include the time LLM-cache hits "
            "originally took.",
            "",
            f"**Target** (adaptive with the fine-tuned MiniLM ≤ 50 % of C-only's LLM calls, "
            f"cover-EM within 2 points of C-only): LLM-call ratio {t['llm_call_ratio']}, "
            f"cover-EM gap {t['cover_em_gap_points']} points → "
            f"**{'met' if t['met'] else 'not met'}**.",
            "",
            "**Mixed-set target** (≥ the better of B and C − 1 point, at ≤ 60 % of C-only's LLM "
            f"calls; the better here: {result['mixed_target'][0]['best']}): "
            + "; ".join(
                f"{'C only' if m['classifier'] is None else 'router: ' + m['classifier']} "
                f"gap {m['cover_em_gap_to_best_points']} points at {m['llm_call_ratio']} of C's "
                f"calls, vs B {_paired(m['vs_B'])}, vs C {_paired(m['vs_C'])}"
                + (f", vs the bias-trained {_paired(m['vs_bias'])}" if "vs_bias" in m else "")
                + " → "
                f"**{'met' if m['met'] else 'missed'}**"
                for m in result.get("mixed_target", [])
            )
            + ".",
            "",
            "Threshold sweep (fine-tuned MiniLM; an unsure decision escalates one step): "
            + "; ".join(
                f"{r['threshold']}: cover-EM {_pct(r['cover_em'])}, {r['llm_calls']} LLM calls, "
                f"routes {r['routes']['A']}/{r['routes']['B']}/{r['routes']['C']}"
                for r in result["threshold_sweep"]
            )
            + ".",
            "",
            "cover-EM by half (single-hop / multi-hop): "
            + "; ".join(
                f"{name} {_pct(v.get('single_hop'))} / {_pct(v.get('multi_hop'))}"
                for name, v in result["cover_em_by_side"].items()
            )
            + ".",
        ]
    labels = result.get("outcome_labels")
    if labels:
        counts = labels["labels"]
        lines += [
            "",
            "## (iii) Outcome labels, as the paper trains its classifier",
            "",
            f"{labels['n']} questions of the classifier's training split (up to "
            f"{result['label_per_dataset']} per dataset), over their pooled paragraphs "
            f"({labels['corpus']['distinct_paragraphs']} distinct): A and B run on all, C on "
            f"the {labels['c_runs']} that neither answered. Label = the simplest strategy "
            "that answered (cover-EM), else the dataset's bias label. NQ-open and TriviaQA "
            "ship no paragraphs, so B and C see no evidence for them.",
            "",
            f"Labels: A {counts['A']}, B {counts['B']}, C {counts['C']}; "
            f"{counts['bias']} of them by bias.",
            "",
            "| dataset | A | B | C | by bias |",
            "|---|---|---|---|---|",
            *(
                f"| {d} | {c['A']} | {c['B']} | {c['C']} | {c['bias']} |"
                for d, c in labels["by_dataset"].items()
            ),
            "",
            "Each classifier's routes on the mixed sample against its questions' outcome labels "
            "(the oracle's routes; `+outcome` = trained on the labels above, the others on "
            "dataset bias):",
            "",
            "| classifier | n | accuracy % | macro-F1 % | F1 A % | F1 B % | F1 C % "
            "| routes A/B/C |",
            "|---|---|---|---|---|---|---|---|",
            *(
                f"| {r['model']} | {r['n']} | {_pct(r['accuracy'])} | {_pct(r['macro_f1'])} | "
                + " | ".join(_pct(r["f1_per_class"].get(y)) for y in ROUTES)
                + " | "
                + "/".join(str(r["predicted"][y]) for y in ROUTES)
                + " |"
                for r in result.get("label_scores", [])
            ),
        ]
    lines += [
        "",
        ANALYSIS_START,
        analysis.strip() or "_Analysis pending._",
        ANALYSIS_END,
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        result = run(args, argv)
    except RCAError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to continue", file=sys.stderr)
        return 130
    if result is None:
        print("runs finished (--runs-only)")
        return 0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    md_path = out.with_suffix(".md")
    md_path.write_text(render_markdown(result, read_analysis(md_path)), encoding="utf-8")
    print(f"wrote {out} and {md_path}")
    for row in result["rows"]:
        print(
            f"{row['strategy']:9s} {row.get('classifier', ''):7s} n={row['n']} "
            f"cover-EM={row['cover_em']} F1={row['f1']} calls={row['llm_calls']} "
            f"retrievals={row['retrieval_calls']} s={row['seconds']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
