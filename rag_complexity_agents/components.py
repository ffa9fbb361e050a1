"""The one place that wires things together: the runtime components (store, retrievers,
models) built from one Config, lazily, and the SUNAR retriever and ASU hook built from them."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from .config import Config, NARParams
from .corpus.store import CorpusStore
from .errors import ConfigError, CorpusError
from .models.base import Embedder, Equivalence, Scorer
from .models.embeddings import SentenceTransformerEmbedder, as_embedder, load_embedder
from .models.equivalence import load_equivalence
from .models.scorers import load_scorer
from .retrieval.asu import AnswerSemanticUncertainty
from .retrieval.first_stage import FirstStage, make_first_stage
from .retrieval.nar import BatchHook
from .retrieval.sunar import MissingGraph, NeighbourGraph, ScoreFn, SunarRetriever

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


INJECTABLE = ("chat", "embedder", "scorer", "equivalence", "first_stage")
"""The components a caller may hand in instead of having them built from the config."""


class Components:
    """Everything a strategy needs, created on first use and shared afterwards.

    Objects passed to the constructor (or :meth:`inject`) are used instead of the ones the
    config's specs name: ``chat`` any LangChain ``BaseChatModel``; ``embedder`` an
    :class:`~.models.base.Embedder`, a LangChain ``Embeddings`` or a LlamaIndex
    ``BaseEmbedding``; ``scorer`` a :class:`~.models.base.Scorer`; ``equivalence`` an
    :class:`~.models.base.Equivalence`; ``first_stage`` a
    :class:`~.retrieval.first_stage.FirstStage`. A collection keeps the embedder it was
    indexed with (``models.embedding``) for its own vectors and the bi-encoder scorer.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        chat: BaseChatModel | None = None,
        embedder: Any = None,
        scorer: Scorer | None = None,
        equivalence: Equivalence | None = None,
        first_stage: FirstStage | None = None,
    ) -> None:
        self.config = config or Config()
        self.injected: frozenset[str] = frozenset()
        self.inject(
            chat=chat,
            embedder=embedder,
            scorer=scorer,
            equivalence=equivalence,
            first_stage=first_stage,
        )

    def inject(self, **objects: Any) -> None:
        """Use the given objects (names from :data:`INJECTABLE`; None leaves one as it is)
        instead of building them from the config."""
        unknown = set(objects) - set(INJECTABLE)
        if unknown:
            raise ConfigError(
                f"cannot inject {', '.join(sorted(unknown))}; injectable: {', '.join(INJECTABLE)}"
            )
        given = {name: obj for name, obj in objects.items() if obj is not None}
        if "embedder" in given:
            given["embedder"] = as_embedder(given["embedder"])
        vars(self).update(given)
        self.injected = self.injected | set(given)

    @cached_property
    def store(self) -> CorpusStore:
        return CorpusStore.open(self.config.collection, self.config)

    @cached_property
    def embedder(self) -> Embedder:
        return load_embedder(
            self.config.models.embedding, batch_size=self.config.models.embed_batch_size
        )

    def local_embedder(self) -> SentenceTransformerEmbedder:
        """The embedder as a sentence-transformers model, for the features that read its
        tokenizer (RRCP's token relevance, GRADE's chunking); ConfigError for an injected
        embedding object."""
        embedder = self.embedder
        if not isinstance(embedder, SentenceTransformerEmbedder):
            raise ConfigError(
                "this feature needs a sentence-transformers embedder (models.embedding), not "
                f"the injected {type(embedder).__name__}"
            )
        return embedder

    @cached_property
    def first_stage(self) -> FirstStage:
        return make_first_stage(self.store, self.config.retrieval)

    @cached_property
    def chat(self) -> BaseChatModel:
        # LangChain's chat-model stack (seconds to import) loads with the first chat model
        from .models.chat import load_chat_model

        return load_chat_model(self.config.models.chat, self.config.models, self.config.models.home)

    def owns_chat(self) -> bool:
        """Whether the chat model in use (if one was made) came from ``models.*`` rather than
        from the caller (a fake, a model configured by hand)."""
        from .models.chat import built_from_spec  # deferred like load_chat_model

        return built_from_spec(vars(self).get("chat"))

    @cached_property
    def scorer(self) -> Scorer:
        store = self.store
        return load_scorer(
            self.config.models.scorer, embedder=store.embedder, vector_lookup=store.vectors
        )

    @cached_property
    def equivalence(self) -> Equivalence:
        spec = self.config.models.equivalence
        return load_equivalence(
            spec,
            embedder=self.embedder if spec == "embedding" else None,
            chat=self.chat if spec == "llm" else None,
            cosine_threshold=self.config.models.embedding_cosine_threshold,
        )

    def answer_uncertainty(self) -> AnswerSemanticUncertainty:
        """A new ASU batch hook from ``asu.*`` with these components' chat model and
        equivalence."""
        a = self.config.asu
        return AnswerSemanticUncertainty(
            self.equivalence,
            chat=self.chat,
            m=a.m,
            temperature=a.temperature,
            max_tokens=a.max_tokens,
            rule=a.rule,
            rescore_mode=a.rescore,
            max_passage_chars=a.max_passage_chars,
            seed=self.config.models.seed,
        )

    def sunar_retriever(
        self,
        *,
        with_asu: bool | None = None,
        asu: BatchHook | None = None,
        params: NARParams | None = None,
        missing_graph: MissingGraph | None = None,
    ) -> SunarRetriever:
        """A SunarRetriever over these components' store, first stage and scorer. ASU is
        ``asu`` if given, else a new hook when ``with_asu`` (default: ``asu.enabled``);
        ``params`` / ``missing_graph`` replace those of ``nar.*``."""
        enabled = self.config.asu.enabled if with_asu is None else with_asu
        return sunar_retriever(
            self.store,
            self.config,
            first_stage=self.first_stage,
            scorer=self.scorer,
            asu=asu if asu is not None else (self.answer_uncertainty() if enabled else None),
            params=params,
            missing_graph=missing_graph,
        )


def sunar_retriever(
    store: CorpusStore,
    config: Config,
    *,
    first_stage: FirstStage | None = None,
    scorer: Scorer | ScoreFn | None = None,
    asu: BatchHook | None = None,
    params: NARParams | None = None,
    missing_graph: MissingGraph | None = None,
) -> SunarRetriever:
    """A SunarRetriever over a collection, from the config's ``retrieval`` / ``nar`` sections
    (``params`` / ``missing_graph`` replace those of ``nar``)."""
    if len(store) == 0:
        raise CorpusError(
            f"collection {store.name!r} is empty; add documents with rca index PATH "
            f"--collection {store.name}"
        )
    graph: NeighbourGraph | None
    graph_error = None
    try:
        graph = store.graph
    except CorpusError as exc:
        graph, graph_error = None, str(exc).rstrip(".")
    nar = config.nar
    return SunarRetriever(
        first_stage or make_first_stage(store, config.retrieval),
        scorer
        or load_scorer(config.models.scorer, embedder=store.embedder, vector_lookup=store.vectors),
        graph,
        store.chunk,
        params=params or NARParams(b=nar.b, c=nar.c, neighbours_per_doc=nar.neighbours_per_doc),
        first_stage_k=config.retrieval.first_stage_k,
        pool=nar.pool,
        asu=asu,
        missing_graph=missing_graph or nar.missing_graph,
        graph_error=graph_error,
        collection_size=len(store),
        rrf_k=config.retrieval.rrf_k,
        default_k=config.retrieval.k,
    )
