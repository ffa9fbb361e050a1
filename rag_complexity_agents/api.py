"""The drop-in API: build our loops and retrievers from the objects a LangChain / LangGraph /
LlamaIndex app already has.

* :func:`create_rag_agent` — a compiled LangGraph graph (like ``create_react_agent``): pass
  your chat model, your embeddings and your store; pick the loop, the retrieval strategy and
  MER; set the paper's knobs as keyword arguments.
* :func:`rag_components` — the :class:`~.components.Components` behind it, which the
  retrievers (``SunarLangChainRetriever.from_defaults``,
  ``SunarLlamaIndexRetriever.from_defaults``) and the query engine
  (``RCAQueryEngine.from_defaults``) are built from the same way.

The first stage is, in this order: ``vectorstore`` (a LangChain ``VectorStore``),
``retriever`` (a LangChain ``BaseRetriever`` or a LlamaIndex retriever), ``index`` (a
LlamaIndex index such as ``VectorStoreIndex``), else the collection ``collection`` (default
``config.collection``) built with ``rca index``. With a store of yours and no ``embeddings``,
the store's own embedding model is used when it exposes one (``vectorstore.embeddings``, a
LlamaIndex index's ``embed_model``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .components import Components
from .config import Config
from .errors import ConfigError, InputError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.graph.state import CompiledStateGraph

    from .models.base import Equivalence, Scorer

KNOBS: dict[str, str] = {
    "b": "nar.b",
    "c": "nar.c",
    "k": "answer.passages",
    "m": "asu.m",
    "l": "mer.l",
    "max_steps": "agents.max_steps",
}
"""Keyword argument → config key of the paper's knobs: NAR batch size b and budget c, the k
passages a question answered in one step is given (single-step RAG), ASU samples m, the
paper's top-l (MER's evidences and, unless ``answer.sub_passages`` is set, the passages each
sub-question is answered from), loop steps."""


def _overrides(collection: str | None, knobs: dict[str, Any]) -> dict[str, Any]:
    unknown = set(knobs) - set(KNOBS)
    if unknown:
        raise ConfigError(f"unknown knobs {', '.join(sorted(unknown))}; use {', '.join(KNOBS)}")
    changes = {KNOBS[name]: value for name, value in knobs.items() if value is not None}
    if collection is not None:
        changes["collection"] = collection
    return changes


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
    llm: BaseChatModel | None = None,
    *,
    embeddings: Any = None,
    vectorstore: Any = None,
    retriever: Any = None,
    index: Any = None,
    documents: Sequence[Any] | None = None,
    collection: str | None = None,
    config: Config | None = None,
    profile: str | None = "cpu",
    scorer: Scorer | None = None,
    equivalence: Equivalence | None = None,
    **knobs: Any,
) -> Components:
    """:class:`~.components.Components` from your objects (see the module docstring).

    ``llm``: any LangChain ``BaseChatModel`` (default: ``models.chat``). ``embeddings``: a
    LangChain ``Embeddings`` or LlamaIndex ``BaseEmbedding``. ``documents``: every document of
    your store (LangChain Documents or LlamaIndex nodes) when it cannot list them itself.
    ``knobs``: ``b``, ``c``, ``k``, ``m``, ``l``, ``max_steps`` (see :data:`KNOBS`).
    ``profile``: ``cpu`` shrinks the paper-sized knobs you did not set, ``paper`` keeps them.
    """
    from .profiles import apply_profile

    sources = [s for s in (vectorstore, retriever, index) if s is not None]
    if len(sources) > 1:
        raise InputError("pass one first stage: vectorstore=, retriever= or index=")
    cfg = config or Config()
    changes = _overrides(collection, knobs)
    if profile is not None:
        changes["agents.profile"] = profile
    cfg = apply_profile(cfg.with_overrides(changes) if changes else cfg, profile)
    if not sources:
        return Components(
            cfg, chat=llm, embedder=embeddings, scorer=scorer, equivalence=equivalence
        )
    from .integrations.byo import from_langchain, from_llamaindex

    source = sources[0]
    embeddings = embeddings if embeddings is not None else _store_embeddings(source)
    if index is not None or _is_llamaindex(source):
        parts = from_llamaindex(
            source, nodes=documents, config=cfg, profile=profile, embeddings=embeddings
        )
    else:
        parts = from_langchain(
            source, documents=documents, config=cfg, profile=profile, embeddings=embeddings
        )
    parts.inject(chat=llm, scorer=scorer, equivalence=equivalence)
    return parts


def create_rag_agent(
    llm: BaseChatModel | None = None,
    *,
    loop: str = "plan_execute",
    retrieval: str = "first_stage",
    mer: bool = False,
    embeddings: Any = None,
    vectorstore: Any = None,
    retriever: Any = None,
    index: Any = None,
    documents: Sequence[Any] | None = None,
    collection: str | None = None,
    config: Config | None = None,
    profile: str | None = "cpu",
    scorer: Scorer | None = None,
    equivalence: Equivalence | None = None,
    checkpointer: Any = None,
    name: str | None = None,
    b: int | None = None,
    c: int | None = None,
    k: int | None = None,
    m: int | None = None,
    l: int | None = None,  # noqa: E741 - the paper's symbol
    max_steps: int | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A compiled LangGraph graph that answers ``{"question": ...}`` with ``loop``
    (``plan_execute`` | ``self_ask`` | ``react`` | ``searchain`` | ``ircot`` | ``cot`` |
    ``single_step`` | ``no_retrieval``) over ``retrieval`` (``none`` | ``first_stage`` |
    ``rerank`` | ``nar`` | ``sunar``), finishing with MER when ``mer``.

    The defaults are the end-to-end benchmark's best loop (plan-and-execute, first-stage
    retrieval, no MER: :data:`~.integrations.core.DEFAULT_GRAPH`); the paper's full SUNAR is
    ``loop="self_ask", retrieval="sunar", mer=True``.

    The state it returns has ``answer`` and ``trace`` (the JSON trace). It works with
    ``invoke`` / ``ainvoke`` / ``stream`` / ``astream``, any checkpointer
    (``checkpointer=``, then pass a ``thread_id``) and per-run knobs in ``configurable`` or
    the run context (:class:`~.agents.state.RunOptions`). Objects and knobs: see
    :func:`rag_components`.
    """
    from .agents.registry import build_graph

    parts = rag_components(
        llm,
        embeddings=embeddings,
        vectorstore=vectorstore,
        retriever=retriever,
        index=index,
        documents=documents,
        collection=collection,
        config=config,
        profile=profile,
        scorer=scorer,
        equivalence=equivalence,
        b=b,
        c=c,
        k=k,
        m=m,
        l=l,
        max_steps=max_steps,
    )
    return build_graph(
        loop,
        parts.config,
        components=parts,
        retrieval=retrieval,
        mer=mer,
        checkpointer=checkpointer,
        name=name,
    )


__all__ = ["KNOBS", "create_rag_agent", "rag_components"]
