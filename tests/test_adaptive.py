"""Adaptive-RAG: labels, classifiers, the router graph, the harness strategy and the CLI."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agent_fakes import Script, ScriptedChat
from typer.testing import CliRunner

from rag_complexity_agents.cli import app
from rag_complexity_agents.complexity.adaptive import labels as lab
from rag_complexity_agents.complexity.adaptive.base import best_label
from rag_complexity_agents.complexity.adaptive.classifier import (
    META_FILE,
    FineTunedClassifier,
    HeuristicClassifier,
    LLMZeroShotClassifier,
    TfidfClassifier,
    classifier_from_config,
    load_classifier,
)
from rag_complexity_agents.complexity.adaptive.head import (
    HEAD_FILE,
    EmbeddingHeadClassifier,
    fit_head,
)
from rag_complexity_agents.complexity.adaptive.router import (
    build_router_graph,
    decide_route,
    raise_only,
)
from rag_complexity_agents.complexity.adaptive.training import (
    train_classifier,
    validate_training_data,
)
from rag_complexity_agents.complexity.adaptive.zero_shot import parse_label_reply
from rag_complexity_agents.config import Config
from rag_complexity_agents.errors import ConfigError, InputError, ModelNotAvailable
from rag_complexity_agents.types import RunResult

TINY: list[tuple[str, str]] = [
    ("What is the capital of France?", "A"),
    ("Who wrote Romeo and Juliet?", "A"),
    ("How many days are in a week?", "A"),
    ("In what year did the Treaty of Ryswick get signed?", "B"),
    ("Which team won the 1987 Copa del Rey final?", "B"),
    ("What was the population of Tartu in 1897?", "B"),
    ("Who is the father of the director of the film Heat?", "C"),
    ("Which was founded earlier, Oxfam or Amnesty International?", "C"),
    ("Where was the founder of the company that makes the Walkman born?", "C"),
]


# --------------------------------------------------------------------------------------------
# Labels
# --------------------------------------------------------------------------------------------


def test_auto_label_prefers_the_simplest_correct_strategy() -> None:
    assert lab.auto_label({"A": True, "B": True, "C": True}, "C") == ("A", "outcome")
    assert lab.auto_label({"A": False, "B": True, "C": True}, "C") == ("B", "outcome")
    assert lab.auto_label({"A": False, "B": False, "C": True}, "B") == ("C", "outcome")
    assert lab.auto_label({"A": True, "B": False, "C": False}, "C") == ("A", "outcome")
    # nobody right: the dataset's inductive bias
    assert lab.auto_label({"A": False, "B": False, "C": False}, "B") == ("B", "bias")
    assert lab.auto_label({"A": False, "B": False, "C": False}, "C") == ("C", "bias")
    assert lab.auto_label({"A": None, "B": False}, None) == (None, "none")
    with pytest.raises(InputError):
        lab.auto_label({"D": True}, "B")


def test_bias_labels_of_the_shared_datasets() -> None:
    for name in ("squad", "nq_open", "triviaqa"):
        assert lab.bias_label(name) == "B"
    for name in ("musique", "2wikimultihopqa", "hotpotqa", "bamboogle"):
        assert lab.bias_label(name) == "C"
    assert lab.bias_label("my_own", hops=1) == "B"
    assert lab.bias_label("my_own", hops=3) == "C"
    assert lab.bias_label("my_own") is None


def _line(qid: str, dataset: str, cover: float, error: bool = False) -> dict[str, Any]:
    return {
        "id": qid,
        "dataset": dataset,
        "question": f"question {qid}?",
        "metrics": {"cover_em": cover, "em": cover, "f1": cover},
        "error": {"type": "Boom"} if error else None,
    }


def test_label_from_runs_uses_outcomes_then_bias_and_ignores_errors() -> None:
    runs = {
        "A": {"s1": _line("s1", "squad", 1.0), "m1": _line("m1", "musique", 0.0)},
        "B": {"s1": _line("s1", "squad", 1.0), "m1": _line("m1", "musique", 1.0, error=True)},
        "C": {"s1": _line("s1", "squad", 0.0), "m1": _line("m1", "musique", 0.0)},
    }
    runs["A"]["s2"] = _line("s2", "squad", 0.0)
    runs["B"]["s2"] = _line("s2", "squad", 0.0)
    runs["C"]["s2"] = _line("s2", "squad", 1.0)
    runs["A"]["x"] = _line("x", "unknown_set", 0.0)
    got = {item.id: (item.label, item.source) for item in lab.label_from_runs(runs)}
    assert got == {"s1": ("A", "outcome"), "m1": ("C", "bias"), "s2": ("C", "outcome")}


def test_labelled_file_round_trip_and_bad_lines(tmp_path: Path) -> None:
    items = [
        lab.LabelledQuestion("1", "squad", "Who?", "B", "bias", {"A": False}),
        lab.LabelledQuestion("2", "musique", "Where?", "C", "outcome", {"C": True}),
    ]
    path = lab.write_labels(items, tmp_path / "labels.jsonl")
    assert lab.read_labelled(path) == [("Who?", "B"), ("Where?", "C")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "Why?", "label": "D"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="not one of A, B, C"):
        lab.read_labelled(bad)
    with pytest.raises(InputError, match="does not exist"):
        lab.read_labelled(tmp_path / "missing.jsonl")


def test_collect_labels_runs_the_harness_with_registered_strategies(tmp_path: Path) -> None:
    """Real harness (run files, resume), scripted strategies: labels follow the outcomes."""
    from rag_complexity_agents.eval.adaptive import collect_labels
    from rag_complexity_agents.eval.strategies import register_strategy

    answers = {
        "fake_a": {"q1": "Paris", "q2": "nope", "q3": "nope"},
        "fake_b": {"q1": "Paris", "q2": "1697", "q3": "nope"},
        "fake_c": {"q1": "nope", "q2": "nope", "q3": "nope"},
    }
    calls: dict[str, int] = {}
    for name, table in answers.items():

        def build(parts: Any, table: dict[str, str] = table, name: str = name) -> Any:
            def run(question: str) -> RunResult:
                calls[name] = calls.get(name, 0) + 1
                qid = question.split(":")[0]
                return RunResult(table[qid], {"llm_calls": 1, "retrieval_calls": 0})

            return run

        register_strategy(name, build, uses_retrieval=False, replace=True)
    data = tmp_path / "tiny.jsonl"
    rows = [
        {"id": "q1", "dataset": "squad", "question": "q1: capital of France?", "answer": "Paris"},
        {"id": "q2", "dataset": "squad", "question": "q2: Ryswick year?", "answer": "1697"},
        {"id": "q3", "dataset": "musique", "question": "q3: nested?", "answer": "Oslo"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config = Config(corpus={"home": tmp_path / "home"}, eval={"llm_cache": False})
    strategies = {"A": "fake_a", "B": "fake_b", "C": "fake_c"}
    out, counts = collect_labels(
        config,
        [str(data)],
        tmp_path / "labels.jsonl",
        strategies=strategies,
        runs_dir=tmp_path / "runs",
        progress=False,
    )
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [(x["id"], x["label"], x["source"]) for x in lines] == [
        ("q1", "A", "outcome"),
        ("q2", "B", "outcome"),
        ("q3", "C", "bias"),
    ]
    assert counts["A"] == counts["B"] == counts["C"] == 1 and counts["bias"] == 1
    assert calls == {"fake_a": 3, "fake_b": 3, "fake_c": 3}
    collect_labels(  # resumable: finished questions are not answered again
        config, [str(data)], out, strategies=strategies, runs_dir=tmp_path / "runs", progress=False
    )
    assert calls == {"fake_a": 3, "fake_b": 3, "fake_c": 3}
    result = CliRunner().invoke(
        app,
        [
            "adaptive",
            "label",
            str(data),
            "--out",
            str(tmp_path / "cli_labels.jsonl"),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--c-strategy",
            "fake_c",
            "--quiet",
            "--set",
            "adaptive.a_strategy=fake_a",
            "--set",
            "adaptive.b_strategy=fake_b",
            "--set",
            "eval.llm_cache=false",
            "--set",
            f"corpus.home={tmp_path / 'home'}",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "A=1, B=1, C=1" in result.output
    assert calls == {"fake_a": 3, "fake_b": 3, "fake_c": 3}  # same run files, nothing rerun


# --------------------------------------------------------------------------------------------
# Classifiers
# --------------------------------------------------------------------------------------------


def test_bad_training_data_gives_clear_errors() -> None:
    with pytest.raises(InputError, match="no training data"):
        validate_training_data([])
    with pytest.raises(InputError, match="duplicate"):
        validate_training_data([("Who wrote Hamlet?", "A"), ("who wrote  hamlet?", "B")])
    with pytest.raises(InputError, match="two classes"):
        validate_training_data([("Q one?", "B"), ("Q two?", "B")])
    with pytest.raises(InputError, match="not one of"):
        validate_training_data([("Q one?", "B"), ("Q two?", "X")])
    with pytest.raises(InputError):
        train_classifier([], "/nonexistent/never-written")
    with pytest.raises(InputError, match="two classes"):
        TfidfClassifier.train([("Q one?", "C"), ("Q two?", "C")])


def test_missing_model_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelNotAvailable, match="rca adaptive train"):
        load_classifier(tmp_path / "nothing-here")
    config = Config(adaptive={"classifier": str(tmp_path / "nothing-here")})
    with pytest.raises(ModelNotAvailable):
        classifier_from_config(config)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / META_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelNotAvailable, match="not valid JSON"):
        load_classifier(tmp_path / "broken")


def _cross_entropy(probs: Sequence[dict[str, float]], pairs: Sequence[tuple[str, str]]) -> float:
    return -sum(math.log(max(p[y], 1e-9)) for p, (_, y) in zip(probs, pairs, strict=True)) / len(
        pairs
    )


def test_finetuning_lowers_the_loss_and_round_trips(tmp_path: Path) -> None:
    """The packaged MiniLM, a few real optimisation steps on CPU, save → load → predict."""
    report = train_classifier(
        TINY,
        tmp_path / "clf",
        epochs=4,
        learning_rate=3e-4,
        batch_size=3,
        max_length=24,
        seed=0,
        threads=1,
    )
    assert report.initial_loss is not None and len(report.epoch_losses) == 4
    assert report.epoch_losses[-1] < report.initial_loss
    assert report.label_counts == {"A": 3, "B": 3, "C": 3}
    meta = json.loads((tmp_path / "clf" / META_FILE).read_text(encoding="utf-8"))
    assert meta["labels"] == ["A", "B", "C"] and meta["max_length"] == 24
    loaded = load_classifier(tmp_path / "clf")
    assert isinstance(loaded, FineTunedClassifier)
    probs = loaded.predict_proba([q for q, _ in TINY])
    assert all(set(p) == {"A", "B", "C"} and abs(sum(p.values()) - 1) < 1e-4 for p in probs)
    # the saved weights are the trained ones: lower loss than the untrained head had
    assert _cross_entropy(probs, TINY) < report.initial_loss
    again = FineTunedClassifier(tmp_path / "clf").predict_proba([TINY[0][0]])
    assert again[0] == pytest.approx(probs[0], abs=1e-5)
    via_config = classifier_from_config(Config(adaptive={"model_dir": str(tmp_path / "clf")}))
    assert isinstance(via_config, FineTunedClassifier)


def test_fit_head_separates_two_labels() -> None:
    rng = np.random.default_rng(0)
    vectors = np.vstack([rng.normal(1.0, 0.3, (20, 4)), rng.normal(-1.0, 0.3, (20, 4))])
    head = fit_head(vectors, ["B"] * 20 + ["C"] * 20)
    clf = EmbeddingHeadClassifier(lambda: _Rows(vectors), {"embedding": "x", **head})
    labels = [best_label(p) for p in clf.predict_proba([str(i) for i in range(40)])]
    assert labels == ["B"] * 20 + ["C"] * 20
    with pytest.raises(InputError, match="at least two"):
        fit_head(vectors, ["B"] * 40)


class _Rows:
    """Hands out fixed rows, one per text ("0", "1", ...): the head's arithmetic alone."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.rows[[int(t) for t in texts]]


def test_the_shipped_head_routes_on_the_packaged_embedder(embedder: Any) -> None:
    """The router the package ships, on the real MiniLM: no training run, no LLM call."""
    config = Config()
    clf = classifier_from_config(config, embedder_factory=lambda: embedder)
    assert isinstance(clf, EmbeddingHeadClassifier) and clf.llm_calls_per_question == 0
    probs = clf.predict_proba(
        [
            "Who designed the Statue of Liberty?",
            "In which country was the director of the film Spirited Away born?",
        ]
    )
    assert [best_label(p) for p in probs] == ["B", "C"]
    assert all(p["A"] == 0.0 for p in probs)  # dataset-bias labels: never A
    with pytest.raises(ModelNotAvailable, match=r"models\.embedding"):
        EmbeddingHeadClassifier.shipped(lambda: embedder, "some/other-model", HEAD_FILE)
    with pytest.raises(ModelNotAvailable, match="needs the embedder"):
        classifier_from_config(Config(adaptive={"classifier": "head"}))


def test_tfidf_baseline_round_trips(tmp_path: Path) -> None:
    clf = TfidfClassifier.train(TINY)
    before = clf.predict_proba(["Who is the mother of the director of Jaws?"])
    clf.save(tmp_path / "tfidf", n=len(TINY))
    loaded = load_classifier(tmp_path / "tfidf")
    assert isinstance(loaded, TfidfClassifier)
    assert loaded.predict_proba(["Who is the mother of the director of Jaws?"]) == before
    assert best_label(before[0]) == "C"


def test_tfidf_is_saved_as_arrays_and_json_without_pickle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pickle

    questions = [q for q, _ in TINY] + ["Who is the mother of the director of Jaws?"]
    clf = TfidfClassifier.train(TINY, seed=3)
    before = clf.predict_proba(questions)
    target = clf.save(tmp_path / "tfidf", n=len(TINY))
    assert sorted(p.name for p in target.iterdir()) == [META_FILE, "tfidf.json", "tfidf.npz"]

    def no_pickle(*_: object, **__: object) -> object:
        raise AssertionError("the TF-IDF classifier must load without pickle")

    monkeypatch.setattr(pickle, "load", no_pickle)
    monkeypatch.setattr(pickle, "loads", no_pickle)
    loaded = TfidfClassifier.load(target)
    assert loaded.predict_proba(questions) == before
    assert [best_label(p) for p in loaded.predict_proba(questions)] == [
        best_label(p) for p in before
    ]
    # a binary model (two classes) round-trips too
    binary = TfidfClassifier.train([(q, "B" if y == "A" else y) for q, y in TINY])
    binary.save(tmp_path / "binary")
    assert load_classifier(tmp_path / "binary").predict_proba(questions) == binary.predict_proba(
        questions
    )
    (tmp_path / "binary" / "tfidf.npz").unlink()
    with pytest.raises(ModelNotAvailable, match=r"tfidf\.npz"):
        load_classifier(tmp_path / "binary")


def test_heuristic_separates_nested_questions() -> None:
    simple, nested = HeuristicClassifier().predict_proba(
        ["Who wrote Hamlet?", "Who is the spouse of the director of the film that won in 1998?"]
    )
    assert best_label(simple) == "B" and best_label(nested) == "C"


def test_zero_shot_reply_parsing_is_robust() -> None:
    assert parse_label_reply("B") == "B"
    assert parse_label_reply("**C** because it compares") == "C"
    assert parse_label_reply("The kind is A.") == "A"
    assert parse_label_reply("it needs several documents") == "C"
    assert parse_label_reply("") is None
    assert parse_label_reply("Banana") is None
    chat = ScriptedChat(script=Script(other=["C", "I cannot tell you that", "b)"]))
    clf = LLMZeroShotClassifier(chat)
    first, second, third = clf.predict_proba(["Q1?", "Who wrote Hamlet?", "Q3?"])
    assert best_label(first) == "C" and first["C"] == pytest.approx(0.8)
    assert (
        clf.fallbacks == 1
        and second == HeuristicClassifier().predict_proba(["Who wrote Hamlet?"])[0]
    )
    assert best_label(third) == "B"


def test_zero_shot_with_the_packaged_model_gives_a_distribution() -> None:
    """Real llama.cpp next-token probabilities (SmolLM2-135M), calibrated."""
    from rag_complexity_agents.components import Components

    config = Config(models={"chat": "llamacpp:smollm2-135m", "n_threads": 1})
    clf = LLMZeroShotClassifier(Components(config).chat)
    (probs,) = clf.predict_proba(["Who is the father of the director of the film Heat?"])
    assert set(probs) == {"A", "B", "C"} and abs(sum(probs.values()) - 1) < 1e-4
    assert all(0.0 <= p <= 1.0 for p in probs.values())


# --------------------------------------------------------------------------------------------
# Router
# --------------------------------------------------------------------------------------------


class FixedClassifier:
    name = "fixed"
    llm_calls_per_question = 1

    def __init__(self, probs: dict[str, float]) -> None:
        self.probs = probs

    def predict_proba(self, questions: Sequence[str]) -> list[dict[str, float]]:
        return [dict(self.probs) for _ in questions]


def _fake_strategies(log: list[str]) -> dict[str, Any]:
    def make(label: str, llm: int, retrieval: int) -> Any:
        def run(question: str) -> RunResult:
            log.append(label)
            evidence = [{"id": f"{label}-doc"}] if retrieval else []
            trace = {"llm_calls": llm, "retrieval_calls": retrieval, "evidence": evidence}
            return RunResult(f"answer from {label}", trace)

        return run

    return {"A": make("A", 1, 0), "B": make("B", 1, 1), "C": make("C", 5, 3)}


@pytest.mark.parametrize(
    ("probs", "route"),
    [
        ({"A": 0.7, "B": 0.2, "C": 0.1}, "A"),
        ({"A": 0.1, "B": 0.8, "C": 0.1}, "B"),
        ({"A": 0.1, "B": 0.2, "C": 0.7}, "C"),
    ],
)
def test_router_dispatches_each_class(probs: dict[str, float], route: str) -> None:
    from rag_complexity_agents.agents.run import run_graph

    log: list[str] = []
    graph = build_router_graph(FixedClassifier(probs), _fake_strategies(log))
    result = run_graph(graph, "Some question?")
    assert log == [route]
    assert result.answer == f"answer from {route}"
    trace = result.trace
    assert trace["route"] == trace["predicted"] == route and not trace["escalated"]
    assert trace["probabilities"] == probs
    expected_llm = {"A": 1, "B": 1, "C": 5}[route] + 1  # + the classifier's call
    assert trace["llm_calls"] == expected_llm
    assert trace["retrieval_calls"] == {"A": 0, "B": 1, "C": 3}[route]
    assert trace["strategy_trace"]["llm_calls"] == expected_llm - 1


def test_threshold_escalates_one_step() -> None:
    from rag_complexity_agents.agents.run import run_graph

    log: list[str] = []
    unsure_a = FixedClassifier({"A": 0.45, "B": 0.35, "C": 0.2})
    graph = build_router_graph(unsure_a, _fake_strategies(log), threshold=0.5)
    trace = run_graph(graph, "Q?").trace
    assert (trace["predicted"], trace["route"], trace["escalated"]) == ("A", "B", True)
    unsure_b = FixedClassifier({"A": 0.1, "B": 0.45, "C": 0.45 - 1e-3})
    trace = run_graph(
        build_router_graph(unsure_b, _fake_strategies(log), threshold=0.5), "Q?"
    ).trace
    assert (trace["predicted"], trace["route"]) == ("B", "C")
    sure = build_router_graph(
        FixedClassifier({"A": 0.9, "B": 0.05, "C": 0.05}), _fake_strategies(log), threshold=0.5
    )
    assert run_graph(sure, "Q?").trace["route"] == "A"
    assert log == ["B", "C", "A"]
    assert decide_route({"A": 0.2, "B": 0.2, "C": 0.3}, 0.9) == ("C", "C", False)
    with pytest.raises(ConfigError):
        decide_route({}, 1.5)


def test_route_hook_can_only_raise() -> None:
    from rag_complexity_agents.agents.run import run_graph

    log: list[str] = []

    def rrcp_like(question: str, route: str, probs: dict[str, float]) -> str:
        return "C" if "nested" in question else "A"

    graph = build_router_graph(
        FixedClassifier({"A": 0.1, "B": 0.8, "C": 0.1}),
        _fake_strategies(log),
        raise_route=rrcp_like,
    )
    assert run_graph(graph, "a nested one?").trace["raised_by"] == "rrcp_like"
    assert run_graph(graph, "a flat one?").trace["route"] == "B"  # lowering is ignored
    assert log == ["C", "B"]
    assert raise_only("B", "bogus") == "B"


def test_router_rejects_empty_questions_and_missing_strategies() -> None:
    from rag_complexity_agents.agents.run import run_graph

    graph = build_router_graph(FixedClassifier({"B": 1.0}), _fake_strategies([]))
    with pytest.raises(InputError):
        run_graph(graph, "   ")
    with pytest.raises(ConfigError, match="needs strategies"):
        build_router_graph(FixedClassifier({"B": 1.0}), {"A": lambda q: RunResult("", {})})


# --------------------------------------------------------------------------------------------
# Real end to end: harness strategy over the demo collection, packaged models
# --------------------------------------------------------------------------------------------


def test_adaptive_strategy_end_to_end_through_the_harness(
    demo_collection_config: Config, tmp_path: Path
) -> None:
    """``rca eval run --strategy adaptive`` path: real first stage, real SmolLM2 answer."""
    from rag_complexity_agents.eval.harness import evaluate
    from rag_complexity_agents.eval.runner import read_run
    from rag_complexity_agents.eval.strategies import get_strategy_spec

    assert get_strategy_spec("adaptive").name == "adaptive"
    config = demo_collection_config.with_overrides(
        {
            "models.chat": "llamacpp:smollm2-135m",
            "models.n_threads": 1,
            "models.max_tokens": 16,
            "adaptive.classifier": "heuristic",
            "eval.llm_cache": False,
        }
    )
    data = tmp_path / "one.jsonl"
    row = {
        "id": "s1",
        "dataset": "squad",
        "question": "Where was Hayao Miyazaki born?",
        "answer": "Tokyo",
    }
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    out = tmp_path / "run.jsonl"
    evaluate(config, "adaptive", data, out=out, progress=False)
    (line,) = read_run(out)
    assert line["error"] is None
    trace = line["trace"]
    assert trace["route"] == "B" and trace["route_strategy"] == "single_step"
    assert trace["llm_calls"] == 1 and trace["retrieval_calls"] == 1
    assert trace["evidence"] and trace["classifier"] == "heuristic"


def test_cli_train_and_predict(tmp_path: Path) -> None:
    runner = CliRunner()
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(json.dumps({"question": q, "label": y}) + "\n" for q, y in TINY), encoding="utf-8"
    )
    model = tmp_path / "tfidf"
    result = runner.invoke(
        app, ["adaptive", "train", str(labels), "--out", str(model), "--kind", "tfidf"]
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        app,
        [
            "adaptive",
            "predict",
            "Who is the father of the director of Heat?",
            "--classifier",
            str(model),
        ],
    )
    assert result.exit_code == 0, result.output
    row = json.loads(result.output.strip().splitlines()[-1])
    assert row["route"] in {"A", "B", "C"} and set(row["probabilities"]) == {"A", "B", "C"}
    result = runner.invoke(
        app, ["adaptive", "predict", "Q?", "--classifier", str(tmp_path / "none")]
    )
    assert result.exit_code == 2 and "rca adaptive train" in result.output
    dup = tmp_path / "dup.jsonl"
    dup.write_text(
        json.dumps({"question": "Q?", "label": "A"})
        + "\n"
        + json.dumps({"question": "Q?", "label": "B"})
        + "\n",
        encoding="utf-8",
    )
    result = runner.invoke(
        app, ["adaptive", "train", str(dup), "--out", str(tmp_path / "x"), "--kind", "tfidf"]
    )
    assert result.exit_code == 2 and "duplicate" in result.output


def test_router_runs_through_the_langchain_adapter() -> None:
    """The compiled router is 'any compiled graph' for the integrations."""
    from rag_complexity_agents.integrations.langchain import as_runnable

    log: list[str] = []
    graph = build_router_graph(
        FixedClassifier({"A": 0.1, "B": 0.2, "C": 0.7}), _fake_strategies(log)
    )
    out = as_runnable(graph).invoke({"question": "Who is the father of the director of Heat?"})
    assert out["answer"] == "answer from C" and out["trace"]["route"] == "C"
    assert log == ["C"]
