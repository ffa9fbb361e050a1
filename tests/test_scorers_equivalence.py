from __future__ import annotations

import numpy as np
import pytest

from rag_complexity_agents.errors import ConfigError, ModelNotAvailable
from rag_complexity_agents.models.equivalence import (
    EmbeddingEquivalence,
    LexicalEquivalence,
    load_equivalence,
)
from rag_complexity_agents.models.scorers import BiEncoderScorer, load_scorer
from rag_complexity_agents.types import Chunk

DOCS = [
    Chunk("a", "Spirited Away is a 2001 animated film directed by Hayao Miyazaki."),
    Chunk("b", "The Danube flows through Vienna, Budapest and Belgrade."),
    Chunk("c", "Paris is the capital and largest city of France."),
]


def test_bi_encoder_ranks_the_relevant_document_first(embedder) -> None:
    scorer = BiEncoderScorer(embedder)
    scores = scorer.score("Who directed Spirited Away?", DOCS)
    assert scores.shape == (3,) and int(np.argmax(scores)) == 0
    # stored vectors give the same scores as re-encoding
    stored = {d.id: v for d, v in zip(DOCS, embedder.encode([d.text for d in DOCS]), strict=True)}
    lookup = BiEncoderScorer(embedder, lambda ids: np.stack([stored[i] for i in ids]))
    np.testing.assert_allclose(lookup.score("Who directed Spirited Away?", DOCS), scores, rtol=1e-5)
    assert scorer.score("anything", []).shape == (0,)


def test_splade_scorer_is_real_and_lexical(embedder) -> None:
    scorer = load_scorer("splade", embedder=embedder)
    scores = scorer.score("capital of France", DOCS)
    assert int(np.argmax(scores)) == 2 and scores[2] > 0
    assert scores[1] < scores[2]


def test_unknown_or_missing_scorers(embedder) -> None:
    with pytest.raises(ConfigError, match="unknown scorer"):
        load_scorer("magic", embedder=embedder)
    with pytest.raises(ModelNotAvailable, match="not a local directory"):
        load_scorer("cross-encoder:/nonexistent/model", embedder=embedder)


def test_lexical_equivalence() -> None:
    eq = LexicalEquivalence()
    assert eq.equivalent("Hayao Miyazaki", "miyazaki")
    assert eq.equivalent("The United Kingdom", "united kingdom.")
    assert not eq.equivalent("Paris", "London")
    assert not eq.equivalent("", "London")


def test_embedding_equivalence(embedder) -> None:
    eq = EmbeddingEquivalence(embedder, threshold=0.8)
    assert eq.equivalent("USA", "usa")
    assert eq.equivalent("the United States of America", "United States")
    assert not eq.equivalent("Tokyo", "a river in Germany")


def test_equivalence_specs(embedder) -> None:
    with pytest.raises(ConfigError, match="unknown equivalence"):
        load_equivalence("bogus")
    with pytest.raises(ConfigError, match="needs a chat model"):
        load_equivalence("llm")
    with pytest.raises(ModelNotAvailable):
        load_equivalence("nli:/nonexistent")
    assert load_equivalence("embedding", embedder=embedder).name == "embedding"


def test_query_vectors_are_encoded_once_per_text(tmp_path) -> None:
    """NAR scores every batch against the same query and the dense first stage embeds it
    too: the embedder encodes each query text once, on one torch thread (torch's
    threads spin-wait on a busy machine), and leaves torch's thread count as it was."""
    torch = pytest.importorskip("torch")
    from rag_complexity_agents.models.embeddings import SentenceTransformerEmbedder

    class CountingModel:
        def __init__(self) -> None:
            self.texts: list[str] = []
            self.threads: list[int] = []

        def encode(self, texts: list[str], **_: object) -> np.ndarray:
            self.texts += texts
            self.threads.append(torch.get_num_threads())
            return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)

    embedder = SentenceTransformerEmbedder(tmp_path)
    model = CountingModel()
    embedder.__dict__["model"] = model  # the cached_property, without loading weights
    scorer = BiEncoderScorer(embedder, lambda ids: np.ones((len(ids), 2), dtype=np.float32))
    for batch in (DOCS[:2], DOCS[2:]):
        scorer.score("Who directed Spirited Away?", batch)
    vector = embedder.encode_query("Who directed Spirited Away?")
    assert model.texts == ["Who directed Spirited Away?"]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        embedder.encode_query("a new query")
        embedder.encode(["a document"])
        assert model.threads[-2:] == [1, 2] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    np.testing.assert_array_equal(vector, embedder.encode(["Who directed Spirited Away?"])[0])
    assert not vector.flags.writeable  # a shared cached vector cannot be changed by a caller
    embedder.QUERY_CACHE_SIZE = 1
    embedder.encode_query("another query")
    embedder.encode_query("Who directed Spirited Away?")  # evicted: encoded again
    assert model.texts.count("Who directed Spirited Away?") == 3


def test_one_thread_query_vectors_equal_the_batch_encoder(embedder) -> None:
    """The one-thread query path gives the multi-threaded encoder's vector up to float
    rounding (~1e-7: no top-20 ranking of 89 demo and MuSiQue queries changed)."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for query in ("Who directed Spirited Away?", "From which university did he graduate?"):
            np.testing.assert_allclose(
                embedder.encode_query(query), embedder.encode([query])[0], rtol=0, atol=1e-6
            )
    finally:
        torch.set_num_threads(threads)
