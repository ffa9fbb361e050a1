"""LlamaIndex models, both ways (``llama-index-core`` 0.14): :class:`LangChainChatLLM` (a
LangChain chat model as a LlamaIndex LLM), :class:`LlamaIndexChatModel` (a LlamaIndex LLM as a
LangChain chat model, which is how ``llm=`` takes one everywhere) and :class:`RCAEmbedding`
(our embedder as a LlamaIndex embedding model)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.custom import CustomLLM

from ..config import Config
from ..models.base import Embedder
from ..models.calls import call_chat
from ..models.chat import load_chat_model
from ..models.embeddings import as_embedder, load_embedder
from ..models.llamacpp.messages import reply_text


def _lc_messages(messages: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    roles = {
        MessageRole.SYSTEM: "system",
        MessageRole.USER: "human",
        MessageRole.ASSISTANT: "ai",
    }
    return [(roles.get(m.role, "human"), m.content or "") for m in messages]


class LangChainChatLLM(CustomLLM):
    """A LangChain chat model as a LlamaIndex LLM (chat and completion, sync; async runs the
    sync call in a thread). Without ``chat`` it loads ``models.chat`` of ``config``."""

    max_tokens: int = Field(default=128, description="Tokens generated per call.")
    context_window: int = Field(default=4096)
    model_name: str = Field(default="rca-chat")
    _chat: Any = PrivateAttr(default=None)

    def __init__(self, chat: Any = None, *, config: Config | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if chat is None:
            cfg = config or Config()
            chat = load_chat_model(cfg.models.chat, cfg.models, cfg.models.home)
            if "context_window" not in kwargs:
                self.context_window = cfg.models.n_ctx
        self._chat = chat

    @classmethod
    def class_name(cls) -> str:
        return "rca_langchain_chat_llm"

    @property
    def chat_model(self) -> BaseChatModel:
        """The LangChain chat model behind this LLM."""
        chat: BaseChatModel = self._chat
        return chat

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.max_tokens,
            is_chat_model=True,
            model_name=self.model_name,
        )

    def _call(self, messages: list[tuple[str, str]]) -> str:
        return call_chat(self._chat, messages, max_tokens=self.max_tokens).text

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        text = self._call(_lc_messages(messages))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._call([("human", prompt)]))

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        text = self._call([("human", prompt)])

        def gen() -> CompletionResponseGen:
            yield CompletionResponse(text=text, delta=text)

        return gen()

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        text = self._call(_lc_messages(messages))

        def gen() -> ChatResponseGen:
            yield ChatResponse(
                message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=text
            )

        return gen()


_ROLES: dict[str, MessageRole] = {
    "system": MessageRole.SYSTEM,
    "human": MessageRole.USER,
    "ai": MessageRole.ASSISTANT,
    "tool": MessageRole.TOOL,
    "function": MessageRole.FUNCTION,
}
_KNOB_FIELDS: dict[str, tuple[str, ...]] = {
    "max_tokens": ("max_tokens", "num_output", "max_new_tokens", "num_predict"),
    "temperature": ("temperature",),
    "seed": ("seed",),
}


def _li_message(message: BaseMessage) -> ChatMessage:
    role = _ROLES.get(message.type)
    if role is None:  # a LangChain ChatMessage with a role of its own
        try:
            role = MessageRole(str(getattr(message, "role", "user")))
        except ValueError:
            role = MessageRole.USER
    return ChatMessage(role=role, content=reply_text(message))


def _cut(text: str, stop: Sequence[str] | None) -> str:
    """``text`` up to the first of the ``stop`` sequences it contains."""
    ends = [text.find(s) for s in stop or () if s and s in text]
    return text[: min(ends)] if ends else text


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _count(*values: Any) -> int | None:
    return next((int(v) for v in values if isinstance(v, int | float)), None)


def _usage(response: ChatResponse) -> UsageMetadata | None:
    """Token usage from a LlamaIndex response (``additional_kwargs`` or ``raw.usage``)."""
    extra = response.additional_kwargs or {}
    raw = response.raw
    usage = raw.get("usage") if isinstance(raw, dict) else getattr(raw, "usage", None)
    if usage is not None and not isinstance(usage, dict):
        usage = {k: getattr(usage, k, None) for k in ("prompt_tokens", "completion_tokens")}
    usage = usage or {}
    prompt = _count(extra.get("prompt_tokens"), usage.get("prompt_tokens"))
    completion = _count(extra.get("completion_tokens"), usage.get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    return UsageMetadata(
        input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion
    )


class LlamaIndexChatModel(BaseChatModel):
    """A LlamaIndex LLM (``llm.chat`` / ``achat`` / ``stream_chat``) as a LangChain chat
    model, so a LlamaIndex app's LLM runs our pipelines; ``llm=`` wraps one in it by itself.

    The per-call knobs (``max_tokens``, ``temperature``, ``seed``) are fields here, set on a
    copy of the LlamaIndex LLM where it has a matching field (``max_tokens``,
    ``num_output``, …); stop sequences cut the reply (LlamaIndex's chat takes none)."""

    llm: Any = Field(exclude=True, description="The LlamaIndex LLM.")
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None

    @property
    def _llm_type(self) -> str:
        return "llamaindex"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        kind = type(self.llm)
        params: dict[str, Any] = {"llamaindex_llm": f"{kind.__module__}.{kind.__qualname__}"}
        try:
            dumped = self.llm.model_dump()
        except Exception:  # an LLM that cannot dump itself: its class identifies it
            dumped = {}
        params.update({k: v for k, v in dumped.items() if _plain(v)})
        params.update(max_tokens=self.max_tokens, temperature=self.temperature, seed=self.seed)
        return params

    def _target(self) -> Any:
        """The LlamaIndex LLM with this model's knobs set where it has the fields."""
        fields = getattr(type(self.llm), "model_fields", {})
        update: dict[str, Any] = {}
        for knob, names in _KNOB_FIELDS.items():
            value = getattr(self, knob)
            field = next((n for n in names if n in fields), None)
            if value is not None and field is not None:
                update[field] = value
        return self.llm.model_copy(update=update) if update else self.llm

    @staticmethod
    def _result(response: ChatResponse, stop: Sequence[str] | None) -> ChatResult:
        text = _cut(response.message.content or "", stop)
        message = AIMessage(content=text, usage_metadata=_usage(response))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        response = self._target().chat([_li_message(m) for m in messages])
        return self._result(response, stop)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        response = await self._target().achat([_li_message(m) for m in messages])
        return self._result(response, stop)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        stream = self._target().stream_chat([_li_message(m) for m in messages])
        for piece in _stop_aware(stream, stop):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece))
            if run_manager is not None:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        result = await self._agenerate(messages, stop, run_manager, **kwargs)
        text = reply_text(result.generations[0].message)
        chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
        if run_manager is not None:
            await run_manager.on_llm_new_token(text, chunk=chunk)
        yield chunk


def _stop_aware(responses: Iterator[ChatResponse], stop: Sequence[str] | None) -> Iterator[str]:
    """The text deltas of a LlamaIndex stream, ending before the first stop sequence (the
    last ``len(longest stop) - 1`` characters are held back until they cannot start one)."""
    hold = max((len(s) for s in stop or () if s), default=1) - 1
    text, sent = "", 0
    for response in responses:
        delta = response.delta
        if delta is None:  # a stream that sends the whole message so far
            delta = (response.message.content or "")[len(text) :]
        text += delta
        cut = _cut(text, stop)
        if len(cut) < len(text):
            if len(cut) > sent:
                yield cut[sent:]
            return
        if len(text) - hold > sent:
            yield text[sent : len(text) - hold]
            sent = len(text) - hold
    if len(text) > sent:
        yield text[sent:]


class RCAEmbedding(BaseEmbedding):
    """Our embedder (default: packaged all-MiniLM-L6-v2) as a LlamaIndex embedding model;
    :meth:`from_embeddings` wraps any embedder or LangChain ``Embeddings`` instead."""

    spec: str = Field(default="packaged:all-minilm-l6-v2")
    _embedder: Any = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "rca_embedding"

    @classmethod
    def from_embeddings(cls, embeddings: Any, **kwargs: Any) -> RCAEmbedding:
        """A LlamaIndex embedding model over ``embeddings`` (a LangChain ``Embeddings`` or an
        :class:`~rag_complexity_agents.models.base.Embedder`), e.g. to build a
        ``VectorStoreIndex`` with the same model as a LangChain app."""
        model = cls(spec=f"external:{type(embeddings).__name__}", **kwargs)
        model._embedder = as_embedder(embeddings)
        return model

    def rca_embedder(self) -> Embedder:
        """The embedder behind this model (so our side uses it directly, not through
        LlamaIndex)."""
        if self._embedder is None:
            self._embedder = load_embedder(self.spec)
        embedder: Embedder = self._embedder
        return embedder

    def _encode(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.rca_embedder().encode(texts)]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._encode([query])[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._encode([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._encode(list(texts)) if texts else []
