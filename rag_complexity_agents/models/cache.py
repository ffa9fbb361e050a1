"""An on-disk cache of LLM calls, so reruns and ablations do not pay for the same call twice.

It is the package's one cache of model work: chat calls (below), GRADE's pipeline steps,
and any other computation keyed by a string (:meth:`LLMCallCache.memo`).

:func:`with_llm_cache` returns a copy of a LangChain chat model whose calls go through an
:class:`LLMCallCache` (a LangChain ``BaseCache`` in one SQLite file). The copy is an instance
of a subclass of the model's own class, so ``isinstance`` checks, ``model_copy`` and every
model-specific method keep working. Two things change:

* ``invoke`` / ``generate`` / ``batch`` (LangChain's cache hook, before the model runs) are
  looked up by a key made of the model's identity (type and identifying parameters: model
  path or name, context size, temperature, top_p, seed, max_tokens, ... — read from the
  instance at call time, so ``model_copy(update={"seed": 3})`` gets its own entries), the
  messages and the call's own parameters (``stop``, per-call ``temperature``/``seed``/...).
  LangChain's default key leaves the model name out for models without identifying
  parameters (``ChatOllama``); this one does not.
* ``sample(messages, m, ...)`` (the llama.cpp model's m-answer method that ASU uses) is cached
  as a whole, keyed the same way plus m and the sampling parameters.

SQLite runs in WAL mode: safe across threads and processes, and a crash loses at most the
call in flight. A hit returns the stored reply with its usage metadata, so token counts in
traces do not change on a rerun. The seconds the original call took are stored too and
:func:`call_stats` reports them as ``saved_seconds``, so the harness can report uncached
time. Next-token probability helpers (``yes_probability``) are not cached.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.caches import BaseCache
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.load import dumps
from langchain_core.messages import (
    BaseMessage,
    convert_to_messages,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.outputs import ChatGeneration, Generation

from ..config import Config
from ..errors import RCAError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    seconds REAL NOT NULL,
    created REAL NOT NULL
)
"""


# --------------------------------------------------------------------------------------------
# Per-question accounting
# --------------------------------------------------------------------------------------------


@dataclass
class CallStats:
    """Cache hits and misses of the calls made while it was active (see :func:`call_stats`)."""

    hits: int = 0
    misses: int = 0
    saved_seconds: float = 0.0

    def to_dict(self) -> dict[str, float | int]:
        return {
            "hits": self.hits,
            "misses": self.misses,
            "saved_seconds": round(self.saved_seconds, 3),
        }


_STATS: contextvars.ContextVar[CallStats | None] = contextvars.ContextVar(
    "rca_llm_call_stats", default=None
)
_STATS_LOCK = threading.Lock()


@contextlib.contextmanager
def call_stats() -> Iterator[CallStats]:
    """Count cache hits and misses inside the ``with`` block (in this context).

    Contexts copied into worker threads (LangGraph does this) share the same counter.
    """
    stats = CallStats()
    token = _STATS.set(stats)
    try:
        yield stats
    finally:
        _STATS.reset(token)


def _record(hit: bool, seconds: float) -> None:
    stats = _STATS.get()
    if stats is None:
        return
    with _STATS_LOCK:
        if hit:
            stats.hits += 1
            stats.saved_seconds += seconds
        else:
            stats.misses += 1


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """A stored value, the seconds its computation took, and whether it came from the store."""

    value: Any
    seconds: float
    hit: bool = True


def _sha256(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


def _generation_to_json(generation: Generation) -> dict[str, Any]:
    if isinstance(generation, ChatGeneration):
        message = generation.message.model_copy(update={"id": None})
        return {"message": message_to_dict(message), "info": generation.generation_info}
    return {"text": generation.text, "info": generation.generation_info}


def _generation_from_json(data: dict[str, Any]) -> Generation:
    if "message" in data:
        message = messages_from_dict([data["message"]])[0]
        return ChatGeneration(message=message, generation_info=data.get("info"))
    return Generation(text=str(data.get("text", "")), generation_info=data.get("info"))


class LLMCallCache(BaseCache):
    """LangChain cache (and key → JSON store) in one SQLite file, for threads and processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(self.path), timeout=60.0, check_same_thread=False, isolation_level=None
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise RCAError(
                f"cannot open the LLM call cache {self.path} ({exc}); choose another file "
                "(--llm-cache-path / eval.llm_cache_path) or turn it off (--no-llm-cache)"
            ) from exc
        self._lock = threading.Lock()
        self._started: dict[str, float] = {}
        self.hits = 0
        self.misses = 0

    # ---------------------------------------------------------------- key → value
    def get(self, key: str) -> CacheEntry | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT value, seconds FROM calls WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        try:
            return CacheEntry(json.loads(row[0]), float(row[1]))
        except (ValueError, TypeError):
            return None

    def put(self, key: str, value: Any, *, kind: str, seconds: float) -> None:
        payload = json.dumps(value, ensure_ascii=False, default=str)
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO calls (key, kind, value, seconds, created) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, kind, payload, float(seconds), time.time()),
            )

    def memo(
        self,
        key: str,
        compute: Callable[[], Any],
        *,
        kind: str,
        valid: Callable[[Any], bool] | None = None,
    ) -> CacheEntry:
        """The value stored under ``key`` (when ``valid`` accepts it), else ``compute()``.

        A computed value is stored with the seconds it took, unless it is None (a failure
        that the next run should retry). Hits and misses count like those of chat calls
        (:attr:`hits`, :attr:`misses`, :func:`call_stats`).
        """
        entry = self.get(key)
        if entry is not None and (valid is None or valid(entry.value)):
            self._hit(entry.seconds)
            return entry
        with self._lock:
            self.misses += 1
        started = time.perf_counter()
        value = compute()
        seconds = time.perf_counter() - started
        _record(False, seconds)
        if value is not None:
            self.put(key, value, kind=kind, seconds=seconds)
        return CacheEntry(value, seconds, hit=False)

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _hit(self, seconds: float) -> None:
        with self._lock:
            self.hits += 1
        _record(True, seconds)

    def _miss_started(self, key: str) -> None:
        with self._lock:
            self.misses += 1
            self._started[key] = time.perf_counter()

    def _miss_finished(self, key: str) -> float:
        with self._lock:
            started = self._started.pop(key, None)
        seconds = time.perf_counter() - started if started is not None else 0.0
        _record(False, seconds)
        return seconds

    # ---------------------------------------------------------------- LangChain BaseCache
    def lookup(self, prompt: str, llm_string: str) -> list[Generation] | None:
        key = _sha256("chat", prompt, llm_string)
        entry = self.get(key)
        if entry is not None and isinstance(entry.value, list):
            try:
                generations = [_generation_from_json(item) for item in entry.value]
            except (KeyError, TypeError, ValueError):
                generations = []
            if generations:
                self._hit(entry.seconds)
                return generations
        self._miss_started(key)
        return None

    def update(self, prompt: str, llm_string: str, return_val: Sequence[Generation]) -> None:
        key = _sha256("chat", prompt, llm_string)
        seconds = self._miss_finished(key)
        value = [_generation_to_json(g) for g in return_val]
        self.put(key, value, kind="chat", seconds=seconds)

    def clear(self, **kwargs: Any) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM calls")


# --------------------------------------------------------------------------------------------
# Models that use it
# --------------------------------------------------------------------------------------------

_NOT_IDENTIFYING = frozenset(
    {
        "cache",
        "callbacks",
        "callback_manager",
        "verbose",
        "tags",
        "metadata",
        "rate_limiter",
        "custom_get_token_ids",
        "disable_streaming",
        "output_version",
        "base_url",
        "client_kwargs",
        "async_client_kwargs",
        "sync_client_kwargs",
        "prefix_cache_mb",
        "prefix_cache_min_tokens",
        "n_threads",
    }
)


def _plain(value: Any) -> bool:
    if isinstance(value, str | int | float | bool) or value is None:
        return True
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def model_identity(chat: BaseChatModel) -> dict[str, Any]:
    """What identifies a model's replies: its type and its plain-valued parameters.

    The union of ``_identifying_params`` and the model's plain fields (model name or path,
    temperature, seed, context size, ...), minus callbacks, tags, endpoints, threads and
    other settings that do not change the reply.
    """
    try:
        dumped = chat.model_dump()
    except Exception:  # pragma: no cover - a model that cannot dump itself
        dumped = {}
    params = {k: v for k, v in dumped.items() if k not in _NOT_IDENTIFYING and _plain(v)}
    with contextlib.suppress(Exception):  # a model with broken identifying params
        identifying = dict(chat._identifying_params)
        params.update({k: v for k, v in identifying.items() if k not in _NOT_IDENTIFYING})
    return {"type": chat._llm_type, "params": params}


def _identity_string(chat: BaseChatModel, params: dict[str, Any]) -> str:
    payload = {"model": model_identity(chat), "call": params}
    return json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)


def _messages_string(messages: Sequence[BaseMessage]) -> str:
    clean = [m.model_copy(update={"id": None}) if getattr(m, "id", None) else m for m in messages]
    return dumps(clean)


class _CacheKeyMixin:
    """Keys LangChain's cache by the model's full identity (see :func:`model_identity`)."""

    def _get_llm_string(self, stop: list[str] | None = None, **kwargs: Any) -> str:
        assert isinstance(self, BaseChatModel)
        return _identity_string(self, {"stop": stop, **kwargs})


class _CachedSampleMixin(_CacheKeyMixin):
    """Also caches ``sample(messages, m, ...)`` of models that have it (llama.cpp)."""

    def sample(self, messages: Any, m: int, **kwargs: Any) -> list[str]:
        assert isinstance(self, BaseChatModel)
        store = self.cache
        inner = super().sample  # type: ignore[misc]
        if not isinstance(store, LLMCallCache):
            return [str(a) for a in inner(messages, m, **kwargs)]
        msgs = convert_to_messages(messages)
        key = _sha256("sample", _messages_string(msgs), _identity_string(self, {"m": m, **kwargs}))
        entry = store.get(key)
        if entry is not None and isinstance(entry.value, list) and len(entry.value) == m:
            store._hit(entry.seconds)
            return [str(v) for v in entry.value]
        store._miss_started(key)
        replies = [str(a) for a in inner(messages, m, **kwargs)]
        seconds = store._miss_finished(key)
        store.put(key, replies, kind="sample", seconds=seconds)
        return replies


_CLASSES: dict[type[BaseChatModel], type[BaseChatModel]] = {}
_CLASSES_LOCK = threading.Lock()


def cached_model_class(cls: type[BaseChatModel]) -> type[BaseChatModel]:
    """The subclass of ``cls`` whose instances use the harness's cache keys (made once)."""
    if issubclass(cls, _CacheKeyMixin):
        return cls
    with _CLASSES_LOCK:
        if cls not in _CLASSES:
            mixin = _CachedSampleMixin if callable(getattr(cls, "sample", None)) else _CacheKeyMixin
            _CLASSES[cls] = type(
                f"Cached{cls.__name__}",
                (mixin, cls),
                {
                    "__module__": __name__,
                    "__doc__": f"{cls.__name__} whose calls go through an LLMCallCache.",
                },
            )
        return _CLASSES[cls]


def with_llm_cache(chat: BaseChatModel, cache: LLMCallCache | None) -> BaseChatModel:
    """A copy of ``chat`` that looks every call up in ``cache`` first (``chat`` if None).

    The copy is rebuilt from the fields that were set on ``chat`` (validators run again, so
    clients such as Ollama's are recreated); loaded llama.cpp weights are shared per process
    and are not loaded twice.
    """
    if cache is None:
        return chat
    cls = cached_model_class(type(chat))
    values = {name: getattr(chat, name) for name in chat.model_fields_set if name != "cache"}
    return cls(**values, cache=cache)


def open_llm_cache(config: Config) -> LLMCallCache | None:
    """The configured on-disk LLM call cache (None when ``eval.llm_cache`` is off)."""
    if not config.eval.llm_cache:
        return None
    path = config.eval.llm_cache_path or (config.models.home / "llm_cache.sqlite")
    return LLMCallCache(path)


def is_cached(chat: object) -> bool:
    """Whether ``chat`` came from :func:`with_llm_cache`."""
    return isinstance(chat, _CacheKeyMixin) and isinstance(
        getattr(chat, "cache", None), LLMCallCache
    )
