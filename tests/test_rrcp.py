"""RRCP: formulas on hand-made score matrices, calibration, evaluators, bad input, the CLI and
an end-to-end run on the demo collection with the packaged models."""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from agent_fakes import Script, ScriptedChat
from typer.testing import CliRunner

from rag_complexity_agents.cli import app
from rag_complexity_agents.complexity.rrcp import (
    RCResult,
    RetrievalComplexity,
    Scored,
    answerability,
    calibrate,
    classification_metrics,
    completeness,
    completeness_score,
    is_complex,
    normalized_entropy,
    predict,
    retrieval_complexity,
    rrcp_from_scores,
)
from rag_complexity_agents.complexity.rrcp_calibrate import load_labelled, write_thresholds
from rag_complexity_agents.complexity.rrcp_evaluators import (
    CrossEncoderAnswerEvaluator,
    LexicalAnswerEvaluator,
    LLMAnswerEvaluator,
    LLMComplexityClassifier,
    MaxSimTokenRelevance,
    load_answer_evaluator,
    yes_probability,
)
from rag_complexity_agents.complexity.rrcp_graph import build_rc_graph
from rag_complexity_agents.config import Config, load_config
from rag_complexity_agents.errors import ConfigError, InputError, ModelNotAvailable
from rag_complexity_agents.models.calls import parse_yes_no
from rag_complexity_agents.types import Chunk, ScoredDoc

runner = CliRunner()


# --------------------------------------------------------------------------------------------
# Formulas
# --------------------------------------------------------------------------------------------


def test_normalized_entropy_reference_values() -> None:
    assert normalized_entropy([1, 1, 1, 1]) == pytest.approx(1.0)
    assert normalized_entropy([0, 5, 0]) == pytest.approx(0.0)
    # p = (1/2, 1/4, 1/4): H = 1.5 ln 2, normalised by ln 3
    assert normalized_entropy([2, 1, 1]) == pytest.approx(1.5 * math.log(2) / math.log(3))
    # scale does not matter: rows are normalised to distributions
    assert normalized_entropy([0.2, 0.1, 0.1]) == pytest.approx(normalized_entropy([2, 1, 1]))


def test_normalized_entropy_edge_cases() -> None:
    assert normalized_entropy([0.7]) == 0.0  # one question token: defined as 0
    assert normalized_entropy([0.0, 0.0, 0.0]) == 1.0  # no mass: read as uniform
    with pytest.raises(InputError):
        normalized_entropy([])
    with pytest.raises(InputError):
        normalized_entropy([0.5, -0.1])
    with pytest.raises(InputError):
        normalized_entropy([0.5, float("nan")])


def test_answerability_threshold() -> None:
    assert answerability([0.1, 0.2], 0.15) == 1
    assert answerability([0.1, 0.14], 0.15) == 0
    assert answerability([0.15], 0.15) == 1  # the threshold itself counts as answerable
    assert answerability([], 0.15) == 0  # nothing retrieved: nothing answers


def test_completeness_score_is_mean_of_row_entropies() -> None:
    m = np.array([[1, 1, 1, 1], [1, 0, 0, 0], [2, 1, 1, 0]], dtype=float)
    s_d, rows = completeness_score(m)
    assert rows[0] == pytest.approx(1.0) and rows[1] == pytest.approx(0.0)
    assert rows[2] == pytest.approx(1.5 * math.log(2) / math.log(4))
    assert s_d == pytest.approx(np.mean(rows))
    assert completeness(s_d, 0.80) == 0 and completeness(s_d, 0.40) == 1
    assert completeness_score(np.zeros((0, 3))) == (1.0, [])


@pytest.mark.parametrize(
    ("ans", "com", "rrcp", "ans_only", "com_only"),
    [(0, 1, True, True, True), (0, 0, False, True, False), (1, 1, False, False, True),
     (1, 0, False, False, False)],
)  # fmt: skip
def test_decision_table(ans: int, com: int, rrcp: bool, ans_only: bool, com_only: bool) -> None:
    assert is_complex(ans, com) is rrcp
    assert is_complex(ans, com, "ans_only") is ans_only
    assert is_complex(ans, com, "com_only") is com_only
    with pytest.raises(InputError):
        is_complex(ans, com, "both")  # type: ignore[arg-type]


def test_rrcp_from_hand_made_scores() -> None:
    # no document answers (max s = 0.1 < 0.15); relevance spread evenly (S_D high) → complex
    scores = [0.05, 0.1, 0.02]
    flat = [[1, 1, 1], [1, 1, 0.9], [0.9, 1, 1]]
    result = rrcp_from_scores(scores, flat, doc_ids=["a", "b", "c"], question_tokens="xyz")
    assert (result.Ans, result.Com, result.complex) == (0, 1, True)
    assert result.max_s == pytest.approx(0.1) and result.S_D > 0.99
    assert all(sum(row) == pytest.approx(1.0) for row in result.relevance)
    assert len(result.entropies) == 3 and result.doc_ids == ("a", "b", "c")
    # one document answers → not complex, whatever the completeness
    answered = rrcp_from_scores([0.05, 0.9, 0.02], flat)
    assert (answered.Ans, answered.Com, answered.complex) == (1, 1, False)
    # concentrated relevance → Com = 0 → not complex
    peaked = rrcp_from_scores(scores, [[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    assert (peaked.Ans, peaked.Com, peaked.S_D, peaked.complex) == (0, 0, 0.0, False)
    # other thresholds, same scores, no model call
    moved = result.with_thresholds(0.05, 0.999)
    assert (moved.Ans, moved.Com, moved.complex, moved.T_ans) == (1, 1, False, 0.05)
    assert 0.0 <= result.score <= 1.0 and result.score > answered.score


def test_rrcp_result_round_trips_through_json() -> None:
    result = rrcp_from_scores([0.3, 0.1], [[1, 2], [3, 1]], question="q?", references=["r"])
    data = json.loads(json.dumps(result.to_dict()))
    again = RCResult.from_dict(data)
    assert again == result and data["score"] == pytest.approx(result.score)


def test_rrcp_from_scores_rejects_mismatched_shapes() -> None:
    with pytest.raises(InputError):
        rrcp_from_scores([0.1, 0.2], [[1, 1, 1]])
    with pytest.raises(InputError):
        rrcp_from_scores([0.1], [])
    with pytest.raises(InputError):
        answerability([0.1, float("inf")], 0.15)


def test_empty_retrieval_is_complex() -> None:
    result = rrcp_from_scores([], [])
    assert result.empty_retrieval and result.Ans == 0 and result.S_D == 1.0 and result.complex


# --------------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------------

LABELLED = [
    Scored(0.05, 0.90, True),
    Scored(0.10, 0.85, True),
    Scored(0.12, 0.60, True),
    Scored(0.95, 0.88, False),
    Scored(0.80, 0.50, False),
    Scored(0.11, 0.40, False),  # not answered, peaked: rrcp gets it, ans_only does not
]


def test_calibration_grid_search_finds_separating_thresholds() -> None:
    best = calibrate(LABELLED, "rrcp")
    predicted = predict(LABELLED, best.T_ans, best.T_com, "rrcp")
    assert best.f1 == pytest.approx(
        classification_metrics(predicted, [x.label for x in LABELLED])["f1"]
    )
    # both constraints separate the six; answerability alone misses the sixth item
    assert best.f1 == 1.0 and best.accuracy == 1.0 and best.n == 6
    assert 0.12 < best.T_ans <= 0.80 and 0.40 < best.T_com <= 0.60
    ans_only = calibrate(LABELLED, "ans_only")
    assert ans_only.T_com == 0.80  # not searched for ans_only
    assert 0.12 < ans_only.T_ans <= 0.80 and ans_only.accuracy == pytest.approx(5 / 6)
    separable = [Scored(0.1, 0.9, True), Scored(0.9, 0.9, False), Scored(0.1, 0.3, False)]
    exact = calibrate(separable, "rrcp")
    assert exact.f1 == 1.0 and exact.accuracy == 1.0
    assert 0.1 < exact.T_ans <= 0.9 and 0.3 < exact.T_com <= 0.9
    with pytest.raises(InputError):
        calibrate([], "rrcp")


def test_classification_metrics() -> None:
    m = classification_metrics([True, True, False, False], [True, False, True, False])
    assert m == {"accuracy": 0.5, "precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert classification_metrics([False], [False])["f1"] == 0.0


def test_write_thresholds_keeps_the_rest_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "rca.toml"
    path.write_text('collection = "notes"\n[rrcp]\nT_ans = 0.15\nk = 3\n[graph]\nk = 16\n')
    write_thresholds(path, 0.42, 0.61)
    data = tomllib.loads(path.read_text())
    assert data["collection"] == "notes" and data["graph"]["k"] == 16
    assert data["rrcp"] == {"T_ans": 0.42, "T_com": 0.61, "k": 3}
    cfg = load_config(path)
    assert (cfg.rrcp.T_ans, cfg.rrcp.T_com, cfg.rrcp.k) == (0.42, 0.61, 3)
    fresh = write_thresholds(tmp_path / "new.toml", 0.2, 0.7)
    assert tomllib.loads(fresh.read_text())["rrcp"] == {"T_ans": 0.2, "T_com": 0.7}
    bad = tmp_path / "bad.toml"
    bad.write_text("[rrcp\n")
    with pytest.raises(ConfigError):
        write_thresholds(bad, 0.2, 0.7)


def test_load_labelled_rejects_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "dev.jsonl"
    path.write_text('{"question": "q?", "answers": "a", "complex": 1}\n')
    (item,) = load_labelled(path)
    assert item.references == ("a",) and item.label is True and item.max_s is None
    for line in ('{"question": "q?"}', '{"question": "", "complex": 0}', "not json",
                 '{"question": "q?", "complex": "maybe"}'):  # fmt: skip
        path.write_text(line + "\n")
        with pytest.raises(InputError):
            load_labelled(path)
    with pytest.raises(InputError):
        load_labelled(tmp_path / "missing.jsonl")


def test_cli_calibrate_from_scored_lines(tmp_path: Path) -> None:
    dev = tmp_path / "dev.jsonl"
    dev.write_text(
        "\n".join(
            json.dumps({"question": f"q{i}?", "complex": x.label, "max_s": x.max_s, "S_D": x.S_D})
            for i, x in enumerate(LABELLED)
        )
    )
    out = tmp_path / "rca.toml"
    result = runner.invoke(app, ["rc", "calibrate", str(dev), "--out", str(out)])
    assert result.exit_code == 0, result.output
    expected = calibrate(LABELLED, "rrcp")
    section = tomllib.loads(out.read_text())["rrcp"]
    assert section["T_ans"] == pytest.approx(expected.T_ans, abs=1e-5)
    assert section["T_com"] == pytest.approx(expected.T_com, abs=1e-5)
    bad = runner.invoke(app, ["rc", "calibrate", str(dev), "--method", "xyz", "--dry-run"])
    assert bad.exit_code == 2 and "method" in bad.output


# --------------------------------------------------------------------------------------------
# Evaluators and bad input (no models)
# --------------------------------------------------------------------------------------------


def test_lexical_evaluator() -> None:
    lex = LexicalAnswerEvaluator()
    passages = [
        "Spirited Away was directed by Hayao Miyazaki.",
        "Miyazaki was born in Tokyo.",
        "Mount Fuji is in Japan.",
    ]
    s = lex.answer_scores(
        "Who directed Spirited Away?", ["Hayao Miyazaki", "Miyazaki Hayao"], passages
    )
    assert s.tolist() == [1.0, 0.5, 0.0]  # containment, half the tokens, nothing
    # yes/no answers and answers that are in the question say nothing about a passage
    comp = lex.answer_scores("Which is older, Tokyo or Kyoto?", ["Kyoto"], ["Kyoto is old."])
    assert comp.tolist() == [0.0]
    assert lex.answer_scores("Is Tokyo big?", ["yes"], ["yes, Tokyo is big"]).tolist() == [0.0]
    with pytest.raises(InputError):
        lex.answer_scores("Who directed Spirited Away?", [], passages)


def test_yes_probability_from_replies_of_other_chat_models() -> None:
    assert parse_yes_no("Yes, it does.") is True
    assert parse_yes_no("no") is False
    assert parse_yes_no("I cannot tell") is None
    assert yes_probability(ScriptedChat(script=Script(default="Yes.")), ["Q?"]) == 1.0
    assert yes_probability(ScriptedChat(script=Script(default="%%garbled%%")), ["Q?"]) == 0.5
    judge = LLMAnswerEvaluator(ScriptedChat(script=Script(other=["No", "Yes"])))  # in turn
    assert judge.answer_scores("q?", ["r"], ["p1", "p2"]).tolist() == [0.0, 1.0]


def test_evaluator_specs_and_missing_model_directory(tmp_path: Path) -> None:
    assert isinstance(load_answer_evaluator("lexical"), LexicalAnswerEvaluator)
    with pytest.raises(ConfigError):
        load_answer_evaluator("bert-score")
    with pytest.raises(ConfigError):
        load_answer_evaluator("llm")  # needs a chat model
    with pytest.raises(ModelNotAvailable):
        load_answer_evaluator(f"cross-encoder:{tmp_path / 'no-such-model'}")
    with pytest.raises(ModelNotAvailable):
        CrossEncoderAnswerEvaluator(tmp_path / "missing")


class _ListRetriever:
    def __init__(self, texts: Sequence[str]) -> None:
        self.docs = [ScoredDoc(Chunk(f"d{i}", t), 1.0 / (i + 1)) for i, t in enumerate(texts)]

    def search(self, query: str, k: int) -> list[ScoredDoc]:
        return self.docs[:k]


class _ConstantEvaluator:
    name = "constant"

    def answer_scores(self, question: str, references: Sequence[str], passages: Sequence[str]):
        return np.full(len(passages), 0.05)


@pytest.fixture(scope="module")
def maxsim() -> MaxSimTokenRelevance:
    from rag_complexity_agents.models.embeddings import load_embedder

    return MaxSimTokenRelevance(load_embedder("packaged:all-minilm-l6-v2"))


def test_pipeline_bad_input(maxsim: MaxSimTokenRelevance) -> None:
    # empty retrieval: defined as complex, no evaluator call
    empty = RetrievalComplexity(_ListRetriever([]), LexicalAnswerEvaluator(), maxsim)
    result = empty.score("Who directed Spirited Away?", ["Hayao Miyazaki"])
    assert result.empty_retrieval and result.complex and result.doc_ids == ()
    assert result.question_tokens == ("directed", "Spirited", "Away")
    texts = ["Paris is the capital of France.", "Lyon is a city in France."]
    # no references: the lexical evaluator refuses, a reference-free evaluator is flagged
    with pytest.raises(InputError):
        RetrievalComplexity(_ListRetriever(texts), LexicalAnswerEvaluator(), maxsim).score("Paris?")
    free = RetrievalComplexity(_ListRetriever(texts), _ConstantEvaluator(), maxsim)
    one = free.score("Paris?")
    # one question token: entropy defined as 0, so never complex by completeness
    assert one.reference_free and one.question_tokens == ("Paris",)
    assert one.entropies == (0.0, 0.0) and one.S_D == 0.0 and one.Com == 0 and not one.complex
    with pytest.raises(InputError):
        free.score("   ")
    with pytest.raises(InputError):
        RetrievalComplexity(_ListRetriever(texts), _ConstantEvaluator(), maxsim, T_ans=1.5)


def test_maxsim_relevance_follows_the_question_parts(maxsim: MaxSimTokenRelevance) -> None:
    words, m = maxsim.relevance(
        "Are lions bigger than tigers?",
        ["Lions live in prides in the African savanna.", "Tigers are striped cats of Asia."],
    )
    assert words == ["lions", "bigger", "tigers"]
    assert m.shape == (2, 3) and np.allclose(m.sum(axis=1), 1.0)
    assert m[0, 0] > m[0, 2] and m[1, 2] > m[1, 0]  # each passage leans to its own animal


# --------------------------------------------------------------------------------------------
# End to end on the demo collection, real packaged models
# --------------------------------------------------------------------------------------------


def _needs_model(name: str) -> None:
    pytest.importorskip("llama_cpp")
    from rag_complexity_agents.models.packaged import chat_model_installed

    if not chat_model_installed(name, Config().models.home):
        pytest.skip(f"the packaged chat model {name} is not installed")


def test_lexical_rrcp_on_the_demo_collection(demo_collection_config: Config) -> None:
    cfg = demo_collection_config.with_overrides({"rrcp.evaluator": "lexical", "rrcp.k": 3})
    simple = retrieval_complexity("Who directed Spirited Away?", ["Hayao Miyazaki"], config=cfg)
    assert len(simple.doc_ids) == 3 and simple.Ans == 1 and not simple.complex
    assert simple.evaluator == "lexical" and simple.relevance_method == "maxsim-minilm"
    assert len(simple.relevance[0]) == len(simple.question_tokens)


def test_cli_rc_score_json(demo_home: Path) -> None:
    result = runner.invoke(
        app,
        ["rc", "score", "Who directed Spirited Away?", "-r", "Hayao Miyazaki", "--evaluator",
         "lexical", "--k", "2", "--json", "--set", f"corpus.home={demo_home}", "-c", "demo"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # machine output is on stdout alone
    assert data["Ans"] == 1 and data["complex"] is False and len(data["answer_scores"]) == 2


def test_llm_rrcp_end_to_end_with_graph_node(demo_collection_config: Config) -> None:
    _needs_model("smollm2-135m")
    cfg = demo_collection_config.with_overrides(
        {"models.chat": "llamacpp:smollm2-135m", "models.n_threads": 1, "rrcp.k": 2,
         "rrcp.passage_chars": 300}
    )  # fmt: skip
    pipeline = RetrievalComplexity.from_config(cfg)
    question = (
        "What is the highest mountain in the country where the director of Spirited Away was born?"
    )
    result = pipeline.score(question, ["Mount Fuji"])
    assert result.evaluator == "llm" and len(result.answer_scores) == 2
    assert all(0.0 <= s <= 1.0 for s in result.answer_scores)
    assert result.Ans == answerability(result.answer_scores, result.T_ans)
    assert result.complex == is_complex(result.Ans, result.Com)
    graph = build_rc_graph(cfg, pipeline=pipeline)
    state = graph.invoke({"question": question, "references": ["Mount Fuji"]})
    rc = state["retrieval_complexity"]
    assert rc["answer_scores"] == pytest.approx(list(result.answer_scores), abs=1e-6)
    assert rc["complex"] == result.complex
    p = LLMComplexityClassifier(pipeline.evaluator.chat).probability(question)
    assert 0.0 <= p <= 1.0
