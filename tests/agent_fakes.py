"""Test helpers: the one fake chat model of the test suite and a shared demo collection.

:class:`ScriptedChat` is langchain_core's ``GenericFakeChatModel`` (streaming split into
tokens, callbacks) answering from a :class:`Script` by prompt kind, or from a reply function
of the whole call (:class:`Prompt`); every call is recorded in ``calls``. The fake recognises
which prompt it is given by the system message (each prompt format has its own), so a script
says what to reply per kind of prompt, in order, independent of how many retrieval or ASU
calls happen in between.

The package decides from a model's *class* what the model can do (structured output, tool
calling, sampling several continuations of one prompt), so each such capability is a small
subclass here: :class:`StructuredChat`, :class:`ToolChat` and :class:`SamplingChat`. Plain
:class:`ScriptedChat` has none of them, like a user's plain ``BaseChatModel``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, ValidationError

from rag_complexity_agents.agents.prompts import (
    cot,
    followup,
    no_retrieval,
    plan_execute,
    react,
    requery,
    searchain,
    self_ask,
)
from rag_complexity_agents.agents.prompts import single_step as single_step_prompt
from rag_complexity_agents.config import Config
from rag_complexity_agents.corpus.demo import DEMO_CORPUS
from rag_complexity_agents.corpus.documents import iter_documents
from rag_complexity_agents.corpus.store import CorpusStore
from rag_complexity_agents.retrieval.asu import ASU_INSTRUCTION
from rag_complexity_agents.retrieval.mer import MER_INSTRUCTION

KINDS: dict[str, str] = {
    self_ask.SYSTEM: "self_ask",
    react.SYSTEM: "react",
    searchain.SYSTEM: "searchain",
    plan_execute.FINAL_SYSTEM: "plan_final",
    cot.SYSTEM: "cot",
    cot.IRCOT_SYSTEM: "ircot",
    single_step_prompt.SYSTEM: "answer",
    single_step_prompt.QUOTE_SYSTEM: "quote",
    no_retrieval.SYSTEM: "no_retrieval",
    ASU_INSTRUCTION: "asu",
    MER_INSTRUCTION: "mer",
    requery.SYSTEM: "requery",
    followup.SYSTEM: "followup",
}

PLAN_SYSTEM = plan_execute.SYSTEM.split("{", 1)[0]  # the planning prompt names max_steps

#: The token usage every reply reports unless its reply function sets its own.
USAGE: dict[str, int] = {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}

Reply = str | Callable[[str], str]


class Script:
    """Replies per prompt kind, used in order; the last one repeats. A reply may be a
    function of the human message. Kinds without replies get ``default``."""

    def __init__(self, default: str = "unknown", **replies: Sequence[Reply] | Reply) -> None:
        self.default = default
        self.replies: dict[str, list[Reply]] = {
            kind: list(value) if isinstance(value, list | tuple) else [value]
            for kind, value in replies.items()
        }
        self.used: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, kind: str, human: str) -> str:
        with self.lock:
            options = self.replies.get(kind)
            if not options:
                return self.default
            index = self.used.get(kind, 0)
            self.used[kind] = index + 1
            reply = options[min(index, len(options) - 1)]
        return reply(human) if callable(reply) else reply


@dataclass(frozen=True)
class Prompt:
    """One call as the fake sees it. ``chat`` is the model answering it: the copy that
    ``call_chat`` makes for a call's temperature, seed or max_tokens carries those values."""

    kind: str  # the prompt kind (see KINDS); "tools" when tools are bound
    human: str  # every human message, joined by newlines
    messages: list[BaseMessage]
    stop: list[str] | None
    kwargs: dict[str, Any]
    chat: ScriptedChat

    @property
    def last(self) -> str:
        """The last message's text (the user turn of a one-shot prompt)."""
        return str(self.messages[-1].content) if self.messages else ""

    @property
    def tools(self) -> list[str]:
        """The names of the tools bound to this call (see :class:`ToolChat`)."""
        return [tool["function"]["name"] for tool in self.kwargs.get("tools") or []]


#: A reply function: the reply text, or a whole message (tool calls, its own usage).
ReplyFn = Callable[[Prompt], "str | AIMessage"]


def tool_call(name: str, args: dict[str, Any], call_id: str = "1") -> AIMessage:
    """An assistant message that calls tool ``name`` with ``args`` and no text."""
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


class ScriptedChat(GenericFakeChatModel):
    """The fake chat model: replies from ``reply(prompt)`` when given, else from ``script``
    (a :class:`Script`, by prompt kind). Every call is appended to ``calls`` (shared with the
    copies that per-call knobs make) as a dict: ``kind``, ``human``, ``last``, ``types`` (the
    message types), ``stop``, ``kwargs`` and the answering model's ``max_tokens``,
    ``temperature`` and ``seed``. ``fail_with`` is raised by every call (a model that is
    down). Test-only fields are left out of ``model_dump``, so cache keys (which use the
    model's plain fields) do not change as calls are recorded."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    messages: Iterator[AIMessage | str] = Field(default_factory=lambda: iter(()), exclude=True)
    script: Any = Field(default=None, exclude=True)
    reply: Any = Field(default=None, exclude=True)
    calls: list[dict[str, Any]] = Field(default_factory=list, exclude=True)
    fail_with: Any = Field(default=None, exclude=True)
    usage: dict[str, int] | None = Field(default_factory=lambda: dict(USAGE), exclude=True)
    model: str = "scripted"
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 256

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self._answer(self._prompt(messages, stop, kwargs))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _prompt(
        self,
        messages: Sequence[BaseMessage],
        stop: list[str] | None,
        kwargs: dict[str, Any],
        kind: str | None = None,
    ) -> Prompt:
        """The call as a :class:`Prompt` (its kind read from the system message)."""
        system = next((str(m.content) for m in messages if m.type == "system"), "")
        human = "\n".join(str(m.content) for m in messages if m.type == "human")
        if kind is None and kwargs.get("tools"):
            kind = "tools"
        if kind is None:
            kind = KINDS.get(system, "plan" if system.startswith(PLAN_SYSTEM) else "other")
        return Prompt(kind, human, list(messages), stop, dict(kwargs), self)

    def _answer(self, prompt: Prompt) -> AIMessage:
        """Record the call, then reply (raising ``fail_with`` first when it is set)."""
        if self.fail_with is not None:
            raise self.fail_with
        self.calls.append(
            {
                "kind": prompt.kind,
                "system": next((str(m.content) for m in prompt.messages if m.type == "system"), ""),
                "human": prompt.human,
                "last": prompt.last,
                "types": [m.type for m in prompt.messages],
                "stop": prompt.stop,
                "kwargs": prompt.kwargs,
                "max_tokens": self.max_tokens,
                "temperature": self.temperature,
                "seed": self.seed,
            }
        )
        out = self._reply(prompt)
        message = out if isinstance(out, AIMessage) else AIMessage(content=str(out))
        if message.usage_metadata is None and self.usage is not None:
            message.usage_metadata = dict(self.usage)  # type: ignore[assignment]
        return message

    def _reply(self, prompt: Prompt) -> str | AIMessage:
        if self.reply is not None:
            return self.reply(prompt)  # type: ignore[no-any-return]
        if self.script is None:
            raise ValueError("ScriptedChat needs a script or a reply function")
        return str(self.script(prompt.kind, prompt.human))

    def kinds(self) -> list[str]:
        return [call["kind"] for call in self.calls]


class StructuredChat(ScriptedChat):
    """A fake chat model with its own ``with_structured_output``: ``objects(schema, n)``
    gives the n-th structured reply for ``schema`` as a dict (validated like a real reply;
    one that does not validate comes back with ``parsed=None``). ``asked`` lists the schema
    names asked for, in order, and ``budgets`` the max_tokens of each structured call (both
    shared by copies); structured replies are not text calls, so they are not in ``calls``."""

    objects: Any = Field(default=None, exclude=True)
    asked: list[str] = Field(default_factory=list, exclude=True)
    budgets: list[int] = Field(default_factory=list, exclude=True)

    def with_structured_output(  # type: ignore[override]
        self, schema: Any, *, include_raw: bool = False, **_: Any
    ) -> Runnable[Any, dict[str, Any]]:
        self.budgets.append(self.max_tokens)

        def reply(messages: Any) -> dict[str, Any]:
            self.asked.append(schema.__name__)
            data = self.objects(schema.__name__, self.asked.count(schema.__name__))
            raw = AIMessage(content=json.dumps(data))
            try:
                return {"raw": raw, "parsed": schema.model_validate(data), "parsing_error": None}
            except ValidationError as exc:
                return {"raw": raw, "parsed": None, "parsing_error": exc}

        return RunnableLambda(reply)


class ToolChat(ScriptedChat):
    """A fake tool-calling chat model: ``bind_tools`` binds the tools as OpenAI tool dicts,
    like a real one (so LangChain's default ``with_structured_output`` and LangGraph's
    ``create_react_agent`` work). A call with tools bound (kind ``"tools"``) is answered by
    ``tool_reply(prompt)``, usually a :func:`tool_call` message; any other call by the
    script or reply function."""

    tool_reply: Any = Field(default=None, exclude=True)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _reply(self, prompt: Prompt) -> str | AIMessage:
        if prompt.kind == "tools" and self.tool_reply is not None:
            return self.tool_reply(prompt)  # type: ignore[no-any-return]
        return super()._reply(prompt)


class SamplingChat(ScriptedChat):
    """A fake chat model with ``sample(messages, m, **kwargs)`` (m replies to one prompt, as
    the llama.cpp model draws them from one evaluated prompt): each draw is a call of kind
    ``"sample"`` whose kwargs add the draw's index as ``sample``."""

    def sample(self, messages: Any, m: int, **kwargs: Any) -> list[str]:
        msgs = self._convert_input(messages).to_messages()
        return [
            str(self._answer(self._prompt(msgs, None, {**kwargs, "sample": i}, "sample")).content)
            for i in range(m)
        ]


_HOMES: dict[str, Path] = {}
_LOCK = threading.Lock()


def demo_home(tmp_root: Path) -> Path:
    """A corpus home with the demo collection indexed (built once per test session)."""
    with _LOCK:
        if "demo" not in _HOMES:
            home = tmp_root / "agents-demo-home"
            cfg = Config(corpus={"home": home}, graph={"k": 16})
            CorpusStore.open_or_create("demo", cfg).ingest(
                iter_documents(DEMO_CORPUS), progress=False
            )
            _HOMES["demo"] = home
        return _HOMES["demo"]


def demo_config(home: Path, **sections: Any) -> Config:
    """A small, fast config over the demo collection: the paper preset's prompt lengths with
    small explicit knobs; sub-questions are answered from the top-l (``mer.l``). The final
    answer check is the exemplar one: the scripted answers of control-flow tests need not be
    in the passages read (the support check has its own tests in test_abstain.py)."""
    base: dict[str, Any] = Config.preset("paper").model_dump(exclude_unset=True)
    small: dict[str, Any] = {
        "corpus": {"home": home},
        "graph": {"k": 16},
        "retrieval": {"first_stage_k": 12},
        "answer": {"sub_passages": None},
        "nar": {"b": 4, "c": 8, "neighbours_per_doc": 6},
        "asu": {"m": 3},
        "mer": {"l": 4},
        "agents": {"max_steps": 3, "abstain": "exemplar"},
    }
    for key, value in [*small.items(), *sections.items()]:
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return Config(**base)


__all__ = [
    "KINDS",
    "USAGE",
    "Prompt",
    "ReplyFn",
    "SamplingChat",
    "Script",
    "ScriptedChat",
    "StructuredChat",
    "ToolChat",
    "demo_config",
    "demo_home",
    "tool_call",
]
