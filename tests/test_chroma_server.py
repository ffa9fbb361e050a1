"""The same store code against a real Chroma server (HttpClient) started on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
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
        deadline = time.time() + 120  # generous: a loaded machine starts it slowly
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


def test_byo_chroma_server_neighbours_on_demand_match_the_built_graph(
    chroma_server: int, tmp_path: Path
) -> None:
    """A LangChain Chroma store on the server: NAR with neighbours on demand ranks exactly as
    with the graph built from the store's vectors, and the lists persist in sqlite."""
    import chromadb
    from chromadb.config import Settings
    from langchain_chroma import Chroma
    from langchain_core.documents import Document

    from rag_complexity_agents.corpus.demo import DEMO_CORPUS
    from rag_complexity_agents.integrations.byo_langchain import from_langchain
    from rag_complexity_agents.integrations.langchain import RCAEmbeddings
    from rag_complexity_agents.integrations.neighbours import ChromaSource, OnDemandGraph

    config = Config(corpus={"home": tmp_path}, graph={"k": 16})
    client = chromadb.HttpClient(
        host="127.0.0.1", port=chroma_server, settings=Settings(anonymized_telemetry=False)
    )
    store = Chroma(
        collection_name="byo-on-demand",
        embedding_function=RCAEmbeddings(config=config),
        client=client,
        collection_metadata={"hnsw:space": "cosine"},
    )
    rows = [json.loads(line) for line in DEMO_CORPUS.read_text().splitlines() if line.strip()]
    store.add_documents(
        [Document(page_content=r["text"], metadata={"title": r["title"]}) for r in rows[:40]],
        ids=[f"d{i}" for i in range(40)],
    )
    built = from_langchain(store, config=config)
    cache = tmp_path / "neighbours.sqlite"
    on_demand = from_langchain(store, config=config, neighbours="on_demand", neighbour_cache=cache)
    graph = on_demand.store.graph
    assert isinstance(graph, OnDemandGraph) and isinstance(graph.source, ChromaSource)
    assert len(on_demand.store) == 40
    for question in ("Who directed The Shape of Water?", "Which river flows through Budapest?"):
        a = built.sunar_retriever(with_asu=False).retrieve(question, 5)
        b = on_demand.sunar_retriever(with_asu=False).retrieve(question, 5)
        assert [d.id for d in a] == [d.id for d in b]
    assert graph.counts["store"] > 0
    for doc_id in list(graph._lists)[:10]:
        got, want = graph.neighbours(doc_id, 8), built.store.graph.neighbours(doc_id, 8)
        assert [i for i, _ in got] == [i for i, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-4)
    graph.close()
    # the cache is keyed by the collection's id: a new session asks the server for nothing
    again = from_langchain(store, config=config, neighbours="on_demand", neighbour_cache=cache)
    again.sunar_retriever(with_asu=False).retrieve("Which river flows through Budapest?", 5)
    assert again.store.graph.counts["store"] == 0 and again.store.graph.counts["disk"] > 0
    again.store.graph.close()
