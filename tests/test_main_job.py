"""Index the demo corpus, then single-step RAG with the packaged LLM
(``--pipeline single_step``).

The README's main job (``make demo``: the default pipeline) runs end to end in
tests/test_agents_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_complexity_agents.agents.structured import weaker_model_note
from rag_complexity_agents.cli import app
from rag_complexity_agents.corpus.demo import load_demo_questions
from rag_complexity_agents.text import normalize_answer

runner = CliRunner()


@pytest.mark.llm
def test_index_demo_then_ask_with_the_packaged_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RCA_CORPUS__HOME", str(tmp_path))
    indexed = runner.invoke(app, ["index", "--demo", "--quiet"])
    assert indexed.exit_code == 0, indexed.output
    assert "154 documents" in indexed.output

    question = next(q for q in load_demo_questions() if q["id"] == "q23")
    result = runner.invoke(
        app, ["ask", question["question"], "--pipeline", "single_step", "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output[result.output.index("{") :])
    trace = payload["trace"]
    assert trace["llm_calls"] == 1 and trace["input_tokens"] > 100
    assert trace["notes"].count(weaker_model_note()) == 1  # the packaged 0.5B says so once
    evidence_docs = [e["doc_id"] for e in trace["evidence"]]
    assert set(question["supporting_ids"]) <= set(evidence_docs)
    answer = normalize_answer(payload["answer"])
    assert any(normalize_answer(gold) in answer for gold in question["answers"]), payload
