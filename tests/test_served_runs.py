"""Runs cannot wedge the server that serves them.

* A run's budget (``agents.max_llm_calls`` / ``max_output_tokens`` / ``max_seconds``) ends a
  loop between steps, and stops ASU sampling inside a retrieval, with ``stop_reason ==
  "budget"``, a trace and an answer; no concluding or MER call is made once it is spent.
* A cancelled async run stops its worker thread before the next model call.
* Every graph refuses run options outside its allow-list, the router and the retrieval
  complexity graph included.
* The same through a real ``langgraph dev`` on a free 127.0.0.1 port (offline settings, chat
  model: an Ollama-compatible test server answering slowly from a scripted fake), driven
  through langgraph-sdk: a knob above its bound is refused, every served graph refuses an
  option outside its allow-list, and a long run that is cancelled stops sending model calls
  while the next run completes. The server is stopped by its PID.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import Prompt, Script, ScriptedChat, demo_config
from langgraph_server import langgraph_dev
from ollama_fake import OllamaLike, serve

from rag_complexity_agents.agents.context import derive_components
from rag_complexity_agents.agents.registry import build_pipeline
from rag_complexity_agents.agents.run import run_graph
from rag_complexity_agents.complexity.adaptive.router import build_router_graph
from rag_complexity_agents.complexity.rrcp_graph import build_rc_graph
from rag_complexity_agents.components import Components
from rag_complexity_agents.config import Config
from rag_complexity_agents.errors import ConfigError
from rag_complexity_agents.retrieval.asu import ASU_INSTRUCTION

ROOT = Path(__file__).resolve().parents[1]
Q = "In which country was the director of Spirited Away born?"
PLAN = "1. Who directed Spirited Away?\n2. Where was #1 born?\n3. Which country is #2 in?"
LONG_RUN = {"retrieval": "sunar", "budget": 500, "batch_size": 1, "samples": 20}
"""Knobs within their bounds that make single-step + SUNAR long: every demo chunk scored one
at a time, each batch with 20 ASU samples."""


@pytest.fixture(scope="module")
def parts(demo_home: Path) -> Components:
    return Components(demo_config(demo_home))


def _graph(parts: Components, pipeline: str, chat: ScriptedChat, **agents: Any) -> Any:
    config = demo_config(parts.config.corpus.home, agents={"max_steps": 3, **agents})
    derived = derive_components(parts, config)
    derived.chat = chat
    return build_pipeline(pipeline, config, components=derived)


# ------------------------------------------------------------------------------ budget


def test_spent_call_budget_ends_the_loop_between_steps_with_an_answer(parts: Components) -> None:
    chat = ScriptedChat(script=Script(plan=PLAN, answer="Hayao Miyazaki"))
    graph = _graph(parts, "plan_execute", chat, max_llm_calls=2)
    result = run_graph(graph, Q, options={"retrieval": "first_stage"})
    trace = result.trace
    assert trace["stop_reason"] == "budget" and result.answer
    # plan + one sub-answer; then no further step, no concluding call
    assert trace["llm_calls"] == 2 and chat.kinds() == ["plan", "answer"]
    assert len(trace["steps"]) == 1


def test_spent_token_budget_skips_the_concluding_and_mer_calls(parts: Components) -> None:
    chat = ScriptedChat(script=Script(plan=PLAN, answer="Hayao Miyazaki", mer="Japan"))
    graph = _graph(parts, "plan_execute_nar_mer", chat, max_output_tokens=3)
    result = run_graph(graph, Q)
    assert result.trace["stop_reason"] == "budget" and result.answer
    assert "mer" not in chat.kinds() and "plan_final" not in chat.kinds()


def test_spent_time_budget_still_gives_an_answer_and_a_trace(parts: Components) -> None:
    chat = ScriptedChat(script=Script(plan=PLAN))
    graph = _graph(parts, "plan_execute", chat, max_seconds=1e-6)
    result = run_graph(graph, Q)
    assert result.trace["stop_reason"] == "budget" and chat.calls == []
    assert isinstance(result.answer, str) and result.answer


def test_spent_budget_stops_asu_sampling_inside_a_retrieval(parts: Components) -> None:
    chat = ScriptedChat(script=Script(answer="Japan", asu="Japan"))
    graph = _graph(parts, "single_step_sunar", chat, max_llm_calls=1)
    result = run_graph(graph, Q, options={"b": 1, "c": 6, "m": 3})
    record = result.trace["steps"][0]["retrieval"]["rounds"][0]
    sampled = [b for b in record["batches"] if b.get("s") is not None]
    assert len(record["batches"]) == 6 and len(sampled) == 1
    assert chat.kinds().count("asu") == 3 and result.answer == "Japan"
    assert any("ASU skipped 5 batch(es)" in note for note in result.trace["notes"])


# ------------------------------------------------------------------------------ cancellation


async def test_a_cancelled_async_run_stops_its_thread_before_the_next_model_call(
    parts: Components,
) -> None:
    started = threading.Event()

    def slow(prompt: Prompt) -> str:
        started.set()
        time.sleep(0.05)
        return "Japan"

    chat = ScriptedChat(reply=slow)
    graph = _graph(parts, "single_step_sunar", chat)
    config = {"configurable": {"b": 1, "c": 40, "m": 5}}
    task = asyncio.create_task(graph.ainvoke({"question": Q}, config))
    await asyncio.to_thread(started.wait, 60)
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    calls = len(chat.calls)
    await asyncio.sleep(0.5)
    assert len(chat.calls) == calls < 40 * 5  # the thread stopped: no call after the cancel


# ------------------------------------------------------------------------------ allow-lists


def test_retrieval_complexity_graph_takes_no_run_options() -> None:
    graph = build_rc_graph(Config())  # refused before its pipeline is built
    for options in ({"collection": "other"}, {"m": 2}, {"overrides": {"models.chat": "x"}}):
        with pytest.raises(ConfigError, match="retrieval_complexity does not accept"):
            graph.invoke({"question": Q}, {"configurable": options})


def test_router_refuses_options_that_are_not_knobs_before_classifying() -> None:
    def never() -> Any:
        raise AssertionError("nothing may load for a refused run")

    graph = build_router_graph(never, {label: never for label in "ABC"}, lazy=True)
    for options in ({"chat_model": "llamacpp:/etc/passwd"}, {"collection": "other"}):
        with pytest.raises(ConfigError, match="not knobs"):
            graph.invoke({"question": Q}, {"configurable": options})
    with pytest.raises(ConfigError, match=r"knob samples \(m\)"):
        graph.invoke({"question": Q}, {"configurable": {"m": 1_000_000}})


# ------------------------------------------------------------------------------ langgraph dev


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _served_graphs() -> list[str]:
    return list(json.loads((ROOT / "langgraph.json").read_text())["graphs"])


@pytest.fixture(scope="module")
def slow_ollama() -> Iterator[OllamaLike]:
    """An Ollama-compatible server whose every answer takes 0.3 s."""
    chat = ScriptedChat(script=Script(default="Japan"))
    with serve(chat, {"fake": "1B"}, delay_s=0.3) as server:
        yield server


@pytest.fixture(scope="module")
def studio(
    demo_home: Path, slow_ollama: OllamaLike, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, Path]]:
    """``langgraph dev`` serving langgraph.json's graphs over the demo collection with the
    slow Ollama model; yields (sdk client, server log path); stopped by its PID."""
    sdk = pytest.importorskip("langgraph_sdk")
    env = {
        "RCA_CORPUS__HOME": str(demo_home),
        "RCA_MODELS__CHAT": "ollama:fake",
        "RCA_MODELS__OLLAMA_HOST": slow_ollama.url,
    }
    with langgraph_dev(tmp_path_factory.mktemp("studio"), env) as (url, log_path):
        yield sdk.get_sync_client(url=url, timeout=600), log_path


def _error(response: Any) -> dict[str, Any]:
    assert isinstance(response, dict) and "__error__" in response, response
    return dict(response["__error__"])


def test_served_knob_above_its_bound_is_refused(studio: Any) -> None:
    client, _ = studio
    response = client.runs.wait(
        None,
        "single_step",
        input={"question": Q},
        config={"configurable": {"retrieval": "sunar", "m": 1_000_000}},
        raise_error=False,
    )
    error = _error(response)
    assert error["error"] == "ConfigError" and "knob samples (m)" in error["message"]


def test_every_served_graph_refuses_an_option_outside_its_allow_list(studio: Any) -> None:
    client, _ = studio
    refusing = []
    for graph in _served_graphs():
        response = client.runs.wait(
            None,
            graph,
            input={"question": Q},
            config={"configurable": {"collection": "other"}},
            raise_error=False,
        )
        error = _error(response)
        if error["error"] == "ConfigError" and "collection" in error["message"]:
            refusing.append(graph)
    assert refusing == _served_graphs()


def _asu_calls(server: OllamaLike) -> int:
    return sum(
        1
        for request in list(server.requests)
        if request["path"] == "/api/chat"
        and any(m.get("content") == ASU_INSTRUCTION for m in request.get("messages") or [])
    )


def test_a_cancelled_served_run_stops_and_the_next_run_completes(
    studio: Any, slow_ollama: OllamaLike
) -> None:
    client, log_path = studio
    thread = client.threads.create()
    run = client.runs.create(
        thread["thread_id"], "single_step", input={"question": Q}, config={"configurable": LONG_RUN}
    )
    deadline = time.monotonic() + 300
    while _asu_calls(slow_ollama) < 3:  # the run is sampling ASU answers
        assert time.monotonic() < deadline, log_path.read_text()[-3000:]
        time.sleep(0.2)
    client.runs.cancel(thread["thread_id"], run["run_id"], wait=True)
    sampled = _asu_calls(slow_ollama)
    assert client.runs.get(thread["thread_id"], run["run_id"])["status"] == "interrupted"
    nxt = client.runs.wait(
        None,
        "single_step",
        input={"question": Q},
        config={"configurable": {"retrieval": "first_stage"}},
    )
    assert nxt["answer"] and nxt["trace"]["stop_reason"] == "single_pass"
    time.sleep(1.0)  # a worker that kept going would send ASU calls meanwhile
    assert _asu_calls(slow_ollama) == sampled < 20 * 10
