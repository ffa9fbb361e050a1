"""Builds the runtime components (store, retrievers, models) from one Config, lazily."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from .config import Config
from .corpus.store import CorpusStore
from .models.base import Equivalence, Scorer
from .models.embeddings import SentenceTransformerEmbedder, load_embedder
from .retrieval.first_stage import FirstStage, make_first_stage

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


class Components:
    """Everything a strategy needs, created on first use and shared afterwards."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()

    @cached_property
    def store(self) -> CorpusStore:
        return CorpusStore.open(self.config.collection, self.config)

    @cached_property
    def embedder(self) -> SentenceTransformerEmbedder:
        return load_embedder(
            self.config.models.embedding, batch_size=self.config.models.embed_batch_size
        )

    @cached_property
    def first_stage(self) -> FirstStage:
        return make_first_stage(self.store, self.config.retrieval)

    @cached_property
    def chat(self) -> BaseChatModel:
        from .models.chat import load_chat_model

        return load_chat_model(self.config.models.chat, self.config.models, self.config.models.home)

    @cached_property
    def scorer(self) -> Scorer:
        from .models.scorers import load_scorer

        store = self.store
        return load_scorer(
            self.config.models.scorer, embedder=store.embedder, vector_lookup=store.vectors
        )

    @cached_property
    def equivalence(self) -> Equivalence:
        from .models.equivalence import load_equivalence

        spec = self.config.models.equivalence
        return load_equivalence(
            spec,
            embedder=self.embedder if spec == "embedding" else None,
            chat=self.chat if spec == "llm" else None,
            cosine_threshold=self.config.models.embedding_cosine_threshold,
        )
