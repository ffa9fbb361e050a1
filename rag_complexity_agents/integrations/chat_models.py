"""What an ``llm=`` argument may be: a LangChain chat model, or a LlamaIndex LLM wrapped as
one (:class:`~.llamaindex_llm.LlamaIndexChatModel`)."""

from __future__ import annotations

import sys

from langchain_core.language_models import BaseChatModel

from ..errors import InputError


def _is_llamaindex_llm(obj: object) -> bool:
    """Whether ``obj`` is a LlamaIndex LLM (checked without importing LlamaIndex)."""
    module = sys.modules.get("llama_index.core.base.llms.base")
    base = getattr(module, "BaseLLM", None)
    return base is not None and isinstance(obj, base)


def as_chat_model(llm: object, argument: str = "llm") -> BaseChatModel | None:
    """``llm`` as a LangChain chat model: a ``BaseChatModel`` as it is, a LlamaIndex LLM
    through :class:`~.llamaindex_llm.LlamaIndexChatModel`
    (our own LangChain-as-LlamaIndex wrapper is unwrapped), None as None; anything else
    raises InputError naming ``argument``, so a wrong object fails where it is passed and
    not at the first question."""
    if llm is None or isinstance(llm, BaseChatModel):
        return llm
    if _is_llamaindex_llm(llm):
        # LlamaIndex is an optional extra: loaded here only for a LlamaIndex LLM
        from .llamaindex_llm import LangChainChatLLM, LlamaIndexChatModel

        if isinstance(llm, LangChainChatLLM):
            return llm.chat_model
        return LlamaIndexChatModel(llm=llm)
    hint = ""
    if isinstance(llm, str):
        hint = f"; to name a model by spec use config=Config(models={{'chat': {llm!r}}})"
    raise InputError(
        f"{argument} must be a LangChain chat model (BaseChatModel) or a LlamaIndex LLM, "
        f"got {type(llm).__name__}{hint}"
    )
