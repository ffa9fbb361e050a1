"""The exact top-k neighbourhood graph (SUNAR §3.1.1) against brute force."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from rag_complexity_agents.corpus.graph import (
    CorpusGraph,
    TopKGraph,
    cluster,
    cluster_topk,
    exact_topk,
    storage,
    topk,
)
from rag_complexity_agents.errors import CorpusError

SUBJECTS = [
    "The Danube",
    "Hayao Miyazaki",
    "The Eiffel Tower",
    "Marie Curie",
    "The Amazon rainforest",
    "Johann Sebastian Bach",
    "Mount Kilimanjaro",
    "The Great Barrier Reef",
    "Ada Lovelace",
    "The Roman Colosseum",
    "Frida Kahlo",
    "The Sahara desert",
]
FACTS = [
    "is often described in travel guides and school textbooks.",
    "was the subject of a documentary film released in 2004.",
    "attracts millions of visitors and researchers every year.",
    "appears on postage stamps issued by several countries.",
    "is mentioned in an encyclopedia article about world heritage.",
    "inspired a novel written by a Brazilian author.",
    "was photographed from the International Space Station.",
    "is linked to a famous legend told by local guides.",
    "was discussed at a scientific conference in Geneva.",
    "has a museum exhibition dedicated to its history.",
]
SENTENCES = [f"{s} {f}" for s, f in itertools.product(SUBJECTS, FACTS)]  # 120 sentences


def unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((n, dim)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def brute_force(embeddings: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reference: full similarity matrix, self excluded, stable argsort (ties → lower row)."""
    sims = embeddings.astype(np.float64) @ embeddings.astype(np.float64).T
    np.fill_diagonal(sims, -np.inf)
    order = np.argsort(-sims, axis=1, kind="stable")[:, : min(k, len(embeddings) - 1)]
    return order, np.take_along_axis(sims, order, axis=1), sims


def assert_exact(rows: np.ndarray, values: np.ndarray, embeddings: np.ndarray, k: int) -> None:
    """Same neighbours as brute force; near-ties (|Δ| < 1e-6, float rounding) may swap."""
    ref_rows, ref_values, sims = brute_force(embeddings, k)
    assert rows.shape == ref_rows.shape
    np.testing.assert_allclose(np.asarray(values, np.float64), ref_values, atol=2e-3)
    # the similarities of the returned rows are exactly the top-k similarities, in order
    got = np.take_along_axis(sims, rows.astype(np.int64), axis=1)
    np.testing.assert_allclose(got, ref_values, atol=1e-6)
    differs = rows != ref_rows
    if differs.any():  # only allowed inside groups of (near-)equal similarities
        gaps = np.abs(got[differs] - ref_values[differs])
        assert gaps.max() < 1e-6
    assert (differs.sum() / max(1, differs.size)) < 0.01
    assert not (rows == np.arange(len(rows))[:, None]).any()


def assert_same_graph(a: TopKGraph, b: TopKGraph, embeddings: np.ndarray) -> None:
    assert len(a) == len(b) and a.k == b.k and a.ids == b.ids
    np.testing.assert_allclose(
        np.asarray(a.similarities, np.float32), np.asarray(b.similarities, np.float32), atol=1e-3
    )
    same = np.asarray(a.neighbour_rows) == np.asarray(b.neighbour_rows)
    if not same.all():  # a swap is only allowed between float-rounding near-ties
        sims = embeddings @ embeddings.T
        rows = np.nonzero(~same)[0]
        got_a = sims[rows[:, None], np.asarray(a.neighbour_rows)[rows]]
        got_b = sims[rows[:, None], np.asarray(b.neighbour_rows)[rows]]
        np.testing.assert_allclose(got_a, got_b, atol=1e-6)


@pytest.fixture(scope="module")
def minilm_vectors(embedder) -> np.ndarray:
    vectors = embedder.encode(SENTENCES)
    assert vectors.shape == (120, 384) and vectors.dtype == np.float32
    return vectors


def test_real_minilm_neighbours_equal_brute_force(minilm_vectors, tmp_path: Path) -> None:
    ids = [f"s{i}" for i in range(len(SENTENCES))]
    graph = TopKGraph.build(tmp_path / "g", minilm_vectors, ids, k=100, block_size=16)
    assert isinstance(graph, CorpusGraph)
    assert len(graph) == 120 and graph.k == 100
    assert_exact(np.asarray(graph.neighbour_rows), graph.similarities, minilm_vectors, 100)
    # meaning, not just arithmetic: a sentence's nearest neighbour shares its subject or fact
    first = graph.neighbours("s0", 1)[0][0]
    row = int(first[1:])
    assert row // len(FACTS) == 0 or row % len(FACTS) == 0
    # doc-id API mirrors the row API
    assert graph.neighbours("s5", 3) == [(ids[r], v) for r, v in graph.neighbours_of_row(5, 3)]


@pytest.mark.parametrize(
    ("n", "dim", "k", "block_size"),
    [
        (400, 32, 25, 64),  # direct top-k path (narrow blocks)
        (2600, 24, 20, 500),  # grouped pre-selection path (wide blocks), ragged last block
        (1203, 16, 8, 4096),  # one block; columns not a multiple of the group size
    ],
)
def test_random_vectors_equal_brute_force(n: int, dim: int, k: int, block_size: int) -> None:
    vectors = unit_rows(n, dim, seed=n)
    rows, values = exact_topk(vectors, k, block_size=block_size)
    assert rows.dtype == np.int32 and values.dtype == np.float32
    assert_exact(rows, values, vectors, k)


def test_small_block_memory_budget_is_respected() -> None:
    vectors = unit_rows(900, 16, seed=3)
    rows, values = exact_topk(vectors, 10, max_block_bytes=900 * 4 * 7)  # 7 rows per block
    assert_exact(rows, values, vectors, 10)


@pytest.mark.parametrize(("n", "k"), [(300, 6), (2000, 5)])
def test_ties_are_broken_by_lower_row_deterministically(n: int, k: int) -> None:
    # small-integer vectors: every dot product is exact, so ties are real and plentiful
    rng = np.random.default_rng(7)
    vectors = rng.integers(-1, 2, size=(n, 4)).astype(np.float32)
    rows, values = exact_topk(vectors, k, block_size=128)
    ref_rows, ref_values, _ = brute_force(vectors, k)
    np.testing.assert_array_equal(rows, ref_rows)
    np.testing.assert_array_equal(values, ref_values)
    again, _ = exact_topk(vectors, k, block_size=77)
    np.testing.assert_array_equal(again, rows)


@pytest.mark.parametrize(("group", "span"), [(2, 32), (3, 5)])
def test_multi_level_preselection_is_exact(
    monkeypatch: pytest.MonkeyPatch, group: int, span: int
) -> None:
    # tiny groups make the recursive group-max pre-selection run several levels deep
    monkeypatch.setattr(topk, "GROUP", group)
    monkeypatch.setattr(topk, "SPAN", span)
    vectors = unit_rows(900, 12, seed=group)
    rows, values = exact_topk(vectors, 5, block_size=200)
    assert_exact(rows, values, vectors, 5)
    ties = np.random.default_rng(group).integers(-1, 2, size=(700, 3)).astype(np.float32)
    rows, values = exact_topk(ties, 4, block_size=300)
    ref_rows, ref_values, _ = brute_force(ties, 4)
    np.testing.assert_array_equal(rows, ref_rows)
    np.testing.assert_array_equal(values, ref_values)


def test_duplicates_tie_and_self_is_never_a_neighbour(tmp_path: Path) -> None:
    base = unit_rows(50, 8, seed=1)
    vectors = np.concatenate([base, base[:10], base[:10]])  # rows i, 50+i, 60+i identical
    ids = [f"d{i}" for i in range(len(vectors))]
    graph = TopKGraph.build(tmp_path / "g", vectors, ids, k=5)
    for row in range(len(graph)):
        assert row not in [r for r, _ in graph.neighbours_of_row(row, 100)]
    # a duplicated row's nearest neighbours are its copies, lower row first
    assert [r for r, _ in graph.neighbours_of_row(0, 2)] == [50, 60]
    assert [r for r, _ in graph.neighbours_of_row(60, 2)] == [0, 50]
    assert graph.neighbours_of_row(0, 1)[0][1] == pytest.approx(1.0, abs=1e-3)


def test_reopen_memmaps_read_only(tmp_path: Path) -> None:
    vectors = unit_rows(300, 16, seed=2)
    ids = [f"x{i}" for i in range(300)]
    built = TopKGraph.build(tmp_path / "g", vectors, ids, k=12, block_size=64)
    reopened = TopKGraph.open(tmp_path / "g")
    for array in (reopened.neighbour_rows, reopened.similarities):
        assert isinstance(array, np.memmap) and not array.flags.writeable
    assert reopened.neighbour_rows.dtype == np.int32
    assert reopened.similarities.dtype == np.float16
    np.testing.assert_array_equal(reopened.neighbour_rows, built.neighbour_rows)
    assert reopened.neighbours("x7", 12) == built.neighbours("x7", 12)
    stats = reopened.stats()
    assert stats["rows"] == 300 and stats["k"] == 12 and stats["dim"] == 16
    assert stats["bytes_on_disk"] >= 300 * 12 * 6
    assert stats["min_similarity"] is not None and stats["max_similarity"] is not None
    assert -1.0 <= stats["min_similarity"] <= stats["mean_similarity"] <= 1.0  # type: ignore[operator]
    json.dumps(stats)  # rca info prints it


def test_n_larger_than_k_and_unknown_ids(tmp_path: Path) -> None:
    vectors = unit_rows(40, 8, seed=4)
    graph = TopKGraph.build(tmp_path / "g", vectors, [f"i{i}" for i in range(40)], k=7)
    assert len(graph.neighbours("i3", 1000)) == 7
    assert graph.neighbours("i3", 0) == []
    sims = [s for _, s in graph.neighbours("i3", 7)]
    assert sims == sorted(sims, reverse=True)
    with pytest.raises(CorpusError, match="not in the neighbourhood graph"):
        graph.neighbours("nope", 3)
    with pytest.raises(CorpusError, match="outside the graph"):
        graph.neighbours_of_row(40, 3)


def test_k_is_capped_and_single_row_has_no_neighbours(tmp_path: Path) -> None:
    one = TopKGraph.build(tmp_path / "one", unit_rows(1, 8, seed=5), ["only"], k=100)
    assert len(one) == 1 and one.k == 0 and one.k_requested == 100
    assert one.neighbours("only", 10) == []
    assert TopKGraph.open(tmp_path / "one").stats()["mean_similarity"] is None
    few = TopKGraph.build(tmp_path / "few", unit_rows(6, 8, seed=5), list("abcdef"), k=100)
    assert few.k == 5
    assert sorted(d for d, _ in few.neighbours("a", 100)) == list("bcdef")


def test_extend_equals_a_fresh_build(tmp_path: Path) -> None:
    vectors = unit_rows(2300, 24, seed=8)
    ids = [f"c{i}" for i in range(len(vectors))]
    graph = TopKGraph.build(tmp_path / "g", vectors[:1500], ids[:1500], k=20, block_size=256)
    first_generation = graph.generation
    graph.extend(vectors[:2000], ids[:2000])
    graph.extend(vectors, ids)  # twice: the second extension starts from an extended graph
    assert graph.generation != first_generation
    fresh = TopKGraph.build(tmp_path / "fresh", vectors, ids, k=20, block_size=999)
    assert_same_graph(graph, fresh, vectors)
    assert_same_graph(TopKGraph.open(tmp_path / "g"), fresh, vectors)
    assert graph.neighbours("c2200", 3) == fresh.neighbours("c2200", 3)
    assert graph.extend(vectors, ids) is graph  # nothing new: no-op


@pytest.mark.parametrize("n_old", [1, 3, 11])
def test_extend_grows_capped_k(tmp_path: Path, n_old: int) -> None:
    vectors = unit_rows(40, 8, seed=9)
    ids = [f"r{i}" for i in range(40)]
    graph = TopKGraph.build(tmp_path / "g", vectors[:n_old], ids[:n_old], k=10)
    assert graph.k == min(10, n_old - 1)
    graph.extend(vectors, ids)
    assert graph.k == 10
    assert_same_graph(graph, TopKGraph.build(tmp_path / "fresh", vectors, ids, k=10), vectors)


def test_extend_rejects_changed_rows(tmp_path: Path) -> None:
    vectors = unit_rows(60, 8, seed=10)
    ids = [f"r{i}" for i in range(60)]
    graph = TopKGraph.build(tmp_path / "g", vectors[:50], ids[:50], k=5)
    with pytest.raises(CorpusError, match="only appends"):
        graph.extend(vectors, ["other", *ids[1:]])
    with pytest.raises(CorpusError, match="only appends"):
        graph.extend(vectors[:40], ids[:40])
    with pytest.raises(CorpusError, match="do not match"):
        graph.extend(unit_rows(60, 8, seed=11), ids)
    with pytest.raises(CorpusError, match="dimension"):
        graph.extend(unit_rows(60, 9, seed=10), ids)
    with pytest.raises(CorpusError, match="unique"):
        graph.extend(vectors, [*ids[:59], "r0"])


def test_crash_while_extending_keeps_the_old_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vectors = unit_rows(80, 8, seed=12)
    ids = [f"r{i}" for i in range(80)]
    graph = TopKGraph.build(tmp_path / "g", vectors[:60], ids[:60], k=6)
    before = np.array(graph.neighbour_rows)
    real_replace = os.replace

    def crash_on_publish(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst).name == storage.CURRENT_FILE:
            raise OSError("simulated power loss")
        real_replace(src, dst)

    monkeypatch.setattr(storage.os, "replace", crash_on_publish)
    with pytest.raises(OSError, match="power loss"):
        graph.extend(vectors, ids)
    monkeypatch.undo()
    survivor = TopKGraph.open(tmp_path / "g")
    assert len(survivor) == 60
    np.testing.assert_array_equal(survivor.neighbour_rows, before)
    # the next write succeeds and clears the debris of the failed one
    survivor.extend(vectors, ids)
    assert len(TopKGraph.open(tmp_path / "g")) == 80
    leftovers = sorted(p.name for p in (tmp_path / "g").iterdir())
    assert leftovers == [storage.CURRENT_FILE, survivor.generation]


def _generation_dir(directory: Path) -> Path:
    return directory / (directory / storage.CURRENT_FILE).read_text().strip()


@pytest.mark.parametrize(
    "damage",
    [
        "no-graph",
        "missing-array",
        "garbage-array",
        "wrong-shape",
        "wrong-dtype",
        "bad-meta",
        "ids-count",
        "dangling-pointer",
        "out-of-range",
    ],
)
def test_missing_or_corrupt_files_raise_corpus_error(tmp_path: Path, damage: str) -> None:
    directory = tmp_path / "g"
    vectors = unit_rows(30, 8, seed=13)
    TopKGraph.build(directory, vectors, [f"r{i}" for i in range(30)], k=4)
    gen = _generation_dir(directory)
    if damage == "no-graph":
        directory = tmp_path / "empty"
        directory.mkdir()
    elif damage == "missing-array":
        (gen / storage.SIMILARITIES_FILE).unlink()
    elif damage == "garbage-array":
        (gen / storage.NEIGHBOURS_FILE).write_bytes(b"\x00garbage" * 10)
    elif damage == "wrong-shape":
        np.save(gen / storage.NEIGHBOURS_FILE, np.zeros((30, 3), np.int32))
    elif damage == "wrong-dtype":
        np.save(gen / storage.SIMILARITIES_FILE, np.zeros((30, 4), np.float32))
    elif damage == "bad-meta":
        (gen / storage.META_FILE).write_text("{not json")
    elif damage == "ids-count":
        (gen / storage.IDS_FILE).write_text(json.dumps(["a", "b"]))
    elif damage == "dangling-pointer":
        (directory / storage.CURRENT_FILE).write_text("g99999999\n")
    elif damage == "out-of-range":
        np.save(gen / storage.NEIGHBOURS_FILE, np.full((30, 4), 30, np.int32))
    with pytest.raises(CorpusError, match="graph"):
        TopKGraph.open(directory)


def test_bad_inputs_raise_corpus_error(tmp_path: Path) -> None:
    vectors = unit_rows(10, 4, seed=14)
    with pytest.raises(CorpusError, match="ids for"):
        TopKGraph.build(tmp_path / "a", vectors, ["x"], k=3)
    with pytest.raises(CorpusError, match="unique"):
        TopKGraph.build(tmp_path / "b", vectors, ["x"] * 10, k=3)
    bad = vectors.copy()
    bad[2, 1] = np.nan
    with pytest.raises(CorpusError, match="NaN"):
        TopKGraph.build(tmp_path / "c", bad, [str(i) for i in range(10)], k=3)
    with pytest.raises(CorpusError, match="2-D"):
        TopKGraph.build(tmp_path / "d", vectors[0], ["x"], k=3)
    with pytest.raises(CorpusError, match="at least 1"):
        TopKGraph.build(tmp_path / "e", vectors, [str(i) for i in range(10)], k=0)


def test_rebuild_replaces_the_graph_and_accepts_a_memmap(tmp_path: Path) -> None:
    vectors = unit_rows(50, 8, seed=15)
    path = tmp_path / "emb.f32"
    vectors.tofile(path)
    on_disk = np.memmap(path, dtype=np.float32, mode="r", shape=(50, 8))
    ids = [f"r{i}" for i in range(50)]
    TopKGraph.build(tmp_path / "g", on_disk[:20], ids[:20], k=4)
    graph = TopKGraph.build(tmp_path / "g", on_disk, ids, k=4)
    assert len(TopKGraph.open(tmp_path / "g")) == 50
    assert_exact(np.asarray(graph.neighbour_rows), graph.similarities, vectors, 4)
    assert len([p for p in (tmp_path / "g").iterdir() if p.is_dir()]) == 1


# --------------------------------------------------------------------------------------------
# approximate graph (faiss HNSW)
# --------------------------------------------------------------------------------------------


def clustered_rows(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors around 40 centres: a corpus-like neighbourhood structure."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, dim))
    matrix = centres[rng.integers(0, 40, n)] + 0.7 * rng.standard_normal((n, dim))
    return (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)


def test_approximate_graph_has_the_exact_graphs_format_and_high_recall(tmp_path: Path) -> None:
    vectors = clustered_rows(3000, 32, seed=21)
    ids = [f"a{i}" for i in range(len(vectors))]
    approx = TopKGraph.build(tmp_path / "approx", vectors, ids, k=16, method="faiss")
    exact = TopKGraph.build(tmp_path / "exact", vectors, ids, k=16, method="exact")
    assert approx.method == "faiss" and exact.method == "exact"
    assert approx.stats()["method"] == "faiss"
    reopened = TopKGraph.open(tmp_path / "approx")
    assert reopened.method == "faiss" and reopened.neighbour_rows.dtype == np.int32
    got, want = np.asarray(reopened.neighbour_rows), np.asarray(exact.neighbour_rows)
    recall = np.mean([len(set(a) & set(b)) / 16 for a, b in zip(got, want, strict=True)])
    assert recall >= 0.95
    assert not (got == np.arange(len(vectors))[:, None]).any()  # never the row itself
    sims = np.asarray(reopened.similarities, np.float32)
    assert (np.diff(sims, axis=1) <= 0).all()  # most similar first
    exact_sims = np.einsum(
        "ij,ij->i", vectors[np.repeat(np.arange(3000), 16)], vectors[got.ravel()]
    )
    np.testing.assert_allclose(sims.ravel(), exact_sims, atol=2e-3)
    # extend keeps the method; the new rows' lists are exact
    more = np.concatenate([vectors, clustered_rows(200, 32, seed=22)])
    grown = reopened.extend(more, [*ids, *[f"b{i}" for i in range(200)]])
    assert grown.method == "faiss" and len(TopKGraph.open(tmp_path / "approx")) == 3200
    new_rows, _ = exact_topk(more, 16, rows=range(3000, 3200))
    np.testing.assert_array_equal(np.asarray(grown.neighbour_rows)[3000:], new_rows)


def test_auto_method_switches_at_the_threshold(tmp_path: Path) -> None:
    vectors = clustered_rows(300, 16, seed=23)
    ids = [f"r{i}" for i in range(300)]
    small = TopKGraph.build(tmp_path / "s", vectors, ids, k=5, exact_max_rows=300)
    large = TopKGraph.build(tmp_path / "l", vectors, ids, k=5, exact_max_rows=299)
    assert (small.method, large.method) == ("exact", "cluster")
    with pytest.raises(CorpusError, match="unknown graph method"):
        TopKGraph.build(tmp_path / "x", vectors, ids, k=5, method="annoy")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# approximate graph (cluster blocks)
# --------------------------------------------------------------------------------------------


def overlap(got: np.ndarray, want: np.ndarray) -> float:
    """Mean |got ∩ want| / k over the rows."""
    k = want.shape[1]
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(got, want, strict=True)]))


def test_cluster_graph_probing_every_cluster_is_the_exact_graph() -> None:
    vectors = clustered_rows(1500, 24, seed=31)
    want_rows, want_values = exact_topk(vectors, 10)
    got_rows, got_values = cluster_topk(vectors, 10, n_clusters=7, probes=7)
    assert got_rows.dtype == np.int32 and got_rows.shape == (1500, 10)
    assert overlap(got_rows, want_rows) == 1.0
    np.testing.assert_array_equal(got_rows, want_rows)  # same order, ties to the lower row
    np.testing.assert_allclose(got_values, want_values, atol=1e-5)


def test_graph_build_passes_the_cluster_parameters_through(tmp_path: Path) -> None:
    vectors = clustered_rows(600, 16, seed=35)
    ids = [f"c{i}" for i in range(600)]
    want, _ = exact_topk(vectors, 8)
    every = TopKGraph.build(
        tmp_path / "all", vectors, ids, k=8, method="cluster", clusters=6, probes=6
    )
    one = TopKGraph.build(
        tmp_path / "one", vectors, ids, k=8, method="cluster", clusters=6, probes=1
    )
    assert every.method == one.method == "cluster"
    np.testing.assert_array_equal(np.asarray(every.neighbour_rows), want)  # P = C: exact
    assert overlap(np.asarray(one.neighbour_rows), want) < 1.0  # one cluster of six compared


def test_cluster_graph_is_deterministic_with_high_recall_and_exact_similarities() -> None:
    vectors = clustered_rows(4000, 32, seed=32)
    want, _ = exact_topk(vectors, 16)
    got, values = cluster_topk(vectors, 16, n_clusters=40, probes=8)
    again, values_again = cluster_topk(vectors, 16, n_clusters=40, probes=8)
    np.testing.assert_array_equal(got, again)
    np.testing.assert_array_equal(values, values_again)
    assert 0.9 <= overlap(got, want) < 1.0  # approximate, but close
    assert not (got == np.arange(4000)[:, None]).any()  # never the row itself
    assert (np.diff(values, axis=1) <= 0).all()
    exact_sims = np.einsum(
        "ij,ij->i", vectors[np.repeat(np.arange(4000), 16)], vectors[got.ravel()]
    )
    np.testing.assert_allclose(values.ravel(), exact_sims, atol=1e-5)


def test_cluster_graph_gives_rows_with_too_few_candidates_their_exact_lists() -> None:
    vectors = clustered_rows(300, 8, seed=33)
    got, values = cluster_topk(vectors, 20, n_clusters=60, probes=1)  # ~5 rows per cluster
    assert got.shape == (300, 20) and np.isfinite(values).all()
    assert all(len(set(row)) == 20 for row in got.tolist())  # k distinct others per row
    assert not (got == np.arange(300)[:, None]).any()


def test_spherical_kmeans_gives_unit_centroids_and_rows_probe_their_own_cluster() -> None:
    vectors = clustered_rows(2000, 16, seed=34)
    centroids = cluster.spherical_kmeans(vectors, 20, seed=1)
    assert centroids.shape == (20, 16)
    np.testing.assert_allclose(np.linalg.norm(centroids, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(centroids, cluster.spherical_kmeans(vectors, 20, seed=1))
    labels, near = cluster.row_probes(torch.from_numpy(vectors), torch.from_numpy(centroids), 3)
    np.testing.assert_array_equal(labels, (vectors @ centroids.T).argmax(axis=1))
    assert near.shape == (2000, 3) and (near == labels[:, None]).any(axis=1).all()
    assert cluster.default_clusters(1) == 1 and cluster.default_clusters(2500) == 3


def test_cluster_method_graph_keeps_format_and_extends_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vectors = clustered_rows(3000, 32, seed=35)
    ids = [f"a{i}" for i in range(3000)]
    # 3,000 rows with the defaults: 3 clusters, all probed: the exact graph
    small = TopKGraph.build(tmp_path / "small", vectors, ids, k=12, method="cluster")
    np.testing.assert_array_equal(np.asarray(small.neighbour_rows), exact_topk(vectors, 12)[0])
    monkeypatch.setattr(cluster, "CLUSTER_ROWS", 100)  # 30 clusters, 3 probed: approximate
    monkeypatch.setattr(cluster, "PROBES", 2)
    built = TopKGraph.build(tmp_path / "g", vectors, ids, k=12, method="cluster")
    assert built.method == "cluster" and built.stats()["method"] == "cluster"
    reopened = TopKGraph.open(tmp_path / "g")
    assert reopened.method == "cluster" and reopened.neighbour_rows.dtype == np.int32
    assert reopened.similarities.dtype == np.float16
    old = np.asarray(reopened.neighbour_rows).copy()
    assert 0.8 < overlap(old, exact_topk(vectors, 12)[0]) < 1.0
    # extend: the new rows get exact lists, each old list is merged with the new rows
    more = np.concatenate([vectors, clustered_rows(150, 32, seed=36)])
    grown = reopened.extend(more, [*ids, *[f"b{i}" for i in range(150)]])
    assert grown.method == "cluster" and len(TopKGraph.open(tmp_path / "g")) == 3150
    rows = np.asarray(grown.neighbour_rows)
    np.testing.assert_array_equal(rows[3000:], exact_topk(more, 12, rows=range(3000, 3150))[0])
    pool = np.concatenate([old, np.broadcast_to(np.arange(3000, 3150), (3000, 150))], axis=1)
    sims = np.einsum("id,ijd->ij", more[:3000], more[pool])
    best = np.take_along_axis(pool, np.argsort(-sims, axis=1, kind="stable")[:, :12], axis=1)
    assert overlap(rows[:3000], best) > 0.999  # (float16 near-ties may swap)
