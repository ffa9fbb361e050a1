"""Test helpers for the agent loops: a scripted fake chat model (langchain_core's
``GenericFakeChatModel`` answering by prompt kind) and a shared demo collection.

The fake recognises which prompt it is given by the system message (each prompt format has
its own), so a script says what to reply per kind of prompt, in order, independent of how
many retrieval or ASU calls happen in between.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field

from rag_complexity_agents.agents import no_retrieval
from rag_complexity_agents.agents.prompts import (
    cot,
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
    no_retrieval.SYSTEM: "no_retrieval",
    ASU_INSTRUCTION: "asu",
    MER_INSTRUCTION: "mer",
    requery.SYSTEM: "requery",
}

PLAN_SYSTEM = plan_execute.SYSTEM.split("{", 1)[0]  # the planning prompt names max_steps

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


class ScriptedChat(GenericFakeChatModel):
    """langchain_core's generic fake chat model (streaming split into tokens, callbacks) whose
    reply comes from a :class:`Script` by prompt kind; every call is recorded."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    messages: Iterator[AIMessage | str] = Field(default_factory=lambda: iter(()))
    script: Any
    calls: list[dict[str, Any]] = Field(default_factory=list)
    fail_with: Any = None  # an exception to raise on every call (model down)
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
        if self.fail_with is not None:
            raise self.fail_with
        system = next((str(m.content) for m in messages if m.type == "system"), "")
        human = "\n".join(str(m.content) for m in messages if m.type == "human")
        kind = KINDS.get(system, "plan" if system.startswith(PLAN_SYSTEM) else "other")
        self.calls.append({"kind": kind, "human": human, "stop": stop, "kwargs": dict(kwargs)})
        usage = {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}
        message = AIMessage(content=str(self.script(kind, human)), usage_metadata=usage)  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=message)])

    def kinds(self) -> list[str]:
        return [call["kind"] for call in self.calls]


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
    """A small, fast config over the demo collection (explicit knobs, no profile)."""
    base: dict[str, Any] = {
        "corpus": {"home": home},
        "graph": {"k": 16},
        "retrieval": {"first_stage_k": 12},
        "nar": {"b": 4, "c": 8, "neighbours_per_doc": 6},
        "asu": {"m": 3},
        "mer": {"l": 4},
        "agents": {"max_steps": 3, "profile": "paper"},
    }
    for key, value in sections.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return Config(**base)


__all__ = ["KINDS", "Script", "ScriptedChat", "demo_config", "demo_home"]
