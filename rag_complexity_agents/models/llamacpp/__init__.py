"""In-process GGUF chat models via llama-cpp-python, as a LangChain ``BaseChatModel``.

* :mod:`.prefix_cache` — block-aligned KV reuse rules and an LRU of saved KV states, so that
  alternating long prefixes skip re-evaluation and answers do not depend on call history;
* :mod:`.runtime` — the lazily loaded ``Llama`` per process per ``(path, n_ctx, n_threads)``,
  its lock and KV bookkeeping, closed at exit;
* :mod:`.messages` — what callers may pass as messages and the chat-template dicts;
* :mod:`.chat` — :class:`LlamaCppChatModel`: generation, streaming, m samples, next-token
  probabilities.
"""

from .chat import LlamaCppChatModel
from .messages import MessagesInput, to_messages
from .runtime import loaded_runtimes, runtime_stats

__all__ = ["LlamaCppChatModel", "MessagesInput", "loaded_runtimes", "runtime_stats", "to_messages"]
