"""rag_complexity_agents: SUNAR retrieval, decomposition loops (LangGraph), Adaptive-RAG,
retrieval complexity and GRADE, as a drop-in for LangChain / LangGraph / LlamaIndex apps.

The public API (imported on first use, so ``import rag_complexity_agents`` stays cheap)::

    from rag_complexity_agents import create_rag_agent

    agent = create_rag_agent(chat_model, embeddings=embeddings, vectorstore=vectorstore)
    agent.invoke({"question": "..."})["answer"]

* :func:`create_rag_agent` — a compiled LangGraph graph over your objects;
* :class:`SunarLangChainRetriever` / :class:`SunarLlamaIndexRetriever` — SUNAR as a LangChain
  or LlamaIndex retriever (``from_defaults`` takes the same objects);
* :class:`RCAQueryEngine` — a LlamaIndex query engine running a loop;
* :class:`Config` — every knob; :class:`Components` — the objects a loop runs on.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import create_rag_agent
    from .components import Components
    from .config import Config
    from .integrations.langchain import SunarLangChainRetriever
    from .integrations.llamaindex import RCAQueryEngine, SunarLlamaIndexRetriever

_EXPORTS: dict[str, str] = {
    "create_rag_agent": ".api",
    "SunarLangChainRetriever": ".integrations.langchain",
    "SunarLlamaIndexRetriever": ".integrations.llamaindex",
    "RCAQueryEngine": ".integrations.llamaindex",
    "Config": ".config",
    "Components": ".components",
}

__all__ = [
    "Components",
    "Config",
    "RCAQueryEngine",
    "SunarLangChainRetriever",
    "SunarLlamaIndexRetriever",
    "create_rag_agent",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
