"""Adapters for LangChain (:mod:`.langchain`), LlamaIndex (:mod:`.llamaindex`) and
bring-your-own stores (:mod:`.byo`); nothing heavy is imported here."""
