"""In-process GGUF chat models via llama-cpp-python, as a LangChain ``BaseChatModel``.

* The ``Llama`` object is created lazily on the first call, never at import or construction,
  and shared per process per ``(path, n_ctx, n_threads)``. llama.cpp contexts are not
  thread-safe, so every use holds that runtime's lock.
* Prompts are rendered with the GGUF's own chat template (the same ``Jinja2ChatFormatter``
  that ``Llama.create_chat_completion`` uses) so that the token ids are known here: that gives
  exact usage counts, next-token probabilities (:meth:`LlamaCppChatModel.yes_probability`) and
  prefix reuse.
* Prefix reuse: llama-cpp-python keeps the KV cache of the previous call and re-evaluates only
  the tokens after the longest common prefix. On top of that a small LRU of saved KV states
  (:class:`_PrefixStateCache`) lets several *alternating* long prefixes (e.g. few-shot prompts
  of different agent steps) each skip re-evaluation. ``llama_cpp.LlamaRAMCache`` is not used
  because ``Llama.save_state`` also copies an ``n_batch × n_vocab`` float buffer per entry
  (311 MB for Qwen2.5's 152k vocabulary, 0.9 s per save) that its capacity does not count.
* :meth:`LlamaCppChatModel.sample` draws m answers to one prompt with the prompt evaluated
  once (each later sample re-evaluates a single token) and a distinct seed per sample.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import ConfigDict, Field

from ..errors import InputError, ModelNotAvailable

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

MessagesInput = str | Sequence[BaseMessage | tuple[str, str] | dict[str, Any] | str]

_PER_CALL_KEYS = ("temperature", "top_p", "seed", "stop", "max_tokens")
_LLAMACPP_INSTALL = "pip install 'rag-complexity-agents[llamacpp]' (llama-cpp-python==0.3.36)"


# --------------------------------------------------------------------------------------------
# Prompt evaluation with reusable, reproducible KV prefixes
# --------------------------------------------------------------------------------------------

#: Prompts are evaluated in blocks aligned to multiples of this many positions, and the last
#: prompt token alone. llama.cpp's numbers depend slightly on how tokens are batched, so this
#: makes every prompt token's KV identical whatever was cached before: same prompt + same seed
#: gives the same answer regardless of call history. Reuse rounds down to a block boundary.
_BLOCK = 64


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


def _reusable(shared: int, target: int, canon: int, primed: int) -> int:
    """How many cached KV positions a prompt of ``target + 1`` tokens may keep.

    ``canon``: leading positions evaluated in full aligned blocks; ``primed``: the prompt
    length (minus one) those positions were primed for. Re-priming the very same prompt keeps
    everything; otherwise only whole blocks that are both shared and canonical.
    """
    if shared >= target and primed == target:
        return target
    return (min(shared, canon) // _BLOCK) * _BLOCK


@dataclass
class _SavedState:
    tokens: np.ndarray  # the evaluated tokens whose KV the state holds
    data: ctypes.Array[ctypes.c_uint8]
    n_bytes: int
    canon: int
    primed: int


@dataclass
class _PrefixStateCache:
    """LRU of llama.cpp context states keyed by their evaluated tokens, bounded in bytes."""

    capacity_bytes: int
    entries: OrderedDict[int, _SavedState] = field(default_factory=OrderedDict)
    _next_id: int = 0

    @property
    def size_bytes(self) -> int:
        return sum(e.n_bytes for e in self.entries.values())

    def best(self, tokens: np.ndarray) -> tuple[int | None, int]:
        """The entry that lets a prompt keep the most positions, and that count."""
        target = len(tokens) - 1
        best_key, best_keep = None, 0
        for key, entry in self.entries.items():
            shared = _common_prefix(entry.tokens, tokens)
            keep = _reusable(shared, target, entry.canon, entry.primed)
            if keep > best_keep:
                best_key, best_keep = key, keep
        return best_key, best_keep

    def add(self, entry: _SavedState, overlap: float) -> None:
        # An entry that the new one nearly covers (same prefix, different tail) is redundant.
        for key in [
            k
            for k, e in self.entries.items()
            if _common_prefix(e.tokens, entry.tokens) >= overlap * len(e.tokens)
        ]:
            del self.entries[key]
        self.entries[self._next_id] = entry
        self._next_id += 1
        while self.entries and self.size_bytes > self.capacity_bytes:
            self.entries.popitem(last=False)


@dataclass
class _Runtime:
    """One loaded model: the ``Llama``, its chat template, lock, and KV bookkeeping."""

    llama: Llama
    formatter: Jinja2ChatFormatter
    lock: threading.Lock = field(default_factory=threading.Lock)
    states: _PrefixStateCache = field(default_factory=lambda: _PrefixStateCache(0))
    canon: int = 0
    primed: int = 0
    stats: dict[str, int] = field(
        default_factory=lambda: {
            "calls": 0,
            "prompt_tokens": 0,
            "reused_tokens": 0,
            "restores": 0,
            "saves": 0,
        }
    )

    def prime(self, tokens: list[int]) -> int:
        """Make the KV cache hold ``tokens[:-1]``; returns how many positions were reused.

        The caller then evaluates the last prompt token alone (``create_completion`` does so
        because exactly one token is missing; :meth:`last_logits` does so explicitly).
        """
        llama = self.llama
        target = len(tokens) - 1
        wanted = np.asarray(tokens, dtype=np.intc)
        shared = _common_prefix(llama.input_ids[: llama.n_tokens], wanted)
        keep = _reusable(shared, target, self.canon, self.primed)
        if self.states.entries:
            key, saved_keep = self.states.best(wanted)
            if key is not None and saved_keep > keep + _BLOCK and self._restore(key):
                keep = saved_keep
        if keep > 0 and llama._ctx.kv_cache_seq_rm(-1, keep, -1):
            llama.n_tokens = keep
        else:
            keep = 0
            llama.reset()
        for start in range(keep, target, _BLOCK):
            llama.eval(tokens[start : min(start + _BLOCK, target)])
        self.canon = (target // _BLOCK) * _BLOCK
        self.primed = target
        self.stats["calls"] += 1
        self.stats["prompt_tokens"] += len(tokens)
        self.stats["reused_tokens"] += keep
        return keep

    def last_logits(self, tokens: list[int]) -> tuple[np.ndarray, int]:
        """Logits of the token after ``tokens`` (float64 copy) and the reused position count."""
        reused = self.prime(tokens)
        llama = self.llama
        llama.eval(tokens[-1:])
        n_vocab = llama.n_vocab()
        logits = np.ctypeslib.as_array(llama._ctx.get_logits_ith(-1), shape=(n_vocab,))
        return logits.astype(np.float64), reused

    def _restore(self, key: int) -> bool:
        from llama_cpp import llama_state_set_data

        entry = self.states.entries[key]
        self.states.entries.move_to_end(key)
        llama = self.llama
        if llama_state_set_data(llama._ctx.ctx, entry.data, entry.n_bytes) != entry.n_bytes:
            llama.reset()  # unknown state: start from scratch
            self.canon = self.primed = 0
            return False
        n = len(entry.tokens)
        llama.input_ids[:n] = entry.tokens
        llama.n_tokens = n
        llama._requires_eval = True
        self.canon, self.primed = entry.canon, entry.primed
        self.stats["restores"] += 1
        return True

    def maybe_save(self, prompt_len: int, reused: int, min_tokens: int) -> None:
        """Save the KV state after a long prompt that was mostly new (for alternation)."""
        llama = self.llama
        if self.states.capacity_bytes <= 0 or prompt_len < min_tokens or reused >= 0.9 * prompt_len:
            return
        from llama_cpp import llama_state_get_data, llama_state_get_size

        size = int(llama_state_get_size(llama._ctx.ctx))
        if size > self.states.capacity_bytes:
            return
        buf = (ctypes.c_uint8 * size)()
        n_bytes = int(llama_state_get_data(llama._ctx.ctx, buf, size))
        if n_bytes <= 0 or n_bytes > size:
            return
        tokens = np.array(llama.input_ids[: llama.n_tokens], dtype=np.intc)
        entry = _SavedState(tokens, buf, n_bytes, canon=self.canon, primed=self.primed)
        self.states.add(entry, overlap=0.9)
        self.stats["saves"] += 1


# --------------------------------------------------------------------------------------------
# Process-wide runtimes
# --------------------------------------------------------------------------------------------


_RUNTIMES: dict[tuple[str, int, int], _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def _available_cores() -> int:
    """Cores this process may run on (respects CPU affinity / container limits)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def _runtime_key(model_path: str, n_ctx: int, n_threads: int | None) -> tuple[str, int, int]:
    threads = n_threads if n_threads else _available_cores()
    return (str(Path(model_path).expanduser().resolve()), n_ctx, threads)


def _load_runtime(key: tuple[str, int, int]) -> _Runtime:
    path, n_ctx, threads = key
    if not Path(path).is_file():
        raise ModelNotAvailable(f"GGUF model file {path} does not exist")
    try:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    except ImportError as exc:
        raise ModelNotAvailable(f"llama-cpp-python is not installed: {_LLAMACPP_INSTALL}") from exc
    try:
        llama = Llama(
            model_path=path,
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            seed=0,
            logits_all=False,
            verbose=False,
        )
    except (ValueError, RuntimeError, OSError) as exc:
        raise ModelNotAvailable(f"llama.cpp could not load {path}: {exc}") from exc
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        raise ModelNotAvailable(
            f"{path} has no chat template in its GGUF metadata; use a chat/instruct GGUF"
        )
    eos_id, bos_id = llama.token_eos(), llama.token_bos()
    formatter = Jinja2ChatFormatter(
        template=template,
        eos_token=llama._model.token_get_text(eos_id) if eos_id != -1 else "",
        bos_token=llama._model.token_get_text(bos_id) if bos_id != -1 else "",
        stop_token_ids=[eos_id],
    )
    return _Runtime(llama=llama, formatter=formatter)


def _get_runtime(key: tuple[str, int, int]) -> _Runtime:
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is None:
            if not _RUNTIMES:
                atexit.register(_close_runtimes)
            runtime = _RUNTIMES[key] = _load_runtime(key)
        return runtime


def _close_runtimes() -> None:
    """Free llama.cpp models before interpreter teardown (its __del__ fails late in exit)."""
    with _RUNTIMES_LOCK:
        for runtime in _RUNTIMES.values():
            runtime.llama.close()
        _RUNTIMES.clear()


def loaded_runtimes() -> list[tuple[str, int, int]]:
    """Keys ``(path, n_ctx, n_threads)`` of the llama.cpp models loaded in this process."""
    with _RUNTIMES_LOCK:
        return list(_RUNTIMES)


# --------------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _role_of(message: BaseMessage) -> str:
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage | FunctionMessage):
        return "tool"
    if isinstance(message, ChatMessage):
        return message.role
    return "user"


def to_messages(messages: MessagesInput) -> list[BaseMessage]:
    """A string (one user turn) or any LangChain message-like sequence → messages."""
    if isinstance(messages, str):
        return [HumanMessage(content=messages)]
    return convert_to_messages(list(messages))


# --------------------------------------------------------------------------------------------
# The chat model
# --------------------------------------------------------------------------------------------


class LlamaCppChatModel(BaseChatModel):
    """A local GGUF chat model run in-process by llama.cpp (lazy, shared, lock-guarded).

    Per-call overrides (``invoke(..., temperature=0.7, seed=3)``, or ``.bind(...)``):
    ``temperature``, ``top_p``, ``seed``, ``stop``, ``max_tokens``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_path: str
    n_ctx: int = Field(4096, ge=64)
    n_threads: int | None = Field(
        None,
        description="None = all available cores. On a machine busy with other work, fewer "
        "threads (even 1) can be several times faster: llama.cpp threads spin-wait.",
    )
    temperature: float = Field(0.0, ge=0.0)
    top_p: float = Field(0.95, gt=0.0, le=1.0)
    seed: int = 0
    max_tokens: int = Field(256, ge=1)
    stop: list[str] | None = None
    prefix_cache_mb: int = Field(
        256, ge=0, description="RAM for saved KV states of alternating prefixes; 0 disables."
    )
    prefix_cache_min_tokens: int = Field(
        256, ge=1, description="Only prompts at least this long are worth saving."
    )

    # ---------------------------------------------------------------- LangChain plumbing

    @property
    def _llm_type(self) -> str:
        return "llamacpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model_path": self.model_path,
            "n_ctx": self.n_ctx,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
        }

    @property
    def model_name(self) -> str:
        return Path(self.model_path).name

    @property
    def _key(self) -> tuple[str, int, int]:
        return _runtime_key(self.model_path, self.n_ctx, self.n_threads)

    @property
    def is_loaded(self) -> bool:
        """Whether this model's weights are loaded in this process (shared across instances)."""
        with _RUNTIMES_LOCK:
            return self._key in _RUNTIMES

    def _runtime(self) -> _Runtime:
        runtime = _get_runtime(self._key)
        runtime.states.capacity_bytes = self.prefix_cache_mb * 1024 * 1024
        return runtime

    def _options(self, stop: list[str] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        stops = [*(self.stop or []), *(stop or [])]
        extra = kwargs.get("stop")
        if extra:
            stops.extend([extra] if isinstance(extra, str) else extra)
        seed = kwargs.get("seed")
        temperature = kwargs.get("temperature")
        top_p = kwargs.get("top_p")
        max_tokens = kwargs.get("max_tokens")
        return {
            "temperature": float(self.temperature if temperature is None else temperature),
            "top_p": float(self.top_p if top_p is None else top_p),
            "seed": int(self.seed if seed is None else seed),
            "max_tokens": int(self.max_tokens if max_tokens is None else max_tokens),
            "stop": stops,
        }

    # ---------------------------------------------------------------- prompt handling

    def _render(self, runtime: _Runtime, messages: Sequence[BaseMessage]) -> tuple[list[int], Any]:
        dicts = [{"role": _role_of(m), "content": _text_of(m.content)} for m in messages]
        result = runtime.formatter(messages=dicts)
        tokens = runtime.llama.tokenize(
            result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True
        )
        if len(tokens) >= self.n_ctx:
            raise InputError(
                f"the prompt has {len(tokens)} tokens but the context window (models.n_ctx) "
                f"is {self.n_ctx}; shorten the prompt or raise models.n_ctx"
            )
        return tokens, result

    def _completion(
        self,
        runtime: _Runtime,
        tokens: list[int],
        formatted: Any,
        opts: dict[str, Any],
        *,
        stream: bool,
    ) -> tuple[Any, int]:
        """Prime the KV cache, then run llama.cpp; returns (result or chunk iterator, reused)."""
        stops = [*opts["stop"]]
        if formatted.stop:
            stops.extend([formatted.stop] if isinstance(formatted.stop, str) else formatted.stop)
        max_tokens = min(opts["max_tokens"], self.n_ctx - len(tokens))
        reused = runtime.prime(tokens)
        result = runtime.llama.create_completion(
            prompt=tokens,
            max_tokens=max_tokens,
            temperature=opts["temperature"],
            top_p=opts["top_p"],
            seed=opts["seed"],
            stop=stops,
            stopping_criteria=formatted.stopping_criteria,
            repeat_penalty=1.0,
            stream=stream,
        )
        return result, reused

    # ---------------------------------------------------------------- generation

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        opts = self._options(stop, kwargs)
        runtime = self._runtime()
        with runtime.lock:
            tokens, formatted = self._render(runtime, messages)
            result, reused = self._completion(runtime, tokens, formatted, opts, stream=False)
            runtime.maybe_save(len(tokens), reused, self.prefix_cache_min_tokens)
        choice = result["choices"][0]
        usage = result.get("usage") or {}
        n_in = int(usage.get("prompt_tokens", len(tokens)))
        n_out = int(usage.get("completion_tokens", 0))
        message = AIMessage(
            content=choice["text"],
            usage_metadata=UsageMetadata(
                input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out
            ),
            response_metadata={
                "model_name": self.model_name,
                "finish_reason": choice.get("finish_reason"),
            },
        )
        return ChatResult(
            generations=[
                ChatGeneration(
                    message=message, generation_info={"finish_reason": choice.get("finish_reason")}
                )
            ]
        )

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        opts = self._options(stop, kwargs)
        runtime = self._runtime()
        # A plain Lock (not RLock): LangChain's default astream advances this generator from
        # different executor threads, and a Lock may be released by another thread.
        with runtime.lock:
            tokens, formatted = self._render(runtime, messages)
            finish_reason = None
            pieces: list[str] = []
            chunks, reused = self._completion(runtime, tokens, formatted, opts, stream=True)
            with contextlib.closing(chunks):
                for part in chunks:
                    choice = part["choices"][0]
                    finish_reason = choice.get("finish_reason") or finish_reason
                    text = choice.get("text") or ""
                    if not text:
                        continue
                    pieces.append(text)
                    chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
                    if run_manager is not None:
                        run_manager.on_llm_new_token(text, chunk=chunk)
                    yield chunk
            runtime.maybe_save(len(tokens), reused, self.prefix_cache_min_tokens)
            text = "".join(pieces)
            n_out = len(runtime.llama.tokenize(text.encode("utf-8"), add_bos=False)) if text else 0
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                usage_metadata=UsageMetadata(
                    input_tokens=len(tokens), output_tokens=n_out, total_tokens=len(tokens) + n_out
                ),
                response_metadata={"model_name": self.model_name, "finish_reason": finish_reason},
                chunk_position="last",
            ),
            generation_info={"finish_reason": finish_reason},
        )

    # ---------------------------------------------------------------- m samples

    def sample(
        self,
        messages: MessagesInput,
        m: int,
        *,
        temperature: float,
        top_p: float | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
    ) -> list[str]:
        """m sampled answers to one prompt; the prompt is evaluated once.

        Sample i uses seed ``seed + i`` (``seed`` defaults to the model's), so the result is
        reproducible and the samples differ. Each later sample re-evaluates one prompt token
        (llama.cpp reuses the KV cache of the shared prompt).
        """
        if m < 1:
            raise ValueError("m must be at least 1")
        msgs = to_messages(messages)
        opts = self._options(
            stop,
            {"temperature": temperature, "top_p": top_p, "seed": seed, "max_tokens": max_tokens},
        )
        runtime = self._runtime()
        answers: list[str] = []
        with runtime.lock:
            tokens, formatted = self._render(runtime, msgs)
            first_reused = 0
            for i in range(m):
                result, reused = self._completion(
                    runtime, tokens, formatted, {**opts, "seed": opts["seed"] + i}, stream=False
                )
                first_reused = reused if i == 0 else first_reused
                answers.append(result["choices"][0]["text"])
            runtime.maybe_save(len(tokens), first_reused, self.prefix_cache_min_tokens)
        return answers

    # ---------------------------------------------------------------- next-token probabilities

    def _next_token_logprobs(self, messages: MessagesInput) -> np.ndarray:
        """log P(next token) over the vocabulary after the rendered prompt (float64)."""
        msgs = to_messages(messages)
        runtime = self._runtime()
        with runtime.lock:
            tokens, _ = self._render(runtime, msgs)
            logits, reused = runtime.last_logits(tokens)
            runtime.maybe_save(len(tokens), reused, self.prefix_cache_min_tokens)
        logits -= logits.max()
        return logits - math.log(float(np.exp(logits).sum()))

    def _single_token_ids(self, words: Sequence[str]) -> set[int]:
        llama = self._runtime().llama
        ids: set[int] = set()
        for word in words:
            for variant in {word, word.lower(), word.capitalize(), word.upper()}:
                for text in (variant, " " + variant):
                    toks = llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
                    if len(toks) == 1:
                        ids.add(toks[0])
        return ids

    def top_next_tokens(self, messages: MessagesInput, k: int = 10) -> list[tuple[str, float]]:
        """The k most likely first tokens of the answer with their log-probabilities."""
        logprobs = self._next_token_logprobs(messages)
        llama = self._runtime().llama
        top = np.argsort(-logprobs)[:k]
        return [
            (
                llama.detokenize([int(t)], special=True).decode("utf-8", errors="replace"),
                float(logprobs[t]),
            )
            for t in top
        ]

    def yes_probability(
        self,
        messages: MessagesInput,
        *,
        yes: Sequence[str] = ("yes",),
        no: Sequence[str] = ("no",),
        normalize: bool = True,
    ) -> float:
        """P(the answer starts with "yes"), from one forward pass over the prompt.

        Case variants and leading-space variants of each word count (single-token spellings
        only). With ``normalize`` the result is P(yes) / (P(yes) + P(no)) (0.5 when the model
        puts no mass on either); otherwise the raw probability mass of the "yes" tokens.
        """
        logprobs = self._next_token_logprobs(messages)
        probs = np.exp(logprobs)
        yes_ids = sorted(self._single_token_ids(yes))
        p_yes = float(probs[yes_ids].sum()) if yes_ids else 0.0
        if not normalize:
            return p_yes
        no_ids = sorted(self._single_token_ids(no) - set(yes_ids))
        p_no = float(probs[no_ids].sum()) if no_ids else 0.0
        total = p_yes + p_no
        return p_yes / total if total > 0.0 else 0.5

    def prefix_cache_stats(self) -> dict[str, int]:
        """Counters of this runtime: calls, KV-state saves and restores, cached bytes."""
        runtime = self._runtime()
        with runtime.lock:
            return {
                **runtime.stats,
                "entries": len(runtime.states.entries),
                "bytes": runtime.states.size_bytes,
            }


__all__ = ["LlamaCppChatModel", "loaded_runtimes", "to_messages"]
