"""The CLI checks its inputs before it loads any model, and says what is wrong in one line;
``-q`` also silences the model libraries' progress bars."""

from __future__ import annotations

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
