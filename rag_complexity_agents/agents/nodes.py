"""Building blocks shared by the loops: per-run resources, the pluggable retrieval node with
its ASU edges, the sub-answer, MER and finish nodes, and the trace.

**Resources.** A graph is built from a :class:`~rag_complexity_agents.config.Config` (and
optionally ready :class:`~rag_complexity_agents.components.Components`, e.g. with a fake
chat model in tests). Each run resolves its knobs from ``config["configurable"]`` and the run
context (:class:`~.state.RunOptions`: retrieval strategy, MER, model spec, b, c, m, l, max
steps, …) into an :class:`AgentContext`; contexts are cached per distinct knob set and share
every component the changed knobs do not affect.

**Retrieval node strategies** (``agents.retrieval``): ``none``; ``first_stage``; ``rerank``
(the scorer over the first-stage pool, no neighbours); ``nar`` (Algorithm 1); ``sunar``
(NAR + ASU: every batch re-scored by 1/s).

**ASU edges** (``sunar`` only). After a retrieval, a batch is *uncertain* when its s > 1 and
s ≥ ``agents.uncertain_fraction`` · m. If every batch was uncertain the evidence found so far
probably lacks the answer, so the graph goes to ``explore`` (run NAR again with the budget c
raised by ``agents.explore_budget``; the ASU results of batches already seen are reused)
while documents are left unexplored and ``agents.max_explore`` allows, then to ``requery``
(a new query: the original question's missing words, or one written by the chat model) while
``agents.max_requery`` allows, and otherwise accepts what it has.

**CPU profile.** ``agents.profile = "cpu"`` (the default) shrinks the paper-sized knobs that
still have their default values (:data:`CPU_PROFILE`): a SUNAR run with b = 16, c = 100 and
m = 10 samples 70 answers per sub-question, minutes on two cores. It also runs llama.cpp on
one thread unless ``models.n_threads`` is set: on a CPU shared with other work, all-core
llama.cpp was measured 5–7× slower than one thread (a 625-token prompt: 95 s vs 17 s on two
busy cores). ``"paper"`` keeps every knob as configured.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, StateGraph
from langgraph.graph.state import CompiledStateGraph

from ..components import Components
from ..config import Config
from ..errors import ConfigError, ModelServerError, RCAError
from ..retrieval.nar import BatchFeedback, BatchHook
from ..text import normalize_answer, validate_question
from ..types import ScoredDoc
from . import no_retrieval
from .parsers import clean_query
from .prompts import requery as requery_prompt
from .prompts import single_step as single_step_prompt
from .single_step import extract_short_answer
from .state import (
    OPTION_KEYS,
    AgentState,
    BatchRecord,
    DocRecord,
    InputState,
    RetrievalRecord,
    RunOptions,
    Step,
    doc_from_record,
    doc_record,
    merge_steps,
    plain,
    without_text,
)

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from ..retrieval.sunar import SunarRetriever

Update = dict[str, Any]
Node = Callable[..., Update]

CPU_PROFILE: dict[str, Any] = {
    "models.n_threads": 1,
    "retrieval.first_stage_k": 20,
    "nar.b": 2,
    "nar.c": 8,
    "asu.m": 3,
    "asu.max_tokens": 12,
    "asu.max_passage_chars": 300,
    "mer.l": 4,
    "mer.max_tokens": 96,
    "mer.max_evidence_chars": 350,
    "answer.passage_chars": 400,
}
"""Values the ``cpu`` profile gives to knobs still at their (paper-sized) defaults."""

RETRIEVAL_STRATEGIES = ("none", "first_stage", "rerank", "nar", "sunar")
UNKNOWN_ANSWER = "unknown"


def _default_of(dotted: str) -> Any:
    section, _, leaf = dotted.partition(".")
    if not leaf:
        return Config.model_fields[section].default
    factory = Config.model_fields[section].default_factory
    assert factory is not None
    return getattr(factory(), leaf)  # type: ignore[call-arg]


def _value_of(config: Config, dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def apply_profile(config: Config, profile: str | None = None) -> Config:
    """``config`` with the CPU profile applied to knobs that still have default values."""
    profile = profile or config.agents.profile
    if profile == "paper":
        return config
    if profile != "cpu":
        raise ConfigError(f"unknown agents.profile {profile!r}; use 'cpu' or 'paper'")
    changes = {
        key: value
        for key, value in CPU_PROFILE.items()
        if _value_of(config, key) == _default_of(key) and _value_of(config, key) != value
    }
    return config.with_overrides(changes) if changes else config


# --------------------------------------------------------------------------------------------
# Per-run resources
# --------------------------------------------------------------------------------------------


def _same(a: Config, b: Config, *paths: str) -> bool:
    return all(_value_of(a, p) == _value_of(b, p) for p in paths)


_CHAT_KEYS = (
    "models.chat",
    "models.home",
    "models.ollama_host",
    "models.ollama_timeout_s",
    "models.n_ctx",
    "models.n_threads",
    "models.max_tokens",
    "models.temperature",
    "models.seed",
)
_CHAT_SPEC_KEYS = ("models.chat", "models.home", "models.ollama_host", "models.ollama_timeout_s")
_STORE_KEYS = ("collection", "corpus", "graph", "models.embedding", "models.embed_batch_size")


def _injected_chat(chat: object) -> bool:
    """A chat model handed in by the caller (not one built from ``models.*``): runs keep it
    when only generation knobs such as threads or temperature change."""
    if chat is None:
        return False
    from ..models.llamacpp import LlamaCppChatModel

    if isinstance(chat, LlamaCppChatModel):
        return False
    return not any("Ollama" in cls.__name__ for cls in type(chat).__mro__)


def derive_components(base: Components, config: Config) -> Components:
    """Components for ``config`` that reuse whatever of ``base`` the changes do not affect
    (a subclass such as the harness's ``EvalComponents`` keeps its class)."""
    if base.config == config:
        return base
    derived = copy.copy(base)
    derived.config = config
    old = base.config
    keep_store = _same(old, config, *_STORE_KEYS)
    keep_chat = _same(old, config, *_CHAT_KEYS) or (
        _same(old, config, *_CHAT_SPEC_KEYS) and _injected_chat(vars(base).get("chat"))
    )
    rules = {
        "store": keep_store,
        "embedder": _same(old, config, "models.embedding", "models.embed_batch_size"),
        "first_stage": keep_store and _same(old, config, "retrieval"),
        "scorer": keep_store and _same(old, config, "models.scorer"),
        "chat": keep_chat,
        "equivalence": keep_chat
        and _same(old, config, "models.equivalence", "models.embedding_cosine_threshold"),
    }
    for name in list(vars(derived)):
        if name in ("config",) or name.startswith("_"):
            continue
        if not rules.get(name, False) and name in rules:
            del vars(derived)[name]
    return derived


class MemoisedBatchHook:
    """Wraps a NAR batch hook (ASU) so that a batch seen before (same query, same documents,
    same position) is not sent to the LLM again: exploration re-runs NAR with a larger c."""

    def __init__(self, hook: BatchHook, *, max_entries: int = 512) -> None:
        self.hook = hook
        self.max_entries = max_entries
        self._memo: OrderedDict[tuple[Any, ...], BatchFeedback] = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0
        self.hits = 0

    def reset(self) -> None:
        reset = getattr(self.hook, "reset", None)
        if callable(reset):
            reset()

    def __call__(self, query: str, batch: Sequence[ScoredDoc], batch_index: int) -> BatchFeedback:
        key = (query, batch_index, tuple(d.id for d in batch), tuple(d.score for d in batch))
        with self._lock:
            cached = self._memo.get(key)
            if cached is not None:
                self.hits += 1
                self._memo.move_to_end(key)
                return BatchFeedback(cached.scores.copy(), dict(cached.info))
        feedback = self.hook(query, batch, batch_index)
        with self._lock:
            self.misses += 1
            self._memo[key] = feedback
            while len(self._memo) > self.max_entries:
                self._memo.popitem(last=False)
        return BatchFeedback(feedback.scores.copy(), dict(feedback.info))


@dataclass
class RetrievalResult:
    docs: list[ScoredDoc]
    trace: dict[str, Any]
    asu_prompts: int = 0


@dataclass
class AgentContext:
    """Everything one run needs, resolved from the graph defaults and the run's options."""

    config: Config
    parts: Components
    options: dict[str, Any]
    _retrievers: dict[tuple[str, int], SunarRetriever] = field(default_factory=dict)
    _locks: dict[tuple[str, int], threading.Lock] = field(default_factory=dict)
    _asu: MemoisedBatchHook | None = None
    _guard: threading.Lock = field(default_factory=threading.Lock)

    @property
    def agents(self) -> Any:
        return self.config.agents

    @property
    def strategy(self) -> str:
        return str(self.config.agents.retrieval)

    @property
    def mer(self) -> bool:
        return bool(self.config.agents.mer)

    @property
    def chat(self) -> BaseChatModel:
        return self.parts.chat

    @property
    def keep_k(self) -> int:
        """Documents kept per retrieval: what the answer prompt and MER need."""
        return max(self.config.answer.passages, self.config.mer.l if self.mer else 1)

    @property
    def keep_chars(self) -> int:
        return max(self.config.answer.passage_chars, self.config.mer.max_evidence_chars)

    def _asu_hook(self) -> MemoisedBatchHook:
        if self._asu is None:
            from ..retrieval.asu import AnswerSemanticUncertainty

            a = self.config.asu
            self._asu = MemoisedBatchHook(
                AnswerSemanticUncertainty(
                    self.parts.equivalence,
                    chat=self.parts.chat,
                    m=a.m,
                    temperature=a.temperature,
                    max_tokens=a.max_tokens,
                    rule=a.rule,
                    rescore_mode=a.rescore,
                    max_passage_chars=a.max_passage_chars,
                    seed=self.config.models.seed,
                )
            )
        return self._asu

    def retriever(self, strategy: str, c: int) -> tuple[SunarRetriever, threading.Lock]:
        """The (cached) SunarRetriever for a NAR-based strategy with budget ``c``."""
        from ..retrieval.sunar import SunarRetriever

        key = (strategy, c)
        with self._guard:
            if key not in self._retrievers:
                overrides: dict[str, Any] = {"nar.c": c}
                if strategy == "rerank":
                    overrides["nar.neighbours_per_doc"] = 0
                    overrides["nar.missing_graph"] = "rerank"
                cfg = self.config.with_overrides(overrides)
                self._retrievers[key] = SunarRetriever.from_store(
                    self.parts.store,
                    cfg,
                    first_stage=self.parts.first_stage,
                    scorer=self.parts.scorer,
                    asu=self._asu_hook() if strategy == "sunar" else None,
                )
                self._locks[key] = threading.Lock()
            return self._retrievers[key], self._locks[key]

    def retrieve(
        self, query: str, original: str | None, *, extra_budget: int = 0
    ) -> RetrievalResult:
        strategy = self.strategy
        k = self.keep_k
        if strategy == "none":
            return RetrievalResult([], {"retriever": "none"})
        if strategy == "first_stage":
            first = self.parts.first_stage
            docs = first.search(query, k)
            return RetrievalResult(docs, {"retriever": "first_stage", "first_stage": first.name})
        c = self.config.nar.c + max(0, extra_budget)
        retriever, lock = self.retriever(strategy, c)
        with lock:
            before = self._asu.misses if self._asu is not None else 0
            docs = retriever.retrieve(query, k, original_query=original)
            trace = dict(retriever.trace)
            prompts = (self._asu.misses - before) if self._asu is not None else 0
        trace["retriever"] = strategy
        return RetrievalResult(docs, trace, asu_prompts=prompts)


class ResourceProvider:
    """Resolves an :class:`AgentContext` per distinct set of run options (cached)."""

    def __init__(
        self,
        config: Config | None = None,
        *,
        components: Components | None = None,
        defaults: Mapping[str, Any] | None = None,
        max_contexts: int = 8,
    ) -> None:
        if components is not None and config is not None and components.config != config:
            components = derive_components(components, config)
        self.config = config or (components.config if components is not None else Config())
        self.components = components
        self.defaults = dict(defaults or {})
        self._contexts: OrderedDict[str, AgentContext] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_contexts

    @staticmethod
    def options_of(config: RunnableConfig | None, context: Any = None) -> dict[str, Any]:
        """Run options from the run context and ``configurable`` (which wins)."""
        options: dict[str, Any] = {}
        if isinstance(context, Mapping):
            options.update(context)
        elif context is not None and hasattr(context, "__dict__"):
            options.update({k: v for k, v in vars(context).items() if v is not None})
        configurable = (config or {}).get("configurable") or {}
        for key in (*OPTION_KEYS, "overrides"):
            if key in configurable and configurable[key] is not None:
                options[key] = configurable[key]
        return {k: v for k, v in options.items() if k in OPTION_KEYS or k == "overrides"}

    def resolve(self, options: Mapping[str, Any] | None = None) -> AgentContext:
        merged = {**self.defaults, **{k: v for k, v in (options or {}).items() if v is not None}}
        key = json.dumps(plain(merged), sort_keys=True)
        with self._lock:
            ctx = self._contexts.get(key)
            if ctx is not None:
                self._contexts.move_to_end(key)
                return ctx
        profile = merged.get("profile")
        base = apply_profile(self.config, profile)
        overrides = {OPTION_KEYS[k]: v for k, v in merged.items() if k in OPTION_KEYS}
        extra = merged.get("overrides") or {}
        if not isinstance(extra, Mapping):
            raise ConfigError("the run option 'overrides' must be a mapping of dotted keys")
        overrides.update(extra)
        if overrides.get("agents.retrieval", base.agents.retrieval) not in RETRIEVAL_STRATEGIES:
            raise ConfigError(
                f"unknown retrieval strategy {overrides.get('agents.retrieval')!r}; use one of "
                + ", ".join(RETRIEVAL_STRATEGIES)
            )
        config = base.with_overrides(overrides) if overrides else base
        if self.components is None:
            self.components = Components(self.config)
        parts = derive_components(self.components, config)
        ctx = AgentContext(config=config, parts=parts, options=plain(merged))
        with self._lock:
            self._contexts[key] = ctx
            while len(self._contexts) > self._max:
                self._contexts.popitem(last=False)
        return ctx

    def context(self, config: RunnableConfig | None, runtime: Any = None) -> AgentContext:
        return self.resolve(self.options_of(config, getattr(runtime, "context", None)))


# --------------------------------------------------------------------------------------------
# Chat calls with accounting
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0


def _with_max_tokens(chat: BaseChatModel, max_tokens: int) -> tuple[Any, dict[str, Any]]:
    from ..models.llamacpp import LlamaCppChatModel

    if isinstance(chat, LlamaCppChatModel):
        return chat, {"max_tokens": max_tokens}
    fields = getattr(type(chat), "model_fields", {})
    for name in ("num_predict", "max_tokens", "max_new_tokens"):
        if name in fields:
            return chat.model_copy(update={name: max_tokens}), {}
    return chat, {}


def call_chat(
    chat: BaseChatModel,
    messages: Sequence[tuple[str, str]],
    *,
    max_tokens: int,
    stop: Sequence[str] | None = None,
) -> Reply:
    """One chat call; failures of the model backend become a clear ModelServerError.

    The generation length is passed the way the backend takes it: ``max_tokens`` per call for
    the llama.cpp model, a copy with ``num_predict`` / ``max_tokens`` set for models that
    only take it as a field (ChatOllama rejects unknown call arguments)."""
    model, kwargs = _with_max_tokens(chat, max_tokens)
    try:
        message = model.invoke(list(messages), stop=list(stop or []), **kwargs)
    except RCAError:
        raise
    except Exception as exc:
        raise ModelServerError(
            f"the chat model failed ({type(exc).__name__}: {exc}); check models.chat, that "
            "the model is installed (rca info) or that its server is running"
        ) from exc
    content = message.content
    if not isinstance(content, str):
        content = "".join(
            part if isinstance(part, str) else str(part.get("text", "")) for part in content
        )
    usage = getattr(message, "usage_metadata", None) or {}
    return Reply(content, int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)))


def costs(state: AgentState, reply: Reply | None = None, **more: int) -> Update:
    """Counter updates for one chat call (and any other counters given)."""
    update: Update = {}
    if reply is not None:
        update["llm_calls"] = state.get("llm_calls", 0) + 1
        update["input_tokens"] = state.get("input_tokens", 0) + reply.input_tokens
        update["output_tokens"] = state.get("output_tokens", 0) + reply.output_tokens
    for key, value in more.items():
        update[key] = update.get(key, state.get(key, 0)) + value  # type: ignore[call-overload]
    return update


# --------------------------------------------------------------------------------------------
# State helpers
# --------------------------------------------------------------------------------------------


def steps_of(state: AgentState) -> list[Step]:
    return list(state.get("steps") or [])


def accepted_retrieval(state: AgentState, step: int) -> RetrievalRecord | None:
    """The last retrieval of ``step`` (the one the loop went on with)."""
    for record in reversed(state.get("retrievals") or []):
        if record.get("step") == step:
            return record
    return None


def step_docs(state: AgentState, step: int) -> list[DocRecord]:
    record = accepted_retrieval(state, step)
    return list(record.get("docs") or []) if record else []


def reasoning_path(state: AgentState) -> list[tuple[str, str]]:
    return [
        (s.get("sub_question", ""), s.get("answer", ""))
        for s in steps_of(state)
        if s.get("sub_question")
    ]


def ask(query: str, step: int) -> Update:
    """Hand ``query`` to the retrieval node for ``step`` (resets the ASU-edge counters)."""
    return {
        "pending_query": query,
        "pending_step": step,
        "explore_rounds": 0,
        "requeries": 0,
        "extra_budget": 0,
        "retrieval_reason": "initial",
    }


def superstep_reserve(ctx: AgentContext) -> int:
    """Supersteps one more loop step may take and still reach ``finish``: the retrieval
    round trip with every ASU edge taken, the step's own nodes, conclude, MER, finish."""
    return 8 + 2 * (ctx.agents.max_explore + ctx.agents.max_requery)


def near_recursion_limit(state: AgentState, ctx: AgentContext) -> bool:
    """True when another loop step could hit LangGraph's recursion limit: the loop then
    concludes instead, so a GraphRecursionError never surfaces."""
    remaining = state.get("remaining_steps")
    return remaining is not None and remaining < superstep_reserve(ctx)


def step_limit(state: AgentState, ctx: AgentContext) -> str | None:
    """Why the loop must conclude instead of taking another step: ``"max_steps"`` once
    ``agents.max_steps`` steps were taken, ``"recursion_limit"`` near LangGraph's limit, else
    None."""
    if len(steps_of(state)) >= ctx.agents.max_steps:
        return "max_steps"
    if near_recursion_limit(state, ctx):
        return "recursion_limit"
    return None


def copied_exemplar(answer: str, exemplar_answers: set[str], state: AgentState) -> bool:
    """True when ``answer`` is one of the exemplars' answers that nothing in this run (the
    question, the evidence, the intermediate answers) mentions: a small model copying the
    prompt's examples instead of answering."""
    norm = normalize_answer(answer)
    if not norm or norm not in {normalize_answer(a) for a in exemplar_answers}:
        return False
    seen = [state.get("question", "")]
    seen += [s.get("answer", "") for s in steps_of(state)]
    seen += [s.get("sub_question", "") for s in steps_of(state)]
    for record in state.get("retrievals") or []:
        seen += [
            str(d.get("text", "")) + " " + str(d.get("title", "")) for d in record.get("docs") or []
        ]
    return not any(norm in normalize_answer(text) for text in seen)


def same_query(a: str, b: str) -> bool:
    return normalize_answer(a) == normalize_answer(b)


# --------------------------------------------------------------------------------------------
# Nodes
# --------------------------------------------------------------------------------------------


def make_start(provider: ResourceProvider, loop: str, name: str) -> Node:
    """Validates the question and resets the run (threads may be reused)."""

    def start(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        question = validate_question(state.get("question"), max_chars=ctx.config.max_question_chars)
        # fail before any LLM call when the collection or the model spec is unusable
        if ctx.strategy != "none":
            _ = ctx.parts.store
        _ = ctx.parts.chat
        return {
            "question": question,
            "options": {
                "graph": name,
                "loop": loop,
                "retrieval": ctx.strategy,
                "mer": ctx.mer,
                **ctx.options,
            },
            "started_at": time.time(),
            "steps": [],
            "retrievals": [],
            "pending_query": "",
            "pending_step": 0,
            "explore_rounds": 0,
            "requeries": 0,
            "extra_budget": 0,
            "retrieval_reason": "initial",
            "chain": [],
            "plan_rounds": 0,
            "sentences": [],
            "pool": [],
            "candidate_answer": "",
            "format_errors": 0,
            "format_hint": False,
            "loop_answer": "",
            "answer_source": "",
            "stop_reason": "",
            "mer": {},
            "answer": "",
            "trace": {},
            "llm_calls": 0,
            "asu_samples": 0,
            "retrieval_calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
        }

    return start


def _batches(trace: Mapping[str, Any], m: int, fraction: float) -> list[BatchRecord]:
    out: list[BatchRecord] = []
    for batch in (trace.get("nar") or {}).get("batches") or []:
        hook = batch.get("hook") or {}
        s = hook.get("s")
        record: BatchRecord = {
            "index": int(batch.get("index", len(out))),
            "pool": str(batch.get("pool", "")),
            "ids": list(batch.get("ids") or []),
            "s": s,
        }
        if s is not None:
            record.update(
                semantic_entropy=hook.get("semantic_entropy"),
                answers=list(hook.get("answers") or []),
                cluster_answers=list(hook.get("cluster_answers") or []),
                clusters=[list(c) for c in hook.get("clusters") or []],
                uncertain=bool(s > 1 and s >= fraction * m),
            )
        out.append(record)
    return out


def _nar_summary(trace: Mapping[str, Any]) -> dict[str, Any]:
    nar = dict(trace.get("nar") or {})
    nar.pop("batches", None)
    keep = {k: v for k, v in trace.items() if k not in ("nar", "returned", "query")}
    return plain({**keep, **({"nar": nar} if nar else {})})


def make_retrieve(provider: ResourceProvider) -> Node:
    """The pluggable retrieval node: runs the run's strategy for ``pending_query``."""

    def retrieve(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        query = state.get("pending_query") or state["question"]
        step = int(state.get("pending_step", 0))
        previous = [r for r in state.get("retrievals") or [] if r.get("step") == step]
        reason = state.get("retrieval_reason") or "initial"
        tick = time.perf_counter()
        extra = int(state.get("extra_budget", 0))
        result = ctx.retrieve(query, state["question"], extra_budget=extra)
        batches = _batches(result.trace, ctx.config.asu.m, ctx.agents.uncertain_fraction)
        asu = [b for b in batches if b.get("s") is not None]
        nar = (result.trace.get("nar") or {}) if isinstance(result.trace, dict) else {}
        record: RetrievalRecord = {
            "step": step,
            "round": len(previous),
            "reason": reason,  # type: ignore[typeddict-item]
            "query": query,
            "strategy": ctx.strategy,
            "c": ctx.config.nar.c + extra if ctx.strategy in ("rerank", "nar", "sunar") else None,
            "docs": [doc_record(d, max_chars=ctx.keep_chars) for d in result.docs],
            "batches": batches,
            "all_uncertain": bool(asu) and all(b.get("uncertain") for b in asu),
            "unexplored": int(nar.get("neighbour_pool_left", 0) or 0)
            + int(nar.get("backfilled", 0) or 0),
            "nar": _nar_summary(result.trace),
            "seconds": round(time.perf_counter() - tick, 3),
        }
        update: Update = {"retrievals": [*(state.get("retrievals") or []), record]}
        calls = 0 if ctx.strategy == "none" else 1
        update.update(
            costs(
                state,
                retrieval_calls=calls,
                llm_calls=result.asu_prompts,
                asu_samples=result.asu_prompts * ctx.config.asu.m,
            )
        )
        return update

    return retrieve


def route_after_retrieve(provider: ResourceProvider, accept: str) -> Callable[..., str]:
    """The ASU edges: ``explore`` / ``requery`` while every batch is uncertain, else ``accept``."""

    def route(state: AgentState, config: RunnableConfig, runtime: Any = None) -> str:
        ctx = provider.context(config, runtime)
        record = (state.get("retrievals") or [None])[-1]
        if not record or ctx.strategy != "sunar" or not record.get("all_uncertain"):
            return accept
        agents = ctx.agents
        if state.get("explore_rounds", 0) < agents.max_explore and record.get("unexplored", 0) > 0:
            return "explore"
        if state.get("requeries", 0) < agents.max_requery:
            return "requery"
        return accept

    return route


def make_explore(provider: ResourceProvider) -> Node:
    """Raise the NAR budget c for the same query (ASU edge)."""

    def explore(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        budget = ctx.agents.explore_budget or ctx.config.nar.b
        return {
            "explore_rounds": state.get("explore_rounds", 0) + 1,
            "extra_budget": state.get("extra_budget", 0) + budget,
            "retrieval_reason": "explore",
        }

    return explore


_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORD_TEXT = (
    "a an and are as at be by did do does for from had has have in is it of on or the this to "
    "was were what when where which who whom whose why with how"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def expand_query(query: str, original: str) -> str:
    """``query`` plus the content words of ``original`` it lacks ('' if it lacks none)."""
    have = {w.lower() for w in _WORD.findall(query)}
    extra = []
    for word in _WORD.findall(original):
        low = word.lower()
        if low not in have and low not in _STOPWORDS:
            extra.append(word)
            have.add(low)
    return f"{query} {' '.join(extra)}" if extra else ""


def make_requery(provider: ResourceProvider) -> Node:
    """A new query for the same step (ASU edge: every batch stayed uncertain)."""

    def requery(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        query = state.get("pending_query") or state["question"]
        step = int(state.get("pending_step", 0))
        sub = next(
            (s.get("sub_question", "") for s in steps_of(state) if s.get("index") == step), query
        )
        update: Update = {
            "requeries": state.get("requeries", 0) + 1,
            "extra_budget": 0,
            "retrieval_reason": "requery",
        }
        new = expand_query(query, state["question"]) if ctx.agents.requery == "expand" else ""
        if not new:
            reply = call_chat(
                ctx.chat,
                requery_prompt.messages(sub or query, query, state["question"]),
                max_tokens=32,
                stop=["\n"],
            )
            update.update(costs(state, reply))
            new = clean_query(reply.text)
        update["pending_query"] = new if new and not same_query(new, query) else query
        return update

    return requery


def make_answer_sub(provider: ResourceProvider) -> Node:
    """Answer the pending step's sub-question from its accepted evidence (Self-Ask,
    SearChain's check): single-step prompt, or the no-retrieval prompt without evidence."""

    def answer_sub(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        step = int(state.get("pending_step", 0))
        reply, answer = answer_from_evidence(ctx, state, step)
        steps = merge_steps(steps_of(state), [{"index": step, "answer": answer}])
        return {"steps": steps, **costs(state, reply)}

    return answer_sub


def answer_from_evidence(ctx: AgentContext, state: AgentState, step: int) -> tuple[Reply, str]:
    """(reply, short answer) for the sub-question of ``step`` from its top passages."""
    sub = next(
        (s.get("sub_question", "") for s in steps_of(state) if s.get("index") == step), ""
    ) or state.get("pending_query", state["question"])
    docs = [doc_from_record(d) for d in step_docs(state, step)[: ctx.config.answer.passages]]
    if docs:
        messages = [
            ("system", single_step_prompt.SYSTEM),
            (
                "human",
                single_step_prompt.user_message(
                    sub, docs, max_chars=ctx.config.answer.passage_chars
                ),
            ),
        ]
    else:
        messages = [
            ("system", no_retrieval.SYSTEM),
            ("human", no_retrieval.user_message(sub)),
        ]
    reply = call_chat(ctx.chat, messages, max_tokens=ctx.agents.answer_max_tokens, stop=["\n\n"])
    return reply, extract_short_answer(reply.text)


def route_after_conclude(provider: ResourceProvider) -> Callable[..., str]:
    def route(state: AgentState, config: RunnableConfig, runtime: Any = None) -> str:
        return "mer" if provider.context(config, runtime).mer else "finish"

    return route


def make_mer(provider: ResourceProvider) -> Node:
    """Meta Evidence Reasoner: reasoning path + top-l evidence across steps → answer."""

    def mer(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        from ..retrieval.mer import DEFAULT_EXEMPLARS, MetaEvidenceReasoner, collect_evidence
        from ..retrieval.mer import extract_final_answer as extract

        ctx = provider.context(config, runtime)
        question = state["question"]
        indices = sorted({int(r.get("step", 0)) for r in state.get("retrievals") or []})
        rankings = [[doc_from_record(d) for d in step_docs(state, i)] for i in indices]
        rankings = [r for r in rankings if r]
        score = None
        if rankings and ctx.strategy in ("rerank", "nar", "sunar"):
            score = ctx.parts.scorer.score
        evidence = (
            collect_evidence(question, rankings, l=ctx.config.mer.l, score=score)
            if rankings
            else []
        )
        path = reasoning_path(state)
        reasoner = MetaEvidenceReasoner(
            ctx.chat,
            exemplars=DEFAULT_EXEMPLARS[: ctx.agents.mer_exemplars],
            max_tokens=ctx.config.mer.max_tokens,
            max_evidence_chars=ctx.config.mer.max_evidence_chars,
        )
        reply = call_chat(
            ctx.chat,
            reasoner.messages(question, path, evidence),
            max_tokens=ctx.config.mer.max_tokens,
            stop=["\nQuestion:", "\nReasoning path so far:", "\n---"],
        )
        extracted = extract(reply.text)
        answer, method = extracted.answer, str(extracted.method)
        if copied_exemplar(answer, {e.answer for e in DEFAULT_EXEMPLARS}, state):
            answer, method = "", "copied_exemplar"
        return {
            "mer": {
                "answer": answer,
                "extraction": method,
                "output": reply.text,
                "reasoning_path": [list(p) for p in path],
                "evidence": without_text(
                    [doc_record(d, max_chars=ctx.keep_chars) for d in evidence]
                ),
                "l": ctx.config.mer.l,
            },
            **costs(state, reply),
        }

    return mer


def make_finish(provider: ResourceProvider) -> Node:
    """The answer (MER's when it gave one, else the loop's) and the JSON trace."""

    def finish(state: AgentState, config: RunnableConfig, runtime: Any = None) -> Update:
        ctx = provider.context(config, runtime)
        answer, source = final_answer(state)
        state = {**state, "answer": answer, "answer_source": source}  # type: ignore[assignment]
        return {
            "answer": answer,
            "answer_source": source,
            "trace": build_trace(state, passages=ctx.config.answer.passages),
        }

    return finish


MER_SHORT_WORDS = 8
_CLOSING_CLAUSE = re.compile(
    r".*\b(?:is|was|are|were)\s+([^,;:]+?)\s*[.!]?\s*$", re.IGNORECASE | re.DOTALL
)


def shorten_answer(text: str) -> str:
    """The short answer at the end of a sentence such as 'Based on the evidence, the
    country where X was born is Japan.' ('' when there is no such closing clause)."""
    last = re.split(r"(?<=[.!?])\s+", text.strip())[-1] if text.strip() else ""
    match = _CLOSING_CLAUSE.match(last[-2000:])
    if not match:
        return ""
    answer = match.group(1).strip().strip("\"'*").strip()
    return answer if 0 < len(answer.split()) <= MER_SHORT_WORDS else ""


def final_answer(state: Mapping[str, Any]) -> tuple[str, str]:
    """(answer, where it came from), in this order: MER's answer when it followed the format
    or is short; the closing clause of a long unformatted MER reply; the loop's answer; the
    long MER reply; the last intermediate answer; 'unknown'."""
    mer = state.get("mer") or {}
    mer_answer = str(mer.get("answer") or "")
    loop_answer = str(state.get("loop_answer") or "")
    if mer_answer:
        if mer.get("extraction") in ("marker", "answer_is", "answer_line") or (
            len(mer_answer.split()) <= MER_SHORT_WORDS
        ):
            return mer_answer, "mer"
        short = shorten_answer(mer_answer)
        if short:
            return short, "mer (closing clause of an unformatted reply)"
    if loop_answer:
        return loop_answer, str(state.get("answer_source") or "loop")
    if mer_answer:
        return mer_answer, "mer (unformatted)"
    for step in reversed(state.get("steps") or []):
        if step.get("answer"):
            return str(step["answer"]), "last_intermediate"
    return UNKNOWN_ANSWER, "none"


def build_trace(state: Mapping[str, Any], *, passages: int | None = None) -> dict[str, Any]:
    """The run's JSON trace (also built from a partial state when a run was cut short)."""
    options = dict(state.get("options") or {})
    retrievals = list(state.get("retrievals") or [])
    shown = passages or int(options.get("passages") or 3)
    steps = []
    used: dict[str, dict[str, Any]] = {}
    for step in state.get("steps") or []:
        index = step.get("index")
        rounds = [r for r in retrievals if r.get("step") == index]
        entry: dict[str, Any] = {k: v for k, v in step.items() if k != "raw"}
        if step.get("raw"):
            entry["raw"] = str(step["raw"])[:500]
        if rounds:
            evidence = without_text(rounds[-1].get("docs") or [])[:shown]
            entry["retrieval"] = {
                "strategy": rounds[-1].get("strategy"),
                "rounds": [
                    {
                        "round": r.get("round"),
                        "reason": r.get("reason"),
                        "query": r.get("query"),
                        "c": r.get("c"),
                        "all_uncertain": r.get("all_uncertain", False),
                        "unexplored": r.get("unexplored", 0),
                        "batches": r.get("batches") or [],
                        "seconds": r.get("seconds"),
                        "retriever": r.get("nar") or {},
                    }
                    for r in rounds
                ],
                "evidence": evidence,
            }
            for doc in evidence:
                used.setdefault(str(doc.get("id")), doc)
        steps.append(entry)
    mer = dict(state.get("mer") or {})
    for doc in mer.get("evidence") or []:
        used.setdefault(str(doc.get("id")), doc)
    answer, source = final_answer(state)
    started = state.get("started_at")
    return plain(
        {
            "strategy": options.get("graph") or options.get("loop"),
            "loop": options.get("loop"),
            "retrieval": options.get("retrieval"),
            "mer_enabled": options.get("mer"),
            "question": state.get("question"),
            "answer": state.get("answer") or answer,
            "answer_source": state.get("answer_source") or source,
            "loop_answer": state.get("loop_answer", ""),
            "stop_reason": state.get("stop_reason") or "unfinished",
            "format_errors": state.get("format_errors", 0),
            "steps": steps,
            "sub_questions": [s.get("sub_question") for s in steps if s.get("sub_question")],
            "reasoning_path": [list(p) for p in reasoning_path(state)],  # type: ignore[arg-type]
            "mer": mer or None,
            "evidence": list(used.values()),
            "llm_calls": state.get("llm_calls", 0),
            "asu_samples": state.get("asu_samples", 0),
            "retrieval_calls": state.get("retrieval_calls", 0),
            "input_tokens": state.get("input_tokens", 0),
            "output_tokens": state.get("output_tokens", 0),
            "seconds": round(time.time() - started, 3) if started else None,
            "options": options,
        }
    )


# --------------------------------------------------------------------------------------------
# Graph assembly
# --------------------------------------------------------------------------------------------


def loop_defaults(retrieval: str | None, mer: bool | None) -> dict[str, Any]:
    """Graph-level defaults for the run options (None: take the config's)."""
    defaults: dict[str, Any] = {}
    if retrieval is not None:
        if retrieval not in RETRIEVAL_STRATEGIES:
            raise ConfigError(
                f"unknown retrieval strategy {retrieval!r}; use one of "
                + ", ".join(RETRIEVAL_STRATEGIES)
            )
        defaults["retrieval"] = retrieval
    if mer is not None:
        defaults["mer"] = bool(mer)
    return defaults


def new_graph() -> StateGraph[Any, Any, Any, Any]:
    """An empty loop graph: AgentState, the question as input, RunOptions as context."""
    return StateGraph(AgentState, context_schema=RunOptions, input_schema=InputState)


def route_next(*allowed: str) -> Callable[[AgentState], str]:
    """A conditional edge that follows ``state["next_node"]`` (one of ``allowed``)."""

    def route(state: AgentState) -> str:
        target = state.get("next_node") or allowed[-1]
        return target if target in allowed else allowed[-1]

    return route


def add_retrieval(
    graph: StateGraph[Any, Any, Any, Any], provider: ResourceProvider, accept: str
) -> None:
    """The retrieval node, its ASU edges (explore / requery) and the edge to ``accept``."""
    graph.add_node("retrieve", make_retrieve(provider))
    graph.add_node("explore", make_explore(provider))
    graph.add_node("requery", make_requery(provider))
    graph.add_conditional_edges(
        "retrieve",
        route_after_retrieve(provider, accept),
        {"explore": "explore", "requery": "requery", accept: accept},
    )
    graph.add_edge("explore", "retrieve")
    graph.add_edge("requery", "retrieve")


def add_ending(graph: StateGraph[Any, Any, Any, Any], provider: ResourceProvider) -> None:
    """``conclude`` (added by the loop) → optional MER → finish → END."""
    graph.add_node("mer", make_mer(provider))
    graph.add_node("finish", make_finish(provider))
    graph.add_conditional_edges(
        "conclude", route_after_conclude(provider), {"mer": "mer", "finish": "finish"}
    )
    graph.add_edge("mer", "finish")
    graph.add_edge("finish", END)


def compile_graph(
    graph: StateGraph[Any, Any, Any, Any],
    *,
    name: str,
    checkpointer: Any = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    return graph.compile(checkpointer=checkpointer, name=name)


__all__ = [
    "CPU_PROFILE",
    "RETRIEVAL_STRATEGIES",
    "UNKNOWN_ANSWER",
    "AgentContext",
    "MemoisedBatchHook",
    "Reply",
    "ResourceProvider",
    "accepted_retrieval",
    "add_ending",
    "add_retrieval",
    "answer_from_evidence",
    "apply_profile",
    "ask",
    "build_trace",
    "call_chat",
    "compile_graph",
    "copied_exemplar",
    "costs",
    "derive_components",
    "expand_query",
    "final_answer",
    "loop_defaults",
    "make_answer_sub",
    "make_explore",
    "make_finish",
    "make_mer",
    "make_requery",
    "make_retrieve",
    "make_start",
    "near_recursion_limit",
    "new_graph",
    "reasoning_path",
    "route_after_conclude",
    "route_after_retrieve",
    "route_next",
    "same_query",
    "shorten_answer",
    "step_docs",
    "step_limit",
    "steps_of",
    "superstep_reserve",
]
