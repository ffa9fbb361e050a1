"""The drop-in API: build our pipelines and retrievers from the objects a LangChain /
LangGraph / LlamaIndex app already has.

* :func:`create_rag_agent` — a compiled LangGraph graph (like ``create_react_agent``): pass
  your chat model, your embeddings and your store; pick a pipeline by name (default: the
  measured best, :data:`~.config.pipelines.DEFAULT_PIPELINE`); set knobs as keyword
  arguments by name or paper symbol (:mod:`~.config.knobs`).
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
from typing import TYPE_CHECKING, Any, Unpack

from .agents.context import derive_components
from .agents.registry import build_pipeline
from .complexity.adaptive.pipeline import build_adaptive_router
from .config import Config
from .config.knobs import KnobValues, canonical, overrides_of
from .config.pipelines import DEFAULT_PIPELINE, get_pipeline
from .integrations.core import rag_components

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.graph.state import CompiledStateGraph
    from llama_index.core.llms import LLM as LlamaIndexLLM

    from .models.base import Equivalence, Scorer


def create_rag_agent(
    llm: BaseChatModel | LlamaIndexLLM | None = None,
    *,
    pipeline: str = DEFAULT_PIPELINE,
    embeddings: Any = None,
    vectorstore: Any = None,
    retriever: Any = None,
    index: Any = None,
    documents: Sequence[Any] | None = None,
    collection: str | None = None,
    config: Config | None = None,
    scorer: Scorer | None = None,
    equivalence: Equivalence | None = None,
    checkpointer: Any = None,
    name: str | None = None,
    **knobs: Unpack[KnobValues],
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A compiled LangGraph graph that answers ``{"question": ...}`` with the pipeline
    ``pipeline`` (:data:`~.config.pipelines.PIPELINES`; default: the measured best).

    ``invoke`` returns ``answer``, ``sources`` (the passages it was drawn from) and ``trace``
    (:class:`~.agents.state.Trace`). It works with ``invoke`` / ``ainvoke`` / ``stream`` /
    ``astream``, any checkpointer (``checkpointer=``, then pass a ``thread_id``) and per-run
    knobs in ``configurable`` or the run context. ``knobs`` (by name or paper symbol, e.g.
    ``budget=8`` or ``c=8``) are this graph's own values; a knob the pipeline cannot use is
    named in ``trace["notes"]``. Objects: see :func:`rag_components`.
    """
    chosen = get_pipeline(pipeline)
    given = canonical(dict(knobs))
    parts = rag_components(
        llm,
        embeddings=embeddings,
        vectorstore=vectorstore,
        retriever=retriever,
        index=index,
        documents=documents,
        collection=collection,
        config=config,
        scorer=scorer,
        equivalence=equivalence,
    )
    if chosen.router:
        config = parts.config.with_overrides(overrides_of(given))
        router: CompiledStateGraph[Any, Any, Any, Any] = build_adaptive_router(
            config, components=derive_components(parts, config)
        )
        return router
    return build_pipeline(
        chosen,
        parts.config,
        components=parts,
        checkpointer=checkpointer,
        knobs=given,
        graph_name=name,
    )
