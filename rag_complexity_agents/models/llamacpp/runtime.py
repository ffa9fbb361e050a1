"""Loaded llama.cpp models: one :class:`Runtime` per process per ``(path, n_ctx, n_threads)``.

The ``Llama`` object is created lazily on the first call, never at import or construction, and
shared by every chat model with the same key. llama.cpp contexts are not thread-safe, so every
use holds that runtime's lock. Runtimes are closed at interpreter exit.

Each runtime counts the model's work (:attr:`Runtime.stats`): prompt tokens evaluated
(``new_tokens``) vs served from the KV cache (``reused_tokens``), tokens decoded, and the
seconds the model was in use (``busy_ms``). Differences of two readings give one run's cost.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ...errors import ModelNotAvailable
from .prefix_cache import BLOCK, PrefixStateCache, SavedState, common_prefix, reusable

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

#: ``(resolved model path, n_ctx, n_threads)``: what identifies a loaded model (0 threads:
#: "auto", see :class:`FreeCores`).
RuntimeKey = tuple[str, int, int]

_LLAMACPP_INSTALL = "pip install 'rag-complexity-agents[llamacpp]' (llama-cpp-python==0.3.36)"


class BusyLock:
    """A ``threading.Lock`` that adds up how long it was held (``busy_s``).

    A plain lock, not an RLock: a streaming generator may be advanced, and the lock released,
    from another thread than the one that acquired it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since = 0.0
        self.busy_s = 0.0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self._lock.acquire(blocking, timeout)
        if got:
            self._since = time.perf_counter()
        return got

    def release(self) -> None:
        self.busy_s += time.perf_counter() - self._since
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass
class Runtime:
    """One loaded model: the ``Llama``, its chat template, lock, and KV bookkeeping."""

    llama: Llama
    formatter: Jinja2ChatFormatter
    lock: BusyLock = field(default_factory=lambda: BusyLock())
    states: PrefixStateCache = field(default_factory=lambda: PrefixStateCache(0))
    canon: int = 0
    primed: int = 0
    counts: dict[str, int] = field(
        default_factory=lambda: {
            "calls": 0,
            "prompt_tokens": 0,
            "reused_tokens": 0,
            "new_tokens": 0,
            "decoded_tokens": 0,
            "restores": 0,
            "saves": 0,
        }
    )
    generating: bool = False  # the last primed prompt was handed to a completion
    threads: int = 1  # llama.cpp threads in use
    core_monitor: FreeCores | None = None  # set: follow the free cores ("auto" thread count)

    @property
    def stats(self) -> dict[str, int]:
        """Work counters since load (read them under :attr:`lock`).

        ``calls``: prompts primed; ``prompt_tokens`` = ``reused_tokens`` (KV positions kept
        from earlier calls or a saved state) + ``new_tokens`` (evaluated by this runtime);
        ``decoded_tokens``: tokens sampled by completions (an end-of-text token included);
        ``restores`` / ``saves``: saved KV states used / made; ``busy_ms``: time the lock was
        held, i.e. the model's share of the wall time.
        """
        return {
            **self.counts,
            "decoded_tokens": self.counts["decoded_tokens"] + self._pending_decoded(),
            "busy_ms": int(self.lock.busy_s * 1000.0),
        }

    def _pending_decoded(self) -> int:
        """Tokens sampled by the completion of the last primed prompt (0 when there was none).

        The completion evaluated every sampled token but the last one after the prompt, so
        the KV cache grew by (sampled - 1) positions beyond the prompt's ``primed + 1``.
        """
        if not self.generating:
            return 0
        return max(0, self.llama.n_tokens - (self.primed + 1)) + 1

    def prime(self, tokens: list[int]) -> int:
        """Make the KV cache hold ``tokens[:-1]``; returns how many positions were reused.

        The caller then evaluates the last prompt token alone (``create_completion`` does so
        because exactly one token is missing; :meth:`last_logits` does so explicitly).
        """
        llama = self.llama
        if self.core_monitor is not None:
            self._fit_threads(self.core_monitor.update())
        self.counts["decoded_tokens"] += self._pending_decoded()
        self.generating = True  # cleared by last_logits, which generates nothing
        target = len(tokens) - 1
        wanted = np.asarray(tokens, dtype=np.intc)
        shared = common_prefix(llama.input_ids[: llama.n_tokens], wanted)
        keep = reusable(shared, target, self.canon, self.primed)
        if self.states.entries:
            key, saved_keep = self.states.best(wanted)
            if key is not None and saved_keep > keep + BLOCK and self._restore(key):
                keep = saved_keep
        if keep > 0 and llama._ctx.kv_cache_seq_rm(-1, keep, -1):
            llama.n_tokens = keep
        else:
            keep = 0
            llama.reset()  # type: ignore[no-untyped-call]
        for start in range(keep, target, BLOCK):
            llama.eval(tokens[start : min(start + BLOCK, target)])
        self.canon = (target // BLOCK) * BLOCK
        self.primed = target
        self.counts["calls"] += 1
        self.counts["prompt_tokens"] += len(tokens)
        self.counts["reused_tokens"] += keep
        self.counts["new_tokens"] += len(tokens) - keep
        return keep

    def _fit_threads(self, threads: int) -> None:
        """Use ``threads`` llama.cpp threads from the next evaluation on (no reload)."""
        if threads != self.threads:
            self.llama._ctx.set_n_threads(threads, threads)
            self.threads = threads

    def last_logits(self, tokens: list[int]) -> tuple[np.ndarray, int]:
        """Logits of the token after ``tokens`` (float64 copy) and the reused position count."""
        reused = self.prime(tokens)
        self.generating = False
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
            llama.reset()  # type: ignore[no-untyped-call]  # unknown state: start over
            self.canon = self.primed = 0
            return False
        n = len(entry.tokens)
        llama.input_ids[:n] = entry.tokens
        llama.n_tokens = n
        llama._requires_eval = True
        self.canon, self.primed = entry.canon, entry.primed
        self.counts["restores"] += 1
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
        entry = SavedState(tokens, buf, n_bytes, canon=self.canon, primed=self.primed)
        self.states.add(entry, overlap=0.9)
        self.counts["saves"] += 1


# --------------------------------------------------------------------------------------------
# Process-wide registry
# --------------------------------------------------------------------------------------------


_RUNTIMES: dict[RuntimeKey, Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def _available_cores() -> int:
    """Cores this process may run on (respects CPU affinity / container limits)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def free_cores() -> int:
    """Available cores not busy with other work: the cores minus the 1-minute load average
    (rounded), at least one. llama.cpp threads spin-wait, so a thread on a busy core slows
    every other thread down: on two busy cores two threads decoded ~10x slower than one."""
    cores = _available_cores()
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - no load average on this platform
        return cores
    return max(1, min(cores, cores - round(load)))


def cpu_sample(children: bool = False) -> tuple[float, float, float] | None:
    """(monotonic s, the machine's busy CPU s, this process's own CPU s, with its finished
    child processes' when ``children``); None without ``/proc/stat``."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            ticks = [int(x) for x in handle.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    busy = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait
    own = os.times()
    spent = own.user + own.system
    if children:
        spent += own.children_user + own.children_system
    return time.monotonic(), busy, spent


class FreeCores:
    """The cores other processes left free during the time since the previous reading.

    Busy CPU time of the machine (``/proc/stat``, scaled to this process's cores) minus this
    process's own (``os.times``), per second of wall time, rounded; at least one core. A
    reading less than ``MIN_INTERVAL_S`` after the previous one repeats it; the first value
    (and the value where ``/proc/stat`` is missing) comes from :func:`free_cores`.
    """

    MIN_INTERVAL_S = 0.5

    def __init__(self) -> None:
        self.value = free_cores()
        self._last = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        return cpu_sample()

    def update(self) -> int:
        """The free cores now (see the class docstring)."""
        now = self._sample()
        if now is None or self._last is None or now[0] - self._last[0] < self.MIN_INTERVAL_S:
            return self.value
        elapsed = now[0] - self._last[0]
        cores = _available_cores()
        share = cores / max(cores, os.cpu_count() or cores)
        others = max(0.0, (now[1] - self._last[1]) * share - (now[2] - self._last[2])) / elapsed
        self.value = max(1, min(cores, cores - round(others)))
        self._last = now
        return self.value


def runtime_key(model_path: str, n_ctx: int, n_threads: int | None) -> RuntimeKey:
    """The registry key of a model; ``n_threads`` None (or 0) is stored as 0: "auto", the
    runtime follows the free cores (:class:`FreeCores`) from call to call."""
    return (str(Path(model_path).expanduser().resolve()), n_ctx, n_threads or 0)


def _load_runtime(key: RuntimeKey) -> Runtime:
    path, n_ctx, threads = key
    monitor = FreeCores() if threads == 0 else None
    threads = monitor.value if monitor is not None else threads
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
    return Runtime(llama=llama, formatter=formatter, threads=threads, core_monitor=monitor)


def get_runtime(key: RuntimeKey) -> Runtime:
    """The runtime for ``key``, loading the model on first use."""
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is None:
            if not _RUNTIMES:
                atexit.register(_close_runtimes)
            runtime = _RUNTIMES[key] = _load_runtime(key)
        return runtime


def is_loaded(key: RuntimeKey) -> bool:
    """Whether the model with this key is loaded in this process."""
    with _RUNTIMES_LOCK:
        return key in _RUNTIMES


def _close_runtimes() -> None:
    """Free llama.cpp models before interpreter teardown (its __del__ fails late in exit)."""
    with _RUNTIMES_LOCK:
        for runtime in _RUNTIMES.values():
            runtime.llama.close()
        _RUNTIMES.clear()


def runtime_stats() -> dict[str, int]:
    """:attr:`Runtime.stats` summed over every model loaded in this process (zeros if none):
    what a harness reads before and after a run to count its model work, whichever chat
    model instances the run used."""
    with _RUNTIMES_LOCK:
        runtimes = list(_RUNTIMES.values())
    total: dict[str, int] = {}
    for runtime in runtimes:
        with runtime.lock:
            stats = runtime.stats
        for key, value in stats.items():
            total[key] = total.get(key, 0) + value
    return total


def loaded_runtimes() -> list[RuntimeKey]:
    """Keys ``(path, n_ctx, n_threads)`` of the llama.cpp models loaded in this process."""
    with _RUNTIMES_LOCK:
        return list(_RUNTIMES)
