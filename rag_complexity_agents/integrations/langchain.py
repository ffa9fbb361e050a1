"""LangChain adapters: a retriever, LCEL runnables over the loop graphs, a tool, embeddings.

* :class:`SunarLangChainRetriever` — a LangChain ``BaseRetriever`` over SUNAR / NAR /
  first-stage retrieval. ``k`` is set at construction and can be overridden per call
  (``retriever.invoke(q, k=3)``); sync and async. Each ``Document`` has ``id`` = our chunk id
  and metadata with provenance (``first_stage`` / ``neighbour`` / ``backfill``), ``doc_id``,
  ``title``, score, rank, NAR batch, ``via`` and, with ASU, the batch's answer clusters. It
  passes ``langchain-tests``' standard retriever suite.
* :func:`as_runnable` — a loop graph as a ``Runnable`` for LCEL chains: question (or
  ``{"question": ...}``) → ``{"answer", "trace"}`` (or the answer string).
* :func:`as_tool` — "answer a complex question" as a LangChain tool for agents; the content
  is the answer, the artifact the trace.
* :class:`RCAEmbeddings` — our packaged embedder as LangChain ``Embeddings`` (e.g. for an
  ``InMemoryVectorStore`` that is then used as the first stage, see
  :mod:`~rag_complexity_agents.integrations.external`).

``k < 1`` raises InputError; ``k`` beyond what the strategy ranks returns everything it
ranked; a query with no first-stage hit returns ``[]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Unpack

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from ..agents.run import arun_graph, run_graph
from ..components import Components
from ..config import Config
from ..config.knobs import RetrieverKnobValues
from ..config.pipelines import DEFAULT_PIPELINE
from ..errors import ConfigError, InputError
from ..models.embeddings import load_embedder
from ..types import ScoredDoc
from .core import (
    STRATEGIES,
    RetrievalAdapter,
    check_k,
    doc_metadata,
    rag_components,
    resolve_graph,
)

Output = Literal["dict", "answer"]


def to_document(
    doc: ScoredDoc, trace: dict[str, Any] | None = None, *, rank: int | None = None
) -> Document:
    """A retrieved document as a LangChain ``Document`` (id = chunk id)."""
    return Document(page_content=doc.text, id=doc.id, metadata=doc_metadata(doc, trace, rank=rank))


class SunarLangChainRetriever(BaseRetriever):
    """SUNAR (``strategy="sunar"``: NAR + ASU), NAR or first-stage retrieval over a collection
    (or over your own store: pass ``components=from_langchain(...)``).

    ``config`` defaults to ``Config()`` (``collection`` overrides its collection).
    ``last_trace`` holds the trace of the latest call.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: Config | None = None
    collection: str | None = None
    k: int = Field(4, description="Documents returned (per call: invoke(q, k=...)).")
    strategy: str = Field("sunar", description="sunar | nar | first_stage")
    components: Components | None = Field(default=None, exclude=True)
    last_trace: dict[str, Any] = Field(default_factory=dict, exclude=True)
    _adapter: RetrievalAdapter | None = PrivateAttr(default=None)

    @classmethod
    def from_defaults(
        cls,
        config: Config | None = None,
        *,
        llm: Any = None,
        embeddings: Any = None,
        vectorstore: Any = None,
        retriever: Any = None,
        index: Any = None,
        documents: Sequence[Any] | None = None,
        collection: str | None = None,
        k: int = 4,
        strategy: str = "sunar",
        scorer: Any = None,
        equivalence: Any = None,
        **knobs: Unpack[RetrieverKnobValues],
    ) -> SunarLangChainRetriever:
        """The retriever over your objects, built like
        :func:`~rag_complexity_agents.create_rag_agent`: ``llm`` (ASU samples its answers),
        ``embeddings``, and the first stage as ``vectorstore`` / ``retriever`` / ``index``
        (else the collection ``collection``); knobs by name or symbol (``budget``/``c``, …).
        ``k`` documents are returned per call."""
        parts = rag_components(
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
        return cls(components=parts, k=k, strategy=strategy)

    def model_post_init(self, context: Any) -> None:
        check_k(self.k)
        if self.strategy not in STRATEGIES:
            raise ConfigError(
                f"unknown retrieval strategy {self.strategy!r}; use one of {', '.join(STRATEGIES)}"
            )

    @property
    def adapter(self) -> RetrievalAdapter:
        if self._adapter is None:
            parts = self.components or rag_components(
                config=self.config, collection=self.collection
            )
            self._adapter = RetrievalAdapter(parts, self.strategy)
        return self._adapter

    def _documents(self, query: str, k: int | None) -> list[Document]:
        docs, trace = self.adapter.retrieve(query, self.k if k is None else k)
        self.last_trace = trace
        return [to_document(d, trace, rank=i) for i, d in enumerate(docs, start=1)]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        return self._documents(query, k)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
    ) -> list[Document]:
        return await asyncio.to_thread(self._documents, query, k)


# --------------------------------------------------------------------------------------------
# Graphs as runnables and tools
# --------------------------------------------------------------------------------------------


def _question(value: Any) -> str:
    if isinstance(value, Mapping):
        value = value.get("question", value.get("input", value.get("query")))
    if not isinstance(value, str) or not value.strip():
        raise InputError("pass a question (a string or {'question': ...})")
    return value


def as_runnable(
    graph: Any = DEFAULT_PIPELINE,
    config: Config | None = None,
    *,
    components: Components | None = None,
    options: Mapping[str, Any] | None = None,
    output: Output = "dict",
) -> Runnable[Any, Any]:
    """A loop graph as an LCEL ``Runnable``.

    ``graph`` is a pipeline's name (default: the default pipeline) or a compiled graph.
    Input: a question string or a mapping with ``question`` (or ``input`` / ``query``).
    Output: ``{"answer", "trace"}``, or the answer string with ``output="answer"``.
    ``options`` are per-run knobs (``max_steps``, ``samples``, ...); the ``RunnableConfig`` of
    the chain is passed through to the graph, so callbacks and ``configurable`` knobs apply.
    """
    compiled = resolve_graph(graph, config, components=components)

    def shape(answer: str, trace: dict[str, Any]) -> Any:
        return answer if output == "answer" else {"answer": answer, "trace": trace}

    def call(value: Any, config: RunnableConfig) -> Any:
        result = run_graph(compiled, _question(value), options=options, config=config)
        return shape(result.answer, result.trace)

    async def acall(value: Any, config: RunnableConfig) -> Any:
        result = await arun_graph(compiled, _question(value), options=options, config=config)
        return shape(result.answer, result.trace)

    return RunnableLambda(call, afunc=acall, name=f"rca:{compiled.name}")


class ComplexQuestion(BaseModel):
    """The tool's input."""

    question: str = Field(description="The full question, e.g. a multi-hop question.")


TOOL_DESCRIPTION = (
    "Answer a complex, multi-hop factual question from the document collection. It breaks "
    "the question into sub-questions, retrieves evidence for each and returns a short answer."
)


def as_tool(
    graph: Any = DEFAULT_PIPELINE,
    config: Config | None = None,
    *,
    components: Components | None = None,
    options: Mapping[str, Any] | None = None,
    name: str = "answer_complex_question",
    description: str = TOOL_DESCRIPTION,
) -> BaseTool:
    """A LangChain tool that answers a question with a loop graph (content = answer, artifact
    = the trace), for LangChain / LangGraph agents."""
    runnable = as_runnable(graph, config, components=components, options=options)

    def answer(question: str) -> tuple[str, dict[str, Any]]:
        out = runnable.invoke(question)
        return out["answer"], out["trace"]

    async def aanswer(question: str) -> tuple[str, dict[str, Any]]:
        out = await runnable.ainvoke(question)
        return out["answer"], out["trace"]

    return StructuredTool.from_function(
        func=answer,
        coroutine=aanswer,
        name=name,
        description=description,
        args_schema=ComplexQuestion,
        response_format="content_and_artifact",
    )


class RCAEmbeddings(Embeddings):
    """Our embedder (default: the packaged all-MiniLM-L6-v2) as LangChain ``Embeddings``."""

    def __init__(self, spec: str | None = None, *, config: Config | None = None) -> None:
        self.config = config or Config()
        self.spec = spec or self.config.models.embedding
        self._embedder: Any = None

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            self._embedder = load_embedder(
                self.spec, batch_size=self.config.models.embed_batch_size
            )
        return self._embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return [[float(x) for x in row] for row in self.embedder.encode(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self.embedder.encode([text])[0]]
