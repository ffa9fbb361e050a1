"""LlamaIndex adapters on the demo corpus with the real packaged models: the retriever (sync,
async, metadata, k rules) inside LlamaIndex's own ``RetrieverQueryEngine`` with our LLM
adapter, the graph query engine (also as a ``QueryEngineTool``), and a LlamaIndex
``VectorStoreIndex`` as the first stage (bring your own store)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import Settings, VectorStoreIndex
from llama_index.core.base.response.schema import Response
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.tools import QueryEngineTool

from rag_complexity_agents.config import Config
from rag_complexity_agents.corpus.demo import DEMO_CORPUS
from rag_complexity_agents.errors import InputError
from rag_complexity_agents.integrations.byo_llamaindex import from_llamaindex
from rag_complexity_agents.integrations.llamaindex import (
    RCAEmbedding,
    RCAQueryEngine,
    SunarLlamaIndexRetriever,
)
from rag_complexity_agents.integrations.llamaindex_llm import LangChainChatLLM

QUESTION = "Where was the director of Spirited Away born?"
SMOL = {"chat": "llamacpp:smollm2-135m", "n_threads": 1}


@pytest.fixture(scope="module", autouse=True)
def offline_llamaindex() -> Iterator[None]:
    """One torch thread, and no OpenAI defaults anywhere in LlamaIndex."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    Settings.llm = None  # type: ignore[assignment]  # MockLLM: nothing may reach OpenAI
    Settings.embed_model = RCAEmbedding()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def li_config(demo_home: Path) -> Config:
    return Config(corpus={"home": demo_home}, collection="demo", graph={"k": 16}, models=SMOL)


def test_retriever_nodes_metadata_and_k(li_config: Config) -> None:
    retriever = SunarLlamaIndexRetriever.from_defaults(li_config, k=6, strategy="nar")
    nodes = retriever.retrieve(QUESTION)
    assert len(nodes) == 6 and all(isinstance(n, NodeWithScore) for n in nodes)
    assert all(isinstance(n.node, TextNode) and n.node.get_content() for n in nodes)
    ids = [n.node.node_id for n in nodes]
    assert ids == [r["id"] for r in retriever.last_trace["returned"]]
    meta = [n.node.metadata for n in nodes]
    assert [m["rank"] for m in meta] == list(range(1, 7))
    assert all(m["chunk_id"] == i for m, i in zip(meta, ids, strict=True))
    assert {m["provenance"] for m in meta} == {"first_stage", "neighbour"}  # NAR reached out
    assert all(m["via"] in ids or m["via"] for m in meta if m["provenance"] == "neighbour")
    assert "Spirited Away" in {m["title"] for m in meta}
    scores = [n.score for n in nodes]
    assert scores == sorted(scores, reverse=True)
    json.dumps(retriever.last_trace)

    assert len(retriever.retrieve_k(QUESTION, 2)) == 2
    nodes_async = asyncio.run(retriever.aretrieve(QUESTION))
    assert [n.node.node_id for n in nodes_async] == ids
    with pytest.raises(InputError):
        retriever.retrieve_k(QUESTION, 0)
    with pytest.raises(InputError):
        SunarLlamaIndexRetriever.from_defaults(li_config, k=0)
    with pytest.raises(InputError, match="empty"):
        retriever.retrieve("  ")
    first = SunarLlamaIndexRetriever.from_defaults(li_config, k=3, strategy="first_stage")
    assert {n.node.metadata["provenance"] for n in first.retrieve("Studio Ghibli")} == {
        "first_stage"
    }


@pytest.mark.llm
def test_retriever_inside_llamaindex_query_engine(li_config: Config) -> None:
    retriever = SunarLlamaIndexRetriever.from_defaults(li_config, k=2, strategy="nar")
    llm = LangChainChatLLM(config=li_config, max_tokens=24)
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
    response = engine.query("Who directed Spirited Away?")
    assert isinstance(response, Response) and str(response).strip()
    assert [n.node.node_id for n in response.source_nodes] == [
        r["id"] for r in retriever.last_trace["returned"]
    ]
    assert response.source_nodes[0].node.metadata["provenance"] == "first_stage"
    completion = llm.complete("Say hello.")
    assert isinstance(completion.text, str)


@pytest.mark.llm
def test_graph_query_engine_sync_async_and_as_tool(li_config: Config) -> None:
    engine = RCAQueryEngine.from_defaults(
        "self_ask_nar", li_config, options={"max_steps": 1, "passages": 2}
    )
    response = engine.query("Who directed Spirited Away?")
    assert isinstance(response, Response) and isinstance(response.response, str)
    trace = response.metadata["trace"]
    assert trace["loop"] == "self_ask" and trace["retrieval"] == "nar"
    assert response.metadata["answer"] == response.response
    assert response.source_nodes, "the run's evidence must come back as source nodes"
    evidence_ids = [e["id"] for e in trace["evidence"]]
    assert [n.node.node_id for n in response.source_nodes] == evidence_ids
    assert all(n.node.get_content() for n in response.source_nodes)  # texts filled in
    assert {n.node.metadata["provenance"] for n in response.source_nodes} <= {
        "first_stage",
        "neighbour",
        "backfill",
    }

    # async + LlamaIndex's tool wrapper in one run
    tool = QueryEngineTool.from_defaults(
        engine, name="complex_qa", description="Answers multi-hop questions."
    )
    output = asyncio.run(tool.acall(input="Who founded Studio Ghibli?"))
    assert output.tool_name == "complex_qa" and isinstance(output.content, str)
    assert output.raw_output.metadata["trace"]["question"] == "Who founded Studio Ghibli?"


def _demo_nodes(n: int) -> list[TextNode]:
    rows = [json.loads(line) for line in DEMO_CORPUS.read_text().splitlines() if line.strip()]
    return [TextNode(id_=r["id"], text=r["text"], metadata={"title": r["title"]}) for r in rows[:n]]


def test_byo_llamaindex_index_as_first_stage(li_config: Config) -> None:
    index = VectorStoreIndex(_demo_nodes(30), embed_model=RCAEmbedding())
    parts = from_llamaindex(index, config=li_config)
    assert len(parts.store) == 30 and parts.store.graph_source == "store"
    retriever = SunarLlamaIndexRetriever.from_defaults(components=parts, k=4, strategy="nar")
    nodes = retriever.retrieve("Who directed The Shape of Water?")
    assert len(nodes) == 4
    assert all(n.node.node_id.startswith("demo-") for n in nodes)  # the index's own ids
    assert retriever.last_trace["first_stage"] == "llamaindex:VectorStoreIndex"
    # k larger than the corpus: every document, once
    everything = SunarLlamaIndexRetriever.from_defaults(components=parts, k=100, strategy="nar")
    found = everything.retrieve("film director")
    assert len({n.node.node_id for n in found}) == len(found) <= 30
    assert everything.last_trace["k_capped"] is True
    # a retriever (not an index) works too, with the nodes given explicitly
    parts2 = from_llamaindex(index.as_retriever(similarity_top_k=3), nodes=_demo_nodes(30))
    assert parts2.store.graph_source == "embedder"
    docs = parts2.first_stage.search("Guillermo del Toro", 2)
    assert len(docs) == 2 and docs[0].rank == 1


def test_byo_index_that_finds_nothing(li_config: Config) -> None:
    class Empty:
        def as_retriever(self, **kwargs: Any) -> Any:
            class R:
                def retrieve(self, query: str) -> list[Any]:
                    return []

            return R()

    parts = from_llamaindex(Empty(), nodes=_demo_nodes(3), config=li_config)
    retriever = SunarLlamaIndexRetriever.from_defaults(components=parts, k=3, strategy="nar")
    assert retriever.retrieve("anything at all") == []
    assert "no documents" in retriever.last_trace["note"]
