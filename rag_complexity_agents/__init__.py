"""rag_complexity_agents: complex-question answering for LangGraph, LangChain and LlamaIndex
apps, made measurable: SUNAR retrieval, decomposition loops, Adaptive-RAG, retrieval
complexity and GRADE.

Everything a user imports is here (imported on first use, so ``import rag_complexity_agents``
stays cheap); other modules are internal::

    from rag_complexity_agents import create_rag_agent

    agent = create_rag_agent(chat_model, embeddings=embeddings, vectorstore=vectorstore)
    agent.invoke({"question": "..."})["answer"]

* :func:`create_rag_agent` — a compiled LangGraph graph of a registered pipeline
  (:data:`PIPELINES`, default :data:`DEFAULT_PIPELINE`) over your objects; knobs
  (:data:`KNOBS`) by name or paper symbol; :func:`rag_components` — the objects behind it;
* :class:`SunarLangChainRetriever`, :func:`as_runnable`, :func:`as_tool` — LangChain;
  :class:`SunarLlamaIndexRetriever`, :class:`RCAQueryEngine` — LlamaIndex;
* :func:`packaged_chat_model` — a packaged chat model run in-process (``llm=`` takes it, any
  LangChain chat model or a LlamaIndex LLM);
* :class:`Config` — every knob (``Config.preset("paper")``, ``Config.from_env()``);
  :class:`Trace` — what a run's ``trace`` holds;
* :func:`retrieval_complexity` — how hard a question is for retrieval (RRCP);
* :class:`RCAError` and its subclasses :class:`ConfigError`, :class:`InputError`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agents.state import Trace
    from .api import create_rag_agent
    from .complexity.rrcp import retrieval_complexity
    from .components import Components
    from .config import Config
    from .config.knobs import KNOBS
    from .config.pipelines import DEFAULT_PIPELINE, PIPELINES
    from .errors import ConfigError, InputError, RCAError
    from .integrations.core import rag_components
    from .integrations.langchain import SunarLangChainRetriever, as_runnable, as_tool
    from .integrations.llamaindex import RCAQueryEngine, SunarLlamaIndexRetriever
    from .models.chat import packaged_chat_model

_EXPORTS: dict[str, str] = {
    "create_rag_agent": ".api",
    "rag_components": ".integrations.core",
    "PIPELINES": ".config.pipelines",
    "DEFAULT_PIPELINE": ".config.pipelines",
    "KNOBS": ".config.knobs",
    "Config": ".config",
    "Components": ".components",
    "Trace": ".agents.state",
    "SunarLangChainRetriever": ".integrations.langchain",
    "as_runnable": ".integrations.langchain",
    "as_tool": ".integrations.langchain",
    "SunarLlamaIndexRetriever": ".integrations.llamaindex",
    "RCAQueryEngine": ".integrations.llamaindex",
    "packaged_chat_model": ".models.chat",
    "retrieval_complexity": ".complexity.rrcp",
    "RCAError": ".errors",
    "ConfigError": ".errors",
    "InputError": ".errors",
}

__all__ = [
    "DEFAULT_PIPELINE",
    "KNOBS",
    "PIPELINES",
    "Components",
    "Config",
    "ConfigError",
    "InputError",
    "RCAError",
    "RCAQueryEngine",
    "SunarLangChainRetriever",
    "SunarLlamaIndexRetriever",
    "Trace",
    "as_runnable",
    "as_tool",
    "create_rag_agent",
    "packaged_chat_model",
    "rag_components",
    "retrieval_complexity",
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
