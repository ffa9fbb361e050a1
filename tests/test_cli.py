"""The rca command line, run in-process with typer's runner (real models, temporary home)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_complexity_agents.cli import app

runner = CliRunner()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RCA_CORPUS__HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RCA_GRAPH__K", "8")
    return tmp_path / "home"


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "emma.txt").write_text("Emma is a novel by Jane Austen, published in 1815.")
    (folder / "danube.md").write_text("The Danube flows through Vienna, Budapest and Belgrade.")
    (folder / "tokyo.txt").write_text("Tokyo is the capital of Japan.")
    return folder


def run(*args: str, input: str | None = None):
    return runner.invoke(app, list(args), input=input)


def test_index_is_idempotent_and_info_reports_it(home: Path, notes: Path) -> None:
    first = run("index", str(notes), "-c", "notes", "-q")
    assert first.exit_code == 0, first.output
    assert "added 3, already present 0; 3 chunks stored" in first.output
    again = run("index", str(notes), "-c", "notes", "-q")
    assert "added 0, already present 3; 3 chunks stored" in again.output
    info = run("info", "--json")
    assert info.exit_code == 0, info.output
    report = json.loads(info.output)
    stats = report["collections"]["notes"]
    assert stats["rows"] == 3 and stats["graph"]["rows"] == 3
    assert any(m["name"] == "all-minilm-l6-v2" and m["installed"] for m in report["models"])
    assert report["config"]["chat"] == "auto (qwen2.5-0.5b)"  # what auto picks (the suite's pin)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("index", "/nonexistent/dir", "-c", "notes"), "does not exist"),
        (("index", "-c", "notes"), "give either a PATH"),
        (("ask", "Who wrote Emma?", "-c", "nothere"), "collection 'nothere' does not exist"),
        (("ask", "Who wrote Emma?", "-c", "nothere"), "rca index --demo --collection nothere"),
        (("ask", "   ", "-c", "notes"), "the question is empty"),
        (("ask", "x" * 1_000_000, "-c", "notes"), "1,000,000 characters long"),
        (("ask", "Who?", "--set", "graph.k"), "--set expects key=value"),
        (("ask", "Who?", "--set", "graph.nope=3"), "unknown config key"),
    ],
)
def test_bad_input_gives_one_clear_line(home: Path, args: tuple[str, ...], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_empty_directory_and_binary_file(home: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run("index", str(empty), "-c", "empty")
    assert result.exit_code == 2 and "contains no" in result.output
    (empty / "photo.txt").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00")
    result = run("index", str(empty), "-c", "empty")
    assert result.exit_code == 2 and "binary" in result.output


def test_unknown_model_spec_and_ollama_down(home: Path, notes: Path) -> None:
    assert run("index", str(notes), "-c", "notes", "-q").exit_code == 0
    bad = run("ask", "Who wrote Emma?", "-c", "notes", "--model", "gpt:9")
    assert bad.exit_code == 2 and "unknown chat model spec" in bad.output.lower()
    down = run(
        "ask",
        "Who wrote Emma?",
        "-c",
        "notes",
        "--model",
        "ollama:llama3.2",
        "--set",
        "models.ollama_host=http://127.0.0.1:9",
    )
    assert down.exit_code == 2
    assert "127.0.0.1:9" in down.output and "ollama serve" in down.output
