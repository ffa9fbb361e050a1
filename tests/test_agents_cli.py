"""``rca ask`` with the pipelines: the default, the readable trace, --json, --stream, knobs,
single-step and bad input — with a scripted fake chat model in place of the packaged one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_fakes import Script, ScriptedChat, demo_home
from typer.testing import CliRunner

from rag_complexity_agents.cli import app
from rag_complexity_agents.components import Components
from rag_complexity_agents.config.pipelines import DEFAULT_PIPELINE

runner = CliRunner()
Q = "In which country was the director of Spirited Away born?"


@pytest.fixture
def fake(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> ScriptedChat:
    home = demo_home(tmp_path_factory.getbasetemp())
    monkeypatch.setenv("RCA_CORPUS__HOME", str(home))
    monkeypatch.setenv("RCA_GRAPH__K", "16")
    chat = ScriptedChat(
        script=Script(
            self_ask=[
                "Follow up: Who directed Spirited Away?",
                "Follow up: Where was Hayao Miyazaki born?",
                "So the final answer is: Japan",
            ],
            react=[
                "Thought 1: search\nAction 1: Search[Spirited Away]",
                "Thought 2: done\nAction 2: Finish[Japan]",
            ],
            plan="1. Who directed Spirited Away?\n2. Where was #1 born?",
            answer=["Hayao Miyazaki", "Tokyo"],
            asu="Hayao Miyazaki",
            mer="[Reasoning]: Miyazaki was born in Tokyo.\n[Final Answer]: Japan",
        )
    )
    monkeypatch.setattr(Components, "chat", property(lambda self: chat))
    return chat


def test_default_is_the_default_pipeline(fake: ScriptedChat) -> None:
    result = runner.invoke(app, ["ask", Q, "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output[result.output.index("{") :])
    trace = payload["trace"]
    assert trace["pipeline"] == DEFAULT_PIPELINE == "plan_execute_mer"
    assert (trace["loop"], trace["retrieval"], trace["mer_enabled"]) == (
        "plan_execute",
        "first_stage",
        True,
    )
    assert trace["loop_answer"] == "Tokyo" and payload["answer"] == "Japan"
    assert fake.kinds()[0] == "plan" and fake.kinds()[-1] == "mer"


def test_self_ask_sunar_mer_with_a_readable_trace(fake: ScriptedChat) -> None:
    result = runner.invoke(app, ["ask", Q, "--pipeline", "self_ask_sunar_mer"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "A: Japan" in out and "loop self_ask, retrieval sunar, MER on" in out
    assert "1. Who directed Spirited Away? → Hayao Miyazaki" in out
    assert "ASU batch 0 [R]: s=1 {Hayao Miyazaki}" in out and "ASU batch 1 [N]" in out
    assert "Spirited Away (first stage, batch 0" in out
    assert "MER:" in out and "answer: Japan (marker)" in out
    assert "stopped: final_answer" in out


def test_json_knobs_and_other_loops(fake: ScriptedChat) -> None:
    result = runner.invoke(
        app,
        [
            *("ask", Q, "--json", "-p", "react", "--retrieval", "nar", "--no-mer"),
            *("--budget", "4", "--batch-size", "2"),
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output[result.output.index("{") :])
    trace = payload["trace"]
    assert payload["answer"] == "Japan" and trace["loop"] == "react"
    assert trace["retrieval"] == "nar" and trace["mer"] is None
    assert trace["steps"][0]["retrieval"]["rounds"][0]["c"] == 4
    assert trace["options"]["budget"] == 4 and trace["options"]["batch_size"] == 2


def test_stream_shows_nodes_and_tokens(fake: ScriptedChat) -> None:
    result = runner.invoke(
        app, ["ask", Q, "-p", "self_ask_sunar_mer", "--stream", "--max-steps", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "· decompose" in result.output and "· mer" in result.output
    assert "Follow up: Who directed Spirited Away?" in result.output
    assert "A: Japan" in result.output


def test_single_step_answers_with_one_call(fake: ScriptedChat) -> None:
    result = runner.invoke(
        app, ["ask", "Who directed Spirited Away?", "--pipeline", "single_step", "--json"]
    )
    assert result.exit_code == 0, result.output
    trace = json.loads(result.output[result.output.index("{") :])["trace"]
    assert trace["strategy"] == "single_step" and trace["llm_calls"] == 1
    assert fake.kinds() == ["answer"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ask", "", "--pipeline", "self_ask"], "the question is empty"),
        (["ask", "x" * 102_400], "102,400 characters long"),
        (["ask", Q, "--pipeline", "tree"], "unknown pipeline 'tree'"),
        (["ask", Q, "--retrieval", "magic"], "knob retrieval"),
        (["ask", Q, "-c", "no-such-collection"], "does not exist"),
    ],
)
def test_bad_input(fake: ScriptedChat, args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and message in result.output, result.output
    assert "Traceback" not in result.output and fake.calls == []


def test_model_down(fake: ScriptedChat, tmp_path: Path) -> None:
    fake.fail_with = ConnectionRefusedError("Connection refused")
    result = runner.invoke(app, ["ask", Q])
    assert result.exit_code == 2 and "the chat model failed" in result.output
    assert "Connection refused" in result.output
