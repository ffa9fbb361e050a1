"""Peer strategies: the multi-hop setups a user would otherwise pick, on our model and retrieval.

Both peers use the run's chat model (``models.chat``, through the harness's LLM cache) and
the same first stage as single-step (``answer.passages`` passages per search, cut to
``answer.passage_chars``), so only the orchestration differs from our loops:

* ``llamaindex_subquestion`` (:class:`SubQuestionPeer`) — LlamaIndex's
  ``SubQuestionQueryEngine`` with its default ``LLMQuestionGenerator`` and ``compact``
  synthesizers, over one ``QueryEngineTool`` whose ``RetrieverQueryEngine`` reads our first
  stage; the model is our LlamaIndex adapter
  (:class:`~rag_complexity_agents.integrations.llamaindex.LangChainChatLLM`).
* ``langgraph_react_agent`` (:class:`ReactAgentPeer`) — LangGraph's prebuilt
  ``create_react_agent`` with one ``search`` tool over the first stage and a short system
  prompt asking for the answer only; it needs the chat model's ``bind_tools`` (ConfigError
  when built without it). At most ``agents.max_steps`` tool rounds (the recursion limit).

Their answers are free text (no grammar), so a reply the framework cannot parse — invalid
sub-question JSON, a malformed tool call, the recursion limit — makes the framework raise.
Such a question is answered with "" (it counts as wrong) and its trace carries
``peer_break: {"type", "message"}``; the report counts these breaks per row. Errors of the
model backend itself (``FATAL_ERRORS``) still stop the run.

Traces: ``evidence`` = every passage the searches returned, in order; ``queries`` = the
search queries (the sub-questions); ``llm_calls`` and tokens are counted by a LangChain
callback on the chat model, so they include cache hits.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel

from ..agents.prompts.single_step import format_passages
from ..agents.single_step import extract_short_answer
from ..errors import ConfigError
from ..models.llamacpp.messages import reply_text
from ..types import RunResult, ScoredDoc
from .base import EvalComponents
from .runner import FATAL_ERRORS

if TYPE_CHECKING:
    from langchain_core.outputs import LLMResult

REACT_SYSTEM = (
    "You answer questions with the help of a Wikipedia search tool. Search for the facts you "
    "need, one at a time. When you know the answer, reply with the answer only: a name, date, "
    "number or short phrase, with no explanation."
)
SEARCH_DESCRIPTION = (
    "Search Wikipedia paragraphs. Input: a short search query about one fact. Output: the "
    "best matching passages."
)


class ChatCallCounter(BaseCallbackHandler):
    """Counts chat-model calls and their reported tokens (cache hits included)."""

    def __init__(self) -> None:
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self._lock = threading.Lock()

    def on_chat_model_start(self, serialized: dict[str, Any], messages: Any, **kwargs: Any) -> None:
        with self._lock:
            self.calls += 1

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                usage = getattr(message, "usage_metadata", None) or {}
                with self._lock:
                    self.input_tokens += int(usage.get("input_tokens", 0))
                    self.output_tokens += int(usage.get("output_tokens", 0))


class SearchLog:
    """The first stage's searches of one question: queries and returned passages in order."""

    def __init__(self, parts: EvalComponents) -> None:
        self.parts = parts
        self.queries: list[str] = []
        self.docs: list[ScoredDoc] = []
        self._lock = threading.Lock()

    def search(self, query: str) -> list[ScoredDoc]:
        docs = self.parts.first_stage.search(query, self.parts.config.answer.passages)
        with self._lock:
            self.queries.append(query)
            self.docs.extend(docs)
        return docs

    def passages(self, query: str) -> str:
        """The search as tool output: numbered passages as single-step shows them."""
        docs = self.search(query)
        if not docs:
            return "No passages found."
        return format_passages(docs, max_chars=self.parts.config.answer.passage_chars)


class _Peer:
    """Shared run logic: a counted chat model, a search log, breaks caught into the trace."""

    strategy = ""

    def __init__(self, parts: EvalComponents) -> None:
        self.parts = parts

    def _answer(self, question: str, chat: BaseChatModel, log: SearchLog) -> tuple[str, str]:
        """(raw reply, short answer) of the framework for ``question``."""
        raise NotImplementedError

    def __call__(self, question: str) -> RunResult:
        started = time.perf_counter()
        counter = ChatCallCounter()
        chat = self.parts.chat.model_copy(update={"callbacks": [counter]})
        log = SearchLog(self.parts)
        trace: dict[str, Any] = {"strategy": self.strategy, "question": question}
        answer = ""
        try:
            raw, answer = self._answer(question, chat, log)
            trace["raw_reply"] = raw
        except FATAL_ERRORS:
            raise
        except Exception as exc:  # the framework broke on the model's output
            trace["peer_break"] = {"type": type(exc).__name__, "message": str(exc)[:2000]}
        trace.update(
            {
                "queries": list(log.queries),
                "evidence": [doc.to_trace() for doc in log.docs],
                "llm_calls": counter.calls,
                "retrieval_calls": len(log.queries),
                "input_tokens": counter.input_tokens,
                "output_tokens": counter.output_tokens,
                # Peers decode freely: a reply they cannot use is a break, not a format failure.
                "format_failures": 0,
                "seconds": round(time.perf_counter() - started, 3),
            }
        )
        return RunResult(answer=answer, trace=trace)


class SubQuestionPeer(_Peer):
    """LlamaIndex ``SubQuestionQueryEngine`` over the first stage (see the module docstring)."""

    strategy = "llamaindex_subquestion"

    def _answer(self, question: str, chat: BaseChatModel, log: SearchLog) -> tuple[str, str]:
        from llama_index.core.query_engine import RetrieverQueryEngine, SubQuestionQueryEngine
        from llama_index.core.question_gen import LLMQuestionGenerator
        from llama_index.core.response_synthesizers import (
            ResponseMode,
            get_response_synthesizer,
        )
        from llama_index.core.tools import QueryEngineTool, ToolMetadata

        # llama-index is optional and heavy (about 2.5 s): loaded only when this peer runs
        from ..integrations.llamaindex_llm import LangChainChatLLM

        models = self.parts.config.models
        llm = LangChainChatLLM(chat, max_tokens=models.max_tokens, context_window=models.n_ctx)
        engine = RetrieverQueryEngine.from_args(
            _logged_retriever_class()(log),
            llm=llm,
            response_synthesizer=get_response_synthesizer(
                llm=llm, response_mode=ResponseMode.COMPACT
            ),
        )
        tool = QueryEngineTool(
            query_engine=engine,
            metadata=ToolMetadata(name="wikipedia", description=SEARCH_DESCRIPTION),
        )
        sub_question = SubQuestionQueryEngine.from_defaults(
            query_engine_tools=[tool],
            llm=llm,
            question_gen=LLMQuestionGenerator.from_defaults(llm=llm),
            response_synthesizer=get_response_synthesizer(
                llm=llm, response_mode=ResponseMode.COMPACT
            ),
            use_async=False,
            verbose=False,
        )
        raw = str(sub_question.query(question))
        return raw, extract_short_answer(raw)


@functools.cache
def _logged_retriever_class() -> type[Any]:
    """The LlamaIndex retriever class over a :class:`SearchLog` (built on first use, so this
    module imports without llama-index installed)."""
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    class LoggedRetriever(BaseRetriever):
        """A LlamaIndex retriever over a :class:`SearchLog` (plain text nodes, no metadata
        in the prompt)."""

        def __init__(self, log: SearchLog) -> None:
            self.log = log
            super().__init__()

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return [
                NodeWithScore(node=TextNode(id_=doc.id, text=doc.text), score=float(doc.score))
                for doc in self.log.search(query_bundle.query_str)
            ]

    return LoggedRetriever


class ReactAgentPeer(_Peer):
    """LangGraph's prebuilt ``create_react_agent`` with a first-stage search tool.

    Needs a chat model whose class implements ``bind_tools``; without it the peer cannot run
    at all (ConfigError when built), which is not a break on the model's output.
    """

    strategy = "langgraph_react_agent"

    def __init__(self, parts: EvalComponents) -> None:
        super().__init__(parts)
        kind = type(parts.chat)
        if kind.bind_tools is BaseChatModel.bind_tools:
            raise ConfigError(
                f"langgraph_react_agent needs a chat model with tool calling, and "
                f"{kind.__name__} does not implement bind_tools"
            )

    def _answer(self, question: str, chat: BaseChatModel, log: SearchLog) -> tuple[str, str]:
        from langchain_core.tools import StructuredTool
        from langgraph.prebuilt import create_react_agent

        def search(query: str) -> str:
            return log.passages(query)

        tool = StructuredTool.from_function(
            func=search, name="search", description=SEARCH_DESCRIPTION
        )
        agent = create_react_agent(chat, [tool], prompt=REACT_SYSTEM)
        limit = 2 * self.parts.config.agents.max_steps + 1
        state = agent.invoke({"messages": [("human", question)]}, config={"recursion_limit": limit})
        messages: Sequence[Any] = state.get("messages") or []
        raw = reply_text(messages[-1]) if messages else ""
        return raw, extract_short_answer(raw)
