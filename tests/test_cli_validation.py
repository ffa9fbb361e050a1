"""The CLI checks its inputs before it loads any model, and says what is wrong in one line;
``-q`` also silences the model libraries' progress bars."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rag_complexity_agents.cli import app
from rag_complexity_agents.models.embeddings import SentenceTransformerEmbedder

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]


class ModelLoaded(AssertionError):
    """Raised by the patched loaders: a model was about to load."""


@pytest.fixture
def no_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary home with one indexed-looking file, and model loaders that fail."""

    def fail(*_: Any, **__: Any) -> Any:
        raise ModelLoaded("a model was loaded before the input was checked")

    monkeypatch.setenv("RCA_CORPUS__HOME", str(tmp_path / "home"))
    monkeypatch.setattr(SentenceTransformerEmbedder, "model", property(fail))
    monkeypatch.setattr("rag_complexity_agents.models.chat.load_chat_model", fail)
    notes = tmp_path / "notes.txt"
    notes.write_text("Emma is a novel by Jane Austen.", encoding="utf-8")
    return notes


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("index", "/nonexistent/notes.txt", "-c", "notes"), "does not exist"),
        (("index", "{notes}", "-c", "a/b"), "invalid collection name 'a/b'"),
        (("index", "{notes}", "-c", "x" * 300), "(300 characters)"),
        (("ask", "   ", "-c", "notes"), "the question is empty"),
        (("ask", "Who wrote Emma?", "-c", "a/b"), "use 3–100 characters"),
        (("ask", "Who wrote Emma?", "-c", "nothere"), "collection 'nothere' does not exist"),
        (
            ("ask", "Who wrote Emma?", "--retrieval", "bogus"),
            "knob retrieval: Input should be 'none', 'first_stage', 'rerank', 'nar' or 'sunar' "
            "(got 'bogus')",
        ),
        (
            ("ask", "Who?", "--set", "nar.b=0"),
            "nar.b: Input should be greater than or equal to 1 (got 0)",
        ),
        (("ask", "Who?", "--set", "corpus.chunk_size=x"), "corpus.chunk_size: Input should be"),
    ],
)
def test_bad_input_fails_in_one_line_before_any_model_loads(
    no_models: Path, args: tuple[str, ...], message: str
) -> None:
    result = runner.invoke(app, [a.format(notes=no_models) for a in args])
    assert not isinstance(result.exception, ModelLoaded), result.output
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert "errors.pydantic.dev" not in result.output


def test_quiet_index_hides_the_loading_weights_bar(tmp_path: Path) -> None:
    """In a fresh process (the bar shows only when the model loads): without -q the bar is
    printed, with -q it is not."""
    notes = tmp_path / "notes.txt"
    notes.write_text("Emma is a novel by Jane Austen.", encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "RCA_CORPUS__HOME": str(tmp_path / "home"),
        "RCA_GRAPH__K": "4",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    env.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)
    command = [sys.executable, "-m", "rag_complexity_agents.cli", "index", str(notes)]
    loud = subprocess.run([*command, "-c", "loud"], env=env, capture_output=True, text=True)
    quiet = subprocess.run([*command, "-c", "quiet", "-q"], env=env, capture_output=True, text=True)
    assert loud.returncode == 0 and quiet.returncode == 0, loud.stderr + quiet.stderr
    assert "Loading weights" in loud.stderr
    assert "Loading weights" not in quiet.stderr + quiet.stdout


def _snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``directory`` with its size and modification time."""
    return {
        str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_bad_input_after_a_full_batch_leaves_the_collection_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad record after the first ingest batch, a symbolic link loop: one line naming the
    file (and line), exit code 2, and not a byte of the collection changed."""
    monkeypatch.setenv("RCA_CORPUS__HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RCA_GRAPH__K", "4")
    notes = tmp_path / "notes.txt"
    notes.write_text("Emma is a novel by Jane Austen.", encoding="utf-8")
    assert runner.invoke(app, ["index", str(notes), "-c", "notes", "-q"]).exit_code == 0
    collection = tmp_path / "home" / "collections" / "notes"
    before = _snapshot(collection)
    good = "".join(
        json.dumps({"id": f"d{i}", "text": f"Entry {i} is about river number {i}."}) + "\n"
        for i in range(300)
    )
    cases = {
        '{"text": "t", "metadata": {"": 1}}': "bad.jsonl:301: metadata key ''",
        '{"text": "t", "#x": 1}': "bad.jsonl:301: metadata key '#x'",
        '{"text": "t", "metadata": {"$x": 1}}': "bad.jsonl:301: metadata key '$x'",
        '{"text": "t", "metadata": [1, 2, 3]}': "bad.jsonl:301: 'metadata' must be",
        '{"text": "t", "m": ' + "[" * 100_000 + "]" * 100_000 + "}": "bad.jsonl:301: JSON nested",
    }
    bad = tmp_path / "bad.jsonl"
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "x.txt").symlink_to(loop / "x.txt")
    runs = [([str(bad)], message, line) for line, message in cases.items()]
    runs.append(([str(loop)], "x.txt: a symbolic link loop", ""))
    for args, message, line in runs:
        bad.write_text(good + line + "\n", encoding="utf-8")
        result = runner.invoke(app, ["index", *args, "-c", "notes", "-q"])
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and message in lines[0], result.output
        assert _snapshot(collection) == before  # half_written: 0


def test_unexpected_errors_are_one_line_unless_debugging(
    no_models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise TypeError("something nobody expected\nsecond line")

    monkeypatch.setattr("rag_complexity_agents.corpus.documents.iter_documents", broken)
    monkeypatch.delenv("RCA_DEBUG", raising=False)
    result = runner.invoke(app, ["index", str(no_models), "-c", "notes"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert lines[0].startswith("error: unexpected TypeError: something nobody expected")
    assert "--debug" in lines[0] and "Traceback" not in result.output
    for args, env in ((["--debug"], {}), ([], {"RCA_DEBUG": "1"})):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        result = runner.invoke(app, [*args, "index", str(no_models), "-c", "notes"])
        assert isinstance(result.exception, TypeError)
        os.environ.pop("RCA_DEBUG", None)  # --debug sets it in this process
