"""Chat models from spec strings (calls go through :mod:`.calls`).

Accepted ``models.chat`` specs:

* ``auto`` — the best packaged GGUF that is installed (Qwen2.5-Coder 1.5B, else Qwen2.5
  0.5B, else SmolLM2-135M);
* ``llamacpp:<packaged name | path/to/model.gguf>`` — run in-process by llama.cpp;
* ``ollama:<model>`` — a model served by Ollama at ``models.ollama_host``.

Loaded models are cached per process per (spec, home, relevant config values).

Also here: :func:`packaged_chat_model` (a packaged GGUF as a chat model of the caller's own),
and what Ollama users trip over: :func:`ollama_context_note` (a prompt longer
than the context Ollama was asked for is cut silently) and :func:`connection_hint` (a server
that cannot be reached, named by its host).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from langchain_core.language_models.chat_models import BaseChatModel

from ..config import Config, ModelsConfig
from ..errors import ConfigError, InputError, ModelNotAvailable, ModelServerError
from .llamacpp import LlamaCppChatModel
from .packaged import PACKAGED_CHAT_MODELS, best_packaged_chat, resolve_chat_model_path

if TYPE_CHECKING:
    from langchain_ollama import ChatOllama

ACCEPTED_SPECS = (
    "'auto' (best installed packaged model)",
    f"'llamacpp:<{' | '.join(PACKAGED_CHAT_MODELS)} | /path/to/model.gguf>'",
    "'ollama:<model>' (served by Ollama at models.ollama_host)",
)
_OLLAMA_INSTALL = "pip install 'rag-complexity-agents[ollama]'"

_CACHE: dict[tuple[Any, ...], BaseChatModel] = {}
_CACHE_LOCK = threading.Lock()
_BUILT: weakref.WeakValueDictionary[int, BaseChatModel] = weakref.WeakValueDictionary()


def _llamacpp_model(path: Path, config: ModelsConfig) -> LlamaCppChatModel:
    return LlamaCppChatModel(
        model_path=str(path),
        n_ctx=config.n_ctx,
        n_threads=config.n_threads,
        temperature=config.temperature,
        seed=config.seed,
        max_tokens=config.max_tokens,
    )


def _cache_key(spec: str, config: ModelsConfig, home: Path) -> tuple[Any, ...]:
    common = (config.temperature, config.seed, config.max_tokens, config.n_ctx)
    if spec.startswith("ollama:"):
        return (spec, config.ollama_host, config.ollama_timeout_s, *common)
    return (spec, str(Path(home).expanduser()), config.n_threads, *common)


def load_chat_model(spec: str, config: ModelsConfig, home: Path) -> BaseChatModel:
    """Build (or reuse) the chat model named by ``spec``. Weights load lazily on first call."""
    spec = spec.strip()
    key = _cache_key(spec, config, home)
    with _CACHE_LOCK:
        model = _CACHE.get(key)
        if model is None:
            model = _CACHE[key] = _build(spec, config, Path(home).expanduser())
            _BUILT[id(model)] = model
        return model


def built_from_spec(chat: object) -> bool:
    """Whether ``chat`` was built by :func:`load_chat_model` from a ``models.chat`` spec (and
    not handed in by a caller, e.g. a fake or a model configured by hand)."""
    return chat is not None and _BUILT.get(id(chat)) is chat


def _build(spec: str, config: ModelsConfig, home: Path) -> BaseChatModel:
    if spec == "auto":
        return _llamacpp_model(resolve_chat_model_path(best_packaged_chat(home), home), config)
    kind, sep, target = spec.partition(":")
    target = target.strip()
    if sep and kind == "llamacpp" and target:
        return _llamacpp_model(resolve_chat_model_path(target, home), config)
    if sep and kind == "ollama" and target:
        return make_ollama_chat(target, config)
    raise ConfigError(
        f"unknown chat model spec {spec!r}; accepted forms: {', '.join(ACCEPTED_SPECS)}"
    )


# --------------------------------------------------------------------------------------------
# Ollama
# --------------------------------------------------------------------------------------------


def _translate_ollama_error(exc: BaseException, host: str, model: str, timeout_s: Any) -> NoReturn:
    """Re-raise an Ollama/httpx failure as a ModelServerError that says what to do."""
    import httpx
    from ollama import ResponseError

    if isinstance(exc, httpx.TimeoutException):
        raise ModelServerError(
            f"Ollama at {host} did not answer within the timeout of {timeout_s} s "
            f"(model {model!r}); raise models.ollama_timeout_s or check the server's load"
        ) from exc
    if isinstance(exc, httpx.ConnectError | ConnectionError):
        raise ModelServerError(
            f"cannot connect to Ollama at {host}: start it with `ollama serve` and fetch the "
            f"model with `ollama pull {model}`, or set models.ollama_host"
        ) from exc
    if isinstance(exc, ResponseError):
        if exc.status_code == 404:
            raise ModelServerError(
                f"Ollama at {host} does not have model {model!r}: run `ollama pull {model}`"
            ) from exc
        raise ModelServerError(
            f"Ollama at {host} answered with HTTP {exc.status_code}: {exc.error}"
        ) from exc
    if isinstance(exc, httpx.HTTPError):
        raise ModelServerError(f"request to Ollama at {host} failed: {exc}") from exc
    raise exc


def _ollama_errors() -> tuple[type[BaseException], ...]:
    import httpx
    from ollama import ResponseError

    return (httpx.HTTPError, ConnectionError, ResponseError)


def _ollama_class() -> type[ChatOllama]:
    try:
        from langchain_ollama import ChatOllama
    except ImportError as exc:
        raise ModelNotAvailable(f"langchain-ollama is not installed: {_OLLAMA_INSTALL}") from exc

    class RCAChatOllama(ChatOllama):
        """ChatOllama whose connection, timeout and missing-model errors say what to do."""

        def _fail(self, exc: BaseException) -> NoReturn:
            timeout = (self.client_kwargs or {}).get("timeout")
            _translate_ollama_error(exc, self.base_url or "default host", self.model, timeout)

        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return super()._generate(*args, **kwargs)
            except _ollama_errors() as exc:
                self._fail(exc)

        async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return await super()._agenerate(*args, **kwargs)
            except _ollama_errors() as exc:
                self._fail(exc)

        def _stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from super()._stream(*args, **kwargs)
            except _ollama_errors() as exc:
                self._fail(exc)

        async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            try:
                async for chunk in super()._astream(*args, **kwargs):
                    yield chunk
            except _ollama_errors() as exc:
                self._fail(exc)

    return RCAChatOllama


_OLLAMA_CLASS: type[ChatOllama] | None = None


def make_ollama_chat(model: str, config: ModelsConfig) -> ChatOllama:
    """A ChatOllama for ``model`` at ``config.ollama_host`` with a request timeout.

    Nothing is contacted here; errors surface on the first call as ModelServerError.
    """
    global _OLLAMA_CLASS
    if _OLLAMA_CLASS is None:
        _OLLAMA_CLASS = _ollama_class()
    return _OLLAMA_CLASS(
        model=model,
        base_url=config.ollama_host,
        client_kwargs={"timeout": config.ollama_timeout_s},
        temperature=config.temperature,
        seed=config.seed,
        num_predict=config.max_tokens,
        num_ctx=config.n_ctx,
    )


def packaged_chat_model(
    name: str = "auto", *, config: Config | None = None, **models: Any
) -> LlamaCppChatModel:
    """A packaged chat model (``qwen2.5-0.5b``, ``qwen2.5-coder-1.5b``, ``smollm2-135m``,
    or ``auto`` for the best installed one) run in-process by llama.cpp, to pass as ``llm=``.

    Home, context size, threads and generation defaults come from ``config`` (default
    ``Config()``); ``models`` overrides ``models.*`` values, e.g. ``n_ctx=8192``. The model is
    the caller's own (a run that changes ``models.*`` keeps it); weights load on first call
    and are shared with every other model over the same file."""
    if name != "auto" and name not in PACKAGED_CHAT_MODELS:
        raise InputError(
            f"unknown packaged chat model {name!r}; use 'auto' or one of "
            f"{', '.join(PACKAGED_CHAT_MODELS)} (a GGUF file: LlamaCppChatModel(model_path=...))"
        )
    cfg = (config or Config()).with_overrides({f"models.{k}": v for k, v in models.items()})
    home = Path(cfg.models.home).expanduser()
    chosen = best_packaged_chat(home) if name == "auto" else name
    return _llamacpp_model(resolve_chat_model_path(chosen, home), cfg.models)


# --------------------------------------------------------------------------------------------
# What Ollama users trip over
# --------------------------------------------------------------------------------------------

#: The context Ollama gives a model when a request does not send ``num_ctx`` (unless the
#: server's ``OLLAMA_CONTEXT_LENGTH`` or the model's Modelfile sets another).
OLLAMA_DEFAULT_CTX = 4096
#: Characters per token of the prompt-size estimate (English prose: about 4).
CHARS_PER_TOKEN = 4


def _is_chat_ollama(chat: object) -> bool:
    return any(kind.__name__ == "ChatOllama" for kind in type(chat).__mro__)


def ollama_context_note(chat: object, prompt_chars: int) -> str | None:
    """A note when ``chat`` is a ``ChatOllama`` and a prompt of ``prompt_chars`` characters
    (about ``prompt_chars / 4`` tokens) exceeds the context it asks Ollama for (its
    ``num_ctx``, else Ollama's default): the server then drops the start of the prompt
    without an error. None otherwise. The text does not depend on the prompt, so a run
    says it once."""
    if not _is_chat_ollama(chat):
        return None
    num_ctx = getattr(chat, "num_ctx", None)
    context = int(num_ctx) if num_ctx else OLLAMA_DEFAULT_CTX
    if prompt_chars // CHARS_PER_TOKEN <= context:
        return None
    if type(chat).__name__ == "RCAChatOllama":  # built from an ollama: spec
        fix = f"raise models.n_ctx (e.g. to {4 * context})"
    else:
        fix = f"build the model with ChatOllama(num_ctx=...) (e.g. {4 * context})"
    where = f"num_ctx={context}" if num_ctx else f"Ollama's default context of {context} tokens"
    return (
        f"prompts longer than {where} were sent (about {CHARS_PER_TOKEN} characters a token): "
        f"Ollama drops the start of such a prompt without an error; {fix}"
    )


_HOST_FIELDS = ("base_url", "openai_api_base", "api_base", "endpoint", "host")


def _host_of(chat: object) -> str | None:
    for name in _HOST_FIELDS:
        value = getattr(chat, name, None)
        if isinstance(value, str) and value:
            return value
    if _is_chat_ollama(chat):
        return os.environ.get("OLLAMA_HOST") or "http://127.0.0.1:11434"
    return None


def _is_connection_error(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionError) or "Connect" in type(current).__name__:
            return True
        current = current.__cause__ or current.__context__
    return False


def connection_hint(chat: object, exc: BaseException) -> str | None:
    """What to do when ``chat`` cannot reach its server (``exc`` is a connection error),
    naming the host it tried; None for any other failure."""
    if not _is_connection_error(exc):
        return None
    host = _host_of(chat)
    if host is None:
        return None
    name = type(chat).__name__
    model = getattr(chat, "model", None) or getattr(chat, "model_name", None)
    named = f"{name} (model {model!r})" if model else name
    if _is_chat_ollama(chat):
        todo = f"start it with `ollama serve`{f' and `ollama pull {model}`' if model else ''}"
        todo += ", or pass base_url= to ChatOllama"
    else:
        todo = "start the server or fix the model's base URL"
    return f"{named} cannot connect to {host}: {todo}"


def clear_chat_model_cache() -> None:
    """Forget cached chat-model objects (loaded llama.cpp weights stay shared)."""
    with _CACHE_LOCK:
        _CACHE.clear()
