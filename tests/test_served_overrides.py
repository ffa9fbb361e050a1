"""Graphs served by ``langgraph dev`` accept per-run overrides only for the answer-shaping
knobs (SERVED_KNOBS); anything else (hosts, model paths, homes, collections) is rejected with
one line that reaches the API client."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import Script, ScriptedChat, demo_config, demo_home

from rag_complexity_agents.agents import context
from rag_complexity_agents.agents.context import (
    SERVED_KNOBS,
    ResourceProvider,
    derive_components,
    serve_clients,
    served_options,
    serving_clients,
)
from rag_complexity_agents.agents.registry import build_preset
from rag_complexity_agents.agents.run import run_graph
from rag_complexity_agents.components import Components
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
]


def test_allow_list_maps_the_knobs_to_dotted_keys() -> None:
    knobs = {"b", "c", "m", "l", "k", "max_steps", "retrieval", "mer", "profile"}
    assert set(SERVED_KNOBS) == knobs
    assert SERVED_KNOBS["k"] == "answer.passages" and SERVED_KNOBS["l"] == "answer.sub_passages"
    options = served_options(
        {"b": 2, "k": 4, "retrieval": "nar", "profile": "paper", "overrides": {"nar.c": 6}}
    )
    assert options == {
        "overrides": {"nar.b": 2, "answer.passages": 4, "agents.retrieval": "nar", "nar.c": 6},
        "profile": "paper",
    }
    assert served_options({}) == {}


@pytest.mark.parametrize("options", FORBIDDEN)
def test_allow_list_rejects_every_other_knob_in_one_line(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        served_options(options)
    message = str(info.value)
    assert "\n" not in message and "b, c, m, l, k, max_steps, retrieval, mer, profile" in message


def test_server_keys_in_configurable_are_ignored() -> None:
    config = {"configurable": {"thread_id": "t", "assistant_id": "a", "b": 3, "run_id": "r"}}
    assert ResourceProvider.options_of(config, served=True) == {"overrides": {"nar.b": 3}}  # type: ignore[arg-type]


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
    return build_preset("single_step_sunar", cfg, components=derived)


def test_graphs_of_a_serving_process_reject_forbidden_overrides(
    parts: Components, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also a graph built before the process started serving (like the loops the adaptive
    router builds lazily, which inherit the client's configurable)."""
    graph = _graph(parts)
    assert run_graph(graph, Q, options={"temperature": 0.5}).answer == "Japan"  # in-process
    monkeypatch.setattr(context, "_SERVING", threading.Event())
    serve_clients()
    for options in FORBIDDEN[:4]:
        with pytest.raises(ConfigError, match="does not accept the run option"):
            run_graph(graph, Q, options=options)


def test_served_graph_applies_allowed_knobs(parts: Components, served: None) -> None:
    graph = _graph(parts)
    result = run_graph(graph, Q, options={"retrieval": "first_stage", "k": 2, "max_steps": 1})
    assert result.answer == "Japan" and result.trace["retrieval"] is not None
    bad = {"overrides": {"agents.retrieval": "bogus"}}
    with pytest.raises(ConfigError, match="unknown retrieval strategy 'bogus'"):
        run_graph(graph, Q, options=bad)


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
