"""LlamaIndex adapters (``llama-index-core`` 0.14): a retriever, a query engine, an LLM and an
embedding model.

* :class:`SunarLlamaIndexRetriever` — a LlamaIndex ``BaseRetriever`` over SUNAR / NAR /
  first-stage retrieval (``_retrieve`` and ``_aretrieve``) returning ``NodeWithScore``s whose
  ``TextNode`` id is our chunk id and whose metadata carries provenance (``first_stage`` /
  ``neighbour`` / ``backfill``), ``doc_id``, ``title``, NAR batch, ``via`` and, with ASU,
  the batch's answer clusters. Works inside LlamaIndex's own ``RetrieverQueryEngine``.
* :class:`RCAQueryEngine` — a ``CustomQueryEngine`` running any of our loop graphs
  (``custom_query`` / ``acustom_query``): a ``Response`` whose ``source_nodes`` are the
  evidence the run used and whose ``metadata["trace"]`` is the run's JSON trace. Usable as
  a ``QueryEngineTool``.
* :class:`LangChainChatLLM` — any LangChain chat model (by default our packaged llama.cpp
  model from ``models.chat``) as a LlamaIndex LLM, so response synthesizers run offline.
* :class:`RCAEmbedding` — our embedder as a LlamaIndex embedding model (offline
  ``VectorStoreIndex``).

``k < 1`` raises InputError; ``k`` beyond what the strategy ranks returns everything it
ranked; a query with no first-stage hit returns ``[]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Unpack

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.custom import CustomLLM
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ..agents.run import arun_graph, run_graph
from ..components import Components
from ..config import Config
from ..config.knobs import RetrieverKnobValues
from ..config.pipelines import DEFAULT_PIPELINE
from ..models.calls import call_chat
from ..models.chat import load_chat_model
from ..models.embeddings import as_embedder, load_embedder
from ..types import RunResult, ScoredDoc
from .core import (
    RetrievalAdapter,
    Strategy,
    check_k,
    doc_metadata,
    rag_components,
    resolve_graph,
)


def to_node(
    doc: ScoredDoc, trace: dict[str, Any] | None = None, *, rank: int | None = None
) -> NodeWithScore:
    """A retrieved document as a ``NodeWithScore`` (node id = chunk id)."""
    node = TextNode(id_=doc.id, text=doc.text, metadata=doc_metadata(doc, trace, rank=rank))
    return NodeWithScore(node=node, score=float(doc.score))


class SunarLlamaIndexRetriever(BaseRetriever):
    """SUNAR / NAR / first-stage retrieval as a LlamaIndex retriever; build it with
    :meth:`from_defaults`. ``last_trace`` holds the trace of the latest call."""

    def __init__(
        self,
        adapter: RetrievalAdapter,
        *,
        k: int = 4,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self.adapter = adapter
        self.k = check_k(k)
        self.last_trace: dict[str, Any] = {}
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def from_defaults(
        cls,
        config: Config | None = None,
        *,
        collection: str | None = None,
        k: int = 4,
        strategy: Strategy = "sunar",
        components: Components | None = None,
        callback_manager: CallbackManager | None = None,
        llm: Any = None,
        embeddings: Any = None,
        vectorstore: Any = None,
        retriever: Any = None,
        index: Any = None,
        documents: Sequence[Any] | None = None,
        scorer: Any = None,
        equivalence: Any = None,
        **knobs: Unpack[RetrieverKnobValues],
    ) -> SunarLlamaIndexRetriever:
        """``config`` defaults to ``Config()``; ``collection`` overrides its collection;
        ``components`` (e.g. :func:`~.byo_llamaindex.from_llamaindex`) replace both. Your
        objects go in as for :func:`~rag_complexity_agents.create_rag_agent`: ``llm``,
        ``embeddings``, the first stage as ``index`` / ``retriever`` (LlamaIndex or
        LangChain) / ``vectorstore``, and knobs by name or symbol (``budget``/``c``, …)."""
        parts = components or rag_components(
            config=config,
            collection=collection,
            llm=llm,
            embeddings=embeddings,
            vectorstore=vectorstore,
            retriever=retriever,
            index=index,
            documents=documents,
            scorer=scorer,
            equivalence=equivalence,
            **knobs,
        )
        return cls(RetrievalAdapter(parts, strategy), k=k, callback_manager=callback_manager)

    def retrieve_k(self, query: str, k: int) -> list[NodeWithScore]:
        """Like ``retrieve`` with another ``k`` for this call."""
        docs, trace = self.adapter.retrieve(query, k)
        self.last_trace = trace
        return [to_node(d, trace, rank=i) for i, d in enumerate(docs, start=1)]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.retrieve_k(query_bundle.query_str, self.k)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self.retrieve_k, query_bundle.query_str, self.k)


def evidence_nodes(result: RunResult) -> list[NodeWithScore]:
    """The passages a run used (``trace["evidence"]``: each step's shown evidence and MER's,
    first occurrence kept) as ``NodeWithScore``s. The trace keeps ids and titles but no
    texts; :class:`RCAQueryEngine` fills them from the collection."""
    records: list[dict[str, Any]] = list(result.trace.get("evidence") or [])
    seen: set[str] = set()
    nodes: list[NodeWithScore] = []
    for record in records:
        doc_id = str(record.get("id") or "")
        if not doc_id or doc_id in seen:
            continue
        seen.add(doc_id)
        meta = {
            k: v
            for k, v in record.items()
            if k not in ("text", "id") and (v is None or isinstance(v, str | int | float | bool))
        }
        meta["provenance"] = record.get("source", "first_stage")
        node = TextNode(id_=doc_id, text=str(record.get("text") or ""), metadata=meta)
        score = record.get("score")
        nodes.append(NodeWithScore(node=node, score=float(score) if score is not None else None))
    return nodes


class RCAQueryEngine(CustomQueryEngine):
    """Runs one of our loop graphs per query; the ``Response`` carries the answer,
    ``source_nodes`` (the evidence, texts filled from the collection) and
    ``metadata["trace"]``."""

    graph: Any = Field(description="A compiled loop graph.")
    components: Any = Field(default=None, description="Components used to look up texts.")
    options: dict[str, Any] = Field(default_factory=dict, description="Per-run knobs.")

    @classmethod
    def from_defaults(
        cls,
        graph: Any = DEFAULT_PIPELINE,
        config: Config | None = None,
        *,
        collection: str | None = None,
        components: Components | None = None,
        options: dict[str, Any] | None = None,
        llm: Any = None,
        embeddings: Any = None,
        vectorstore: Any = None,
        retriever: Any = None,
        index: Any = None,
        documents: Sequence[Any] | None = None,
    ) -> RCAQueryEngine:
        """``graph``: a pipeline's name (default: the default pipeline) or a compiled graph.
        Your objects go in as for :func:`~rag_complexity_agents.create_rag_agent`: ``llm``,
        ``embeddings`` and the first stage as ``index`` / ``retriever`` / ``vectorstore``;
        ``options`` are per-run knobs."""
        parts = components or rag_components(
            llm,
            embeddings=embeddings,
            vectorstore=vectorstore,
            retriever=retriever,
            index=index,
            documents=documents,
            collection=collection,
            config=config,
        )
        compiled = resolve_graph(graph, parts.config, components=parts)
        return cls(graph=compiled, components=parts, options=dict(options or {}))

    def _response(self, result: RunResult) -> Response:
        nodes = evidence_nodes(result)
        store = None
        if self.components is not None:
            try:
                store = self.components.store
            except Exception:  # no collection (e.g. the no-retrieval loop)
                store = None
        if store is not None:
            for item in nodes:
                if not item.node.get_content():
                    try:
                        item.node.set_content(store.chunk(item.node.node_id).text)
                    except Exception:
                        continue
        return Response(
            response=result.answer,
            source_nodes=nodes,
            metadata={"trace": result.trace, "answer": result.answer},
        )

    def custom_query(self, query_str: str) -> Response:
        return self._response(run_graph(self.graph, query_str, options=self.options))

    async def acustom_query(self, query_str: str) -> Response:
        return self._response(await arun_graph(self.graph, query_str, options=self.options))


def _lc_messages(messages: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    roles = {
        MessageRole.SYSTEM: "system",
        MessageRole.USER: "human",
        MessageRole.ASSISTANT: "ai",
    }
    return [(roles.get(m.role, "human"), m.content or "") for m in messages]


class LangChainChatLLM(CustomLLM):
    """A LangChain chat model as a LlamaIndex LLM (chat and completion, sync; async runs the
    sync call in a thread). Without ``chat`` it loads ``models.chat`` of ``config``."""

    max_tokens: int = Field(default=128, description="Tokens generated per call.")
    context_window: int = Field(default=4096)
    model_name: str = Field(default="rca-chat")
    _chat: Any = PrivateAttr(default=None)

    def __init__(self, chat: Any = None, *, config: Config | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if chat is None:
            cfg = config or Config()
            chat = load_chat_model(cfg.models.chat, cfg.models, cfg.models.home)
            if "context_window" not in kwargs:
                self.context_window = cfg.models.n_ctx
        self._chat = chat

    @classmethod
    def class_name(cls) -> str:
        return "rca_langchain_chat_llm"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.max_tokens,
            is_chat_model=True,
            model_name=self.model_name,
        )

    def _call(self, messages: list[tuple[str, str]]) -> str:
        return call_chat(self._chat, messages, max_tokens=self.max_tokens).text

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        text = self._call(_lc_messages(messages))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._call([("human", prompt)]))

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        text = self._call([("human", prompt)])

        def gen() -> CompletionResponseGen:
            yield CompletionResponse(text=text, delta=text)

        return gen()

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        text = self._call(_lc_messages(messages))

        def gen() -> ChatResponseGen:
            yield ChatResponse(
                message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=text
            )

        return gen()


class RCAEmbedding(BaseEmbedding):
    """Our embedder (default: packaged all-MiniLM-L6-v2) as a LlamaIndex embedding model;
    :meth:`from_embeddings` wraps any embedder or LangChain ``Embeddings`` instead."""

    spec: str = Field(default="packaged:all-minilm-l6-v2")
    _embedder: Any = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "rca_embedding"

    @classmethod
    def from_embeddings(cls, embeddings: Any, **kwargs: Any) -> RCAEmbedding:
        """A LlamaIndex embedding model over ``embeddings`` (a LangChain ``Embeddings`` or an
        :class:`~rag_complexity_agents.models.base.Embedder`), e.g. to build a
        ``VectorStoreIndex`` with the same model as a LangChain app."""
        model = cls(spec=f"external:{type(embeddings).__name__}", **kwargs)
        model._embedder = as_embedder(embeddings)
        return model

    def _encode(self, texts: list[str]) -> list[list[float]]:
        if self._embedder is None:
            self._embedder = load_embedder(self.spec)
        return [[float(x) for x in row] for row in self._embedder.encode(texts)]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._encode([query])[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._encode([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._encode(list(texts)) if texts else []


__all__ = [
    "LangChainChatLLM",
    "RCAEmbedding",
    "RCAQueryEngine",
    "SunarLlamaIndexRetriever",
    "evidence_nodes",
    "to_node",
]
