"""Adapters for LangChain (:mod:`.langchain`), LlamaIndex (:mod:`.llamaindex`) and
bring-your-own stores (:mod:`.external`, :mod:`.byo_langchain`, :mod:`.byo_llamaindex`);
nothing heavy is imported here."""
