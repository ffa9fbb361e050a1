"""Robustness benchmark (issue 17): parser fuzzing, concurrent writers, kill-and-resume, and the
peak RSS of indexing a 100 MB text file.

Run from the repository root::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/robustness.py

(``--skip-index`` leaves out the 100 MB index, ``--size-mb`` changes its size.) It measures:

(a) ``parsers``: every parser of model output on seeded random replies built from format
    fragments and on adversarial repetitions (runs of spaces, brackets, markers) up to 100k
    characters: inputs, exceptions other than our own errors, and the slowest call in ms;
(b) ``concurrent_index_ok``: two ``rca index`` processes started together on one collection
    both succeed and leave it consistent (rows = unique ids = embedding rows = Chroma count =
    graph rows) and searchable;
(c) ``kill_and_resume``: ``rca index`` killed with SIGKILL mid-way, then rerun: every chunk
    stored exactly once;
(d) ``index_100mb_peak_rss_mb``: the peak RSS of a process that indexes one generated 100 MB
    text file (reading, tokenising with the real tokenizer, chunking, storing, Chroma, BM25 and
    the graph). The packaged encoder is loaded, but its ``encode`` is replaced by a hash-seeded
    unit vector per chunk: embedding ~120k chunks of 200 tokens with MiniLM takes about an hour
    on 2 cores, while its own memory is one batch (≈ tens of MB). The encoder's real peak on a
    batch is reported separately (``encoder_batch_peak_rss_mb``).

``load`` and ``abstention`` are null here: they are measured by later work on the server and
on out-of-corpus questions.

Writes ``benchmarks/results/robustness.json`` and ``benchmarks/results/robustness.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import REPO, machine

RESULTS = REPO / "benchmarks" / "results"
FRAGMENTS = (
    " ",
    "\n",
    "[",
    "]",
    "(",
    ")",
    "|",
    "*",
    "**",
    ":",
    "?",
    ".",
    "a",
    "Paris",
    "answer",
    "Answer:",
    "final answer",
    "[Final Answer]:",
    "[Reasoning]:",
    "the answer is",
    "So the answer is",
    "Follow up:",
    "Intermediate answer:",
    "Thought 1:",
    "Action 1: Search[",
    "Finish[",
    "[Query 1]:",
    "[Answer 1]:",
    "[Unsolved Query]:",
    "[Final Content]:",
    "always",
    "context",
    "(s | r | o | 1)",
    "[a | b]",
    "yes",
    "no",
    "A",
    "\x00",
    "é",
    "“",
    "—",
)
ADVERSARIAL = (
    " ",
    "\n",
    "[",
    "(",
    "*",
    "a",
    "answer ",
    "final",
    "(|",
    "so ",
    "[Final Answer]:\n",
    "the answer is .\n",
    "Follow up: \n",
    "Search[",
    "[Query]: ",
    "(s | r | o | 1)\n",
    "[x | y] always\n",
)
SIZES = (1_000, 10_000, 100_000)


def _parsers() -> dict[str, Callable[[str], Any]]:
    from rag_complexity_agents.agents import parsers
    from rag_complexity_agents.agents.single_step import extract_short_answer as single_step
    from rag_complexity_agents.complexity.adaptive.classifier import parse_label_reply
    from rag_complexity_agents.complexity.grade import claims, equivalence, questions, triples
    from rag_complexity_agents.models.calls import parse_yes_no
    from rag_complexity_agents.retrieval.asu import extract_short_answer
    from rag_complexity_agents.retrieval.mer import extract_final_answer

    return {
        "mer.extract_final_answer": extract_final_answer,
        "asu.extract_short_answer": extract_short_answer,
        "grade.parse_triples": lambda t: triples.parse_triples(t, ["c1", "c2"]),
        "grade.parse_groups": equivalence.parse_groups,
        "grade.parse_numbered": lambda t: claims.parse_numbered(t, 3),
        "grade.parse_question": questions.parse_question,
        "grade.parse_description": lambda t: questions.parse_description(t, "Paris"),
        "agents.clean_answer": parsers.clean_answer,
        "agents.clean_query": parsers.clean_query,
        "agents.find_answer": parsers.find_answer,
        "agents.parse_self_ask": parsers.parse_self_ask,
        "agents.parse_react": parsers.parse_react,
        "agents.parse_searchain": parsers.parse_searchain,
        "agents.parse_ircot": parsers.parse_ircot,
        "agents.parse_cot": parsers.parse_cot,
        "single_step.extract_short_answer": single_step,
        "calls.parse_yes_no": parse_yes_no,
        "adaptive.parse_label_reply": parse_label_reply,
    }


def _inputs(n_random: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = [
        filler * (size // len(filler) + 1) + tail
        for filler in ADVERSARIAL
        for size in SIZES
        for tail in ("", "x")
    ]
    for _ in range(n_random):
        size = rng.choice((10, 100, 1_000, 10_000, 100_000))
        parts, length = [], 0
        while length < size:
            part = rng.choice(FRAGMENTS) * rng.choice((1, 1, 1, 3, 50))
            parts.append(part)
            length += len(part)
        out.append("".join(parts)[:size])
    return out


def fuzz_parsers(n_random: int, seed: int = 0) -> list[dict[str, Any]]:
    from rag_complexity_agents.errors import RCAError

    inputs = _inputs(n_random, seed)
    rows = []
    for name, parser in _parsers().items():
        exceptions: dict[str, int] = {}
        slowest, worst = 0.0, ""
        for text in inputs:
            started = time.perf_counter()
            try:
                parser(text)
            except RCAError:
                pass
            except Exception as exc:  # what the fuzzing looks for
                exceptions[type(exc).__name__] = exceptions.get(type(exc).__name__, 0) + 1
            ms = (time.perf_counter() - started) * 1000
            if ms > slowest:
                slowest, worst = ms, f"{text[:20]!r}… ({len(text)} chars)"
        rows.append(
            {
                "parser": name,
                "inputs": len(inputs),
                "max_chars": max(map(len, inputs)),
                "exceptions": sum(exceptions.values()),
                "exception_types": exceptions,
                "max_ms": round(slowest, 2),
                "slowest_input": worst,
            }
        )
        print(f"parser {name}: max {slowest:.1f} ms, {sum(exceptions.values())} exceptions")
    return rows


# ------------------------------------------------------------------------------ index runs
def _env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "RCA_CORPUS__HOME": str(home),
        "RCA_GRAPH__K": "8",
        "RCA_CORPUS__INGEST_BATCH_SIZE": "16",
    }


def _corpus(path: Path, n: int) -> None:
    topics = ["river", "mountain", "city", "film", "novel", "bridge", "painter", "island"]
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            text = (
                f"Entry {i} describes a {topics[i % 8]} called Name{i}. It is number {i} in a "
                f"catalogue of {topics[(i * 3) % 8]}s."
            )
            handle.write(json.dumps({"id": f"doc-{i}", "title": f"Entry {i}", "text": text}) + "\n")


def _index_cmd(corpus: Path, name: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rag_complexity_agents.cli",
        "index",
        str(corpus),
        "-c",
        name,
        "--quiet",
    ]


def _consistency(home: Path, name: str, expected: int) -> dict[str, Any]:
    from rag_complexity_agents.config import Config
    from rag_complexity_agents.corpus.store import CorpusStore
    from rag_complexity_agents.retrieval.first_stage import HybridFirstStage

    store = CorpusStore.open(name, Config(corpus={"home": home}, graph={"k": 8}))
    counts = {
        "rows": len(store),
        "unique_ids": len(set(store.ids)),
        "embedding_rows": int(store.embeddings.shape[0]),
        "chroma": store.chroma_count(),
        "graph_rows": len(store.graph),
    }
    hits = HybridFirstStage(store).search("Which river is called Name8?", 3)
    return {
        **counts,
        "expected": expected,
        "search_ok": bool(hits),
        "ok": set(counts.values()) == {expected} and bool(hits),
    }


def concurrent_index(tmp: Path, n: int = 400) -> dict[str, Any]:
    corpus, home = tmp / "concurrent.jsonl", tmp / "concurrent-home"
    _corpus(corpus, n)
    procs = [
        subprocess.Popen(
            _index_cmd(corpus, "both"),
            env=_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [proc.communicate(timeout=1800) for proc in procs]
    codes = [proc.returncode for proc in procs]
    waited = sum("waiting for it to finish" in err for _, err in outs)
    result = {"returncodes": codes, "writers_that_waited": waited, **_consistency(home, "both", n)}
    result["ok"] = result["ok"] and codes == [0, 0]
    print(f"concurrent index: {result}")
    return result


def kill_and_resume(tmp: Path, n: int = 600) -> dict[str, Any]:
    corpus, home = tmp / "killed.jsonl", tmp / "killed-home"
    _corpus(corpus, n)
    proc = subprocess.Popen(
        _index_cmd(corpus, "killed"),
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    manifest = home / "collections" / "killed" / "manifest.json"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if manifest.exists() and json.loads(manifest.read_text() or "{}").get("rows", 0) >= 32:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rows_at_kill = json.loads(manifest.read_text())["rows"] if manifest.exists() else 0
    rerun = subprocess.run(
        _index_cmd(corpus, "killed"), env=_env(home), capture_output=True, text=True, timeout=1800
    )
    result = {
        "rows_at_kill": rows_at_kill,
        "rerun_returncode": rerun.returncode,
        **_consistency(home, "killed", n),
    }
    result["ok"] = result["ok"] and rerun.returncode == 0 and 0 < rows_at_kill < n
    print(f"kill and resume: {result}")
    return result


# ------------------------------------------------------------------- 100 MB index (child)
def _vocabulary() -> list[str]:
    """The words of the bundled demo corpus (English: tokens per character as in real text)."""
    from rag_complexity_agents.corpus.demo import DEMO_CORPUS
    from rag_complexity_agents.corpus.documents import iter_documents

    words = {w for doc in iter_documents(DEMO_CORPUS) for w in doc.text.split() if w.isalpha()}
    return sorted(words)


def _write_text(path: Path, size_mb: int) -> None:
    rng = random.Random(1)
    vocabulary = _vocabulary()
    target = size_mb * 2**20
    written = 0
    with open(path, "w", encoding="utf-8") as handle:
        while written < target:
            sentences = []
            for _ in range(rng.randint(3, 8)):
                words = rng.choices(vocabulary, k=rng.randint(6, 24))
                sentences.append(" ".join(words).capitalize() + ".")
            paragraph = " ".join(sentences) + "\n\n"
            handle.write(paragraph)
            written += len(paragraph)


def _child_index(path: str, home: str) -> None:
    """Runs in the measured process: index ``path`` with a hash-seeded stand-in encoder."""
    import hashlib
    import resource

    import numpy as np

    from rag_complexity_agents.config import Config
    from rag_complexity_agents.corpus.documents import iter_documents
    from rag_complexity_agents.corpus.store import CorpusStore
    from rag_complexity_agents.models.embeddings import SentenceTransformerEmbedder

    def encode(self: SentenceTransformerEmbedder, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            out[i] = np.random.default_rng(seed).standard_normal(self.dimension)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    config = Config(corpus={"home": home, "ingest_batch_size": 256})
    store = CorpusStore.open_or_create("big", config)
    store.embedder.model  # noqa: B018 - the real weights are loaded and counted
    SentenceTransformerEmbedder.encode = encode  # type: ignore[method-assign]
    started = time.perf_counter()
    report = store.ingest(iter_documents(path), progress=False)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "peak_rss_mb": round(peak_kb / 1024, 1),
                "rows": report.rows,
                "seconds": round(time.perf_counter() - started, 1),
            }
        )
    )


def _child_encoder_batch() -> None:
    """Runs in the measured process: the real encoder on one ingest batch of 200-token chunks."""
    import resource

    from rag_complexity_agents.config import Config
    from rag_complexity_agents.models.embeddings import load_embedder

    config = Config()
    embedder = load_embedder(config.models.embedding, batch_size=config.models.embed_batch_size)
    rng = random.Random(2)
    vocabulary = _vocabulary()
    texts = [
        " ".join(rng.choices(vocabulary, k=150)) for _ in range(config.corpus.ingest_batch_size)
    ]
    embedder.encode(texts)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_rss_mb": round(peak_kb / 1024, 1), "batch": len(texts)}))


def index_big_file(tmp: Path, size_mb: int) -> dict[str, Any]:
    path = tmp / f"big-{size_mb}mb.txt"
    _write_text(path, size_mb)
    here = str(Path(__file__).resolve())
    runs = {}
    for key, args in (
        ("index", ["--child-index", str(path), str(tmp / "big-home")]),
        ("encoder", ["--child-encoder"]),
    ):
        done = subprocess.run(
            [sys.executable, here, *args],
            env=_env(tmp / "big-home"),
            capture_output=True,
            text=True,
            timeout=7200,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{key} run failed: {done.stderr[-2000:]}")
        runs[key] = json.loads(done.stdout.strip().splitlines()[-1])
    result = {
        "file_mb": round(path.stat().st_size / 2**20, 1),
        **runs["index"],
        "encoder_batch_peak_rss_mb": runs["encoder"]["peak_rss_mb"],
    }
    print(f"index {size_mb} MB: {result}")
    return result


# ------------------------------------------------------------------------------ report
def write_markdown(data: dict[str, Any], path: Path) -> None:
    lines = [
        "# Robustness (issue 17)",
        "",
        f"Machine: {data['machine']}. Load average at "
        f"start/end: {data['load_average']['start']} / {data['load_average']['end']} (the "
        "2 cores were shared with other work).",
        "",
        "## Parsers of model output",
        "",
        "| parser | inputs | longest input | exceptions | slowest call (ms) | slowest input |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in data["parsers"]:
        lines.append(
            f"| {row['parser']} | {row['inputs']} | {row['max_chars']:,} | "
            f"{row['exceptions']} | {row['max_ms']} | `{row['slowest_input']}` |"
        )
    conc, kill = data["concurrent_index"], data["kill_and_resume"]
    lines += [
        "",
        "Inputs: seeded random replies made of format fragments (10 to 100k characters) "
        "plus every adversarial repetition (runs of spaces, brackets, markers) at 1k, 10k "
        "and 100k characters. Exceptions count anything but our own RCAError.",
        "",
        "## Writers",
        "",
        f"- `concurrent_index_ok`: **{data['concurrent_index_ok']}**: two `rca index` "
        f"processes on one collection exited {conc['returncodes']} "
        f"({conc['writers_that_waited']} waited for the other); rows {conc['rows']}, unique "
        f"ids {conc['unique_ids']}, embedding rows {conc['embedding_rows']}, Chroma "
        f"{conc['chroma']}, graph rows {conc['graph_rows']} (expected {conc['expected']}).",
        f"- `kill_and_resume_ok`: **{data['kill_and_resume_ok']}**: SIGKILL at "
        f"{kill['rows_at_kill']} committed rows, the rerun exited {kill['rerun_returncode']} "
        f"with rows {kill['rows']}, unique ids {kill['unique_ids']}, Chroma {kill['chroma']}, "
        f"graph rows {kill['graph_rows']} (expected {kill['expected']}).",
        "",
        "## Memory",
        "",
    ]
    big = data.get("index_big_file")
    if big:
        lines += [
            f"- `index_100mb_peak_rss_mb`: **{data['index_100mb_peak_rss_mb']}** MB for a "
            f"{big['file_mb']} MB text file → {big['rows']:,} chunks in {big['seconds']} s "
            "(streamed reading and tokenising, real tokenizer, Chroma, BM25, graph; a "
            "hash-seeded stand-in for the encoder's forward pass, see the script's "
            "docstring).",
            f"- The real encoder on one ingest batch peaks at "
            f"{big['encoder_batch_peak_rss_mb']} MB (weights included).",
        ]
    else:
        lines.append("- The 100 MB index was not run (`--skip-index`).")
    lines += [
        "",
        "## Not measured here",
        "",
        "- `load` and `abstention` are null: the load test "
        "against `langgraph dev` and the out-of-corpus abstention test belong to later "
        "work on issue 17.",
        "",
    ]
    path.write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--random-inputs", type=int, default=300)
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--skip-index", action="store_true")
    parser.add_argument("--child-index", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--child-encoder", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_index:
        _child_index(*args.child_index)
        return
    if args.child_encoder:
        _child_encoder_batch()
        return
    load_start = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="rca-robustness-") as tmp_name:
        tmp = Path(tmp_name)
        rows = fuzz_parsers(args.random_inputs)
        conc = concurrent_index(tmp)
        kill = kill_and_resume(tmp)
        big = None if args.skip_index else index_big_file(tmp, args.size_mb)
    data = {
        "machine": machine(),
        "load_average": {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]},
        "parsers": rows,
        "concurrent_index_ok": conc["ok"],
        "concurrent_index": conc,
        "kill_and_resume_ok": kill["ok"],
        "kill_and_resume": kill,
        "index_100mb_peak_rss_mb": big["peak_rss_mb"] if big else None,
        "index_big_file": big,
        "load": None,
        "abstention": None,
        "notes": {
            "load": "measured by later work on issue 17 (langgraph dev, 16+ requests)",
            "abstention": "measured by later work on issue 17 (50+ out-of-corpus questions)",
        },
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "robustness.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    write_markdown(data, RESULTS / "robustness.md")
    print(f"wrote {RESULTS / 'robustness.json'} and robustness.md")


if __name__ == "__main__":
    main()
