"""LangChain adapters on the demo corpus with the real packaged models: the retriever (standard
``langchain-tests`` suite + our contract), graphs in LCEL chains and as a tool, and a
bring-your-own LangChain store as the first stage of NAR and of a loop."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import ToolMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore

from rag_complexity_agents.config import Config
from rag_complexity_agents.corpus.demo import DEMO_CORPUS
from rag_complexity_agents.errors import ConfigError, InputError
from rag_complexity_agents.integrations.byo_langchain import from_langchain
from rag_complexity_agents.integrations.external import content_id
from rag_complexity_agents.integrations.langchain import (
    RCAEmbeddings,
    SunarLangChainRetriever,
    as_runnable,
    as_tool,
)

QUESTION = "Where was the director of Spirited Away born?"
SMOL = {"chat": "llamacpp:smollm2-135m", "n_threads": 1}


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def lc_config(demo_home: Path) -> Config:
    return Config(corpus={"home": demo_home}, collection="demo", graph={"k": 16}, models=SMOL)


def _demo_documents(n: int) -> list[Document]:
    import json

    rows = [json.loads(line) for line in DEMO_CORPUS.read_text().splitlines() if line.strip()]
    # no ids on purpose: the adapter must give them stable content-hash ids
    return [Document(page_content=r["text"], metadata={"title": r["title"]}) for r in rows[:n]]


# --------------------------------------------------------------------------------------------
# langchain-tests' standard retriever suite (NAR strategy: no LLM in the loop)
# --------------------------------------------------------------------------------------------

lc_tests = pytest.importorskip("langchain_tests.integration_tests")
_STANDARD: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def _standard_params(lc_config: Config) -> None:
    _STANDARD["config"] = lc_config


class TestStandardRetriever(lc_tests.RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return SunarLangChainRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"config": _STANDARD["config"], "strategy": "nar", "k": 2}

    @property
    def retriever_query_example(self) -> str:
        return "Who directed Spirited Away?"


# --------------------------------------------------------------------------------------------
# Our contract
# --------------------------------------------------------------------------------------------


def test_nar_documents_carry_provenance_and_ids(lc_config: Config) -> None:
    retriever = SunarLangChainRetriever(config=lc_config, strategy="nar", k=6)
    docs = retriever.invoke(QUESTION)
    assert len(docs) == 6 and all(isinstance(d, Document) for d in docs)
    ids = [d.id for d in docs]
    assert len(set(ids)) == 6 and all(d.metadata["chunk_id"] == d.id for d in docs)
    assert [d.metadata["rank"] for d in docs] == [1, 2, 3, 4, 5, 6]
    assert {d.metadata["provenance"] for d in docs} <= {"first_stage", "neighbour", "backfill"}
    titles = [d.metadata["title"] for d in docs]
    assert "Spirited Away" in titles and "Hayao Miyazaki" in titles
    neighbours = [d for d in docs if d.metadata["provenance"] == "neighbour"]
    assert all(d.metadata["via"] for d in neighbours)  # the document that brought it in
    assert all(str(d.metadata["doc_id"]).startswith("demo-") for d in docs)
    # the trace of the call is kept and JSON-ready
    assert retriever.last_trace["retriever"] == "nar" and retriever.last_trace["k"] == 6
    assert [r["id"] for r in retriever.last_trace["returned"]] == ids


def test_per_call_k_async_and_bad_k(lc_config: Config) -> None:
    retriever = SunarLangChainRetriever(config=lc_config, strategy="first_stage", k=3)
    assert len(retriever.invoke("Studio Ghibli")) == 3
    assert len(retriever.invoke("Studio Ghibli", k=5)) == 5
    docs = asyncio.run(retriever.ainvoke("Studio Ghibli", k=2))
    assert len(docs) == 2 and docs[0].metadata["provenance"] == "first_stage"
    with pytest.raises(InputError, match="k must be at least 1"):
        retriever.invoke("Studio Ghibli", k=0)
    with pytest.raises(InputError):
        SunarLangChainRetriever(config=lc_config, k=0)
    with pytest.raises(InputError, match="empty"):
        retriever.invoke("   ")
    with pytest.raises(ConfigError):
        SunarLangChainRetriever(config=lc_config, strategy="bogus")


@pytest.mark.llm
def test_sunar_documents_carry_asu_clusters(lc_config: Config) -> None:
    cfg = lc_config.with_overrides({"nar.c": 4, "asu.m": 2})
    retriever = SunarLangChainRetriever(config=cfg, strategy="sunar", k=3)
    docs = retriever.invoke("Who directed Spirited Away?")
    assert len(docs) == 3
    scored = [d for d in docs if d.metadata["nar_batch"] is not None]
    assert scored, "NAR scored none of the returned documents"
    for doc in scored:
        assert doc.metadata["asu_s"] >= 1
        assert len(doc.metadata["asu_cluster_answers"]) == doc.metadata["asu_s"]
        assert sum(len(c) for c in doc.metadata["asu_clusters"]) == 2  # m samples
    assert retriever.last_trace["asu"] is True


# --------------------------------------------------------------------------------------------
# Bring your own LangChain store
# --------------------------------------------------------------------------------------------


class KeywordRetriever(BaseRetriever):
    """A user's retriever: documents sharing a word with the query, in list order."""

    docs: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        words = {w.strip("?.,").lower() for w in query.split() if len(w) > 3}
        return [d for d in self.docs if words & set(d.page_content.lower().split())]


@pytest.fixture(scope="module")
def byo_parts(lc_config: Config) -> Any:
    user = KeywordRetriever(docs=_demo_documents(40))
    return from_langchain(user, config=lc_config)


def test_byo_retriever_without_ids_gets_content_hash_ids_and_a_graph(byo_parts: Any) -> None:
    corpus = byo_parts.store
    assert len(corpus) == 40 and corpus.graph_source == "embedder"
    first = _demo_documents(1)[0]
    expected = content_id(first.page_content, first.metadata["title"])
    assert corpus.ids[0] == expected and expected.startswith("doc-")
    assert content_id(first.page_content, first.metadata["title"]) == expected  # stable
    neighbours = corpus.graph.neighbours(expected, 5)
    assert len(neighbours) == 5 and all(n != expected for n, _ in neighbours)
    retriever = byo_parts.sunar_retriever(with_asu=False)
    docs = retriever.retrieve("Who directed the film The Shape of Water?", 4)
    assert docs and all(d.id in set(corpus.ids) for d in docs)
    assert retriever.trace["first_stage"].startswith("langchain:KeywordRetriever")


def test_byo_store_returning_nothing_and_k_beyond_corpus(lc_config: Config) -> None:
    docs = _demo_documents(5)
    parts = from_langchain(KeywordRetriever(docs=docs), config=lc_config)
    retriever = SunarLangChainRetriever(components=parts, strategy="nar", k=50)
    assert retriever.invoke("zzzz qqqq xxxx") == []
    assert "no documents" in retriever.last_trace["note"]
    # k beyond the corpus: every document the store has, once
    everything = KeywordRetriever(docs=[Document(page_content=f"alpha item {i}") for i in range(4)])
    parts = from_langchain(everything, config=lc_config)
    found = SunarLangChainRetriever(components=parts, strategy="nar", k=10).invoke("alpha")
    assert len(found) == 4
    assert len({d.id for d in found}) == 4


def test_byo_in_memory_vector_store_uses_its_vectors(lc_config: Config) -> None:
    store = InMemoryVectorStore(RCAEmbeddings(config=lc_config))
    store.add_documents(_demo_documents(30))
    parts = from_langchain(store, config=lc_config)
    assert len(parts.store) == 30 and parts.store.graph_source == "store"
    retriever = SunarLangChainRetriever(components=parts, strategy="nar", k=3)
    docs = retriever.invoke("Who directed The Shape of Water?")
    assert len(docs) == 3 and docs[0].id in store.store  # the store's own ids
    with pytest.raises(InputError):
        from_langchain(object(), config=lc_config)  # not a LangChain store


@pytest.mark.llm
def test_byo_store_drives_a_loop(byo_parts: Any) -> None:
    from rag_complexity_agents.agents.registry import build_pipeline
    from rag_complexity_agents.agents.run import run_graph

    graph = build_pipeline("self_ask_nar", byo_parts.config, components=byo_parts)
    result = run_graph(graph, "Who directed The Shape of Water?", options={"max_steps": 1})
    assert isinstance(result.answer, str) and result.trace["retrieval"] == "nar"
    ids = {e["id"] for e in result.trace["evidence"]}
    assert ids and ids <= set(byo_parts.store.ids)


# --------------------------------------------------------------------------------------------
# Graphs in LCEL chains and as a tool
# --------------------------------------------------------------------------------------------


@pytest.mark.llm
def test_graph_in_lcel_chain_and_as_tool(lc_config: Config) -> None:
    chain = (
        RunnableLambda(lambda x: {"question": x["q"]})
        | as_runnable("single_step", lc_config)
        | RunnableLambda(lambda out: (out["answer"], out["trace"]))
    )
    answer, trace = chain.invoke({"q": "Who directed Spirited Away?"})
    assert isinstance(answer, str) and answer.strip()
    assert trace["loop"] == "single_step" and trace["evidence"]
    tool = as_tool("single_step", lc_config)
    assert tool.name == "answer_complex_question" and "question" in tool.args
    call = tool.ainvoke(  # async path of the runnable and the tool in one run
        {
            "type": "tool_call",
            "id": "call-1",
            "name": tool.name,
            "args": {"question": "Who directed Spirited Away?"},
        }
    )
    message = asyncio.run(call)
    assert isinstance(message, ToolMessage) and message.content
    assert message.artifact["loop"] == "single_step"
    with pytest.raises(InputError):
        as_runnable("single_step", lc_config).invoke({"question": ""})
    with pytest.raises(ConfigError):
        as_runnable("no_such_graph", lc_config)
