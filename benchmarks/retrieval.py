"""Retrieval benchmark for SUNAR's NAR on a pooled multi-hop corpus.

Corpus: every paragraph of MuSiQue (``musique_dev_ctx.jsonl``), 2WikiMultiHopQA
(``2wikimultihopqa_dev_ctx.jsonl``) and HotpotQA distractor (``hotpotqa_dev_distractor_ctx.jsonl``),
deduplicated by (title, text), indexed once as one collection (one chunk per paragraph,
indexed text = ``title + "\\n" + text``; MiniLM embeddings; bm25s; exact MiniLM top-k graph)
in a cache directory outside the repository. Relevance = supporting paragraphs.

Query sets:
  (i)  ``original``: each dataset's questions (pool = the question's own first-stage list);
  (ii) ``subquestions``: MuSiQue gold sub-questions with ``#k`` replaced by the gold
       sub-answers; relevant = the step's supporting paragraph; pools ``own`` (the
       sub-question's own first-stage top-k), ``original`` (the original question's, what the
       official SUNAR code does) and ``union`` (both, fused by reciprocal rank).

Strategies: ``bm25``, ``dense``, ``hybrid`` (first stage only), ``rerank`` (the pool's top c
re-scored in batches of b) and ``nar`` (Algorithm 1 with b, c, neighbours per document), for
every scorer (bi-encoder, SPLADE, a cross-encoder given by path) and budget c. Both ``rerank``
and ``nar`` run through :class:`SunarRetriever` (rerank = NAR with 0 neighbours), so they
share pools, batches and timing code. Paired bootstrap 95% intervals are given for NAR minus
rerank (same pool, scorer, budget) and for NAR(union) minus the sub-question's own hybrid list.

Run from the repository root::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/retrieval.py \\
        --data ../shared/data

Writes ``benchmarks/results/retrieval.json`` and ``retrieval.md``. Text between the
``<!-- analysis:start -->`` / ``<!-- analysis:end -->`` markers of an existing ``retrieval.md``
is kept when the file is rewritten.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import re
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _common import ANALYSIS_END, ANALYSIS_START, REPO, read_analysis
from retrieval_asu import add_arguments as add_asu_arguments
from retrieval_asu import render_asu, run_asu

from rag_complexity_agents.config import Config, default_home
from rag_complexity_agents.corpus.documents import SourceDocument
from rag_complexity_agents.corpus.graph import TopKGraph
from rag_complexity_agents.corpus.store import CorpusStore
from rag_complexity_agents.models.base import Scorer
from rag_complexity_agents.retrieval.first_stage import (
    BM25FirstStage,
    DenseFirstStage,
    reciprocal_rank_fusion,
)
from rag_complexity_agents.retrieval.nar import NARParams
from rag_complexity_agents.retrieval.sunar import PoolSource, SunarRetriever
from rag_complexity_agents.types import ScoredDoc

DATASETS = {
    "musique": "musique_dev_ctx.jsonl",
    "2wikimultihopqa": "2wikimultihopqa_dev_ctx.jsonl",
    "hotpotqa": "hotpotqa_dev_distractor_ctx.jsonl",
}
POOLS: tuple[PoolSource, ...] = ("own", "original", "union")


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


@dataclass
class Query:
    dataset: str
    kind: str  # "original" | "subquestions"
    qid: str
    text: str
    relevant: set[str]
    original: str | None = None


@dataclass
class Corpus:
    documents: list[SourceDocument]
    queries: list[Query]
    raw_paragraphs: int
    fingerprint: str


def _key(paragraph: dict[str, Any]) -> tuple[str, str]:
    return str(paragraph["title"]).strip(), str(paragraph["text"]).strip()


def load_corpus(data_dir: Path, limit: int | None = None) -> Corpus:
    """Pooled, deduplicated paragraphs and both query sets."""
    ids: dict[tuple[str, str], str] = {}
    documents: list[SourceDocument] = []
    queries: list[Query] = []
    raw = 0
    digest = hashlib.sha256()
    for dataset, filename in DATASETS.items():
        path = data_dir / filename
        if not path.is_file():
            raise SystemExit(f"{path} not found; pass --data DIR holding {list(DATASETS.values())}")
        digest.update(f"{filename}:{path.stat().st_size}".encode())
        with open(path, encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
        for record in records:
            for paragraph in record["paragraphs"]:
                raw += 1
                key = _key(paragraph)
                if key not in ids:
                    ids[key] = f"p{len(ids):05d}"
                    title, text = key
                    documents.append(
                        SourceDocument(ids[key], f"{title}\n{text}", title, {"dataset": dataset})
                    )
        for record in records[:limit]:
            supporting = {ids[_key(p)] for p in record["paragraphs"] if p["is_supporting"]}
            queries.append(
                Query(dataset, "original", str(record["id"]), record["question"], supporting)
            )
            if dataset != "musique":
                continue
            by_idx = {int(p["idx"]): p for p in record["paragraphs"]}
            steps = record["decomposition"]
            for number, step in enumerate(steps, start=1):
                text = re.sub(
                    r"#(\d+)",
                    lambda m, steps=steps: str(steps[int(m.group(1)) - 1]["answer"]),
                    str(step["question"]),
                )
                support = by_idx[int(step["paragraph_support_idx"])]
                queries.append(
                    Query(
                        dataset,
                        "subquestions",
                        f"{record['id']}#{number}",
                        text,
                        {ids[_key(support)]},
                        original=record["question"],
                    )
                )
    return Corpus(documents, queries, raw, digest.hexdigest()[:12])


def build_collection(corpus: Corpus, cache: Path, graph_k: int) -> CorpusStore:
    """The pooled collection in ``cache`` (built once, reused while the data is unchanged)."""
    config = Config(
        corpus={"home": cache, "chunk_size": 4096, "chunk_overlap": 0},
        graph={"k": graph_k},
    )
    name = f"bench-pooled-{corpus.fingerprint}-k{graph_k}"
    store = CorpusStore.open_or_create(name, config)
    if len(store) == 0:
        print(f"indexing {len(corpus.documents)} paragraphs into {store.directory}", flush=True)
        store.ingest(corpus.documents, progress=True)
    if len(store) != len(corpus.documents):
        raise SystemExit(
            f"{store.directory} holds {len(store)} chunks for {len(corpus.documents)} "
            "paragraphs; delete it and rerun"
        )
    return store


def graph_of(
    store: CorpusStore, method: str, clusters: int | None = None, probes: int | None = None
) -> TopKGraph:
    """The collection's own graph (``auto``), or one built with ``method`` (``exact``,
    ``cluster`` or ``faiss``, the values of ``graph.method``) from the collection's embeddings,
    with its k, inside the collection's directory (built once, reused while the collection is
    unchanged). ``clusters``/``probes`` are the cluster build's C and P (None: its defaults)."""
    if method == "auto":
        return store.graph
    name = f"graph-{method}"
    if method == "cluster" and (clusters or probes):
        name += f"-C{clusters or 'auto'}-P{probes or 'auto'}"
    directory = store.directory / name
    if directory.exists():
        graph = TopKGraph.open(directory)
        if len(graph) == len(store) and graph.method == method:
            return graph
    print(f"building the {method} graph of {len(store)} chunks in {directory}", flush=True)
    return TopKGraph.build(
        directory,
        store.embeddings,
        store.ids,
        k=store.graph.k,
        method=method,
        clusters=clusters,
        probes=probes,
    )


def graph_recall(graph: TopKGraph, exact: TopKGraph) -> float | None:
    """Mean |graph's top-k ∩ exact top-k| / k over all rows (None unless ``exact`` is an exact
    graph of the same rows)."""
    if exact.method != "exact" or len(exact) != len(graph) or exact.k != graph.k:
        return None
    got, want = np.asarray(graph.neighbour_rows), np.asarray(exact.neighbour_rows)
    hits = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(got, want, strict=True))
    return round(hits / want.size, 4)


# --------------------------------------------------------------------------------------------
# First stage with memoised, timed BM25 / dense lists
# --------------------------------------------------------------------------------------------


class MemoFirstStage:
    """Hybrid first stage (RRF of BM25 and dense at depth k) whose lists are computed once
    per query; ``elapsed_ms(query, mode)`` gives the time the computation took."""

    name = "hybrid"

    def __init__(self, store: CorpusStore, rrf_k: int = 60) -> None:
        self.bm25 = BM25FirstStage(store)
        self.dense = DenseFirstStage(store)
        self.rrf_k = rrf_k
        self._lists: dict[tuple[str, str, int], list[ScoredDoc]] = {}
        self._ms: dict[tuple[str, str, int], float] = {}

    def _get(self, mode: str, query: str, k: int) -> list[ScoredDoc]:
        key = (mode, query, k)
        if key not in self._lists:
            tick = time.perf_counter()
            if mode == "bm25":
                result = self.bm25.search(query, k)
            elif mode == "dense":
                result = self.dense.search(query, k)
            else:
                result = reciprocal_rank_fusion(
                    [self._get("bm25", query, k), self._get("dense", query, k)],
                    k=k,
                    rrf_k=self.rrf_k,
                )
            self._ms[key] = (time.perf_counter() - tick) * 1000.0
            self._lists[key] = result
        return [ScoredDoc(d.chunk, d.score, rank=d.rank) for d in self._lists[key]]

    def search(self, query: str, k: int) -> list[ScoredDoc]:
        return self._get("hybrid", query, k)

    def list(self, mode: str, query: str, k: int) -> list[ScoredDoc]:
        return self._get(mode, query, k)

    def elapsed_ms(self, mode: str, query: str, k: int) -> float:
        self._get(mode, query, k)
        own = self._ms[(mode, query, k)]
        if mode == "hybrid":  # fusion time + both lists
            own += self._ms[("bm25", query, k)] + self._ms[("dense", query, k)]
        return own

    def forget(self, query: str) -> None:
        for key in [k for k in self._lists if k[1] == query]:
            self._lists.pop(key)
            self._ms.pop(key)


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


def paragraph_ranking(docs: Iterable[ScoredDoc]) -> list[str]:
    seen: set[str] = set()
    out = []
    for doc in docs:
        pid = str(doc.chunk.metadata.get("doc_id", doc.id))
        if pid not in seen:
            seen.add(pid)
            out.append(pid)
    return out


def metrics(ranking: Sequence[str], relevant: set[str]) -> tuple[float, float, float]:
    """R@1, R@10, nDCG@10 (binary gains)."""
    if not relevant:
        return 0.0, 0.0, 0.0
    r1 = len(relevant & set(ranking[:1])) / len(relevant)
    r10 = len(relevant & set(ranking[:10])) / len(relevant)
    dcg = sum(1.0 / math.log2(i + 2) for i, pid in enumerate(ranking[:10]) if pid in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return r1, r10, dcg / ideal


def bootstrap(diffs: np.ndarray, n_boot: int, seed: int) -> dict[str, float]:
    """Mean of paired differences with a percentile bootstrap 95% interval."""
    diffs = np.asarray(diffs, dtype=np.float64)
    if diffs.size == 0:
        return {"mean": float("nan"), "lo": float("nan"), "hi": float("nan")}
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, diffs.size, size=(n_boot, diffs.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {"mean": float(diffs.mean()), "lo": float(lo), "hi": float(hi)}


@dataclass
class Cell:
    """Per-query measurements of one (dataset, queries, pool, budget, strategy, scorer)."""

    qids: list[str] = field(default_factory=list)
    r1: list[float] = field(default_factory=list)
    r10: list[float] = field(default_factory=list)
    ndcg: list[float] = field(default_factory=list)
    first_stage_ms: list[float] = field(default_factory=list)
    scoring_ms: list[float] = field(default_factory=list)
    overhead_ms: list[float] = field(default_factory=list)
    pool_recall: list[float] = field(default_factory=list)
    scored_recall: list[float] = field(default_factory=list)
    new_docs: list[float] = field(default_factory=list)

    def add(self, query: Query, ranking: Sequence[str], **timings: float) -> None:
        r1, r10, ndcg = metrics(ranking, query.relevant)
        self.qids.append(query.qid)
        self.r1.append(r1)
        self.r10.append(r10)
        self.ndcg.append(ndcg)
        self.first_stage_ms.append(timings.get("first_stage_ms", 0.0))
        self.scoring_ms.append(timings.get("scoring_ms", 0.0))
        self.overhead_ms.append(timings.get("overhead_ms", 0.0))

    def metric(self, name: str) -> np.ndarray:
        return np.asarray(
            {"recall_at_1": self.r1, "recall_at_10": self.r10, "ndcg_at_10": self.ndcg}[name]
        )


METRICS = ("recall_at_1", "recall_at_10", "ndcg_at_10")


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def warm_splade(scorer: Any, store: CorpusStore) -> None:
    """Fill the SPLADE scorer's document cache before timing queries (document vectors are
    an offline index). Vectors are kept, sparse, in the collection's cache directory."""
    cache: dict[str, np.ndarray] | None = getattr(scorer, "_doc_cache", None)
    path = store.directory / "splade_docs.npz"
    chunks = store.chunks
    if cache is not None and path.is_file():
        data = np.load(path)
        if list(data["ids"]) == store.ids:
            dim, offsets = int(data["dim"]), data["offsets"]
            for row, chunk_id in enumerate(store.ids):
                vector = np.zeros(dim, dtype=np.float32)
                lo, hi = offsets[row], offsets[row + 1]
                vector[data["indices"][lo:hi]] = data["values"][lo:hi]
                cache[chunk_id] = vector
            print(f"SPLADE document vectors loaded from {path}", flush=True)
            return
    tick = time.perf_counter()
    print(f"encoding {len(chunks)} documents with SPLADE (one-off)", flush=True)
    for start in range(0, len(chunks), 512):
        scorer.score("warm-up", chunks[start : start + 512])
    print(f"  done in {time.perf_counter() - tick:.0f} s", flush=True)
    if cache is None:
        return
    indices, values, offsets = [], [], [0]
    for chunk_id in store.ids:
        vector = cache[chunk_id]
        nz = np.flatnonzero(vector)
        indices.append(nz.astype(np.int32))
        values.append(vector[nz].astype(np.float32))
        offsets.append(offsets[-1] + nz.size)
    np.savez(
        path,
        ids=np.array(store.ids),
        dim=np.array(cache[store.ids[0]].size),
        offsets=np.array(offsets, dtype=np.int64),
        indices=np.concatenate(indices),
        values=np.concatenate(values),
    )


def load_scorers(
    names: Sequence[str], store: CorpusStore, cross_encoder: str | None
) -> dict[str, Scorer]:
    from rag_complexity_agents.models.scorers import load_scorer

    scorers: dict[str, Scorer] = {}
    specs = list(names) + ([f"cross-encoder:{cross_encoder}"] if cross_encoder else [])
    for spec in specs:
        scorer = load_scorer(spec, embedder=store.embedder, vector_lookup=store.vectors)
        name = spec.split(":", 1)[0]
        if name == "splade":
            warm_splade(scorer, store)
        scorers[name] = scorer
    return scorers


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    torch.set_num_threads(args.threads)
    started = time.time()
    corpus = load_corpus(Path(args.data), args.limit)
    store = build_collection(corpus, Path(args.cache), args.graph_k)
    first_stage = MemoFirstStage(store)
    scorers = load_scorers(args.scorers, store, args.cross_encoder)
    store.embedder.encode(["warm-up"])
    graph = graph_of(store, args.graph_method, args.graph_clusters, args.graph_probes)
    k = args.first_stage_k

    retrievers: dict[tuple[str, str, int, str], SunarRetriever] = {}
    for pool in POOLS:
        for scorer_name, scorer in scorers.items():
            for budget in args.budgets:
                for strategy, neighbours in (("rerank", 0), ("nar", args.neighbours)):
                    retrievers[(pool, scorer_name, budget, strategy)] = SunarRetriever(
                        first_stage,
                        scorer,
                        graph,
                        store.chunk,
                        params=NARParams(b=args.b, c=budget, neighbours_per_doc=neighbours),
                        first_stage_k=k,
                        pool=pool,
                        collection_size=len(store),
                    )

    cells: dict[tuple[str, str, str, int | None, str, str | None], Cell] = defaultdict(Cell)
    total = len(corpus.queries)
    tick = time.perf_counter()
    for index, query in enumerate(corpus.queries, start=1):
        pools = ("own",) if query.kind == "original" else POOLS
        # first stage only
        for mode in ("bm25", "dense", "hybrid"):
            docs = first_stage.list(mode, query.text, k)
            cells[(query.dataset, query.kind, "own", None, mode, None)].add(
                query,
                paragraph_ranking(docs),
                first_stage_ms=first_stage.elapsed_ms(mode, query.text, k),
            )
        own_ms = first_stage.elapsed_ms("hybrid", query.text, k)
        orig_ms = first_stage.elapsed_ms("hybrid", query.original, k) if query.original else 0.0
        for pool in pools:
            pool_ms = {"own": own_ms, "original": orig_ms, "union": own_ms + orig_ms}[pool]
            for scorer_name in scorers:
                for budget in args.budgets:
                    for strategy in ("rerank", "nar"):
                        retriever = retrievers[(pool, scorer_name, budget, strategy)]
                        result = retriever.run(query.text, original_query=query.original)
                        trace = result.trace
                        cell = cells[
                            (query.dataset, query.kind, pool, budget, strategy, scorer_name)
                        ]
                        cell.add(
                            query,
                            paragraph_ranking(result.docs),
                            first_stage_ms=pool_ms,
                            scoring_ms=trace.scoring_ms,
                            overhead_ms=trace.bookkeeping_ms,
                        )
                        initial = paragraph_ranking(
                            retriever.initial_ranking(query.text, query.original)[0]
                        )
                        scored = {
                            str(d.chunk.metadata.get("doc_id", d.id))
                            for d in result.docs
                            if d.source != "backfill"
                        }
                        rel = query.relevant
                        cell.pool_recall.append(len(rel & set(initial)) / len(rel))
                        cell.scored_recall.append(len(rel & scored) / len(rel))
                        cell.new_docs.append(float(trace.new_documents))
        if (
            query.original is None
            or index == total
            or (corpus.queries[index].original != query.original)
        ):
            first_stage.forget(query.text)
            if query.original:
                first_stage.forget(query.original)
        if index % 50 == 0 or index == total:
            elapsed = time.perf_counter() - tick
            eta = elapsed / index * (total - index)
            print(f"  {index}/{total} queries, {elapsed:.0f} s, ~{eta:.0f} s left", flush=True)

    return summarise(cells, corpus, store, graph, args, time.time() - started)


def asu_rows(args: argparse.Namespace) -> dict[str, Any]:
    """The ASU rows (:mod:`retrieval_asu`) on the pooled collection of this benchmark."""
    import torch

    torch.set_num_threads(args.threads)
    corpus = load_corpus(Path(args.data), args.limit)
    ranking_of = paragraph_ranking
    if args.asu_collection:
        # another pooled collection (e.g. end_to_end.py's): its chunks are mapped to this
        # benchmark's paragraph ids by their indexed text (title + newline + text)
        config = Config(
            corpus={"home": args.cache, "chunk_size": 4096, "chunk_overlap": 0},
            graph={"k": args.asu_graph_k},
        )
        store = CorpusStore.open(args.asu_collection, config)
        ids = {" ".join(d.text.split()): d.id for d in corpus.documents}

        def ranking_of(docs: Iterable[ScoredDoc]) -> list[str]:
            found = (ids.get(" ".join(d.chunk.text.split()), d.id) for d in docs)
            return list(dict.fromkeys(found))

    else:
        store = build_collection(corpus, Path(args.cache), args.graph_k)
    scorers = load_scorers(args.scorers, store, args.cross_encoder)
    first_stage = MemoFirstStage(store)
    return run_asu(args, corpus, store, first_stage, scorers, ranking_of, bootstrap)


def _round(value: float, digits: int = 4) -> float | None:
    return round(float(value), digits) if math.isfinite(value) else None


def summarise(
    cells: dict,
    corpus: Corpus,
    store: CorpusStore,
    graph: TopKGraph,
    args: argparse.Namespace,
    seconds: float,
) -> dict[str, Any]:
    rows = []
    for (dataset, kind, pool, budget, strategy, scorer), cell in sorted(
        cells.items(), key=lambda kv: tuple(str(x) for x in kv[0])
    ):
        row: dict[str, Any] = {
            "dataset": dataset,
            "queries": kind,
            "pool": pool,
            "budget": budget,
            "strategy": strategy,
            "scorer": scorer,
            "n_queries": len(cell.qids),
            "recall_at_1": _round(np.mean(cell.r1)),
            "recall_at_10": _round(np.mean(cell.r10)),
            "ndcg_at_10": _round(np.mean(cell.ndcg)),
            "first_stage_ms": _round(np.mean(cell.first_stage_ms), 3),
            "scoring_ms": _round(np.mean(cell.scoring_ms), 3),
            "nar_overhead_ms": _round(np.mean(cell.overhead_ms), 3),
        }
        if strategy in ("rerank", "nar"):
            row["pool_recall"] = _round(np.mean(cell.pool_recall))
            row["scored_recall"] = _round(np.mean(cell.scored_recall))
            row["new_docs_scored"] = _round(np.mean(cell.new_docs), 2)
            row["overhead_share"] = _round(
                np.sum(cell.overhead_ms) / max(np.sum(cell.scoring_ms), 1e-9)
            )
        if strategy == "nar":
            base = cells[(dataset, kind, pool, budget, "rerank", scorer)]
            assert base.qids == cell.qids
            row["nar_minus_rerank"] = {
                m: {
                    key: _round(value)
                    for key, value in bootstrap(
                        cell.metric(m) - base.metric(m), args.bootstrap, args.seed
                    ).items()
                }
                for m in METRICS
            }
            hybrid = cells[(dataset, kind, "own", None, "hybrid", None)]
            assert hybrid.qids == cell.qids
            row["nar_minus_own_hybrid"] = {
                m: {
                    key: _round(value)
                    for key, value in bootstrap(
                        cell.metric(m) - hybrid.metric(m), args.bootstrap, args.seed
                    ).items()
                }
                for m in METRICS
            }
        rows.append(row)

    targets = evaluate_targets(rows, cells, args)
    return {
        "rows": rows,
        "targets": targets,
        "setup": {
            "command": "python benchmarks/retrieval.py " + " ".join(args.argv),
            "data": {name: file for name, file in DATASETS.items()},
            "paragraphs_raw": corpus.raw_paragraphs,
            "paragraphs_dedup": len(corpus.documents),
            "collection": store.name,
            "indexed_text": "title + newline + paragraph text, one chunk per paragraph",
            "embedding": store.manifest.embedding,
            "graph": {
                "k": graph.k,
                "method": graph.method,
                "built_from": f"MiniLM embeddings ({graph.method} top-k)",
                "recall_vs_exact": graph_recall(graph, store.graph),
                **(
                    {"clusters": args.graph_clusters, "probes": args.graph_probes}
                    if graph.method == "cluster"
                    else {}
                ),
            },
            "first_stage": "hybrid (RRF of bm25s and Chroma MiniLM, rrf_k=60)",
            "first_stage_k": args.first_stage_k,
            "b": args.b,
            "budgets": list(args.budgets),
            "neighbours_per_doc": args.neighbours,
            "scorers": list(args.scorers) + (["cross-encoder"] if args.cross_encoder else []),
            "bootstrap": {"resamples": args.bootstrap, "seed": args.seed, "interval": "95%"},
            "queries": {
                f"{d}/{kind}": sum(q.dataset == d and q.kind == kind for q in corpus.queries)
                for d in DATASETS
                for kind in ("original", "subquestions")
                if any(q.dataset == d and q.kind == kind for q in corpus.queries)
            },
            "limit_per_dataset": args.limit,
            "torch_threads": args.threads,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, shared with other jobs",
            "python": platform.python_version(),
            "wall_seconds": round(seconds, 1),
        },
    }


def evaluate_targets(
    rows: list[dict[str, Any]], cells: dict, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """The three acceptance targets, on MuSiQue sub-questions."""
    targets = []
    by_key = {
        (r["dataset"], r["queries"], r["pool"], r["budget"], r["strategy"], r["scorer"]): r
        for r in rows
    }
    hybrid = by_key.get(("musique", "subquestions", "own", None, "hybrid", None))
    for scorer in [
        s for s in list(args.scorers) + (["cross-encoder"] if args.cross_encoder else [])
    ]:
        for budget in args.budgets:
            nar = by_key.get(("musique", "subquestions", "original", budget, "nar", scorer))
            rerank = by_key.get(("musique", "subquestions", "original", budget, "rerank", scorer))
            if nar and rerank:
                delta = nar["nar_minus_rerank"]["recall_at_10"]
                targets.append(
                    {
                        "target": "original pool: NAR R@10 >= rerank R@10 + 0.04",
                        "scorer": scorer,
                        "budget": budget,
                        "nar": nar["recall_at_10"],
                        "rerank": rerank["recall_at_10"],
                        "delta": delta["mean"],
                        "ci95": [delta["lo"], delta["hi"]],
                        "met": delta["mean"] is not None and delta["mean"] >= 0.04,
                        "shortfall": None
                        if delta["mean"] is None
                        else _round(max(0.0, 0.04 - delta["mean"])),
                    }
                )
            union = by_key.get(("musique", "subquestions", "union", budget, "nar", scorer))
            if union and hybrid:
                delta = union["nar_minus_own_hybrid"]["recall_at_10"]
                targets.append(
                    {
                        "target": "union pool + NAR R@10 >= the sub-question's own hybrid top-10",
                        "scorer": scorer,
                        "budget": budget,
                        "nar": union["recall_at_10"],
                        "hybrid": hybrid["recall_at_10"],
                        "delta": delta["mean"],
                        "ci95": [delta["lo"], delta["hi"]],
                        "met": delta["mean"] is not None and delta["mean"] >= 0.0,
                        "shortfall": None
                        if delta["mean"] is None
                        else _round(max(0.0, -delta["mean"])),
                    }
                )
        overhead = scoring = 0.0
        for key, cell in cells.items():
            if key[4] == "nar" and key[5] == scorer:
                overhead += float(np.sum(cell.overhead_ms))
                scoring += float(np.sum(cell.scoring_ms))
        share = overhead / scoring if scoring else float("nan")
        targets.append(
            {
                "target": "NAR bookkeeping <= 5% of scoring time (all NAR runs)",
                "scorer": scorer,
                "budget": None,
                "bookkeeping_ms_total": _round(overhead, 1),
                "scoring_ms_total": _round(scoring, 1),
                "share": _round(share),
                "met": math.isfinite(share) and share <= 0.05,
            }
        )
    return targets


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------


def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _ci(entry: dict[str, Any] | None) -> str:
    if not entry or entry.get("mean") is None:
        return "–"
    return f"{entry['mean'] * 100:+.1f} [{entry['lo'] * 100:+.1f}, {entry['hi'] * 100:+.1f}]"


def render_markdown(result: dict[str, Any], analysis: str) -> str:
    setup = result["setup"]
    lines = [
        "# Retrieval benchmark: NAR (SUNAR Algorithm 1) on a pooled multi-hop corpus",
        "",
        f"Reproduce: `HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/{setup['command']}` "
        f"(wall time {setup['wall_seconds'] / 60:.0f} min on {setup['machine']}).",
        "",
        f"Corpus: {setup['paragraphs_dedup']:,} paragraphs ({setup['paragraphs_raw']:,} before "
        "deduplication by title+text) of MuSiQue, 2WikiMultiHopQA and HotpotQA-distractor dev; "
        f"{setup['indexed_text']}. First stage: {setup['first_stage']}, R = top "
        f"{setup['first_stage_k']}. Graph: MiniLM {setup['graph'].get('method', 'exact')} "
        f"top-{setup['graph']['k']}. NAR: b = "
        f"{setup['b']}, {setup['neighbours_per_doc']} neighbours per scored document, budgets c "
        f"= {', '.join(map(str, setup['budgets']))}. Queries: "
        + ", ".join(f"{k} {v}" for k, v in setup["queries"].items())
        + ". Δ = paired difference in points with a bootstrap 95% interval "
        f"({setup['bootstrap']['resamples']} resamples). Latencies are means per query in ms "
        "(scoring = time inside the scorer; overhead = NAR bookkeeping: pools, graph look-ups, "
        "sorting).",
        "",
        "## Targets (MuSiQue sub-questions)",
        "",
        "| target | scorer | c | measured | met |",
        "|---|---|---|---|---|",
    ]
    for t in result["targets"]:
        if "share" in t:
            measured = (
                f"bookkeeping {t['bookkeeping_ms_total']:.0f} ms / scoring "
                f"{t['scoring_ms_total']:.0f} ms = {t['share'] * 100:.2f}%"
            )
        else:
            other = t.get("rerank", t.get("hybrid"))
            measured = (
                f"{t['nar']:.3f} vs {other:.3f}: Δ {t['delta'] * 100:+.1f} "
                f"[{t['ci95'][0] * 100:+.1f}, {t['ci95'][1] * 100:+.1f}]"
            )
            if not t["met"]:
                measured += f" (short by {t['shortfall'] * 100:.1f} pts)"
        lines.append(
            f"| {t['target']} | {t['scorer']} | {_f(t['budget'])} | {measured} | "
            f"{'yes' if t['met'] else '**no**'} |"
        )
    lines += ["", ANALYSIS_START, analysis.strip() or "(analysis to be written)", ANALYSIS_END, ""]

    rows = result["rows"]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["queries"], row["dataset"])].append(row)
    order = {"bm25": 0, "dense": 1, "hybrid": 2, "rerank": 3, "nar": 4}
    pool_order = {"own": 0, "original": 1, "union": 2}
    for (kind, dataset), group in sorted(
        groups.items(), key=lambda kv: (kv[0][0] != "subquestions", kv[0][1])
    ):
        n = group[0]["n_queries"]
        lines += [
            f"## {dataset} — {kind} ({n} queries)",
            "",
            "| strategy | pool | scorer | c | R@1 | R@10 | nDCG@10 | Δ R@10 vs rerank | "
            "pool recall | new docs | first stage ms | scoring ms | overhead ms |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        group.sort(
            key=lambda r: (
                r["strategy"] not in ("bm25", "dense", "hybrid"),
                str(r["scorer"]),
                r["budget"] or 0,
                pool_order[r["pool"]],
                order[r["strategy"]],
            )
        )
        for r in group:
            lines.append(
                f"| {r['strategy']} | {r['pool']} | {r['scorer'] or '–'} | {_f(r['budget'])} | "
                f"{_f(r['recall_at_1'])} | {_f(r['recall_at_10'])} | {_f(r['ndcg_at_10'])} | "
                f"{_ci((r.get('nar_minus_rerank') or {}).get('recall_at_10'))} | "
                f"{_f(r.get('pool_recall'))} | {_f(r.get('new_docs_scored'), 1)} | "
                f"{_f(r['first_stage_ms'], 1)} | {_f(r['scoring_ms'], 1)} | "
                f"{_f(r['nar_overhead_ms'], 2)} |"
            )
        lines.append("")
    lines += [
        "Columns: *pool recall* = share of the relevant paragraphs inside the initial pool R "
        "(the ceiling for rerank-only); *new docs* = documents scored by NAR that were not in R.",
        "",
    ]
    for section in (result.get("asu") or {}).values():
        lines += render_asu(section)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        default=str(REPO / ".." / "shared" / "data"),
        help="directory with the dataset JSONL files (read in place)",
    )
    parser.add_argument(
        "--cache",
        default=str(default_home() / "benchmarks"),
        help="where the pooled collection is built (outside the repository)",
    )
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    parser.add_argument(
        "--scorers", default="bi-encoder,splade", type=lambda s: [x for x in s.split(",") if x]
    )
    parser.add_argument(
        "--cross-encoder", default=None, help="local path of a cross-encoder to add as a scorer"
    )
    parser.add_argument(
        "--budgets", default="100,200", type=lambda s: [int(x) for x in s.split(",") if x]
    )
    parser.add_argument("--b", type=int, default=16)
    parser.add_argument("--neighbours", type=int, default=10)
    parser.add_argument("--first-stage-k", type=int, default=100)
    parser.add_argument("--graph-k", type=int, default=16)
    parser.add_argument(
        "--graph-method",
        choices=("auto", "exact", "cluster", "faiss"),
        default="auto",
        help="NAR's neighbourhood graph: the collection's own (auto: exact at this size) or "
        "one built from its embeddings with this graph.method",
    )
    parser.add_argument(
        "--graph-clusters",
        type=int,
        default=None,
        help="--graph-method cluster: number of k-means clusters C (default ceil(n / 1000))",
    )
    parser.add_argument(
        "--graph-probes",
        type=int,
        default=None,
        help="--graph-method cluster: clusters probed per row P (default 48)",
    )
    parser.add_argument("--bootstrap", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help="only the first N questions of each dataset (smoke runs)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (1 is fastest on a shared machine)"
    )
    add_asu_arguments(parser)
    args = parser.parse_args(argv)
    args.argv = list(argv)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    out = Path(args.out)
    if args.asu:
        result = json.loads((out / "retrieval.json").read_text(encoding="utf-8"))
        result.setdefault("asu", {})[f"musique/{args.asu_queries}"] = asu_rows(args)
    else:
        result = run(args)
    out.mkdir(parents=True, exist_ok=True)
    (out / "retrieval.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    md_path = out / "retrieval.md"
    md_path.write_text(render_markdown(result, read_analysis(md_path)), encoding="utf-8")
    print(f"wrote {out / 'retrieval.json'} and {md_path}")
    for target in result["targets"]:
        print(json.dumps(target))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
