"""Per-run resources of the loops.

A graph is built from a pipeline (:mod:`~rag_complexity_agents.config.pipelines`), a
:class:`~rag_complexity_agents.config.Config` and optionally ready
:class:`~rag_complexity_agents.components.Components` (e.g. with a fake chat model in tests).
Each run resolves its knobs (:mod:`~rag_complexity_agents.config.knobs`: the graph's own,
then the run's ``configurable`` and context) into an :class:`AgentContext`; contexts are cached
per distinct knob set and share every component the changed knobs do not affect.

**Retrieval strategies** (``agents.retrieval``): ``none``; ``first_stage``; ``rerank`` (the
scorer over the first-stage pool, no neighbours); ``nar`` (Algorithm 1); ``sunar`` (NAR +
ASU: every batch re-scored by 1/s).
"""

from __future__ import annotations

import copy
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.runnables import RunnableConfig

from ..components import Components
from ..config import AgentsConfig, Config, NARParams
from ..config.knobs import KNOBS_BY_NAME, checked, idle_knob_notes, knob_list
from ..config.pipelines import RETRIEVAL_STRATEGIES, Pipeline, active_parts
from ..errors import ConfigError
from ..retrieval.nar import BatchFeedback, BatchHook
from ..types import ScoredDoc
from .state import plain
from .steps import asu_allowed

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from ..models.structured import StructuredOutput
    from ..retrieval.sunar import SunarRetriever

_SERVING = threading.Event()


def serve_clients() -> None:
    """Declare that this process serves graphs to API clients (``langgraph dev`` imports the
    entry modules in ``graphs/``, which call this through :func:`~.registry.studio_graph`):
    from then on every run of every graph in the process accepts only the knobs of the knob
    table, within their bounds (:func:`served_options`), including graphs built later, such
    as the loops the adaptive router builds on its first question."""
    _SERVING.set()


def serving_clients() -> bool:
    """Whether :func:`serve_clients` was called in this process."""
    return _SERVING.is_set()


def served_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The knobs of a served run (its ``configurable`` and context, our keys only), by name
    and checked against their bounds; anything else is a ConfigError naming it."""
    rejected = sorted(str(key) for key in options if key not in KNOBS_BY_NAME)
    if rejected:
        raise ConfigError(
            f"this server does not accept the run option(s) {', '.join(rejected)}; a run may "
            f"set only the knobs {knob_list()}"
        )
    return checked(options)


_RUN_OPTIONS = frozenset({"overrides", "chat_model", "collection", "temperature", "seed", "preset"})
"""Run options of ours that are not knobs (accepted in process only, or never)."""


def _ours(key: str) -> bool:
    """Whether a ``configurable`` key is one of our run options (a knob, a config key, …)
    rather than the server's own (thread id, run id, checkpoint, …)."""
    return key in KNOBS_BY_NAME or key in _RUN_OPTIONS or key in Config.model_fields or "." in key


def given_options(config: RunnableConfig | None, context: Any = None) -> dict[str, Any]:
    """A run's options of ours, unchecked: its context's and its ``configurable``'s (which
    wins), without None values and without the server's own keys (thread id, run id, …)."""
    options: dict[str, Any] = {}
    if isinstance(context, Mapping):
        options.update(context)
    elif context is not None and hasattr(context, "__dict__"):
        options.update(vars(context))
    configurable = (config or {}).get("configurable") or {}
    options.update({k: v for k, v in configurable.items() if _ours(k)})
    return {k: v for k, v in options.items() if v is not None}


def check_strategy(retrieval: str) -> str:
    """``retrieval`` if it names a retrieval strategy, else a ConfigError."""
    if retrieval not in RETRIEVAL_STRATEGIES:
        raise ConfigError(
            f"unknown retrieval strategy {retrieval!r}; use one of "
            + ", ".join(RETRIEVAL_STRATEGIES)
        )
    return retrieval


def _value_of(config: Config, dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


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


_SHARING = threading.Lock()


def derive_components(base: Components, config: Config, *, share: bool = False) -> Components:
    """Components for ``config`` that reuse whatever of ``base`` the changes do not affect
    (a subclass such as the harness's ``EvalComponents`` keeps its class). Injected objects
    (:attr:`Components.injected`) win over the config's specs and are always kept, except a
    chat model when the run names another one (``models.chat``); a chat model the caller
    handed in is kept when only generation knobs such as threads or temperature change.
    ``share`` (at run time): the chat model and the first stage the copy keeps are made on
    ``base`` first, so they are made once however many runs derive from it at once."""
    if base.config == config:
        return base
    old = base.config
    keep_store = _same(old, config, *_STORE_KEYS)
    injected = "chat" in vars(base) and not base.owns_chat()
    keep_chat = _same(old, config, *_CHAT_KEYS) or (
        _same(old, config, *_CHAT_SPEC_KEYS) and injected
    )
    keep_first_stage = keep_store and _same(old, config, "retrieval")
    if share:
        with _SHARING:
            if keep_chat:
                _ = base.chat
            if keep_first_stage and config.agents.retrieval != "none":
                _ = base.first_stage
    derived = copy.copy(base)
    derived.config = config
    rules = {
        "store": keep_store,
        "embedder": _same(old, config, "models.embedding", "models.embed_batch_size"),
        "first_stage": keep_first_stage,
        "scorer": keep_store and _same(old, config, "models.scorer"),
        "chat": keep_chat,
        "equivalence": keep_chat
        and _same(old, config, "models.equivalence", "models.embedding_cosine_threshold"),
    }
    for name, keep in rules.items():
        if not keep and (name not in base.injected or name == "chat"):
            vars(derived).pop(name, None)
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
        """Reset the wrapped hook's per-query state (the memo stays)."""
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
        if not asu_allowed():  # the run's budget is spent: the batch keeps its scores
            scores = np.asarray([d.score for d in batch], dtype=float)
            return BatchFeedback(scores, {"skipped": "budget"})
        feedback = self.hook(query, batch, batch_index)
        with self._lock:
            self.misses += 1
            self._memo[key] = feedback
            while len(self._memo) > self.max_entries:
                self._memo.popitem(last=False)
        return BatchFeedback(feedback.scores.copy(), dict(feedback.info))


@dataclass
class RetrievalResult:
    """One call of the retrieval strategy: the documents kept, its trace, and how many ASU
    prompts it sent to the chat model."""

    docs: list[ScoredDoc]
    trace: dict[str, Any]
    asu_prompts: int = 0


@dataclass
class AgentContext:
    """Everything one run needs, resolved from the graph defaults and the run's options."""

    config: Config
    parts: Components
    options: dict[str, Any]
    pipeline: Pipeline
    _retrievers: dict[tuple[str, int], SunarRetriever] = field(default_factory=dict)
    _locks: dict[tuple[str, int], threading.Lock] = field(default_factory=dict)
    _asu: MemoisedBatchHook | None = None
    _structured: StructuredOutput | None = None
    _guard: threading.Lock = field(default_factory=threading.Lock)

    @property
    def agents(self) -> AgentsConfig:
        return self.config.agents

    @property
    def strategy(self) -> str:
        """The retrieval strategy of this run (the pipeline's unless a knob changed it)."""
        return str(self.config.agents.retrieval)

    @property
    def mer(self) -> bool:
        return bool(self.config.agents.mer)

    @property
    def active_parts(self) -> frozenset[str]:
        """The pipeline parts this run runs (see :func:`~..config.pipelines.active_parts`)."""
        return active_parts(self.pipeline.loop, self.strategy, self.mer)

    def knob_notes(self) -> list[str]:
        """One note for each knob this run was given that cannot act in it."""
        return idle_knob_notes(self.options, self.active_parts, self.pipeline.name)

    @property
    def chat(self) -> BaseChatModel:
        return self.parts.chat

    @property
    def structured(self) -> StructuredOutput:
        """Whether this context's loop steps ask the chat model for structured output."""
        with self._guard:
            if self._structured is None:
                # LangChain's chat-model stack (about 1.3 s) loads on the first structured step
                from ..models.structured import StructuredOutput

                self._structured = StructuredOutput(self.chat, self.agents.structured_output)
            return self._structured

    @property
    def sub_passages(self) -> int:
        """l: passages each sub-question is answered from (``answer.sub_passages``, else
        ``mer.l``: the paper's top-l)."""
        return self.config.answer.sub_passages or self.config.mer.l

    @property
    def keep_k(self) -> int:
        """Documents kept per retrieval: what the answer prompts and MER need."""
        mer_l = self.config.mer.l if self.mer else 1
        return max(self.config.answer.passages, self.sub_passages, mer_l)

    @property
    def keep_chars(self) -> int:
        """Characters of passage text kept in the state: what the prompts show."""
        return max(self.config.answer.passage_chars, self.config.mer.max_evidence_chars)

    def budget(self, extra: int = 0) -> int:
        """NAR's budget c for a retrieval with ``extra`` documents added by exploration."""
        return self.config.nar.c + max(0, extra)

    def _asu_hook(self) -> MemoisedBatchHook:
        if self._asu is None:
            self._asu = MemoisedBatchHook(self.parts.answer_uncertainty())
        return self._asu

    def retriever(self, strategy: str, c: int) -> tuple[SunarRetriever, threading.Lock]:
        """The (cached) SunarRetriever for a NAR-based strategy with budget ``c``."""
        key = (strategy, c)
        with self._guard:
            if key not in self._retrievers:
                nar = self.config.nar
                rerank = strategy == "rerank"
                params = NARParams(
                    b=nar.b, c=c, neighbours_per_doc=0 if rerank else nar.neighbours_per_doc
                )
                self._retrievers[key] = self.parts.sunar_retriever(
                    with_asu=False,
                    asu=self._asu_hook() if strategy == "sunar" else None,
                    params=params,
                    missing_graph="rerank" if rerank else None,
                )
                self._locks[key] = threading.Lock()
            return self._retrievers[key], self._locks[key]

    def retrieve(
        self,
        query: str,
        original: str | None,
        *,
        extra_budget: int = 0,
        carried: Sequence[str] = (),
    ) -> RetrievalResult:
        """Run the context's retrieval strategy for ``query`` (a sub-question of
        ``original``); ``extra_budget`` raises NAR's c (exploration); NAR strategies add the
        ``carried`` documents (earlier hops' evidence) to the pool."""
        strategy = self.strategy
        k = self.keep_k
        if strategy == "none":
            return RetrievalResult([], {"retriever": "none"})
        if strategy == "first_stage":
            first = self.parts.first_stage
            docs = first.search(query, k)
            return RetrievalResult(docs, {"retriever": "first_stage", "first_stage": first.name})
        retriever, lock = self.retriever(strategy, self.budget(extra_budget))
        with lock:
            before = self._asu.misses if self._asu is not None else 0
            docs = retriever.retrieve(query, k, original_query=original, carried=carried)
            trace = dict(retriever.trace)
            prompts = (self._asu.misses - before) if self._asu is not None else 0
        trace["retriever"] = strategy
        return RetrievalResult(docs, trace, asu_prompts=prompts)


class ResourceProvider:
    """Resolves an :class:`AgentContext` per distinct set of run knobs (cached)."""

    def __init__(
        self,
        pipeline: Pipeline,
        config: Config | None = None,
        *,
        components: Components | None = None,
        knobs: Mapping[str, Any] | None = None,
        retrieval: str | None = None,
        max_contexts: int = 8,
    ) -> None:
        if components is not None and config is not None and components.config != config:
            components = derive_components(components, config)
        self.pipeline = pipeline
        self.config = config or (components.config if components is not None else Config())
        self.components = components
        self.knobs = checked(knobs or {})
        self.retrieval = retrieval
        self._contexts: OrderedDict[str, AgentContext] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_contexts

    @staticmethod
    def options_of(
        config: RunnableConfig | None, context: Any = None, *, served: bool = False
    ) -> dict[str, Any]:
        """A run's knobs from its context and ``configurable`` (which wins), by name; in
        process also ``overrides`` (dotted config keys). ``served``: only the knobs, within
        their bounds; a run option of ours that is not a knob is refused (:func:`served_options`),
        the server's own keys (thread and run ids, …) are left alone."""
        options = given_options(config, context)
        if served:
            return served_options(options)
        extra = options.pop("overrides", None)
        other = sorted(k for k in options if k not in KNOBS_BY_NAME)
        if other:
            raise ConfigError(
                f"the run option(s) {', '.join(other)} are not knobs ({knob_list()}); pass "
                "other settings as overrides={'<section>.<key>': value}, e.g. "
                "{'models.temperature': 0.3}"
            )
        knobs = checked(options)
        if extra:
            if not isinstance(extra, Mapping):
                raise ConfigError("the run option 'overrides' must map dotted config keys")
            knobs["overrides"] = dict(extra)
        return knobs

    def resolve(self, options: Mapping[str, Any] | None = None) -> AgentContext:
        """The context of a run with ``options`` on top of the graph's own knobs."""
        merged = {**self.knobs, **{k: v for k, v in (options or {}).items() if v is not None}}
        key = json.dumps(plain(merged), sort_keys=True)
        with self._lock:
            ctx = self._contexts.get(key)
            if ctx is not None:
                self._contexts.move_to_end(key)
                return ctx
        knobs = {k: v for k, v in merged.items() if k != "overrides"}
        overrides = {KNOBS_BY_NAME[name].key: value for name, value in knobs.items()}
        overrides.update(merged.get("overrides") or {})
        config = self.config.with_overrides(overrides) if overrides else self.config
        retrieval = self.retrieval or config.agents.retrieval or self.pipeline.retrieval
        mer = self.pipeline.mer if config.agents.mer is None else config.agents.mer
        config = config.with_overrides(
            {"agents.retrieval": check_strategy(retrieval), "agents.mer": mer}
        )
        if self.components is None:
            self.components = Components(self.config)
        parts = derive_components(self.components, config, share=True)
        ctx = AgentContext(config=config, parts=parts, options=plain(knobs), pipeline=self.pipeline)
        with self._lock:
            self._contexts[key] = ctx
            while len(self._contexts) > self._max:
                self._contexts.popitem(last=False)
        return ctx

    def context(self, config: RunnableConfig | None, runtime: Any = None) -> AgentContext:
        """The context of the run a node is called in."""
        context = getattr(runtime, "context", None)
        return self.resolve(self.options_of(config, context, served=serving_clients()))
