"""Framework-neutral plumbing shared by the LangChain and LlamaIndex adapters.

* :class:`RetrievalAdapter` turns a query into ``(docs, trace)`` with one of three strategies
  (``sunar`` = first stage + NAR + ASU, ``nar`` = first stage + NAR, ``first_stage``), thread
  safe, with the ``k`` rules every adapter follows:

  - ``k < 1`` (including ``k = 0``) raises :class:`~rag_complexity_agents.errors.InputError`
    (a retriever asked for nothing is almost always a bug in the caller);
  - ``k`` larger than what the strategy can rank returns everything it ranked
    (``trace["k_capped"]`` is true);
  - a first stage that finds nothing returns ``[]`` with ``trace["note"]`` saying so.

* :func:`doc_metadata` is the metadata every adapter attaches to a retrieved document:
  provenance (``first_stage`` / ``neighbour`` / ``backfill``), the chunk's ``doc_id`` and
  title, score, rank, NAR batch, the document whose neighbours brought it in, and the ASU
  clusters of its batch when ASU ran.
* :func:`resolve_graph` builds a pipeline's graph by name (or passes a compiled graph); the
  adapters build :data:`~..config.pipelines.DEFAULT_PIPELINE` when none is named.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Unpack

from ..agents.registry import build_pipeline
from ..components import Components
from ..config import Config
from ..config.knobs import KnobValues, overrides_of
from ..errors import ConfigError, InputError
from ..types import ScoredDoc
from .byo_langchain import from_langchain
from .byo_llamaindex import from_llamaindex
from .chat_models import as_chat_model

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.graph.state import CompiledStateGraph
    from llama_index.core.llms import LLM as LlamaIndexLLM

    from ..models.base import Equivalence, Scorer
    from ..retrieval.sunar import SunarRetriever

Strategy = Literal["sunar", "nar", "first_stage"]
STRATEGIES: tuple[str, ...] = ("sunar", "nar", "first_stage")


def check_k(k: Any) -> int:
    """``k`` as an int >= 1, else InputError (``k = 0`` is rejected, see the module doc)."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise InputError(f"k must be a positive integer, got {k!r}")
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}; ask for one document or more")
    return int(k)


def check_query(query: Any) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InputError("the query is empty; pass the question to retrieve for")
    return query.strip()


def _is_llamaindex(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "llama_index"


def _store_embeddings(store: Any) -> Any:
    """The embedding model a LangChain store or a LlamaIndex index was built with, if any."""
    store = getattr(store, "vectorstore", None) or store
    for name in ("embeddings", "_embed_model", "embed_model"):
        try:
            found = getattr(store, name, None)
        except (AttributeError, NotImplementedError, ValueError):
            found = None
        if found is not None:
            return found
    return None


def rag_components(
    llm: BaseChatModel | LlamaIndexLLM | None = None,
    *,
    embeddings: Any = None,
    vectorstore: Any = None,
    retriever: Any = None,
    index: Any = None,
    documents: Sequence[Any] | None = None,
    collection: str | None = None,
    config: Config | None = None,
    scorer: Scorer | None = None,
    equivalence: Equivalence | None = None,
    **knobs: Unpack[KnobValues],
) -> Components:
    """:class:`~rag_complexity_agents.components.Components` from your objects.

    ``llm``: any LangChain ``BaseChatModel`` or LlamaIndex LLM (default: ``models.chat``;
    anything else raises InputError here). ``embeddings``: a
    LangChain ``Embeddings`` or LlamaIndex ``BaseEmbedding`` (default: your store's own, else
    ``models.embedding``). The first stage is, in this order: ``vectorstore`` (a LangChain
    ``VectorStore``), ``retriever`` (a LangChain ``BaseRetriever`` or a LlamaIndex
    retriever), ``index`` (a LlamaIndex index), else the collection ``collection`` built with
    ``rca index``. ``documents``: every document of your store (LangChain Documents or
    LlamaIndex nodes) when it cannot list them itself. ``config``: default ``Config()`` (the
    ``cpu`` preset; ``Config.preset("paper")`` for the paper's sizes). ``knobs``: any knob of
    :mod:`~rag_complexity_agents.config.knobs`, by name or paper symbol.
    """
    llm = as_chat_model(llm)  # a LlamaIndex LLM becomes a chat model; a wrong object fails here
    sources = [s for s in (vectorstore, retriever, index) if s is not None]
    if len(sources) > 1:
        raise InputError("pass one first stage: vectorstore=, retriever= or index=")
    changes = overrides_of(dict(knobs))
    if collection is not None:
        changes["collection"] = collection
    cfg = (config or Config()).with_overrides(changes)
    if not sources:
        return Components(
            cfg, chat=llm, embedder=embeddings, scorer=scorer, equivalence=equivalence
        )
    source = sources[0]
    embeddings = embeddings if embeddings is not None else _store_embeddings(source)
    if index is not None or _is_llamaindex(source):
        parts: Components = from_llamaindex(
            source, nodes=documents, config=cfg, embeddings=embeddings
        )
    else:
        parts = from_langchain(source, documents=documents, config=cfg, embeddings=embeddings)
    parts.inject(chat=llm, scorer=scorer, equivalence=equivalence)
    return parts


class RetrievalAdapter:
    """One retrieval strategy over :class:`Components`, safe to call from several threads."""

    def __init__(self, components: Components, strategy: Strategy | str = "sunar") -> None:
        if strategy not in STRATEGIES:
            raise ConfigError(
                f"unknown retrieval strategy {strategy!r}; use one of {', '.join(STRATEGIES)}"
            )
        self.components = components
        self.strategy = str(strategy)
        self._retriever: SunarRetriever | None = None
        self._lock = threading.Lock()

    @property
    def config(self) -> Config:
        return self.components.config

    def sunar(self) -> SunarRetriever:
        """The underlying :class:`~rag_complexity_agents.retrieval.sunar.SunarRetriever`."""
        if self._retriever is None:
            self._retriever = self.components.sunar_retriever(with_asu=self.strategy == "sunar")
        return self._retriever

    def retrieve(self, query: str, k: int) -> tuple[list[ScoredDoc], dict[str, Any]]:
        """The top ``k`` documents for ``query`` and a JSON-serialisable trace."""
        query = check_query(query)
        k = check_k(k)
        with self._lock:
            if self.strategy == "first_stage":
                first = self.components.first_stage
                docs = list(first.search(query, k))[:k]
                trace: dict[str, Any] = {
                    "retriever": "first_stage",
                    "first_stage": getattr(first, "name", type(first).__name__),
                    "query": query,
                }
            else:
                retriever = self.sunar()
                docs = retriever.retrieve(query, k)
                trace = dict(retriever.trace)
                trace["retriever"] = self.strategy
        trace["k"] = k
        trace["k_capped"] = len(docs) < k
        trace.setdefault("returned", [d.to_trace() for d in docs])
        if not docs:
            trace["note"] = "the first stage returned no documents for this query"
        return docs, trace


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def asu_of(doc: ScoredDoc, trace: dict[str, Any]) -> dict[str, Any]:
    """The ASU outcome of the NAR batch that scored ``doc`` ({} when ASU did not run)."""
    if doc.batch is None:
        return {}
    for batch in (trace.get("nar") or {}).get("batches") or []:
        if batch.get("index") == doc.batch:
            hook = batch.get("hook") or {}
            if hook.get("s") is None:
                return {}
            return {
                "asu_s": hook["s"],
                "asu_semantic_entropy": hook.get("semantic_entropy"),
                "asu_cluster_answers": list(hook.get("cluster_answers") or []),
                "asu_clusters": [list(c) for c in hook.get("clusters") or []],
            }
    return {}


def doc_metadata(
    doc: ScoredDoc, trace: dict[str, Any] | None = None, *, rank: int | None = None
) -> dict[str, Any]:
    """Metadata for a retrieved document: the chunk's own plain metadata, then ours
    (``rank`` is its 1-based position in the returned list)."""
    meta = {k: v for k, v in doc.chunk.metadata.items() if _plain(v)}
    meta.update(
        {
            "chunk_id": doc.id,
            "doc_id": doc.chunk.metadata.get("doc_id", doc.id),
            "title": doc.chunk.title,
            "provenance": doc.source,
            "score": float(doc.score),
            "rank": rank if rank is not None else doc.rank,
            "nar_batch": doc.batch,
            "via": doc.via,
        }
    )
    if trace:
        meta.update(asu_of(doc, trace))
    return meta


def resolve_graph(
    graph: str | CompiledStateGraph[Any, Any, Any, Any],
    config: Config | None = None,
    *,
    components: Components | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A compiled graph: a pipeline's name (:data:`~..config.pipelines.PIPELINES`) or an
    already compiled graph (returned as is)."""
    if not isinstance(graph, str):
        return graph
    cfg = config or (components.config if components is not None else Config())
    return build_pipeline(graph, cfg, components=components)
