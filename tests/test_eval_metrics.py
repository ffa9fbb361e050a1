"""Answer and retrieval metrics against hand-computed cases."""

from __future__ import annotations

import math

import pytest

from rag_complexity_agents.eval.metrics import (
    answer_scores,
    cover_em,
    evidence_ranking,
    exact_match,
    mean_ci,
    ndcg_at_k,
    recall_at_k,
    retrieval_scores,
    substring_match,
    token_f1,
)
from rag_complexity_agents.text import normalize_answer


def test_squad_normalisation() -> None:
    assert normalize_answer("The  Beatles!") == "beatles"
    assert normalize_answer("An apple, a PEAR.") == "apple pear"
    assert normalize_answer("  ") == ""
    assert normalize_answer("Café") == "café"  # accents stay (as in SQuAD)


def test_exact_match_uses_normalisation_and_aliases() -> None:
    assert exact_match("the Beatles.", ["Beatles"]) == 1.0
    assert exact_match("Beatles band", "Beatles") == 0.0
    assert exact_match("NYC", ["New York City", "NYC"]) == 1.0  # an alias matches
    assert exact_match(None, ["x"]) == 0.0


def test_token_f1_hand_computed() -> None:
    # pred {barack, obama, jr}, gold {obama}: P = 1/3, R = 1 → F1 = 2·(1/3)/(4/3) = 0.5
    assert token_f1("Barack Obama Jr", ["Obama"]) == pytest.approx(0.5)
    # max over aliases: "new york" gives P = 2/3, R = 1 → 0.8; "nyc" gives 0
    assert token_f1("New York City", ["NYC", "New York"]) == pytest.approx(0.8)
    # repeated tokens count with multiplicity: common {y: 2} → P = R = 2/3
    assert token_f1("x y y", ["y y z"]) == pytest.approx(2 / 3)
    assert token_f1("completely wrong", ["Paris"]) == 0.0


def test_cover_em_and_acc_differ_at_word_boundaries() -> None:
    assert cover_em("He was born in Paris, France.", ["Paris"]) == 1.0
    assert substring_match("He was born in Paris, France.", ["Paris"]) == 1.0
    assert cover_em("Norway", ["no"]) == 0.0  # "no" is not a word of the prediction
    assert substring_match("Norway", ["no"]) == 1.0  # but it is a substring (Adaptive-RAG Acc)
    assert cover_em("the answer is new york city", ["New York"]) == 1.0
    assert cover_em("york new", ["New York"]) == 0.0  # a contiguous run, in order
    assert cover_em("1969", ["11969"]) == 0.0
    assert cover_em("It was James Madison.", ["george washington", "james madison"]) == 1.0


def test_empty_predictions_and_empty_gold() -> None:
    for prediction in ("", "   ", None, "the"):  # all normalise to the empty string
        scores = answer_scores(prediction, ["Paris"])
        assert scores == {"cover_em": 0.0, "em": 0.0, "f1": 0.0, "acc": 0.0}
    # a gold answer that normalises to "" is matched only by an empty prediction
    assert answer_scores("", ["The"]) == {"cover_em": 1.0, "em": 1.0, "f1": 1.0, "acc": 1.0}
    assert answer_scores("Paris", ["The"]) == {"cover_em": 0.0, "em": 0.0, "f1": 0.0, "acc": 0.0}
    assert answer_scores("Paris", []) == {"cover_em": 0.0, "em": 0.0, "f1": 0.0, "acc": 0.0}


def test_answer_scores_takes_the_best_alias_per_metric() -> None:
    scores = answer_scores("Cassini division", ["Cassini's Division", "Cassini gap"])
    # "cassinis division" vs "cassini division": no exact match; F1 against "cassini gap" is
    # P = 1/2, R = 1/2 → 0.5, against "cassinis division" P = R = 1/2 → 0.5
    assert scores["em"] == 0.0
    assert scores["f1"] == pytest.approx(0.5)
    assert scores["cover_em"] == 0.0


def test_recall_and_ndcg_hand_computed() -> None:
    ranking = ["a", "b", "c"]
    relevant = {"a", "c"}
    assert recall_at_k(ranking, relevant, 1) == 0.5
    assert recall_at_k(ranking, relevant, 2) == 0.5
    assert recall_at_k(ranking, relevant, 3) == 1.0
    # DCG = 1/log2(2) + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3)
    assert ndcg_at_k(ranking, relevant, 10) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(["a", "c"], relevant, 10) == pytest.approx(1.0)
    assert recall_at_k(ranking, set(), 5) == 0.0 and ndcg_at_k(ranking, set(), 10) == 0.0


def test_retrieval_scores_dedupe_paragraphs_and_pick_the_matching() -> None:
    pa, pb, pc = "p" + "a" * 16, "p" + "b" * 16, "p" + "c" * 16
    evidence = [
        {"id": "chunk1", "doc_id": pa, "title": "Alpha"},
        {"id": "chunk2", "doc_id": pa, "title": "Alpha"},  # a second chunk of the same paragraph
        {"id": "chunk3", "doc_id": pb, "title": "Beta"},
        {"id": "chunk4", "doc_id": pc, "title": "Gamma"},
    ]
    assert evidence_ranking(evidence, by="id") == [pa, pb, pc]
    by_id = retrieval_scores(evidence, supporting_ids=[pa, pc], supporting_titles=["Alpha"])
    assert by_id is not None and by_id["match"] == "id"
    assert by_id["recall@2"] == 0.5 and by_id["recall@5"] == 1.0 and by_id["recall"] == 1.0
    assert by_id["evidence_paragraphs"] == 3 and by_id["gold_paragraphs"] == 2
    # without pooled ids the titles are compared (case-insensitively)
    plain = [{"id": "x1", "title": "beta"}, {"id": "x2", "title": "ALPHA"}]
    by_title = retrieval_scores(plain, supporting_ids=[pa], supporting_titles=["Alpha", "Delta"])
    assert by_title is not None and by_title["match"] == "title"
    assert by_title["recall@2"] == 0.5 and recall_at_k(["beta", "alpha"], {"alpha"}, 1) == 0.0
    assert by_title["ndcg@10"] == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    # no evidence: zero recall, still scored; no gold: None
    empty = retrieval_scores([], supporting_ids=[pa])
    assert empty is not None and empty["recall@10"] == 0.0 and empty["ndcg@10"] == 0.0
    assert retrieval_scores(evidence) is None


def test_mean_ci() -> None:
    assert mean_ci([]) is None
    constant = mean_ci([1.0, 1.0, 1.0])
    assert constant is not None and (constant.mean, constant.lo, constant.hi) == (1.0, 1.0, 1.0)
    est = mean_ci([0.0, 1.0] * 20, seed=1)
    assert est is not None and est.mean == 0.5 and est.n == 40
    assert 0.3 < est.lo < 0.5 < est.hi < 0.7
    assert mean_ci([0.0, 1.0] * 20, seed=1) == est  # reproducible
