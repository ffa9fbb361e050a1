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
* :class:`LlamaIndexChatModel` — the other way round: a LlamaIndex LLM as a LangChain chat
  model, which is how ``llm=`` takes a LlamaIndex LLM everywhere.
* :class:`RCAEmbedding` — our embedder as a LlamaIndex embedding model (offline
  ``VectorStoreIndex``).

LlamaIndex's own defaults count: without ``llm=`` / ``embeddings=``, the entry points here use
``Settings.llm`` and ``Settings.embed_model`` when the app set them (:func:`settings_llm`,
:func:`settings_embed_model`); a store's own embedding model still comes first.

``k < 1`` raises InputError; ``k`` beyond what the strategy ranks returns everything it
ranked; a query with no first-stage hit returns ``[]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Unpack

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import Field
from llama_index.core.callbacks import CallbackManager
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ..agents.run import arun_graph, run_graph
from ..components import Components
from ..config import Config
from ..config.knobs import RetrieverKnobValues
from ..config.pipelines import DEFAULT_PIPELINE
from ..types import RunResult, ScoredDoc
from .core import (
    RetrievalAdapter,
    Strategy,
    _store_embeddings,
    check_k,
    doc_metadata,
    rag_components,
    resolve_graph,
)
from .llamaindex_llm import RCAEmbedding


def settings_llm() -> Any:
    """The LLM the app set on ``llama_index.core.Settings``, else None. Read from the private
    field: reading ``Settings.llm`` unset would build LlamaIndex's OpenAI default. A
    ``MockLLM`` is what LlamaIndex puts there when LLMs are turned off
    (``Settings.llm = None``), so it counts as unset."""
    from llama_index.core import Settings
    from llama_index.core.llms.mock import MockLLM

    llm = getattr(Settings, "_llm", None)
    return None if llm is None or type(llm) is MockLLM else llm


def settings_embed_model(config: Config | None = None) -> Any:
    """The embedding model the app set on ``llama_index.core.Settings``, else None (read
    like :func:`settings_llm`; the ``MockEmbedding`` of ``Settings.embed_model = None`` and an
    :class:`RCAEmbedding` of ``config``'s own ``models.embedding`` count as unset)."""
    from llama_index.core import Settings
    from llama_index.core.embeddings.mock_embed_model import MockEmbedding

    model = getattr(Settings, "_embed_model", None)
    if model is None or type(model) is MockEmbedding:
        return None
    if isinstance(model, RCAEmbedding):
        spec = (config or Config()).models.embedding
        return None if model.spec == spec else model.rca_embedder()
    return model


def _with_settings(
    llm: Any, embeddings: Any, sources: Sequence[Any], config: Config | None
) -> tuple[Any, Any]:
    """``llm`` / ``embeddings``, else LlamaIndex's ``Settings`` ones; the Settings embedding
    model only when the first stage has no embedding model of its own."""
    if llm is None:
        llm = settings_llm()
    if embeddings is None:
        source = next((s for s in sources if s is not None), None)
        if source is None or _store_embeddings(source) is None:
            embeddings = settings_embed_model(config)
    return llm, embeddings


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
        LangChain) / ``vectorstore``, and knobs by name or symbol (``budget``/``c``, …).
        Without ``llm`` / ``embeddings``, LlamaIndex's ``Settings`` ones are used when set."""
        if components is None:
            llm, embeddings = _with_settings(
                llm, embeddings, (vectorstore, retriever, index), config
            )
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
        ``embeddings`` and the first stage as ``index`` / ``retriever`` / ``vectorstore``
        (without ``llm`` / ``embeddings``, LlamaIndex's ``Settings`` ones when set);
        ``options`` are per-run knobs."""
        if components is None:
            llm, embeddings = _with_settings(
                llm, embeddings, (vectorstore, retriever, index), config
            )
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
