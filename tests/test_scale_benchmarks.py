"""The scale tooling of the benchmarks: forcing the graph method of the retrieval benchmark's
collection, the sampled 1M-style HNSW builds of ``index_build.py`` and the NAR-by-graph table."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from rag_complexity_agents.corpus.documents import SourceDocument
from rag_complexity_agents.corpus.graph import exact_topk

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _benchmark(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    module = importlib.import_module(name)
    monkeypatch.delitem(sys.modules, name)
    return module


def test_retrieval_benchmark_forces_the_graph_method(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("faiss")
    retrieval = _benchmark("retrieval", monkeypatch)
    documents = [
        SourceDocument(f"d{i}", f"Paragraph {i} about topic {i % 5} and place {i % 7}.")
        for i in range(40)
    ]
    store = retrieval.build_collection(retrieval.Corpus(documents, [], 40, "t"), tmp_path, 4)
    assert retrieval.graph_of(store, "auto").method == "exact"
    forced = retrieval.graph_of(store, "faiss")
    assert forced.method == "faiss" and len(forced) == 40 and forced.k == 4
    assert retrieval.graph_of(store, "faiss").directory == forced.directory  # reused
    exact = retrieval.graph_of(store, "exact")
    assert [n for n, _ in exact.neighbours(store.ids[0], 4)] == [
        n for n, _ in store.graph.neighbours(store.ids[0], 4)
    ]
    assert retrieval.graph_recall(exact, store.graph) == 1.0
    assert 0.5 <= retrieval.graph_recall(forced, store.graph) <= 1.0
    assert retrieval.graph_recall(store.graph, forced) is None  # only against an exact graph
    assert retrieval.parse_args(["--graph-method", "faiss"]).graph_method == "faiss"
    assert retrieval.parse_args([]).graph_method == "auto"


def test_retrieval_benchmark_builds_a_cluster_graph_with_given_clusters_and_probes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    retrieval = _benchmark("retrieval", monkeypatch)
    documents = [
        SourceDocument(f"d{i}", f"Paragraph {i} about topic {i % 5} and place {i % 7}.")
        for i in range(60)
    ]
    store = retrieval.build_collection(retrieval.Corpus(documents, [], 60, "t"), tmp_path, 4)
    every = retrieval.graph_of(store, "cluster", clusters=6, probes=6)  # P = C: exact
    assert every.method == "cluster" and every.directory.name == "graph-cluster-C6-P6"
    assert retrieval.graph_recall(every, store.graph) == 1.0
    one = retrieval.graph_of(store, "cluster", clusters=6, probes=1)
    assert one.directory != every.directory and one.k == 4
    assert retrieval.graph_recall(one, store.graph) < 1.0  # only its own cluster is compared
    args = retrieval.parse_args(["--graph-method", "cluster", "--graph-clusters", "6"])
    assert (args.graph_method, args.graph_clusters, args.graph_probes) == ("cluster", 6, None)


@pytest.mark.parametrize("library", ["faiss", "hnswlib"])
def test_sampled_hnsw_build_searches_windows_and_fills_full_buffers(
    library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip(library)
    index_build = _benchmark("index_build", monkeypatch)
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((3000, 32)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    cols, measured, searched = index_build._sampled_hnsw(matrix, 8, 400, library, windows=4)
    assert cols.shape == (3000, 8) and len(searched) == measured["rows_searched"] == 400
    assert searched[0] == 0 and searched[-1] == 2999  # windows spread over all rows
    unsearched = np.setdiff1d(np.arange(3000), searched)
    assert (cols[unsearched] == -1).all() and (cols[searched] >= 0).all()
    assert not (cols[searched] == searched[:, None]).any()  # never the row itself
    exact, _ = exact_topk(matrix, 8)
    recall = np.mean([len(set(cols[r]) & set(exact[r])) / 8 for r in searched])
    assert recall >= 0.9
    assert measured["graph_seconds_extrapolated"] is True


def test_nar_by_graph_pairs_the_runs_by_method(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_build = _benchmark("index_build", monkeypatch)

    def run(method: str, nar: float, recall: float | None, **params: int) -> Path:
        row = {"dataset": "musique", "queries": "subquestions", "pool": "own"}
        row |= {"scorer": "bi-encoder", "budget": 100, "n_queries": 3}
        rows = [
            row | {"strategy": "nar", "recall_at_10": nar},
            row | {"strategy": "rerank", "recall_at_10": 0.5},
        ]
        path = tmp_path / f"{method}{len(list(tmp_path.iterdir()))}.json"
        graph = {"method": method, "recall_vs_exact": recall} | params
        path.write_text(json.dumps({"rows": rows, "setup": {"graph": graph}}))
        return path

    got = index_build._nar_by_graph([str(run("exact", 0.8, None)), str(run("faiss", 0.79, 0.99))])
    assert got == [
        {
            "dataset": "musique",
            "queries": "subquestions",
            "pool": "own",
            "scorer": "bi-encoder",
            "budget": 100,
            "n_queries": 3,
            "recall_at_10": {"exact": 0.8, "faiss": 0.79},
            "graph_recall": {"faiss": 0.99},
        }
    ]
    markdown = index_build._scale_markdown(
        {"rows": [], "capacity": [], "real_rows": 10, "noise": 1.0, "fill": "gaussian"}
        | {"nar_by_graph": {"rows": got, "command": "cmd"}}
    )
    assert "exact graph (all rows): faiss 0.99." in markdown
    assert "| musique | subquestions | own | bi-encoder | 100 | 3 | 0.8 | 0.79 | -1.00 |" in (
        markdown
    )
    # cluster runs with given C and P are columns of their own, each with its Δ
    runs = [run("exact", 0.8, None), run("cluster", 0.8, 0.96, clusters=100, probes=24)]
    runs.append(run("cluster", 0.78, 0.8, clusters=100, probes=5))
    got = index_build._nar_by_graph([str(path) for path in runs])
    assert list(got[0]["recall_at_10"]) == ["exact", "cluster C=100 P=24", "cluster C=100 P=5"]
    markdown = index_build._scale_markdown(
        {"rows": [], "capacity": [], "real_rows": 10, "noise": 1.0, "fill": "gaussian"}
        | {"nar_by_graph": {"rows": got, "command": "cmd"}}
    )
    assert "| 0.8 | 0.8 | 0.78 | +0.00 | -2.00 |" in markdown
    assert "cluster C=100 P=24 0.96, cluster C=100 P=5 0.8." in markdown


def test_probe_recall_without_a_build_equals_the_built_cluster_graphs_recall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_build = _benchmark("index_build", monkeypatch)
    rng = np.random.default_rng(1)
    real = rng.standard_normal((400, 16)).astype(np.float32)
    np.save(tmp_path / "real.npy", real / np.linalg.norm(real, axis=1, keepdims=True))
    common = {"real": str(tmp_path / "real.npy"), "fill": "gaussian", "noise": 1.0}
    common |= {"sweep_k": "5,20"}
    spec = "1600:12:1/3/12"
    modelled = index_build._child_probe_recall(
        index_build.argparse.Namespace(child_probe_recall=spec, **common)
    )
    built = index_build._child_cluster_sweep(
        index_build.argparse.Namespace(child_cluster_sweep=spec, **common)
    )
    keys = [f"recall_{part}_at_{k}" for part in ("real", "fill") for k in (5, 20)]
    assert [[r[key] for key in keys] for r in modelled] == [[r[key] for key in keys] for r in built]
    assert modelled[-1]["recall_fill_at_20"] == 1.0  # P = C: every row compared
    assert [r["candidates_per_row"] for r in modelled] == [133, 400, 1600]


def test_scale_rows_of_cluster_builds_with_other_probes_are_kept_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index_build = _benchmark("index_build", monkeypatch)
    scale: dict[str, list[dict[str, object]]] = {"rows": []}

    def row(method: str, probes: int | None, seconds: float) -> dict[str, object]:
        extra = {"clusters": 1000, "probes": probes} if probes else {}
        return {"method": method, "n_chunks": 1000, "k": 100, "graph_seconds": seconds} | extra

    for built in (row("cluster", 48, 1.0), row("cluster", 26, 2.0), row("exact", None, 3.0)):
        index_build._add_row(scale, built)
    index_build._add_row(scale, row("cluster", 48, 4.0))  # replaces the same C and P
    got = [(r["method"], r.get("probes"), r["graph_seconds"]) for r in scale["rows"]]
    assert got == [("cluster", 26, 2.0), ("cluster", 48, 4.0), ("exact", None, 3.0)]
