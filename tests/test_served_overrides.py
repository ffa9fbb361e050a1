"""Graphs served by ``langgraph dev`` accept per-run values only for the knobs of the knob
table, within their bounds; anything else (config overrides, hosts, model paths, homes,
collections, presets) is rejected with one line that reaches the API client."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import Script, ScriptedChat, demo_config, demo_home

from rag_complexity_agents.agents import context
from rag_complexity_agents.agents.context import (
    ResourceProvider,
    derive_components,
    serve_clients,
    served_options,
    serving_clients,
)
from rag_complexity_agents.agents.registry import build_pipeline
from rag_complexity_agents.agents.run import run_graph
from rag_complexity_agents.components import Components
from rag_complexity_agents.config.knobs import KNOBS_BY_NAME, knob_list
from rag_complexity_agents.errors import ConfigError, CorpusError, InputError, ModelServerError

Q = "In which country was the director of Spirited Away born?"
FORBIDDEN = [
    {"overrides": {"models.ollama_host": "http://127.0.0.1:9"}},
    {"chat_model": "llamacpp:/etc/passwd"},
    {"overrides": {"models.chat": "llamacpp:/etc/passwd"}},
    {"overrides": {"corpus.home": "/tmp/elsewhere"}},
    {"overrides": {"models.home": "/tmp/elsewhere"}},
    {"collection": "other"},
    {"temperature": 1.5},
    {"overrides": "models.ollama_host=x"},
    {"overrides": {"nar.c": 6}},
    {"profile": "paper"},
    {"preset": "paper"},
]


def test_allow_list_takes_the_knobs_by_name_or_symbol() -> None:
    assert KNOBS_BY_NAME["k"].key == "answer.passages" and KNOBS_BY_NAME["l"].key == "mer.l"
    options = served_options({"b": 2, "k": 4, "retrieval": "nar", "budget": 6})
    assert options == {"batch_size": 2, "passages": 4, "retrieval": "nar", "budget": 6}
    assert served_options({}) == {}


@pytest.mark.parametrize("options", FORBIDDEN)
def test_allow_list_rejects_every_other_knob_in_one_line(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        served_options(options)
    message = str(info.value)
    assert "\n" not in message and knob_list() in message


def test_server_keys_in_configurable_are_ignored() -> None:
    config = {"configurable": {"thread_id": "t", "assistant_id": "a", "b": 3, "run_id": "r"}}
    assert ResourceProvider.options_of(config, served=True) == {"batch_size": 3}  # type: ignore[arg-type]


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process serves API clients (a fresh switch, so other tests are not affected)."""
    monkeypatch.setattr(context, "_SERVING", threading.Event())
    assert not serving_clients()
    serve_clients()


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Components:
    home: Path = demo_home(tmp_path_factory.getbasetemp())
    return Components(demo_config(home))


def _graph(parts: Components) -> Any:
    script = Script(answer="Japan", asu="Japan")
    cfg = demo_config(parts.config.corpus.home)
    derived = derive_components(parts, cfg)
    derived.chat = ScriptedChat(script=script)  # type: ignore[misc]
    return build_pipeline("single_step_sunar", cfg, components=derived)


def test_graphs_of_a_serving_process_reject_forbidden_overrides(
    parts: Components, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also a graph built before the process started serving (like the loops the adaptive
    router builds lazily, which inherit the client's configurable)."""
    graph = _graph(parts)
    in_process = {"overrides": {"models.temperature": 0.5}}
    assert run_graph(graph, Q, options=in_process).answer == "Japan"
    monkeypatch.setattr(context, "_SERVING", threading.Event())
    serve_clients()
    for options in FORBIDDEN[:4]:
        with pytest.raises(ConfigError, match="does not accept the run option"):
            run_graph(graph, Q, options=options)


def test_served_graph_applies_allowed_knobs(parts: Components, served: None) -> None:
    graph = _graph(parts)
    result = run_graph(graph, Q, options={"retrieval": "first_stage", "k": 2, "max_steps": 1})
    assert result.answer == "Japan" and result.trace["retrieval"] is not None
    with pytest.raises(ConfigError, match=r"knob retrieval: .*got 'bogus'"):
        run_graph(graph, Q, options={"retrieval": "bogus"})
    with pytest.raises(ConfigError, match=r"knob budget \(c\): .*got 10000"):
        run_graph(graph, Q, options={"c": 10_000})


def test_our_errors_reach_langgraph_api_clients_with_their_message() -> None:
    """The LangGraph API server shows a built-in ValueError/RuntimeError's message and hides
    any other exception's behind "An internal error occurred"."""
    serde = pytest.importorskip("langgraph_api.serde")
    for error in (
        ConfigError("a run may set only b, c"),
        InputError("the question is empty"),
        CorpusError("collection 'x' does not exist"),
        ModelServerError("Ollama is down"),
    ):
        assert serde.default(error) == {"error": type(error).__name__, "message": str(error)}
