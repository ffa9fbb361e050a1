"""Neighbours on demand from a bring-your-own store: the same lists and the same NAR rankings as
the graph built from the store's vectors, persisted in sqlite, never building the graph."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore

from rag_complexity_agents.config import Config, NARParams
from rag_complexity_agents.corpus.demo import DEMO_CORPUS
from rag_complexity_agents.errors import CorpusError
from rag_complexity_agents.integrations.byo_langchain import from_langchain
from rag_complexity_agents.integrations.langchain import RCAEmbeddings
from rag_complexity_agents.integrations.neighbours import OnDemandGraph
from rag_complexity_agents.retrieval.nar_trace import neighbourhood_aware_rerank
from rag_complexity_agents.types import Chunk, ScoredDoc

QUESTIONS = [
    "Who directed The Shape of Water?",
    "Where was the director of Spirited Away born?",
    "Which river flows through Budapest?",
]


def demo_documents(n: int) -> list[Document]:
    rows = [json.loads(line) for line in DEMO_CORPUS.read_text().splitlines() if line.strip()]
    return [
        Document(page_content=r["text"], metadata={"title": r["title"]}, id=f"d{i}")
        for i, r in enumerate(rows[:n])
    ]


def same_rankings(built: object, on_demand: object) -> None:
    """Same NAR rankings from both components, and same neighbour lists for every doc seen."""
    for question in QUESTIONS:
        a = built.sunar_retriever(with_asu=False)
        b = on_demand.sunar_retriever(with_asu=False)
        assert [d.id for d in a.retrieve(question, 5)] == [d.id for d in b.retrieve(question, 5)]
    graph = on_demand.store.graph  # type: ignore[attr-defined]
    assert isinstance(graph, OnDemandGraph) and graph.counts["store"] > 0
    reference = built.store.graph  # type: ignore[attr-defined]
    for doc_id in list(graph._lists)[:10]:
        got, want = graph.neighbours(doc_id, 8), reference.neighbours(doc_id, 8)
        assert [i for i, _ in got] == [i for i, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-4)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Config:
    home = tmp_path_factory.mktemp("od-home")
    return Config(corpus={"home": home}, graph={"k": 16})


def test_in_memory_store_on_demand_matches_the_built_graph(config: Config, tmp_path: Path) -> None:
    store = InMemoryVectorStore(RCAEmbeddings(config=config))
    store.add_documents(demo_documents(40))
    built = from_langchain(store, config=config)
    cache = tmp_path / "neighbours.sqlite"
    on_demand = from_langchain(
        store, config=config, neighbours="on_demand", neighbour_cache=cache, cache_key="demo"
    )
    assert on_demand.store.graph_source == "on_demand" and len(on_demand.store) == 40
    same_rankings(built, on_demand)
    first = on_demand.store.graph
    first.close()

    # a new process: every list comes from the sqlite file, none from the store
    again = from_langchain(
        store, config=config, neighbours="on_demand", neighbour_cache=cache, cache_key="demo"
    )
    retriever = again.sunar_retriever(with_asu=False)
    retriever.retrieve(QUESTIONS[0], 5)
    graph = again.store.graph
    assert graph.counts["disk"] > 0 and graph.counts["store"] == 0
    graph.close()

    # the store grows: cached lists are dropped
    store.add_documents([Document(page_content="The Danube delta lies in Romania.", id="new")])
    grown = from_langchain(
        store, config=config, neighbours="on_demand", neighbour_cache=cache, cache_key="demo"
    )
    grown.sunar_retriever(with_asu=False).retrieve(QUESTIONS[0], 5)
    assert grown.store.graph.counts["disk"] == 0 and grown.store.graph.counts["store"] > 0
    grown.store.graph.close()


def test_on_demand_batches_and_unknown_documents(config: Config) -> None:
    store = InMemoryVectorStore(RCAEmbeddings(config=config))
    store.add_documents(demo_documents(20))
    parts = from_langchain(store, config=config, neighbours="on_demand")  # no key: memory only
    graph = parts.store.graph
    assert isinstance(graph, OnDemandGraph) and graph.cache is None
    parts.first_stage.search(QUESTIONS[1], 6)
    ids = [d for d in parts.store.ids][:6]
    graph.prefetch(ids, 5)
    assert graph.counts["store_calls"] == 1 and graph.counts["store"] == 6
    assert all(len(graph.neighbours(i, 5)) == 5 for i in ids)
    assert graph.counts["store_calls"] == 1 and graph.counts["memory"] == 6
    assert all(i != ids[0] for i, _ in graph.neighbours(ids[0], 19))
    with pytest.raises(CorpusError):
        graph.neighbours("never-seen", 3)


def test_llamaindex_index_on_demand_matches_the_built_graph(config: Config, tmp_path: Path) -> None:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.schema import TextNode

    from rag_complexity_agents.integrations.byo_llamaindex import from_llamaindex
    from rag_complexity_agents.integrations.llamaindex import RCAEmbedding

    nodes = [
        TextNode(text=d.page_content, id_=str(d.id), metadata=d.metadata)
        for d in demo_documents(30)
    ]
    index = VectorStoreIndex(nodes, embed_model=RCAEmbedding())
    built = from_llamaindex(index, config=config)
    on_demand = from_llamaindex(
        index,
        config=config,
        neighbours="on_demand",
        neighbour_cache=tmp_path / "n.sqlite",
        cache_key="li-demo",
    )
    assert on_demand.store.graph_source == "on_demand" and len(on_demand.store) == 30
    same_rankings(built, on_demand)
    on_demand.store.graph.close()


class CountingSource:
    """A fake vector store over unit vectors: counts its nearest-neighbour calls."""

    key = None

    def __init__(self, vectors: np.ndarray) -> None:
        self.matrix = vectors
        self.chunks = {f"c{i}": Chunk(f"c{i}", f"text {i}") for i in range(len(vectors))}
        self.calls = 0

    def size(self) -> int:
        return len(self.matrix)

    def vectors(self, chunks: Sequence[Chunk]) -> np.ndarray:
        return self.matrix[[int(c.id[1:]) for c in chunks]]

    def nearest(self, vectors: np.ndarray, k: int) -> list[list[tuple[Chunk, float]]]:
        self.calls += 1
        sims = vectors @ self.matrix.T
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        return [
            [(self.chunks[f"c{j}"], float(s[j])) for j in row]
            for s, row in zip(sims, order, strict=True)
        ]


def test_nar_batches_on_demand_lookups_to_one_store_call_per_batch() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((300, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = vectors[0] + 0.1 * rng.standard_normal(8).astype(np.float32)

    relevance = {f"c{i}": float(v) for i, v in enumerate(vectors @ query)}

    def score(_: str, chunks: Sequence[Chunk]) -> np.ndarray:
        return np.array([relevance.get(c.id, -1.0) for c in chunks])

    order = np.argsort(-(vectors @ query))
    initial = [ScoredDoc(Chunk(f"c{i}", f"text {i}"), 0.0) for i in order[:120:2]]
    initial.insert(2, ScoredDoc(Chunk("unknown", "not in the store"), 0.0))

    def run(batched: bool, c: int, b: int) -> tuple[list[str], int]:
        source = CountingSource(vectors)

        def chunk_of(doc_id: str) -> Chunk:
            if doc_id not in source.chunks:
                raise CorpusError(doc_id)
            return source.chunks[doc_id]

        graph = OnDemandGraph(source, chunk_of=chunk_of, add_chunk=lambda c: c, k=8)

        def neighbours(doc_id: str, n: int) -> list[tuple[str, float]]:
            try:
                return graph.neighbours(doc_id, n)
            except CorpusError:
                return []

        result = neighbourhood_aware_rerank(
            "q",
            initial,
            score=score,
            neighbours=neighbours,
            chunk_of=chunk_of,
            params=NARParams(b=b, c=c, neighbours_per_doc=5),
            prefetch=graph.prefetch if batched else None,
        )
        assert result.trace.scored == c
        return [d.id for d in result.docs], source.calls

    for c, b in [(30, 4), (50, 16), (16, 16)]:
        batched_ids, batched_calls = run(True, c, b)
        single_ids, single_calls = run(False, c, b)
        assert batched_ids == single_ids  # prefetching changes no result
        assert batched_calls <= math.ceil(c / b) < single_calls


def test_sunar_retriever_makes_at_most_one_store_call_per_batch(config: Config) -> None:
    store = InMemoryVectorStore(RCAEmbeddings(config=config))
    store.add_documents(demo_documents(40))
    parts = from_langchain(store, config=config, neighbours="on_demand")
    retriever = parts.sunar_retriever(with_asu=False)
    retriever.retrieve(QUESTIONS[2], 5)
    graph = parts.store.graph
    params = retriever.params
    assert 0 < graph.counts["store_calls"] <= math.ceil(params.c / params.b)
    assert graph.counts["store"] == retriever.trace["nar"]["scored"]
