"""Index-build benchmark: embedding throughput, exact top-k graph build, matmul peak.

Run from the repository root::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/index_build.py

It measures, in one run:

(a) embedding throughput (chunks/s) of the packaged all-MiniLM-L6-v2 on real paragraphs read from
    the evaluation data (``--data``, default ``../shared/data``; nothing is copied into the repo);
(b) for each size (default 1k/10k/50k/100k chunks), in a fresh subprocess so that peak RSS is per
    size: the wall time of ``TopKGraph.build`` (exact top-k, k=100), its GFLOP/s counting the
    2·n·n·d flops of the similarity products actually done, and the peak RSS. The first rows are
    the real embedded paragraphs; sizes beyond them are filled with random unit vectors (the
    cost of an exact build does not depend on the values);
(c) the peak GFLOP/s of a plain numpy float32 matmul of the same kind of shape (block × dim
    times dim × columns), measured before and after the graph builds; the best value is the
    peak that the graph build is compared with.

With ``--scale`` it runs only the scale section and adds it to the existing results: the
approximate graphs against exact at k = 16 and k = 100 (sampled graph recall): the cluster-block
build (``--cluster-sweep`` chooses its parameters) and two HNSW libraries (faiss, hnswlib; their
search can be sampled and extrapolated), build time, CPU seconds and peak RSS up to 1M chunks,
neighbours on demand from a Chroma server against the prebuilt graph, and the capacity for 10^8
chunks on paper. Every row records ``os.getloadavg()`` before and after its timing.

Writes ``benchmarks/results/index_build.json`` and ``benchmarks/results/index_build.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import analysis_block, read_analysis

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data"
DATA_FILES = (
    "musique_dev_ctx.jsonl",
    "hotpotqa_dev_distractor_ctx.jsonl",
    "2wikimultihopqa_dev_ctx.jsonl",
)
#: How the markdown describes each ``--fill`` (see :func:`_scale_vectors`).
FILLS = {
    "gaussian": "random vectors from a Gaussian with the real rows' mean and covariance "
    "(renormalised)",
    "isotropic": "random unit vectors",
    "noisy": "real rows plus Gaussian noise of norm {noise} (renormalised)",
}
COMMAND = "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/index_build.py"


def _peak_rss_mb() -> float:
    """Peak resident set size of this process.

    Linux: VmHWM of /proc/self/status (ru_maxrss would carry over the parent's peak, since a
    forked child starts with the parent's pages and rusage survives exec).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**10
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def _cpu_seconds() -> float:
    """User + system CPU time of this process (all threads): unlike wall time, it does not
    grow when other jobs share the cores."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _current_rss_mb() -> float:
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def _cpu_busy_percent(seconds: float = 1.0) -> float | None:
    """Share of all CPUs busy over ``seconds`` (from /proc/stat); None where unavailable."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [int(v) for v in handle.readline().split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields), idle

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return round(100.0 * (1 - (idle1 - idle0) / total), 1) if total else None


def _wait_until_idle(max_wait_s: float, busy_below: float = 15.0) -> float | None:
    """Wait (up to ``max_wait_s``) until other processes leave the CPUs mostly idle."""
    deadline = time.monotonic() + max_wait_s
    busy = _cpu_busy_percent(2.0)
    while busy is not None and busy > busy_below and time.monotonic() < deadline:
        print(f"  CPU {busy}% busy with other work; waiting ...", flush=True)
        time.sleep(10)
        busy = _cpu_busy_percent(2.0)
    return busy


def _unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    step = 8192
    for start in range(0, n, step):
        block = rng.standard_normal((min(step, n - start), dim), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + len(block)] = block
    return out


# ---------------------------------------------------------------------------------------------
# child processes: one graph build, or one matmul peak measurement
# ---------------------------------------------------------------------------------------------


def _child_graph(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from rag_complexity_agents.corpus.graph import TopKGraph, rows_per_block

    real = np.load(args.real) if args.real else np.zeros((0, args.dim), np.float32)
    n = args.child_graph
    real_rows = min(n, len(real))
    embeddings = np.empty((n, real.shape[1]), dtype=np.float32)
    embeddings[:real_rows] = real[:real_rows]
    if n > real_rows:
        embeddings[real_rows:] = _unit_rows(n - real_rows, real.shape[1], seed=n)
    ids = [f"chunk-{i}" for i in range(n)]
    rss_before = _current_rss_mb()
    with tempfile.TemporaryDirectory(prefix="rca-graph-bench-") as tmp:
        start, cpu_start = time.perf_counter(), time.process_time()
        graph = TopKGraph.build(
            Path(tmp) / "graph",
            embeddings,
            ids,
            k=args.k,
            block_size=args.block_size,
            max_block_bytes=args.max_block_mb * 2**20,
        )
        seconds = time.perf_counter() - start
        cpu_seconds = time.process_time() - cpu_start
        stats = graph.stats()
        # sanity: one row against brute force
        row = n // 2
        sims = embeddings @ embeddings[row]
        sims[row] = -np.inf
        expected = np.sort(sims)[::-1][: graph.k]
        got = np.array([v for _, v in graph.neighbours_of_row(row, graph.k)])
        assert np.allclose(got, expected, atol=2e-3), "graph disagrees with brute force"
    dim = embeddings.shape[1]
    flops = 2.0 * n * n * dim
    return {
        "n_chunks": n,
        "graph_seconds": round(seconds, 3),
        "graph_gflops": round(flops / seconds / 1e9, 1),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "rss_before_build_mb": round(rss_before, 1),
        "real_rows": real_rows,
        "random_rows": n - real_rows,
        "k": stats["k"],
        "dim": dim,
        "rows_per_block": rows_per_block(n, args.block_size, args.max_block_mb * 2**20),
        "graph_bytes_on_disk": stats["bytes_on_disk"],
        "torch_threads": torch.get_num_threads(),
        # CPU time this process got during the build / (wall time × CPUs): ~1 when the
        # build had the whole machine, lower when other work took CPU time from it
        "cpu_share": round(cpu_seconds / (seconds * (os.cpu_count() or 1)), 2),
    }


def _child_matmul(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    shapes = [tuple(int(v) for v in s.split("x")) for s in args.child_matmul.split(",")]
    rng = np.random.default_rng(0)
    result: dict[str, Any] = {"numpy": {}, "torch": {}}
    for rows, dim, cols in shapes:
        a = rng.standard_normal((rows, dim), dtype=np.float32)
        b = rng.standard_normal((cols, dim), dtype=np.float32)
        out = np.empty((rows, cols), dtype=np.float32)
        flops = 2.0 * rows * cols * dim
        reps = max(3, int(2e11 / flops))
        ta, tb, tout = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(out)
        runs = {
            "numpy": lambda a=a, b=b, out=out: np.matmul(a, b.T, out=out),
            "torch": lambda a=ta, b=tb, out=tout: torch.mm(a, b.T, out=out),
        }
        for name, run in runs.items():
            run()  # warm-up
            best = 0.0
            for _ in range(reps):
                start = time.perf_counter()
                run()
                best = max(best, flops / (time.perf_counter() - start) / 1e9)
            result[name][f"{rows}x{dim}x{cols}"] = round(best, 1)
    return result


def _run_child(
    flag: str,
    value: str,
    args: argparse.Namespace,
    real: Path | None,
    extra: list[str] | None = None,
) -> Any:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        flag,
        value,
        "--k",
        str(args.k),
        "--block-size",
        str(args.block_size),
        "--max-block-mb",
        str(args.max_block_mb),
        "--dim",
        str(args.dim),
    ]
    if real is not None:
        cmd += ["--real", str(real)]
    cmd += extra or []
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"child {flag} {value} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# embedding throughput on real paragraphs
# ---------------------------------------------------------------------------------------------


def _real_paragraphs(data: Path, limit: int) -> tuple[list[str], list[str]]:
    texts: list[str] = []
    seen: set[str] = set()
    used: list[str] = []
    for name in DATA_FILES:
        path = data / name
        if not path.is_file():
            continue
        used.append(name)
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                for paragraph in json.loads(line).get("paragraphs") or []:
                    text = f"{paragraph.get('title', '')}\n{paragraph.get('text', '')}".strip()
                    if text and text not in seen:
                        seen.add(text)
                        texts.append(text)
                        if len(texts) >= limit:
                            return texts, used
    return texts, used


def _embedding_throughput(data: Path, limit: int) -> dict[str, Any]:
    from rag_complexity_agents.models.embeddings import load_embedder

    texts, used = _real_paragraphs(data, limit)
    if not texts:
        raise SystemExit(f"no paragraphs found in {data} ({', '.join(DATA_FILES)}); use --data")
    embedder = load_embedder("packaged:all-minilm-l6-v2")
    embedder.encode(texts[:64])  # load the weights, warm up
    tokens = sum(embedder.count_tokens(t) for t in texts)
    start = time.perf_counter()
    vectors = embedder.encode(texts)
    seconds = time.perf_counter() - start
    return {
        "vectors": vectors,
        "chunks": len(texts),
        "files": used,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(len(texts) / seconds, 1),
        "mean_tokens": round(tokens / len(texts), 1),
        "max_tokens": embedder.max_tokens,
        "batch_size": embedder.batch_size,
    }


# ---------------------------------------------------------------------------------------------
# scale: approximate graph vs exact, 1M chunks, neighbours on demand from a Chroma server
# ---------------------------------------------------------------------------------------------


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def _scale_vectors(real: np.ndarray, n: int, fill: str, noise: float, seed: int) -> np.ndarray:
    """``n`` unit vectors: the real embeddings first, then ``fill`` rows (renormalised):

    * ``gaussian``: random vectors drawn from a Gaussian with the real rows' mean and
      covariance: the anisotropy of real embeddings, no duplicated structure;
    * ``isotropic``: random unit vectors (no neighbourhood structure at all: in 384-d every
      row is almost equidistant from every other, the worst case for any ANN index);
    * ``noisy``: a random real row plus Gaussian noise of norm ``noise`` (cosine to the source
      ≈ 1/√(1+noise²); with few real rows, many near-equidistant copies of each).
    """
    rng = np.random.default_rng(seed)
    dim = real.shape[1]
    out = np.empty((n, dim), dtype=np.float32)
    head = min(n, len(real))
    out[:head] = real[:head]
    mean = real.mean(axis=0)
    factor = np.linalg.cholesky(np.cov(real.T) + 1e-6 * np.eye(dim)).astype(np.float32)
    for start in range(head, n, 65536):
        stop = min(n, start + 65536)
        block = rng.standard_normal((stop - start, dim), dtype=np.float32)
        if fill == "gaussian":
            block = block @ factor.T + mean
        elif fill == "noisy":
            block = real[rng.integers(0, len(real), stop - start)] + block * noise / np.sqrt(dim)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:stop] = block
    return out


def _sample_recall(matrix: np.ndarray, cols: np.ndarray, k: int, rows: np.ndarray) -> float:
    """Mean |approximate top-k ∩ exact top-k| / k over ``rows`` (exact by brute force)."""
    hits = 0
    for start in range(0, len(rows), 64):
        part = rows[start : start + 64]
        sims = matrix[part] @ matrix.T
        sims[np.arange(len(part)), part] = -np.inf
        exact = np.argpartition(-sims, k, axis=1)[:, :k]
        for got, want in zip(cols[part, :k], exact, strict=True):
            hits += len(set(got.tolist()) & set(want.tolist()))
    return round(hits / (len(rows) * k), 4)


def _spaced(low: int, high: int, samples: int) -> np.ndarray:
    """Up to ``samples`` evenly spaced rows of ``low .. high - 1``."""
    return np.unique(np.linspace(low, high - 1, samples).astype(np.int64))


def _hnswlib_index(matrix: np.ndarray, k: int) -> Any:
    """The compared library: an hnswlib index (float32, inner product, all cores) with faiss's
    parameters (M, efConstruction, and efSearch for ``k``)."""
    import hnswlib

    from rag_complexity_agents.corpus.graph.ann import EF_CONSTRUCTION, HNSW_M, default_ef_search

    n, dim = matrix.shape
    index = hnswlib.Index(space="ip", dim=dim)
    index.init_index(max_elements=n, ef_construction=EF_CONSTRUCTION, M=HNSW_M, random_seed=0)
    index.add_items(matrix, np.arange(n))
    index.set_ef(default_ef_search(k))
    return index


def _hnswlib_rows(
    index: Any, matrix: np.ndarray, k: int, start: int, stop: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """hnswlib's top-k of rows ``start .. stop - 1``, self excluded (as ``ann.search_rows``)."""
    labels, distances = index.knn_query(matrix[start:stop], k=k + 1)
    own = np.arange(start, stop)[:, None]
    keep = np.argsort(labels == own, axis=1, kind="stable")[:, :k]
    values = 1.0 - np.take_along_axis(distances, keep, axis=1)  # "ip" distance = 1 - dot
    return np.take_along_axis(labels, keep, axis=1).astype(np.int32), values, np.empty(0)


def _child_scale(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from rag_complexity_agents.corpus.graph import TopKGraph, cluster

    method, n_text, *params = args.child_scale.split(":")  # cluster: optional C and P
    n = int(n_text)
    clusters, probes = (int(v) for v in params) if params else (None, None)
    real = np.load(args.real)
    matrix = _scale_vectors(real, n, args.fill, args.noise, seed=n)
    ids = [f"chunk-{i}" for i in range(n)]
    load_before = _load()
    rss_before = _current_rss_mb()
    measured: dict[str, Any] = {}
    searched_rows = np.arange(n)
    with tempfile.TemporaryDirectory(prefix="rca-scale-") as tmp:
        start, cpu_start = time.perf_counter(), _cpu_seconds()
        if method in ("faiss", "hnswlib") and 0 < args.search_sample < n:
            cols, measured, searched_rows = _sampled_hnsw(
                matrix, args.k, args.search_sample, method
            )
        elif method == "hnswlib":
            index = _hnswlib_index(matrix, args.k)
            cols = np.concatenate(
                [
                    _hnswlib_rows(index, matrix, args.k, s, min(n, s + 8192))[0]
                    for s in range(0, n, 8192)
                ]
            )
            del index
        else:
            graph = TopKGraph.build(
                Path(tmp) / "g",
                matrix,
                ids,
                k=args.k,
                method=method,
                clusters=clusters,
                probes=probes,
            )
            cols = np.asarray(graph.neighbour_rows)
        seconds = measured.get("extrapolated_seconds", time.perf_counter() - start)
        cpu = measured.get("extrapolated_cpu_seconds", _cpu_seconds() - cpu_start)
        load_after = _load()
        peak = _peak_rss_mb()
        real_rows = min(n, len(real))
        sample = searched_rows[_spaced(0, len(searched_rows), args.recall_samples)]
        recall = _sample_recall(matrix, cols, args.k, sample)
        real_searched = searched_rows[searched_rows < real_rows]
        real_sample = real_searched[_spaced(0, len(real_searched), args.recall_samples)]
        recall_real = _sample_recall(matrix, cols, args.k, real_sample)
    if method == "cluster":
        measured |= {
            "clusters": clusters or cluster.default_clusters(n),
            "probes": probes or cluster.PROBES,
        }
    return {
        "method": method,
        "n_chunks": n,
        "k": args.k,
        "graph_seconds": round(seconds, 1),
        "graph_cpu_seconds": round(cpu, 1),
        # CPU seconds / wall seconds: ~2 = both cores busy (the BLAS threads are used)
        "cpu_per_wall": round(cpu / seconds, 2) if seconds else None,
        "torch_threads": torch.get_num_threads(),
        "peak_rss_mb": round(peak, 1),
        "rss_before_build_mb": round(rss_before, 1),
        "graph_recall": recall,
        "graph_recall_real_rows": recall_real,
        "recall_samples": args.recall_samples,
        "real_rows": real_rows,
        "fill": args.fill,
        "noise": args.noise,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        **measured,
    }


def _sweep_sample(
    args: argparse.Namespace, n: int
) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """The sweeps' n vectors, 150 sampled real and 150 sampled fill rows, and those rows'
    similarities to every row (self excluded)."""
    real = np.load(args.real)
    matrix = _scale_vectors(real, n, args.fill, args.noise, seed=n)
    head = min(n, len(real))
    rows = np.concatenate([_spaced(0, head, 150), _spaced(head, n, 150)])
    sims = matrix[rows] @ matrix.T
    sims[np.arange(len(rows)), rows] = -np.inf
    return matrix, rows, sims


def _child_ef_sweep(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One faiss HNSW index over ``n`` rows (``M``, efConstruction given); for each k and
    efSearch the recall of sampled real rows and sampled fill rows against brute force."""
    from rag_complexity_agents.corpus.graph.ann import hnsw_index

    n_text, m_text, efc_text = args.child_ef_sweep.split(":")
    n, m, efc = int(n_text), int(m_text), int(efc_text)
    matrix, rows, sims = _sweep_sample(args, n)
    load_before = _load()
    tick = time.perf_counter()
    index = hnsw_index(matrix, m=m, ef_construction=efc)
    build = round(time.perf_counter() - tick, 1)
    out = []
    for k in (int(v) for v in args.sweep_k.split(",")):
        exact = np.argpartition(-sims, k, axis=1)[:, :k]
        for ef in (int(v) for v in args.sweep_ef.split(",")):
            index.hnsw.efSearch = max(ef, k + 1)
            tick = time.perf_counter()
            _, found = index.search(matrix[rows], k + 1)
            per_row = (time.perf_counter() - tick) * 1000 / len(rows)
            hit = [
                len({c for c in got.tolist() if c != row}.intersection(want.tolist())) / k
                for got, want, row in zip(found, exact, rows.tolist(), strict=True)
            ]
            out.append(
                {
                    "n_chunks": n,
                    "m": m,
                    "ef_construction": efc,
                    "index_seconds": build,
                    "k": k,
                    "ef_search": ef,
                    "recall_real_rows": round(float(np.mean(hit[: len(rows) // 2])), 4),
                    "recall_fill_rows": round(float(np.mean(hit[len(rows) // 2 :])), 4),
                    "search_ms_per_row": round(per_row, 2),
                    "loadavg_before": load_before,
                    "loadavg_after": _load(),
                }
            )
    return out


def _child_cluster_sweep(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Cluster-block graphs (k = max of ``--sweep-k``) over ``n`` rows with ``C`` clusters, one
    per number of probed clusters P; the recall at each ``--sweep-k`` of 150 sampled real rows
    and 150 sampled fill rows against brute force (the first k of a row's top-K list are its
    top-k: candidates do not depend on k)."""
    from rag_complexity_agents.corpus.graph.cluster import cluster_topk

    n_text, c_text, probes_text = args.child_cluster_sweep.split(":")
    n, n_clusters = int(n_text), int(c_text)
    matrix, rows, sims = _sweep_sample(args, n)
    ks = [int(v) for v in args.sweep_k.split(",")]
    exact = {k: np.argpartition(-sims, k, axis=1)[:, :k] for k in ks}
    out = []
    for probes in (int(v) for v in probes_text.split("/")):
        load_before = _load()
        tick, cpu = time.perf_counter(), _cpu_seconds()
        cols, _ = cluster_topk(matrix, max(ks), n_clusters=n_clusters, probes=probes)
        seconds, cpu = time.perf_counter() - tick, _cpu_seconds() - cpu
        row: dict[str, Any] = {
            "n_chunks": n,
            "clusters": n_clusters,
            "probes": probes,
            "graph_seconds": round(seconds, 1),
            "graph_cpu_seconds": round(cpu, 1),
            "loadavg_before": load_before,
            "loadavg_after": _load(),
        }
        for k in ks:
            hit = [
                len(set(got.tolist()) & set(want.tolist())) / k
                for got, want in zip(cols[rows, :k], exact[k], strict=True)
            ]
            row[f"recall_real_at_{k}"] = round(float(np.mean(hit[: len(rows) // 2])), 4)
            row[f"recall_fill_at_{k}"] = round(float(np.mean(hit[len(rows) // 2 :])), 4)
        out.append(row)
    return out


def _child_probe_recall(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The recall of cluster-block graphs over ``n`` rows with ``C`` clusters for each number
    of probed clusters P, without building them: the build's own clustering (same vectors,
    same k-means seed) and, for 150 sampled real and 150 sampled fill rows, the rank of every
    exact neighbour's cluster among the row's centroids by similarity. A row compares exactly
    with the members of its P most similar clusters, so its top-k holds exactly the true
    neighbours whose cluster ranks below P: recall(P) = their share. Also times the k-means
    and the assignment of every row (the build's fixed part)."""
    import torch

    from rag_complexity_agents.corpus.graph.cluster import assign_clusters, spherical_kmeans

    n_text, c_text, probes_text = args.child_probe_recall.split(":")
    n, n_clusters = int(n_text), int(c_text)
    matrix, rows, sims = _sweep_sample(args, n)
    load_before = _load()
    tick, cpu = time.perf_counter(), _cpu_seconds()
    centroids = torch.from_numpy(spherical_kmeans(matrix, n_clusters, seed=0))
    labels = assign_clusters(torch.from_numpy(matrix), centroids)
    fixed_seconds, fixed_cpu = time.perf_counter() - tick, _cpu_seconds() - cpu
    order = np.argsort(-(matrix[rows] @ centroids.numpy().T), axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(n_clusters)[None, :], axis=1)
    half = len(rows) // 2
    ranks = {}
    for k in (int(v) for v in args.sweep_k.split(",")):
        exact = np.argpartition(-sims, k, axis=1)[:, :k]
        ranks[k] = np.take_along_axis(rank, labels[exact], axis=1)  # rows × k
    out = []
    for probes in (int(v) for v in probes_text.split("/")):
        row: dict[str, Any] = {
            "n_chunks": n,
            "clusters": n_clusters,
            "probes": probes,
            "candidates_per_row": round(probes * n / n_clusters),
            "kmeans_assign_seconds": round(fixed_seconds, 1),
            "kmeans_assign_cpu_seconds": round(fixed_cpu, 1),
            "loadavg_before": load_before,
            "loadavg_after": _load(),
        }
        for k, got in ranks.items():
            hit = (got < probes).mean(axis=1)
            row[f"recall_real_at_{k}"] = round(float(hit[:half].mean()), 4)
            row[f"recall_fill_at_{k}"] = round(float(hit[half:].mean()), 4)
        out.append(row)
    return out


def _sampled_hnsw(
    matrix: np.ndarray, k: int, rows: int, library: str = "faiss", windows: int = 16
) -> tuple[np.ndarray, dict[str, Any], np.ndarray]:
    """Build an HNSW index (``library``: faiss or hnswlib) over all rows, search only ``rows``
    of them (``windows`` runs of consecutive rows spread evenly over the matrix), and
    extrapolate the whole graph's time (index + rows searched × n / rows). The n × k output
    buffers are allocated and written in full, so the peak RSS is the full build's. Returns
    (n × k neighbour rows, -1 where not searched; the measured figures; the searched rows)."""
    from rag_complexity_agents.corpus.graph.ann import default_ef_search, hnsw_index, search_rows

    n = len(matrix)
    cols = np.full((n, k), -1, dtype=np.int32)
    values = np.zeros((n, k), dtype=np.float32)
    values.fill(-1.0)
    tick, cpu = time.perf_counter(), _cpu_seconds()
    index = hnsw_index(matrix) if library == "faiss" else _hnswlib_index(matrix, k)
    search: Any = search_rows if library == "faiss" else _hnswlib_rows
    index_seconds, index_cpu = time.perf_counter() - tick, _cpu_seconds() - cpu
    per_window = max(1, rows // windows)
    starts = _spaced(0, n - per_window + 1, windows)
    tick, cpu = time.perf_counter(), _cpu_seconds()
    for start in starts.tolist():
        stop = start + per_window
        cols[start:stop], values[start:stop], _ = search(index, matrix, k, start, stop)
    search_seconds, search_cpu = time.perf_counter() - tick, _cpu_seconds() - cpu
    searched = np.concatenate([np.arange(s, s + per_window) for s in starts.tolist()])
    per_row, cpu_per_row = search_seconds / len(searched), search_cpu / len(searched)
    return (
        cols,
        {
            "extrapolated_seconds": index_seconds + per_row * n,
            "extrapolated_cpu_seconds": index_cpu + cpu_per_row * n,
            "index_seconds": round(index_seconds, 1),
            "index_cpu_seconds": round(index_cpu, 1),
            "rows_searched": len(searched),
            "search_ms_per_row": round(per_row * 1000, 3),
            "search_cpu_ms_per_row": round(cpu_per_row * 1000, 3),
            "ef_search": default_ef_search(k),
            "graph_seconds_extrapolated": True,
        },
        searched,
    )


def _nar_queries(
    matrix: np.ndarray,
    chunks: dict[str, Any],
    graph: Any,
    source: Any,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Whole NAR queries (c = 100, b = 16, ``--on-demand-k`` neighbours per document) over the
    prebuilt graph and over neighbours on demand from ``source`` (cold cache per query; with
    the batched prefetch NAR does, and without it), timed per query, and how far their
    top-10s agree. Query = a stored row's vector; R = its top 100 by dot product; scorer = dot
    product with the stored vectors (cheap, so the times are NAR's and the store's)."""
    from rag_complexity_agents.config import NARParams
    from rag_complexity_agents.integrations.neighbours import OnDemandGraph
    from rag_complexity_agents.retrieval.nar_trace import neighbourhood_aware_rerank
    from rag_complexity_agents.types import ScoredDoc

    params = NARParams(b=16, c=100, neighbours_per_doc=args.on_demand_k)
    rng = np.random.default_rng(1)
    rows = rng.choice(len(matrix), size=args.on_demand_nar_queries, replace=False)
    times: dict[str, list[float]] = {"prebuilt": [], "on_demand_batched": [], "on_demand": []}
    calls: dict[str, list[int]] = {"on_demand_batched": [], "on_demand": []}
    overlap: list[float] = []
    for row in rows.tolist():
        vector = matrix[row]

        def score(_query: str, batch: Any, vector: np.ndarray = vector) -> np.ndarray:
            return matrix[[int(c.id.split("-")[1]) for c in batch]] @ vector

        top = np.argsort(-(matrix @ vector))[:100]
        initial = [ScoredDoc(chunks[f"chunk-{i}"], 0.0, rank=r) for r, i in enumerate(top, 1)]
        tops = {}
        for mode in times:
            on_demand = OnDemandGraph(
                source, chunk_of=chunks.__getitem__, add_chunk=lambda c: c, k=args.on_demand_k
            )
            neighbours = graph.neighbours if mode == "prebuilt" else on_demand.neighbours
            prefetch = on_demand.prefetch if mode == "on_demand_batched" else None
            tick = time.perf_counter()
            result = neighbourhood_aware_rerank(
                "q",
                initial,
                score=score,
                neighbours=neighbours,
                chunk_of=chunks.__getitem__,
                params=params,
                prefetch=prefetch,
            )
            times[mode].append((time.perf_counter() - tick) * 1000)
            if mode in calls:
                calls[mode].append(on_demand.counts["store_calls"])
            tops[mode] = [d.id for d in result.docs[:10]]
        overlap.append(len(set(tops["prebuilt"]) & set(tops["on_demand_batched"])) / 10)
    out: dict[str, Any] = {"nar_queries": len(rows), "nar_params": "c=100, b=16"}
    for mode, values in times.items():
        out[f"nar_ms_per_query_{mode}"] = round(float(np.mean(values)), 1)
    for mode, values in calls.items():
        out[f"store_calls_per_query_{mode}"] = round(float(np.mean(values)), 1)
    out["nar_top10_agreement_on_demand_vs_prebuilt"] = round(float(np.mean(overlap)), 4)
    return out


def _on_demand_latency(real: np.ndarray, args: argparse.Namespace) -> dict[str, Any]:
    """Per-look-up latency of neighbours on demand from a Chroma server vs the prebuilt graph,
    and how often their lists agree (Chroma's own index is approximate too)."""
    import shutil
    import socket
    import urllib.request

    import chromadb
    from chromadb.config import Settings

    from rag_complexity_agents.corpus.graph import TopKGraph
    from rag_complexity_agents.integrations.external import make_chunk
    from rag_complexity_agents.integrations.neighbours import ChromaSource, OnDemandGraph

    n, k, b = args.on_demand_size, args.on_demand_k, 16
    matrix = _scale_vectors(real, n, args.fill, args.noise, seed=n)
    ids = [f"chunk-{i}" for i in range(n)]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    exe = shutil.which("chroma", path=str(Path(sys.executable).parent))
    with tempfile.TemporaryDirectory(prefix="rca-od-") as tmp:
        server = subprocess.Popen(
            [str(exe), "run", "--path", f"{tmp}/db", "--host", "127.0.0.1", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 300  # a loaded machine needs ~1 min to start it
            while time.monotonic() < deadline:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1)
                    break
                except OSError:
                    time.sleep(0.2)
            client = chromadb.HttpClient(
                host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False)
            )
            collection = client.create_collection(
                "scale", metadata={"hnsw:space": "cosine"}, embedding_function=None
            )
            step = int(client.get_max_batch_size())
            tick = time.perf_counter()
            for start in range(0, n, step):
                stop = min(n, start + step)
                collection.add(
                    ids=ids[start:stop],
                    embeddings=matrix[start:stop],
                    documents=[f"text {i}" for i in range(start, stop)],
                )
            load_seconds = time.perf_counter() - tick
            graph = TopKGraph.build(f"{tmp}/graph", matrix, ids, k=k, method="exact")
            chunks = {i: make_chunk(f"text {r}", id=i) for r, i in enumerate(ids)}
            rng = np.random.default_rng(0)
            queries = [ids[i] for i in rng.choice(n, size=args.on_demand_queries, replace=False)]
            load_before = _load()
            single = OnDemandGraph(
                ChromaSource(collection, make_chunk),
                chunk_of=chunks.__getitem__,
                add_chunk=lambda c: c,
                k=k,
            )
            tick = time.perf_counter()
            on_demand = [single.neighbours(q, k) for q in queries]
            single_ms = (time.perf_counter() - tick) * 1000 / len(queries)
            tick = time.perf_counter()
            for q in queries:
                single.neighbours(q, k)
            cached_ms = (time.perf_counter() - tick) * 1000 / len(queries)
            batched = OnDemandGraph(
                ChromaSource(collection, make_chunk),
                chunk_of=chunks.__getitem__,
                add_chunk=lambda c: c,
                k=k,
            )
            tick = time.perf_counter()
            for start in range(0, len(queries), b):
                batched.prefetch(queries[start : start + b], k)
            batch_ms = (time.perf_counter() - tick) * 1000 / math.ceil(len(queries) / b)
            tick = time.perf_counter()
            prebuilt = [graph.neighbours(q, k) for q in queries]
            graph_ms = (time.perf_counter() - tick) * 1000 / len(queries)
            nar = _nar_queries(matrix, chunks, graph, ChromaSource(collection, make_chunk), args)
            load_after = _load()
        finally:
            server.terminate()
            server.wait(timeout=30)
    agree = np.mean(
        [
            len({i for i, _ in a} & {i for i, _ in p}) / k
            for a, p in zip(on_demand, prebuilt, strict=True)
        ]
    )
    c = 100
    return {
        "n_chunks": n,
        "neighbours": k,
        "queries": len(queries),
        "chroma_load_seconds": round(load_seconds, 1),
        "on_demand_ms_per_lookup": round(single_ms, 2),
        "on_demand_ms_per_batch_of_16": round(batch_ms, 2),
        "cached_ms_per_lookup": round(cached_ms, 4),
        "prebuilt_ms_per_lookup": round(graph_ms, 4),
        "nar_query_ms_unbatched_c100": round(c * single_ms, 1),
        "nar_query_ms_batched_c100_b16": round(math.ceil(c / b) * batch_ms, 1),
        "agreement_with_exact": round(float(agree), 4),
        **nar,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
    }


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import torch

    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "platform": platform.platform(),
    }


def _markdown(report: dict[str, Any]) -> str:
    emb = report["embedding"]
    lines = [
        "# Index build benchmark",
        "",
        f"Reproduce from the repository root: `{COMMAND}`",
        "",
        f"- matmul peak (plain numpy float32 matmul, best of before/after): "
        f"**{report['matmul_peak_gflops']} GFLOP/s**"
        f" (torch.mm: {report['torch_mm_peak_gflops']} GFLOP/s)",
        f"- embedding: packaged all-MiniLM-L6-v2 (fp32, CPU), {emb['chunks']} real paragraphs "
        f"from {', '.join(emb['files'])} (mean {emb['mean_tokens']} tokens, truncated at "
        f"{emb['max_tokens']}), batch {emb['batch_size']}: **{emb['chunks_per_s']} chunks/s**",
        f"- graph: exact top-k, k={report['k']}, dim={report['dim']}, block_size="
        f"{report['block_size']} rows, at most {report['max_block_mb']} MiB of similarities per "
        "block; float32 products (torch.mm), int32 + float16 memory-mapped arrays",
        "",
        "| chunks | embed chunks/s | graph s | graph GFLOP/s | fraction of numpy peak "
        "| peak RSS MB | real rows | random rows | CPU busy before % | CPU share |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['n_chunks']:,} | {row['embed_chunks_per_s']} | {row['graph_seconds']} "
            f"| {row['graph_gflops']} | {row['fraction_of_peak']:.2f} | {row['peak_rss_mb']} "
            f"| {row['real_rows']:,} | {row['random_rows']:,} "
            f"| {row.get('cpu_busy_before_pct')} | {row.get('cpu_share')} |"
        )
    machine = report["machine"]
    lines += [
        "",
        "Notes",
        "",
        f"- Machine: {machine['cpu']}, {machine['cpus']} CPUs, Python {machine['python']}, "
        f"numpy {machine['numpy']}, torch {machine['torch']}; {machine['platform']}.",
        f"- Load average at start/end: {report['loadavg_start']} / {report['loadavg_end']}. "
        "The CPUs may be shared with other work; 'CPU busy before' is the whole-machine "
        "busy share in the second before each build; 'CPU share' is the CPU time the build "
        "process got divided by wall time × CPUs (about 1.0 = it had the whole machine).",
        "- GFLOP/s counts the 2·n·n·d flops of the similarity products the build really does "
        "(the full matrix, no symmetry shortcut); graph seconds include selecting the top-k, "
        "ordering, and writing + fsyncing the arrays.",
        "- Each size runs in a fresh subprocess; peak RSS is that process's high-water mark "
        "(VmHWM), including the Python/torch runtime (~230 MB), the embedding matrix "
        f"(n × {report['dim']} float32) held by the caller and one block of similarities "
        f"(at most {report['max_block_mb']} MiB).",
        "- Embedding throughput is measured once (on the real paragraphs) and repeated on every "
        "row; rows beyond the real paragraphs use random unit vectors.",
        f"- matmul peak measurements: numpy {report['matmul_measurements']['numpy']}, "
        f"torch {report['matmul_measurements']['torch']}.",
        "",
    ]
    return "\n".join(lines)


def _scale_markdown(scale: dict[str, Any], analysis: str = "") -> str:
    """The scale section: approximate vs exact, 1M chunks, on-demand neighbours, 10^8 on paper,
    and the hand-written ``analysis`` (kept from the previous markdown by :func:`_write`)."""
    lines = [
        "",
        "## Scale: approximate graph, 1M chunks, neighbours on demand",
        "",
        "Each part records the command that produced it (`command` in the JSON). "
        f"Vectors: {scale['real_rows']:,} real MiniLM paragraph embeddings, then "
        f"{FILLS[scale.get('fill', 'noisy')].format(noise=scale['noise'])}. `graph_recall` = "
        "mean |approximate top-k ∩ exact top-k| / k over evenly spaced sample rows of all rows "
        "(exact by brute force); `recall real` over sample rows among the real embeddings. "
        "Load average (1, 5, 15 min) is recorded before and after every timing: the machine "
        "(2 cores) was shared with other jobs, so times are upper bounds of an idle machine's.",
        "",
        "| method | n_chunks | k | graph_seconds | CPU seconds | CPU / wall | peak_rss_mb "
        "| graph_recall | recall real | load before | load after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in scale["rows"]:
        lines.append(
            f"| {row['method']}"
            + (f" C={row['clusters']} P={row['probes']}" if row.get("clusters") else "")
            + f" | {row['n_chunks']:,} | {row['k']} | {row['graph_seconds']} "
            f"| {row.get('graph_cpu_seconds', '')} | {row.get('cpu_per_wall', '')} "
            f"| {row['peak_rss_mb']} | {row['graph_recall']} "
            f"| {row.get('graph_recall_real_rows', '')} | {row['loadavg_before']} "
            f"| {row['loadavg_after']} |"
        )
    clustered = [r for r in scale["rows"] if r.get("clusters")]
    extrapolated = [r for r in scale["rows"] if r.get("graph_seconds_extrapolated")]
    notes = []
    if clustered:
        notes.append(
            "Cluster rows (`TopKGraph.build(method='cluster')`; default parameters unless the "
            "spec gave C and P): "
            + "; ".join(
                f"{r['n_chunks']:,} k={r['k']}: C = {r['clusters']:,} clusters, P = "
                f"{r['probes']} probed, {r.get('torch_threads')} torch threads"
                for r in clustered
            )
            + ". CPU / wall ≈ 2 means both cores worked; under load the wall time is an upper "
            "bound and CPU seconds / 2 estimates an idle machine's wall time."
        )
    if extrapolated:
        notes.append(
            "Rows with an index time: the HNSW index was built over all rows (measured), "
            "`rows_searched` rows were searched and the search time extrapolated to all rows; "
            "the full n × k output buffers were allocated and written, so peak RSS is the "
            "whole build's: "
            + "; ".join(
                f"{r['method']} {r['n_chunks']:,} k={r['k']}: index {r['index_seconds']} s, "
                f"{r['search_ms_per_row']} ms per row searched ({r['rows_searched']:,} rows)"
                for r in extrapolated
            )
            + "."
        )
    if notes:
        lines += ["", " ".join(notes)]
    lines += ["", "Commands:", ""]
    lines += [f"- `{c}`" for c in dict.fromkeys(r.get("command", "") for r in scale["rows"]) if c]
    if scale.get("ef_sweep"):
        lines += _ef_sweep_markdown(scale["ef_sweep"])
        if scale.get("ef_sweep_command"):
            lines += ["", f"Command: `{scale['ef_sweep_command']}`"]
    if scale.get("cluster_sweep"):
        ks = sorted(
            {
                int(key.rsplit("_", 1)[1])
                for r in scale["cluster_sweep"]
                for key in r
                if "_at_" in key
            }
        )
        lines += [
            "",
            "### Cluster blocks: recall against exact by probed clusters",
            "",
            f"One cluster-block graph (k = {max(ks)}) per (n, C clusters, P probed clusters), "
            "k-means included in the seconds; 150 sampled real rows and 150 sampled fill rows, "
            "each against brute force (a row's first k neighbours are its top-k).",
            "",
            "| n | C | P | graph s | CPU s | "
            + " | ".join(f"recall@{k} real | recall@{k} fill" for k in ks)
            + " | load before |",
            "|---:|---:|---:|---:|---:|" + "---:|---:|" * len(ks) + "---|",
        ]
        lines += [
            f"| {r['n_chunks']:,} | {r['clusters']:,} | {r['probes']} | {r['graph_seconds']} "
            f"| {r['graph_cpu_seconds']} | "
            + " | ".join(f"{r[f'recall_real_at_{k}']} | {r[f'recall_fill_at_{k}']}" for k in ks)
            + f" | {r['loadavg_before']} |"
            for r in scale["cluster_sweep"]
        ]
        if scale.get("cluster_sweep_command"):
            lines += ["", f"Command: `{scale['cluster_sweep_command']}`"]
    if scale.get("probe_recall"):
        lines += _probe_recall_markdown(scale)
    nar = scale.get("nar_by_graph")
    if nar:
        methods = list(dict.fromkeys(m for r in nar["rows"] for m in r["recall_at_10"]))
        lines += [
            "",
            "### NAR R@10 on the retrieval benchmark by graph method",
            "",
            "`benchmarks/retrieval.py --graph-method …` (same corpus, queries, first stage and "
            "scorer; only the neighbourhood graph differs). Δ = a column's R@10 − "
            f"{methods[0]}'s, in points.",
            "",
            "| dataset | queries | pool | scorer | c | n | "
            + " | ".join(f"R@10 {m}" for m in methods)
            + "".join(f" | Δ {m}" for m in methods[1:])
            + " |",
            "|---|---|---|---|---:|---:|" + "---:|" * (2 * len(methods) - 1),
        ]
        for r in nar["rows"]:
            got = r["recall_at_10"]
            deltas = [
                f"{(got[m] - got[methods[0]]) * 100:+.2f}" if m in got and methods[0] in got else ""
                for m in methods[1:]
            ]
            lines.append(
                f"| {r['dataset']} | {r['queries']} | {r['pool']} | {r['scorer']} "
                f"| {r['budget']} | {r['n_queries']} | "
                + " | ".join(f"{got.get(m, '')}" for m in methods)
                + "".join(f" | {d}" for d in deltas)
                + " |"
            )
        recalls = {m: v for r in nar["rows"] for m, v in r.get("graph_recall", {}).items()}
        if recalls:
            lines += [
                "",
                "Graph recall against the collection's exact graph (all rows): "
                + ", ".join(f"{m} {v}" for m, v in recalls.items())
                + ".",
            ]
        extra = [nar[key] for key in ("note", "command") if nar.get(key)]
        lines += ["", *extra] if extra else []
    od = scale.get("on_demand")
    if od:
        lines += [
            "",
            f"### Neighbours on demand from a Chroma server ({od['n_chunks']:,} chunks, "
            f"{od['neighbours']} neighbours, {od['queries']} look-ups)",
            "",
            "| look-up | ms |",
            "|---|---:|",
            f"| on demand, one document per store call | {od['on_demand_ms_per_lookup']} |",
            f"| on demand, a batch of 16 per store call | {od['on_demand_ms_per_batch_of_16']} |",
            f"| on demand, served from the cache | {od['cached_ms_per_lookup']} |",
            f"| prebuilt memory-mapped graph | {od['prebuilt_ms_per_lookup']} |",
            "",
            "Per NAR query with c = 100, b = 16 (cold cache), from the look-up times above: "
            f"{od['nar_query_ms_unbatched_c100']}"
            f" ms with one look-up per scored document, "
            f"{od['nar_query_ms_batched_c100_b16']} ms with c/b = 7 batched look-ups (NAR's "
            "prefetch). "
            f"Agreement of the on-demand lists with the exact graph: "
            f"{od['agreement_with_exact']} (Chroma's HNSW index is approximate). "
            f"Load: {od['loadavg_before']} → {od['loadavg_after']}.",
        ]
        if "nar_ms_per_query_prebuilt" in od:
            lines += [
                "",
                f"Whole NAR queries ({od['nar_queries']} queries, {od['nar_params']}, "
                f"{od['neighbours']} neighbours per document, cold cache per query; top-10 "
                "agreement of NAR on demand with NAR on the prebuilt graph: "
                f"{od['nar_top10_agreement_on_demand_vs_prebuilt']}):",
                "",
                "| neighbours from | ms per query | store calls per query |",
                "|---|---:|---:|",
                f"| prebuilt graph | {od['nar_ms_per_query_prebuilt']} | 0 |",
                f"| Chroma server, batched prefetch (what NAR does) "
                f"| {od['nar_ms_per_query_on_demand_batched']} "
                f"| {od['store_calls_per_query_on_demand_batched']} |",
                f"| Chroma server, one look-up per document | {od['nar_ms_per_query_on_demand']} "
                f"| {od['store_calls_per_query_on_demand']} |",
            ]
        if od.get("command"):
            lines += ["", f"Command: `{od['command']}`"]
    lines += ["", "### Capacity on paper: 10^8 chunks (384-d)", ""]
    lines += [f"- {line}" for line in scale["capacity"]]
    lines += ["", "### Analysis", "", *analysis_block(analysis)]
    return "\n".join(lines) + "\n"


def _build_cost_model(scale: dict[str, Any]) -> dict[int, tuple[float, float, float]]:
    """Per n: (CPU seconds per candidate, CPU / wall, fixed CPU seconds at the measured C) of
    the measured cluster-block build (k = 100) whose clustering the probe-recall rows timed (of
    several, the one with the highest CPU / wall: the least loaded machine): its CPU seconds
    minus the k-means and assignment, over its n · P · (n / C) candidate comparisons. The
    blocks' cost is linear in the candidates per row."""
    fixed = {
        (r["n_chunks"], r["clusters"]): r["kmeans_assign_cpu_seconds"]
        for r in scale.get("probe_recall", [])
    }
    model = {}
    for r in scale["rows"]:
        key = (r["n_chunks"], r.get("clusters"))
        if r["method"] == "cluster" and r["k"] == 100 and key in fixed and r.get("cpu_per_wall"):
            candidates = r["n_chunks"] * r["probes"] * r["n_chunks"] / r["clusters"]
            per = (r["graph_cpu_seconds"] - fixed[key]) / candidates
            if r["n_chunks"] not in model or r["cpu_per_wall"] > model[r["n_chunks"]][1]:
                model[r["n_chunks"]] = (per, r["cpu_per_wall"], fixed[key])
    return model


def _ef_sweep_markdown(sweep: list[dict[str, Any]]) -> list[str]:
    """The efSearch sweep, one line per (n, M, efConstruction, k) and one column per
    efSearch: recall of the real / fill rows and search ms per row."""
    efs = sorted({r["ef_search"] for r in sweep})
    groups: dict[tuple[Any, ...], dict[int, dict[str, Any]]] = {}
    for r in sweep:
        key = (r["n_chunks"], r["m"], r["ef_construction"], r["index_seconds"], r["k"])
        groups.setdefault(key, {})[r["ef_search"]] = r
    lines = [
        "",
        "### HNSW parameters: recall against exact by efSearch",
        "",
        "One faiss index per (n, M, efConstruction); 150 sampled real rows and 150 sampled "
        "fill rows, each against brute force. Cells: recall of the real rows / of the fill "
        "rows (search ms per row, a batch of 300 rows on the shared machine; load "
        + ", ".join(dict.fromkeys(str(r["loadavg_before"]) for r in sweep))
        + ").",
        "",
        "| n | M | efConstruction | index s | k | "
        + " | ".join(f"efSearch {ef}" for ef in efs)
        + " |",
        "|---:|---:|---:|---:|---:|" + "---|" * len(efs),
    ]
    for (n, m, efc, index_s, k), by_ef in groups.items():
        cells = [
            f"{by_ef[ef]['recall_real_rows']} / {by_ef[ef]['recall_fill_rows']} "
            f"({by_ef[ef]['search_ms_per_row']})"
            if ef in by_ef
            else ""
            for ef in efs
        ]
        lines.append(f"| {n:,} | {m} | {efc} | {index_s} | {k} | " + " | ".join(cells) + " |")
    return lines


def _probe_recall_markdown(scale: dict[str, Any]) -> list[str]:
    """The probe-recall table, one line per number of candidates per row and one column per
    cluster count C: the P giving those candidates, recall@k of the real / fill rows, and the
    modelled build wall time."""
    rows = scale["probe_recall"]
    ks = sorted({int(key.rsplit("_", 1)[1]) for r in rows for key in r if "_at_" in key})
    model = _build_cost_model(scale)
    clusters = sorted({(r["n_chunks"], r["clusters"]) for r in rows})
    lines = [
        "",
        "### Cluster blocks: recall by probed clusters P, from the clustering (no build)",
        "",
        "The build's own clustering (same vectors, k-means seed and assignment); for 150 "
        "sampled real and 150 sampled fill rows, a true top-k neighbour is found iff its "
        "cluster is among the row's P most similar centroids, so recall(P) is the share of "
        "such neighbours (no graph built). Modelled build time: the measured cluster build "
        "at the same n (k = 100) minus its k-means and assignment, per candidate comparison "
        "(n · P · n / C), times this row's candidates, plus this row's timed k-means and "
        "assignment; wall = CPU / (the measured build's CPU / wall). Cells: P; "
        + "; ".join(f"recall@{k} real / fill" for k in ks)
        + "; modelled wall s. k-means + assignment CPU s: "
        + ", ".join(
            f"C = {c:,}: {next(r['kmeans_assign_cpu_seconds'] for r in rows if r['clusters'] == c)}"
            for _, c in clusters
        )
        + "; load before "
        + ", ".join(dict.fromkeys(str(r["loadavg_before"]) for r in rows))
        + ".",
        "",
        "| n | candidates per row | " + " | ".join(f"C = {c:,}" for _, c in clusters) + " |",
        "|---:|---:|" + "---|" * len(clusters),
    ]
    cells: dict[tuple[int, int], dict[tuple[int, int], str]] = {}
    for r in rows:
        wall = ""
        if r["n_chunks"] in model:
            per, cpu_per_wall, _ = model[r["n_chunks"]]
            cpu = r["kmeans_assign_cpu_seconds"] + per * r["n_chunks"] * r["candidates_per_row"]
            wall = f"; {cpu / cpu_per_wall:,.0f}"
        recall = "; ".join(
            f"{r[f'recall_real_at_{k}']:.2f} / {r[f'recall_fill_at_{k}']:.2f}" for k in ks
        )
        line = cells.setdefault((r["n_chunks"], r["candidates_per_row"]), {})
        line[(r["n_chunks"], r["clusters"])] = f"P {r['probes']}: {recall}{wall}"
    for (n, candidates), by_c in sorted(cells.items()):
        lines.append(
            f"| {n:,} | {candidates:,} | " + " | ".join(by_c.get(c, "") for c in clusters) + " |"
        )
    if scale.get("probe_recall_command"):
        lines += ["", f"Command: `{scale['probe_recall_command']}`"]
    return lines


def _capacity(rows: list[dict[str, Any]], gflops: float) -> list[str]:
    """What 10^8 chunks cost, from the measured rows (the largest cluster-block build, with
    the default P where there is one)."""
    from rag_complexity_agents.corpus.graph.cluster import CLUSTER_ROWS, PROBES

    n, dim = 10**8, 384
    approx = [r for r in rows if r["method"] == "cluster"]
    timed = [r for r in approx if r.get("graph_cpu_seconds")] or approx  # CPU: load-free
    biggest = (
        max(timed, key=lambda r: (r["n_chunks"], r["k"], r.get("probes") == PROBES))
        if timed
        else None
    )
    out = [
        f"Embeddings: {n * dim * 4 / 1e9:.0f} GB as float32 ({n * dim * 2 / 1e9:.0f} GB "
        "float16): more than this machine's 24 GB of RAM, so no single-machine index holds "
        "them in memory.",
        f"Graph on disk (int32 ids + float16 similarities): {n * 100 * 6 / 1e9:.0f} GB at "
        f"k = 100, {n * 16 * 6 / 1e9:.1f} GB at k = 16; memory-mapped, a look-up reads one row.",
        f"Exact build: 2·n²·d = {2 * n * n * dim:.1e} flop, at {gflops:.0f} GFLOP/s "
        f"{2 * n * n * dim / gflops / 1e9 / 86400:.0f} days: out of reach.",
    ]
    if biggest is not None:
        cpu = biggest.get("graph_cpu_seconds") or biggest["graph_seconds"] * 2
        blocks = cpu * n / biggest["n_chunks"]  # fixed cluster size and P: linear in n
        assign = 2 * n * (n / CLUSTER_ROWS) * dim / gflops / 1e9  # every row × every centroid
        out.append(
            f"Cluster-block build (the approximate default): its blocks cost n · P · "
            f"{CLUSTER_ROWS} · d · 2 flop, linear in n: from {cpu} CPU-seconds at "
            f"{biggest['n_chunks']:,} chunks (k = {biggest['k']}, P = "
            f"{biggest.get('probes', PROBES)}), about "
            f"{blocks / 3600:.0f} CPU-hours ({blocks / 7200 / 24:.1f} days on 2 idle cores), "
            f"plus assigning every row to one of {n // CLUSTER_ROWS:,} centroids (2·n·C·d = "
            f"{2 * n * (n / CLUSTER_ROWS) * dim:.1e} flop, ~{assign / 3600:.0f} h at "
            f"{gflops:.0f} GFLOP/s; a two-level k-means would make it negligible). But each "
            "cluster gathers its candidates' vectors from anywhere in the matrix, so the "
            "vectors must be in RAM: 154 GB do not fit this machine (an out-of-core build "
            "would first sort the vectors by cluster on disk; not implemented). And at a fixed "
            f"P the recall falls as C grows (recall@{biggest['k']} {biggest['graph_recall']} at "
            f"{biggest['n_chunks']:,} chunks on the benchmark's vectors), so this is a lower "
            "bound of what a useful graph would cost."
        )
    out.append(
        "What serves 10^8 chunks: the vector database cluster that already holds them "
        "(Qdrant, Milvus, Weaviate, pgvector, a Chroma server …) with neighbours on demand "
        "(`from_langchain(store, neighbours='on_demand')`): NAR asks it for the neighbours of "
        "at most c scored documents per query, cached in sqlite; no graph is built. The cost "
        "is about c/b store calls per query (one per batch of b uncached scored documents; "
        "see the latency above)."
    )
    return out


def _real_vectors(args: argparse.Namespace) -> np.ndarray:
    """Real paragraph embeddings: ``--real-vectors`` or embedded now (cached outside the repo)."""
    if args.real_vectors:
        return np.load(args.real_vectors).astype(np.float32)
    from rag_complexity_agents.config import default_home

    cache = default_home() / "benchmarks" / f"index_build_real_{args.scale_real_chunks}.npy"
    if cache.is_file():
        return np.load(cache)
    emb = _embedding_throughput(args.data.resolve(), args.scale_real_chunks)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, emb["vectors"])
    return np.asarray(emb["vectors"], dtype=np.float32)


def _nar_by_graph(paths: list[str]) -> list[dict[str, Any]]:
    """NAR rows of ``benchmarks/retrieval.py`` results run with different ``--graph-method``s:
    R@10 per (dataset, queries, pool, scorer, budget), one column per graph method."""
    runs = [json.loads(Path(path).read_text()) for path in paths]
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for run in runs:
        graph = run["setup"]["graph"]
        method = graph.get("method", "exact")
        if graph.get("clusters") or graph.get("probes"):  # cluster runs with given C / P
            method += f" C={graph.get('clusters') or 'auto'} P={graph.get('probes') or 'auto'}"
        recall = graph.get("recall_vs_exact")
        for row in run["rows"]:
            if row["strategy"] != "nar":
                continue
            key = (row["dataset"], row["queries"], row["pool"], row["scorer"], row["budget"])
            entry = out.setdefault(
                key,
                dict(zip(("dataset", "queries", "pool", "scorer", "budget"), key, strict=True))
                | {"n_queries": row["n_queries"], "recall_at_10": {}, "graph_recall": {}},
            )
            entry["recall_at_10"][method] = row["recall_at_10"]
            if recall is not None:
                entry["graph_recall"][method] = recall
    return list(out.values())


def _add_row(scale: dict[str, Any], row: dict[str, Any]) -> None:
    """Add a build row to the scale section, replacing one of the same method, size, k and (for
    cluster rows) C and P."""

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["method"], r["n_chunks"], r["k"], r.get("clusters"), r.get("probes"))

    rows = [r for r in scale["rows"] if key(r) != key(row)]
    scale["rows"] = sorted(
        [*rows, row], key=lambda r: (r["n_chunks"], r["k"], r["method"], r.get("probes") or 0)
    )


def _scale(args: argparse.Namespace, previous: dict[str, Any]) -> dict[str, Any]:
    """Run the requested parts of the scale section and merge them into the existing one
    (rows replace those of the same method, size and k); every part records its command.
    The JSON/markdown are rewritten after every part."""
    command = " ".join([COMMAND, *sys.argv[1:]])
    scale: dict[str, Any] = dict(previous.get("scale") or {})
    scale.setdefault("rows", [])
    gflops = float(previous.get("rows", [{}])[-1].get("graph_gflops", 200.0))
    scale.setdefault("capacity", _capacity(scale["rows"], gflops))
    for path in filter(None, args.merge_from.split(",")):
        other = json.loads(Path(path).read_text()).get("scale", {})
        for row in other.get("rows", []):
            _add_row(scale, row)
        for key in (
            "on_demand",
            "nar_by_graph",
            "ef_sweep",
            "ef_sweep_command",
            "cluster_sweep",
            "cluster_sweep_command",
            "probe_recall",
            "probe_recall_command",
        ):
            if key in other:
                scale[key] = other[key]
        _write(args.out, {**previous, "scale": scale})
    if args.nar_results:
        scale["nar_by_graph"] = {
            "rows": _nar_by_graph(args.nar_results.split(",")),
            "command": args.nar_command or "",
        }
        _write(args.out, {**previous, "scale": scale})
    if not (
        args.on_demand_size
        or args.ef_sweep
        or args.cluster_sweep
        or args.probe_recall
        or args.scale_runs
    ):
        scale["capacity"] = _capacity(scale["rows"], gflops)
        _write(args.out, {**previous, "scale": scale})
        return scale
    real = _real_vectors(args)
    scale |= {"real_rows": len(real), "fill": args.fill, "noise": args.noise}
    if args.on_demand_size:
        print(f"scale: on-demand neighbours, Chroma server, {args.on_demand_size:,} chunks ...")
        scale["on_demand"] = _on_demand_latency(real, args) | {"command": command}
        scale.pop("on_demand_note", None)
        print(f"    {scale['on_demand']}", flush=True)
        _write(args.out, {**previous, "scale": scale})
    with tempfile.TemporaryDirectory(prefix="rca-scale-") as tmp:
        real_path = Path(tmp) / "real.npy"
        np.save(real_path, real)
        sweep_args = ["--fill", args.fill, "--noise", str(args.noise)]
        sweep_args += ["--sweep-k", args.sweep_k, "--sweep-ef", args.sweep_ef]
        sweeps = (
            ("ef_sweep", args.ef_sweep, "HNSW recall sweep"),
            ("cluster_sweep", args.cluster_sweep, "cluster-block recall sweep"),
            ("probe_recall", args.probe_recall, "cluster-block recall by P, without builds"),
        )
        for key, specs, label in sweeps:
            if specs:
                scale[key] = []
                scale[f"{key}_command"] = command
            for spec in filter(None, specs.split(",")):
                print(f"scale: {label} {spec} ...", flush=True)
                child = "--child-" + key.replace("_", "-")
                scale[key].extend(_run_child(child, spec, args, real_path, sweep_args))
                _write(args.out, {**previous, "scale": scale})
        for spec in filter(None, args.scale_runs.split(",")):
            method, n, k, *params = spec.split(":")
            print(f"scale: {method} graph of {int(n):,} chunks, k={k} ...", flush=True)
            extra = ["--fill", args.fill, "--noise", str(args.noise)]
            extra += ["--recall-samples", str(args.recall_samples)]
            extra += ["--search-sample", str(args.search_sample)]
            run = argparse.Namespace(**{**vars(args), "k": int(k)})
            child = ":".join([method, n, *params])
            row = _run_child("--child-scale", child, run, real_path, extra)
            row["command"] = command
            print(f"    {row}", flush=True)
            _add_row(scale, row)
            _write(args.out, {**previous, "scale": scale})
    scale["capacity"] = _capacity(scale["rows"], gflops)
    _write(args.out, {**previous, "scale": scale})
    return scale


def _write(out: Path, report: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "index_build.json").write_text(json.dumps(report, indent=2) + "\n")
    text = _markdown(report) if "embedding" in report else "# Index build benchmark\n"
    if report.get("scale"):
        text += _scale_markdown(report["scale"], read_analysis(out / "index_build.md"))
    (out / "index_build.md").write_text(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sizes", default="1000,10000,50000,100000")
    parser.add_argument("--embed-chunks", type=int, default=3000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--block-size", type=int, default=4096)
    parser.add_argument("--max-block-mb", type=int, default=256)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        help="wait up to this many seconds for other processes to leave the CPUs idle",
    )
    parser.add_argument(
        "--scale",
        action="store_true",
        help="run only the scale section (approximate graph, 1M chunks, on-demand neighbours) "
        "and add it to the existing results",
    )
    parser.add_argument(
        "--scale-runs",
        default="faiss:100000:16,hnswlib:100000:16,faiss:100000:100,hnswlib:100000:100,"
        "exact:200000:100,faiss:200000:100,faiss:1000000:16",
        help="method:n_chunks:k builds of the scale section; cluster builds may add :C:P "
        "(clusters, probed clusters; default: the library's)",
    )
    parser.add_argument("--scale-real-chunks", type=int, default=12000)
    parser.add_argument(
        "--ef-sweep",
        default="",
        help="n:M:efConstruction,... HNSW indexes whose recall is swept over --sweep-k × "
        "--sweep-ef (before the --scale-runs)",
    )
    parser.add_argument(
        "--cluster-sweep",
        default="",
        help="n:C:P1/P2/...,... cluster-block graphs whose recall at --sweep-k is measured for "
        "each number of probed clusters P (before the --scale-runs)",
    )
    parser.add_argument(
        "--probe-recall",
        default="",
        help="n:C:P1/P2/...,... the recall of cluster-block graphs at --sweep-k for each P, "
        "computed from the build's clustering for sampled rows without building the graphs",
    )
    parser.add_argument("--sweep-k", default="16,100")
    parser.add_argument("--sweep-ef", default="64,128,256,400,600,800")
    parser.add_argument("--real-vectors", help="a .npy of real embeddings to use instead")
    parser.add_argument(
        "--fill",
        choices=("gaussian", "isotropic", "noisy"),
        default="gaussian",
        help="how rows beyond the real embeddings are made (see _scale_vectors)",
    )
    parser.add_argument("--noise", type=float, default=1.0, help="noise norm of --fill noisy")
    parser.add_argument("--recall-samples", type=int, default=1000)
    parser.add_argument(
        "--search-sample",
        type=int,
        default=0,
        help="faiss rows: search only this many rows and extrapolate the graph time",
    )
    parser.add_argument(
        "--nar-results",
        default="",
        help="comma-separated retrieval.json files of benchmarks/retrieval.py runs with "
        "different --graph-method: their NAR R@10 side by side in the scale section",
    )
    parser.add_argument("--nar-command", default="", help="the command behind --nar-results")
    parser.add_argument(
        "--merge-from",
        default="",
        help="comma-separated index_build.json files whose scale parts (rows, on-demand, "
        "sweep, NAR by graph) are merged into --out (runs written elsewhere, e.g. a long 1M "
        "run)",
    )
    parser.add_argument("--on-demand-size", type=int, default=20000)
    parser.add_argument("--on-demand-k", type=int, default=10)
    parser.add_argument("--on-demand-queries", type=int, default=200)
    parser.add_argument("--on-demand-nar-queries", type=int, default=30)
    parser.add_argument("--real", help=argparse.SUPPRESS)
    parser.add_argument("--child-scale", help=argparse.SUPPRESS)
    parser.add_argument("--child-ef-sweep", help=argparse.SUPPRESS)
    parser.add_argument("--child-cluster-sweep", help=argparse.SUPPRESS)
    parser.add_argument("--child-probe-recall", help=argparse.SUPPRESS)
    parser.add_argument("--child-graph", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-matmul", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child_graph is not None:
        print(json.dumps(_child_graph(args)))
        return
    if args.child_matmul is not None:
        print(json.dumps(_child_matmul(args)))
        return
    if args.child_scale is not None:
        print(json.dumps(_child_scale(args)))
        return
    if args.child_ef_sweep is not None:
        print(json.dumps(_child_ef_sweep(args)))
        return
    if args.child_cluster_sweep is not None:
        print(json.dumps(_child_cluster_sweep(args)))
        return
    if args.child_probe_recall is not None:
        print(json.dumps(_child_probe_recall(args)))
        return
    results = args.out / "index_build.json"
    previous = json.loads(results.read_text()) if results.is_file() else {}
    if args.scale:
        sys.path.insert(0, str(REPO))
        _scale(args, previous)
        return

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sys.path.insert(0, str(REPO))
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    loadavg_start = [round(v, 2) for v in os.getloadavg()]

    print(f"(a) embedding throughput on up to {args.embed_chunks} real paragraphs ...", flush=True)
    emb = _embedding_throughput(args.data.resolve(), args.embed_chunks)
    print(f"    {emb['chunks']} chunks in {emb['seconds']} s: {emb['chunks_per_s']} chunks/s")

    from rag_complexity_agents.corpus.graph import rows_per_block

    biggest = max(sizes)
    block_rows = rows_per_block(biggest, args.block_size, args.max_block_mb * 2**20)
    shapes = f"{block_rows}x{args.dim}x{biggest},{min(args.block_size, 4096)}x{args.dim}x16384"

    with tempfile.TemporaryDirectory(prefix="rca-bench-") as tmp:
        real_path = Path(tmp) / "real.npy"
        np.save(real_path, emb["vectors"])

        print(f"(c) matmul peak ({shapes}) ...", flush=True)
        if args.wait_idle:
            _wait_until_idle(args.wait_idle)
        peaks = [_run_child("--child-matmul", shapes, args, None)]
        rows: list[dict[str, Any]] = []
        for n in sizes:
            busy = _wait_until_idle(args.wait_idle) if args.wait_idle else _cpu_busy_percent()
            print(f"(b) graph of {n:,} chunks ...", flush=True)
            row = _run_child("--child-graph", str(n), args, real_path)
            row["cpu_busy_before_pct"] = busy
            row["embed_chunks_per_s"] = emb["chunks_per_s"]
            rows.append(row)
            print(
                f"    {row['graph_seconds']} s, {row['graph_gflops']} GFLOP/s, "
                f"peak RSS {row['peak_rss_mb']} MB",
                flush=True,
            )
        print("(c) matmul peak again ...", flush=True)
        if args.wait_idle:
            _wait_until_idle(args.wait_idle)
        peaks.append(_run_child("--child-matmul", shapes, args, None))

    numpy_peak = max(v for p in peaks for v in p["numpy"].values())
    torch_peak = max(v for p in peaks for v in p["torch"].values())
    ordered = [
        {
            "n_chunks": r["n_chunks"],
            "embed_chunks_per_s": r["embed_chunks_per_s"],
            "graph_seconds": r["graph_seconds"],
            "graph_gflops": r["graph_gflops"],
            "peak_rss_mb": r["peak_rss_mb"],
            "fraction_of_peak": round(r["graph_gflops"] / numpy_peak, 3),
            "fraction_of_torch_peak": round(r["graph_gflops"] / torch_peak, 3),
            **{k: v for k, v in r.items() if k not in {"n_chunks", "graph_seconds"}},
        }
        for r in rows
    ]
    report: dict[str, Any] = {
        "matmul_peak_gflops": numpy_peak,
        "rows": ordered,
        "torch_mm_peak_gflops": torch_peak,
        "matmul_measurements": {
            "numpy": [p["numpy"] for p in peaks],
            "torch": [p["torch"] for p in peaks],
        },
        "k": args.k,
        "dim": args.dim,
        "block_size": args.block_size,
        "max_block_mb": args.max_block_mb,
        "embedding": {k: v for k, v in emb.items() if k != "vectors"},
        "loadavg_start": loadavg_start,
        "loadavg_end": [round(v, 2) for v in os.getloadavg()],
        "machine": _machine(),
        "command": COMMAND,
    }
    if previous.get("scale"):
        report["scale"] = previous["scale"]
    _write(args.out, report)
    print(_markdown(report))


if __name__ == "__main__":
    main()
