"""``rca eval`` end to end: corpus → run (single-step over a pooled collection) → report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_fakes import Prompt, ScriptedChat
from typer.testing import CliRunner

from rag_complexity_agents.cli import app
from rag_complexity_agents.eval.datasets import paragraph_id
from rag_complexity_agents.eval.report import build_report
from rag_complexity_agents.eval.runner import read_meta, read_run

runner = CliRunner()

QUESTIONS = [
    (
        "q1",
        "Who wrote the novel Emma?",
        "Jane Austen",
        ["Emma (novel)", "Emma is a novel by Jane Austen."],
    ),
    (
        "q2",
        "Which river flows through Vienna?",
        "Danube",
        ["Danube", "The Danube flows through Vienna and Budapest."],
    ),
    ("q3", "What is the capital of Japan?", "Tokyo", ["Tokyo", "Tokyo is the capital of Japan."]),
]
DISTRACTORS = [
    ["Persuasion", "Persuasion is a novel by Jane Austen published in 1817."],
    ["Rhine", "The Rhine flows through Basel and Cologne."],
]


def oracle(prompt: Prompt) -> str:
    """Answers with the title of the first passage in the prompt (or 'unknown')."""
    answer = "unknown"
    if "[1] " in prompt.last:
        answer = prompt.last.split("[1] ", 1)[1].split(":", 1)[0]
    return f"Answer: {answer}"


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    lines = []
    for qid, question, answer, (title, text) in QUESTIONS:
        paragraphs = [{"idx": 0, "title": title, "text": text, "is_supporting": True}]
        paragraphs += [
            {"idx": i + 1, "title": t, "text": x, "is_supporting": False}
            for i, (t, x) in enumerate(DISTRACTORS)
        ]
        record = {"id": qid, "dataset": "toy", "question": question, "answer": answer}
        lines.append(json.dumps({**record, "paragraphs": paragraphs}))
    path = tmp_path / "toy.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import rag_complexity_agents.models.chat as chat_module

    monkeypatch.setenv("RCA_CORPUS__HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RCA_MODELS__HOME", str(tmp_path / "models"))
    monkeypatch.setenv("RCA_GRAPH__K", "4")
    monkeypatch.setattr(chat_module, "load_chat_model", lambda *args: ScriptedChat(reply=oracle))
    return tmp_path


def test_corpus_run_resume_and_report(env: Path, toy: Path) -> None:
    built = runner.invoke(app, ["eval", "corpus", str(toy), "-c", "toy-pool", "-q"])
    assert built.exit_code == 0, built.output
    assert "9 paragraphs → 5 distinct" in built.output

    args = ["eval", "run", "-s", "single_step", "-d", str(toy), "-c", "toy-pool", "--k", "2"]
    first = runner.invoke(app, [*args, "--limit", "2", "-q"])
    assert first.exit_code == 0, first.output
    assert "2 answered now, 0 already done" in first.output
    runs = sorted((env / "home" / "runs").glob("*.jsonl"))
    assert len(runs) == 1 and runs[0].name.startswith("toy__single_step__")
    second = runner.invoke(app, [*args, "-q"])  # same settings → same file, resumed
    assert "1 answered now, 2 already done" in second.output

    lines = read_run(runs[0])
    assert [line["id"] for line in lines] == ["q1", "q2", "q3"]
    for line, (_, _, _, (title, text)) in zip(lines, QUESTIONS, strict=True):
        evidence = line["trace"]["evidence"]
        assert len(evidence) == 2 and all("doc_id" in item for item in evidence)
        assert line["retrieval"]["match"] == "id"
        gold = paragraph_id(title, text)
        assert line["supporting"]["ids"] == [gold]
        assert line["retrieval"]["recall@2"] == (
            1.0 if gold in {e["doc_id"] for e in evidence} else 0.0
        )
    assert read_meta(runs[0])["settings"]["answer.passages"] == 2
    assert read_meta(runs[0])["collection"] == "toy-pool"

    other = runner.invoke(app, [*args, "--k", "3", "-q"])  # other settings → another file
    assert other.exit_code == 0, other.output
    assert len(list((env / "home" / "runs").glob("*.jsonl"))) == 2
    clash = runner.invoke(app, [*args, "--k", "1", "-q", "--out", str(runs[0])])
    assert clash.exit_code == 2 and "other settings" in clash.output

    closed_book = env / "closed.jsonl"
    none = runner.invoke(
        app, ["eval", "run", "-s", "no_retrieval", "-d", str(toy), "-o", str(closed_book), "-q"]
    )
    assert none.exit_code == 0, none.output
    assert all(line["prediction"] == "unknown" for line in read_run(closed_book))

    md, js = env / "report.md", env / "report.json"
    report = runner.invoke(
        app,
        [
            "eval",
            "report",
            str(env / "home" / "runs"),
            str(closed_book),
            "--md",
            str(md),
            "--json",
            str(js),
        ],
    )
    assert report.exit_code == 0, report.output
    assert "cover-EM %" in report.output and "R@2 %" in report.output
    rows = json.loads(js.read_text())["rows"]
    assert len(rows) == 3 and md.read_text().startswith("| run |")
    closed = next(row for row in rows if row["strategy"] == "no_retrieval")
    assert closed["n"] == 3 and closed["answer"]["em"]["mean"] == 0.0
    assert closed["cost"]["retrieval_calls"]["mean"] == 0.0
    assert closed["retrieval"] == {}  # a strategy that does not retrieve has no evidence scores
    single = build_report([runs[0]])[0]
    assert single.n == 3 and single.errors == 0 and single.retrieval_n == 3
    assert single.cost["llm_calls"] is not None and single.cost["llm_calls"].mean == 1.0


def test_clean_errors(env: Path, toy: Path) -> None:
    unknown = runner.invoke(app, ["eval", "run", "-s", "nope", "-d", str(toy)])
    assert unknown.exit_code == 2 and "unknown strategy 'nope'" in unknown.output
    missing = runner.invoke(app, ["eval", "run", "-s", "no_retrieval", "-d", "nothere"])
    assert missing.exit_code == 2 and "neither a file nor a known dataset" in missing.output
    nocoll = runner.invoke(
        app, ["eval", "run", "-s", "single_step", "-d", str(toy), "-c", "nocoll"]
    )
    assert nocoll.exit_code == 2 and "collection 'nocoll' does not exist" in nocoll.output
    bad = runner.invoke(app, ["eval", "report", str(env / "missing.jsonl")])
    assert bad.exit_code == 2 and "does not exist" in bad.output
    listing = runner.invoke(app, ["eval", "list"])
    assert (
        listing.exit_code == 0 and "single_step" in listing.output and "musique" in listing.output
    )
