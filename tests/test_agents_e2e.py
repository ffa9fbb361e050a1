"""End to end with the real packaged chat model on the demo corpus (temperature 0, seed 0,
the cpu preset: b = 2, c = 8, m = 3, l = 4, llama.cpp on the free cores), and the Studio
server.

* the README's main job, ``make demo``: the Makefile's ``rca ask`` line (the default pipeline,
  plan-and-execute over the first stage) on its DEMO_QUESTION;
* ``rca ask --pipeline self_ask_sunar_mer`` on the same question (every paper part, really
  run);
* ReAct + NAR on a two-hop demo question;
* ``langgraph dev`` on a free port with the offline settings: list the assistants over HTTP,
  run the Self-Ask + SUNAR graph to completion through the API (SmolLM2 and tiny knobs via
  ``configurable``), stop the server by its PID.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import demo_home
from typer.testing import CliRunner

from rag_complexity_agents.agents.registry import build_pipeline
from rag_complexity_agents.agents.run import run_graph
from rag_complexity_agents.cli import app
from rag_complexity_agents.config import Config
from rag_complexity_agents.config.pipelines import DEFAULT_PIPELINE
from rag_complexity_agents.corpus.demo import load_demo_questions
from rag_complexity_agents.text import normalize_answer

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.llm


def _needs_model(name: str) -> None:
    pytest.importorskip("llama_cpp")
    from rag_complexity_agents.models.packaged import chat_model_installed

    if not chat_model_installed(name, Config().models.home):
        pytest.skip(f"the packaged chat model {name} is not installed")


def _demo_question() -> str:
    match = re.search(r"^DEMO_QUESTION \?= (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert match, "the Makefile defines DEMO_QUESTION"
    return match.group(1).strip()


def _demo_ask_options() -> list[str]:
    """The options of the Makefile's ``rca ask`` line (``make demo``; none: the default)."""
    match = re.search(
        r'^\t\$\(RCA\) ask(.*) "\$\(DEMO_QUESTION\)"$', (ROOT / "Makefile").read_text(), re.M
    )
    assert match, "make demo runs rca ask on DEMO_QUESTION"
    return match.group(1).split()


def _ask_json(args: list[str]) -> tuple[str, dict[str, Any]]:
    started = time.perf_counter()
    result = CliRunner().invoke(app, ["ask", *args, "--json"])
    seconds = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output[result.output.index("{") :])
    trace = payload["trace"]
    print(
        f"\n{trace['loop']}: {payload['answer']!r} in {seconds:.1f} s; {trace['llm_calls']} calls"
    )
    return payload["answer"], trace


def _right(question: str, answer: str) -> bool:
    golds = next(
        (q["answers"] for q in load_demo_questions() if q["question"] == question), ["Japan"]
    )
    return any(normalize_answer(gold) in normalize_answer(answer) for gold in golds)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_home(tmp_path_factory.getbasetemp())


def test_main_job_make_demo(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_model("qwen2.5-0.5b")
    monkeypatch.setenv("RCA_CORPUS__HOME", str(home))
    question = _demo_question()
    answer, trace = _ask_json([*_demo_ask_options(), question])
    assert trace["pipeline"] == DEFAULT_PIPELINE
    assert (trace["loop"], trace["retrieval"], trace["mer_enabled"]) == (
        "plan_execute",
        "first_stage",
        True,
    )
    assert trace["steps"] and all(s["retrieval"]["evidence"] for s in trace["steps"])
    assert trace["format_failures"] == 0 and trace["stop_reason"] == "final_answer"
    assert _right(question, answer), trace


def test_cli_self_ask_sunar_mer(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_model("qwen2.5-0.5b")
    monkeypatch.setenv("RCA_CORPUS__HOME", str(home))
    question = _demo_question()
    answer, trace = _ask_json(["--pipeline", "self_ask_sunar_mer", question])
    assert (trace["loop"], trace["retrieval"], trace["mer_enabled"]) == ("self_ask", "sunar", True)
    # sub-questions with their retrieval
    assert trace["sub_questions"] and all(s["retrieval"]["rounds"] for s in trace["steps"])
    rounds = [r for s in trace["steps"] for r in s["retrieval"]["rounds"]]
    # NAR provenance: batches from the first stage (R) and the graph neighbours (N)
    assert all({b["pool"] for b in r["batches"]} == {"R", "N"} for r in rounds)
    assert all(r["retriever"]["nar"]["scored_neighbours"] > 0 for r in rounds)
    evidence = [e for s in trace["steps"] for e in s["retrieval"]["evidence"]]
    assert evidence and all(e["source"] in ("first_stage", "neighbour") for e in evidence)
    assert all(e["batch"] is not None for e in evidence)
    assert all(len(b["ids"]) == 2 for r in rounds for b in r["batches"])
    # ASU clusters: m = 3 real samples per batch, clustered
    for batch in (b for r in rounds for b in r["batches"]):
        assert len(batch["answers"]) == 3 and 1 <= batch["s"] <= 3
        assert len(batch["cluster_answers"]) == batch["s"]
    # MER over the reasoning path and the top-l evidence
    mer = trace["mer"]
    assert mer["output"] and 1 <= len(mer["evidence"]) <= 4 and mer["reasoning_path"]
    assert _right(question, answer), trace


def test_react_nar_answers_a_two_hop_question(home: Path) -> None:
    _needs_model("qwen2.5-0.5b")
    question = next(q for q in load_demo_questions() if q["id"] == "q23")  # Amazon → Princeton
    graph = build_pipeline("react_nar", Config(corpus={"home": home}, graph={"k": 16}))
    started = time.perf_counter()
    result = run_graph(graph, question["question"], options={"max_steps": 2})
    seconds = time.perf_counter() - started
    print(f"\nReAct + NAR: {result.answer!r} in {seconds:.1f} s; {result.trace['llm_calls']} calls")
    steps = result.trace["steps"]
    assert steps and steps[0]["action"].startswith("Search[") and steps[0]["observation"]
    assert steps[0]["retrieval"]["rounds"][0]["retriever"]["nar"]["scored"] == 8
    answer = normalize_answer(result.answer)
    assert any(normalize_answer(gold) in answer for gold in question["answers"]), result.trace


# ------------------------------------------------------------------------------ Studio


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _http(url: str, body: Any = None, timeout: float = 10.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        headers={"content-type": "application/json"},
        method="POST" if data else "GET",
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def test_langgraph_dev_serves_the_loops(home: Path, tmp_path: Path) -> None:
    _needs_model("smollm2-135m")
    cli = Path(sys.executable).with_name("langgraph")
    if not cli.exists():
        pytest.skip(
            "langgraph-cli is not installed (pip install 'rag-complexity-agents[langgraph]')"
        )
    spec = json.loads((ROOT / "langgraph.json").read_text())
    # the repository's langgraph.json with absolute paths, so the server's state directory
    # (.langgraph_api) goes to a temporary working directory
    spec["dependencies"] = [str(ROOT)]
    spec["graphs"] = {
        name: str(ROOT / path.removeprefix("./")) for name, path in spec["graphs"].items()
    }
    (tmp_path / "langgraph.json").write_text(json.dumps(spec))
    port = _free_port()
    env = {
        **os.environ,
        **spec["env"],
        "LANGGRAPH_NO_VERSION_CHECK": "true",
        "RCA_CORPUS__HOME": str(home),
        # the served graphs take no model from a client: the server's config picks it
        "RCA_MODELS__CHAT": "llamacpp:smollm2-135m",
    }
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [
            str(cli),
            "dev",
            "--no-browser",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-reload",
            "--config",
            str(tmp_path / "langgraph.json"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                if _http(f"{base}/ok", timeout=2).get("ok"):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "langgraph dev did not start in 120 s"
            time.sleep(0.5)
        assistants = _http(f"{base}/assistants/search", {"limit": 50})
        assert {a["graph_id"] for a in assistants} == set(spec["graphs"])
        thread = _http(f"{base}/threads", {})
        started = time.perf_counter()
        state = _http(
            f"{base}/threads/{thread['thread_id']}/runs/wait",
            {
                "assistant_id": "self_ask_sunar",
                "input": {"question": "From which university did the founder of Amazon graduate?"},
                "config": {
                    "configurable": {
                        "max_steps": 1,
                        "b": 2,
                        "c": 4,
                        "m": 2,
                    }
                },
            },
            timeout=600,
        )
        print(f"\nStudio run: {state.get('answer')!r} in {time.perf_counter() - started:.1f} s")
        trace = state["trace"]
        assert state["answer"] and trace["loop"] == "self_ask" and trace["retrieval"] == "sunar"
        assert trace["stop_reason"] in (
            "final_answer",
            "max_steps",
            "repeated_query",
            "format_error",
        )
        batches = trace["steps"][0]["retrieval"]["rounds"][0]["batches"]
        assert [len(b["ids"]) for b in batches] == [2, 2]
        assert all(len(b["answers"]) == 2 and b["s"] in (1, 2) for b in batches)
        assert trace["mer"] is None
        # a client may not choose the model (a path or host): one line naming the allowed knobs
        refused = _http(
            f"{base}/runs/wait",
            {
                "assistant_id": "single_step",
                "input": {"question": "Who founded Amazon?"},
                "config": {"configurable": {"chat_model": "llamacpp:/etc/passwd"}},
            },
            timeout=600,
        )
        message = refused["__error__"]["message"]
        assert "chat_model" in message and "max_steps" in message and "\n" not in message
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
        log.close()
    with pytest.raises(OSError):
        _http(f"{base}/ok", timeout=2)


def test_self_ask_forced_final_line_is_written_under_its_grammar(home: Path) -> None:
    """With one step allowed, Self-Ask must conclude with its final line; the llama.cpp model
    writes that line under a grammar, so it parses even from SmolLM2-135M, whose text reply
    does not (structured output 'off': no grammar)."""
    _needs_model("smollm2-135m")

    def run(structured_output: str) -> dict[str, Any]:
        config = Config(
            corpus={"home": home},
            models={"chat": "llamacpp:smollm2-135m", "n_threads": 1},
            agents={"structured_output": structured_output},
        )
        graph = build_pipeline("self_ask", config)
        return run_graph(graph, _demo_question(), options={"max_steps": 1}).trace

    constrained, free = run("auto"), run("off")
    assert constrained["stop_reason"] == free["stop_reason"] == "max_steps"
    assert "conclude" not in constrained["format_failures_by_step"]
    assert constrained["loop_answer"]
    assert free["format_failures_by_step"].get("conclude") == 1 and not free["loop_answer"]
