"""The same store code against a real Chroma server (HttpClient) started on 127.0.0.1."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_complexity_agents.config import Config
from rag_complexity_agents.corpus.documents import SourceDocument
from rag_complexity_agents.corpus.store import CorpusStore
from rag_complexity_agents.retrieval.first_stage import DenseFirstStage, HybridFirstStage


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    exe = shutil.which("chroma", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail("the chroma CLI (from chromadb) is missing from the environment")
    port = _free_port()
    data = tmp_path_factory.mktemp("chroma-server")
    proc = subprocess.Popen(
        [exe, "run", "--path", str(data), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1)
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    pytest.fail("the Chroma server did not start")
                time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_store_runs_against_a_chroma_server(chroma_server: int, tmp_path: Path) -> None:
    config = Config(
        corpus={"home": tmp_path, "chroma_host": "127.0.0.1", "chroma_port": chroma_server},
        graph={"k": 4},
    )
    docs = [
        SourceDocument("film", "Spirited Away is a 2001 film directed by Hayao Miyazaki."),
        SourceDocument("river", "The Danube flows through Vienna and Budapest."),
        SourceDocument("city", "Tokyo is the capital of Japan."),
    ]
    store = CorpusStore.open_or_create("served", config)
    assert store.ingest(docs, progress=False).added == 3
    assert store.chroma_count() == 3
    assert not (store.directory / "chroma").exists()  # vectors went to the server
    hit = DenseFirstStage(store).search("Which river flows through Budapest?", 1)[0]
    assert hit.chunk.metadata["doc_id"] == "river"
    assert HybridFirstStage(store).search("Who directed Spirited Away?", 2)[0].id == store.ids[0]
    assert store.ingest(docs, progress=False).added == 0
    assert CorpusStore.open("served", config).chroma_count() == 3
