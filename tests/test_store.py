"""The collection store with real MiniLM embeddings, a real Chroma directory, real bm25s."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from filelock import FileLock

from rag_complexity_agents.config import Config
from rag_complexity_agents.corpus.documents import SourceDocument, iter_documents
from rag_complexity_agents.corpus.store import CorpusStore, list_collections
from rag_complexity_agents.errors import CorpusError
from rag_complexity_agents.retrieval.first_stage import (
    BM25FirstStage,
    DenseFirstStage,
    HybridFirstStage,
)
from rag_complexity_agents.text import MAX_COLLECTION_NAME_CHARS as MAX_NAME_CHARS
from rag_complexity_agents.types import Chunk

TOPICS = ["river", "mountain", "city", "film", "novel", "bridge", "painter", "island"]


def synthetic_docs(n: int) -> list[SourceDocument]:
    return [
        SourceDocument(
            id=f"doc-{i}",
            title=f"Entry {i}",
            text=f"Entry {i} describes a {TOPICS[i % len(TOPICS)]} called Name{i}. "
            f"It is number {i} in a catalogue of {TOPICS[(i * 3) % len(TOPICS)]}s.",
        )
        for i in range(n)
    ]


FACTS = [
    SourceDocument(
        "spirited", "Spirited Away is a 2001 film directed by Hayao Miyazaki.", "Spirited Away"
    ),
    SourceDocument("miyazaki", "Hayao Miyazaki was born in Tokyo in 1941.", "Hayao Miyazaki"),
    SourceDocument("tokyo", "Tokyo is the capital of Japan.", "Tokyo"),
    SourceDocument("danube", "The Danube flows through Vienna and Budapest.", "Danube"),
    SourceDocument("emma", "Emma is a novel by Jane Austen published in 1815.", "Emma"),
]


def test_ingest_search_and_graph(config: Config) -> None:
    store = CorpusStore.open_or_create("facts", config)
    report = store.ingest([*FACTS, *synthetic_docs(20)], progress=False)
    assert (report.documents, report.added, report.skipped, report.rows) == (25, 25, 0, 25)
    assert store.chroma_count() == 25
    assert store.embeddings.shape == (25, 384)

    query = "Who directed Spirited Away?"
    for stage in (BM25FirstStage(store), DenseFirstStage(store), HybridFirstStage(store)):
        hits = stage.search(query, 3)
        assert hits[0].chunk.metadata["doc_id"] == "spirited", stage.name
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    # dense scores are cosine similarities of the stored vectors
    dense = DenseFirstStage(store).search(query, 5)
    q = store.embedder.encode([query])[0]
    np.testing.assert_allclose(
        [d.score for d in dense], store.vectors([d.id for d in dense]) @ q, atol=1e-4
    )
    # k beyond the collection returns everything; a query with no known term finds nothing
    assert len(HybridFirstStage(store).search(query, 1000)) == 25
    assert BM25FirstStage(store).search("zzzqqq xxyyzz", 5) == []

    spirited = next(c for c in store.chunks if c.metadata["doc_id"] == "spirited")
    neighbours = store.graph.neighbours(spirited.id, 3)
    assert len(neighbours) == 3 and spirited.id not in [n for n, _ in neighbours]
    assert store.chunk(neighbours[0][0]).metadata["doc_id"] in {"miyazaki", "tokyo"}

    reopened = CorpusStore.open("facts", config)
    assert reopened.ids == store.ids and len(reopened) == 25
    assert reopened.stats()["graph"]["rows"] == 25


def test_reingest_is_a_noop_and_adding_keeps_everything_consistent(config: Config) -> None:
    store = CorpusStore.open_or_create("noop", config)
    docs = synthetic_docs(30)
    store.ingest(docs, progress=False)
    files = {p.name: p.stat().st_size for p in store.directory.iterdir() if p.is_file()}
    again = store.ingest(docs, progress=False)
    assert (again.added, again.skipped, again.rows) == (0, 30, 30)
    assert {p.name: p.stat().st_size for p in store.directory.iterdir() if p.is_file()} == files
    assert store.chroma_count() == 30

    more = store.ingest(synthetic_docs(45), progress=False)  # 15 new documents
    assert (more.added, more.rows) == (15, 45)
    fresh = CorpusStore.open_or_create("fresh", config)
    fresh.ingest(synthetic_docs(45), progress=False)
    assert set(store.ids) == set(fresh.ids)
    # the extended graph equals a graph built from scratch (up to row order)
    for chunk_id in store.ids[:10]:
        got = [n for n, _ in store.graph.neighbours(chunk_id, 5)]
        want = [n for n, _ in fresh.graph.neighbours(chunk_id, 5)]
        assert got == want


class Crash(Exception):
    pass


def test_interrupted_ingest_resumes_without_loss_or_duplicates(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config.with_overrides({"corpus.ingest_batch_size": 8})
    store = CorpusStore.open_or_create("crash", config)
    docs = synthetic_docs(40)
    original = CorpusStore._add_batch
    calls = {"n": 0}

    def crash_on_third_batch(self: CorpusStore, batch) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            # Chroma received the batch and half of it reached our files, then the crash
            self._chroma_collection.upsert(
                ids=[c.id for c in batch], embeddings=self.embedder.encode([c.text for c in batch])
            )
            with open(self._chunks_path, "a", encoding="utf-8") as handle:
                handle.write('{"id": "half-written')
            with open(self._embeddings_path, "ab") as handle:
                handle.write(b"\x00" * 100)
            raise Crash
        original(self, batch)

    monkeypatch.setattr(CorpusStore, "_add_batch", crash_on_third_batch)
    with pytest.raises(Crash):
        store.ingest(docs, progress=False)
    monkeypatch.setattr(CorpusStore, "_add_batch", original)

    resumed = CorpusStore.open_or_create("crash", config)
    # two committed batches survived, the torn tail is gone; readers see no half-indexed rows
    assert resumed.log.committed.rows == 16 and len(resumed) == 0
    report = resumed.ingest(docs, progress=False)
    assert (report.added, report.rows) == (24, 40)
    assert len(set(resumed.ids)) == 40 and resumed.chroma_count() == 40
    assert len(resumed.graph) == 40


def test_ingest_keeps_no_more_than_a_batch_of_chunks_in_memory(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunks wait on disk, not in a list: while a batch is stored, the chunks alive in
    the process are about that batch (a 100 MB file is ~100k chunks)."""
    config = config.with_overrides({"corpus.ingest_batch_size": 8})
    store = CorpusStore.open_or_create("streamed", config)
    original = CorpusStore._add_batch
    alive: list[int] = []

    def chunks_alive() -> int:
        gc.collect()
        return sum(type(obj) is Chunk for obj in gc.get_objects())

    def counting(self: CorpusStore, batch) -> None:
        alive.append(chunks_alive())
        original(self, batch)

    docs = synthetic_docs(120)
    before = chunks_alive()  # other tests' chunks (fixtures, caches) in this process
    monkeypatch.setattr(CorpusStore, "_add_batch", counting)
    report = store.ingest(docs, progress=False)
    assert report.rows == 120 and len(alive) == 15
    assert max(alive) - before <= 2 * 8


def test_killed_index_process_resumes(tmp_path: Path) -> None:
    """SIGKILL a real `rca index` mid-way; the rerun completes with every chunk exactly once."""
    corpus = tmp_path / "corpus.jsonl"
    with open(corpus, "w", encoding="utf-8") as handle:
        for doc in synthetic_docs(600):
            handle.write(json.dumps({"id": doc.id, "title": doc.title, "text": doc.text}) + "\n")
    home = tmp_path / "home"
    env = {
        **os.environ,
        "RCA_CORPUS__HOME": str(home),
        "RCA_GRAPH__K": "8",
        "RCA_CORPUS__INGEST_BATCH_SIZE": "16",
    }
    cmd = [
        sys.executable,
        "-m",
        "rag_complexity_agents.cli",
        "index",
        str(corpus),
        "-c",
        "killed",
        "--quiet",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    manifest = home / "collections" / "killed" / "manifest.json"
    deadline = time.time() + 120
    while time.time() < deadline:
        if manifest.exists() and json.loads(manifest.read_text() or "{}").get("rows", 0) >= 32:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rows_at_kill = json.loads(manifest.read_text())["rows"]
    assert 0 < rows_at_kill < 600

    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "600 chunks stored" in done.stdout
    store = CorpusStore.open("killed", Config(corpus={"home": home}, graph={"k": 8}))
    assert len(store) == 600 and len(set(store.ids)) == 600
    assert store.chroma_count() == 600 and len(store.graph) == 600


def test_bad_collections_and_inputs(config: Config, tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="rca index PATH --collection nothere"):
        CorpusStore.open("nothere", config)
    with pytest.raises(CorpusError, match="invalid collection name"):
        CorpusStore.open_or_create("a/../b", config)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "blank.txt").write_text("   \n")
    store = CorpusStore.open_or_create("blank", config)
    with pytest.raises(CorpusError, match="no text to index"):
        store.ingest(iter_documents(empty), progress=False)
    # a failed first index leaves no (empty) collection behind
    assert not store.directory.exists() and list_collections(config) == []
    with pytest.raises(CorpusError, match="does not exist"):
        CorpusStore.open("blank", config)
    CorpusStore.open_or_create("small", config).ingest(FACTS[:2], progress=False)
    other = config.with_overrides({"corpus.chunk_size": 100})
    with pytest.raises(CorpusError, match="chunk size/overlap"):
        CorpusStore.open_or_create("small", other)


def test_collection_names_fit_every_filesystem(config: Config) -> None:
    longest = "n" * MAX_NAME_CHARS
    store = CorpusStore.open_or_create(longest, config)
    assert store.ingest(FACTS[:1], progress=False).rows == 1
    assert list_collections(config) == [longest]
    for name in ("n" * (MAX_NAME_CHARS + 1), "x" * 300, "ab", "-abc", "abc-", "a b c"):
        with pytest.raises(CorpusError, match=f"3–{MAX_NAME_CHARS} characters") as info:
            CorpusStore.open_or_create(name, config)
        assert "\n" not in str(info.value) and len(str(info.value)) < 300


def test_readers_see_only_committed_rows_and_a_torn_tail_is_repaired(config: Config) -> None:
    store = CorpusStore.open_or_create("torn", config)
    store.ingest(FACTS, progress=False)
    sizes = {p: p.stat().st_size for p in (store._chunks_path, store._embeddings_path)}
    # a writer is busy: it holds the lock and has appended half a batch
    writer = FileLock(store._lock_path)
    with writer:
        with open(store._chunks_path, "a", encoding="utf-8") as handle:
            handle.write('{"id": "half-writ')
        with open(store._embeddings_path, "ab") as handle:
            handle.write(b"\x00" * 1000)
        reader = CorpusStore.open("torn", config)
        assert [c.id for c in reader.chunks] == store.ids and reader.embeddings.shape == (5, 384)
        assert HybridFirstStage(reader).search("Who directed Spirited Away?", 1)[0].id
        assert all(p.stat().st_size > size for p, size in sizes.items())  # not cut under it
    # no writer: the torn tail is cut off on open
    CorpusStore.open("torn", config)
    assert {p: p.stat().st_size for p in sizes} == sizes
    # committed bytes that do not parse: one line naming the file and line, no traceback
    text = store._chunks_path.read_text(encoding="utf-8")
    store._chunks_path.write_text(text.replace('"id"', '"ix"', 1), encoding="utf-8")
    with pytest.raises(CorpusError, match=r"chunks\.jsonl:1 is damaged"):
        _ = CorpusStore.open("torn", config).chunks


def test_a_second_writer_waits_and_says_so(
    config: Config, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = CorpusStore.open_or_create("busy", config)
    store.ingest(FACTS[:2], progress=False)
    monkeypatch.setattr(CorpusStore, "write_wait_s", 0.2)
    with FileLock(store._lock_path), pytest.raises(CorpusError, match="still being written"):
        CorpusStore.open_or_create("busy", config).ingest(FACTS, progress=False)
    assert "being written by another process; waiting" in caplog.text
    assert len(CorpusStore.open("busy", config)) == 2


def test_concurrent_index_processes_keep_the_collection_consistent(tmp_path: Path) -> None:
    """Two real `rca index` runs on one collection at once: both succeed, nothing is lost or
    duplicated, and the collection is usable afterwards."""
    corpus = tmp_path / "corpus.jsonl"
    with open(corpus, "w", encoding="utf-8") as handle:
        for doc in [*FACTS, *synthetic_docs(300)]:
            handle.write(json.dumps({"id": doc.id, "title": doc.title, "text": doc.text}) + "\n")
    home = tmp_path / "home"
    env = {**os.environ, "RCA_CORPUS__HOME": str(home), "RCA_GRAPH__K": "8",
           "RCA_CORPUS__INGEST_BATCH_SIZE": "16"}  # fmt: skip
    cmd = [sys.executable, "-m", "rag_complexity_agents.cli", "index", str(corpus), "-c", "both",
           "--quiet"]  # fmt: skip
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "305 chunks stored" in out
    store = CorpusStore.open("both", Config(corpus={"home": home}, graph={"k": 8}))
    assert len(store) == 305 and len(set(store.ids)) == 305
    assert store.embeddings.shape == (305, 384) and store.chroma_count() == 305
    assert len(store.graph) == 305
    assert HybridFirstStage(store).search("Who directed Spirited Away?", 1)[0].id == store.ids[0]


def _read_once(config: Config) -> dict[str, int]:
    """What a reader sees: open the collection, search it, count every index's rows."""
    store = CorpusStore.open("live", config)
    hits = HybridFirstStage(store).search("Which river is called Name8?", 5)
    dense = DenseFirstStage(store).search("a painter", 5)
    assert hits and dense and all(h.id in store.row_of for h in [*hits, *dense])
    store.graph.neighbours(hits[0].id, 3)
    return {
        "rows": len(store),
        "ids": len(store.ids),
        "embeddings": int(store.embeddings.shape[0]),
        "bm25": int(store.bm25.scores["num_docs"]),
        "graph": len(store.graph),
        "committed": store.log.committed.rows,
    }


def test_readers_see_the_last_published_state_while_a_writer_appends(tmp_path: Path) -> None:
    """A real `rca index` process appends while this process reads: every read succeeds and
    sees Chroma, BM25, graph and chunks agree on one published state."""
    home = tmp_path / "home"
    config = Config(corpus={"home": home}, graph={"k": 8})
    CorpusStore.open_or_create("live", config).ingest(synthetic_docs(40), progress=False)
    corpus = tmp_path / "more.jsonl"
    with open(corpus, "w", encoding="utf-8") as handle:
        for doc in synthetic_docs(400):
            handle.write(json.dumps({"id": doc.id, "title": doc.title, "text": doc.text}) + "\n")
    env = {**os.environ, "RCA_CORPUS__HOME": str(home), "RCA_GRAPH__K": "8",
           "RCA_CORPUS__INGEST_BATCH_SIZE": "16"}  # fmt: skip
    cmd = [sys.executable, "-m", "rag_complexity_agents.cli", "index", str(corpus), "-c", "live",
           "--quiet"]  # fmt: skip
    writer = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen: list[dict[str, int]] = []
    errors: list[str] = []
    deadline = time.time() + 300
    while writer.poll() is None and time.time() < deadline:
        try:
            seen.append(_read_once(config))
        except Exception as exc:  # any error counts
            errors.append(f"{type(exc).__name__}: {exc}")
    _, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err
    assert errors == [] and len(seen) >= 3
    for view in seen:  # one state: everything a reader reads agrees
        assert view["rows"] == view["ids"] == view["embeddings"] == view["bm25"] == view["graph"]
        assert view["rows"] in (40, 400)
    # some reads overlapped the append: the writer had committed rows it had not yet published
    assert any(view["committed"] > view["rows"] for view in seen), seen
    assert _read_once(config)["rows"] == 400


def test_a_document_the_store_cannot_hold_stops_ingest_before_any_write(config: Config) -> None:
    config = config.with_overrides({"corpus.ingest_batch_size": 8})
    store = CorpusStore.open_or_create("checked", config)
    store.ingest(FACTS, progress=False)
    files = {p: p.stat().st_size for p in store.directory.rglob("*") if p.is_file()}
    deep: list = [1]
    for _ in range(17):
        deep = [deep]
    for metadata in ({"": 1}, {"#x": 1}, {"$x": 1}, {"k": deep}):
        bad = SourceDocument("bad", "Some text.", "Bad", metadata)
        with pytest.raises(CorpusError, match="document 'bad': metadata") as info:
            store.ingest([*synthetic_docs(100), bad], progress=False)
        assert "\n" not in str(info.value)
        assert {p: p.stat().st_size for p in store.directory.rglob("*") if p.is_file()} == files
    assert len(CorpusStore.open("checked", config)) == 5
