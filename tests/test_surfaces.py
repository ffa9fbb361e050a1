"""One pipeline and one knob table behind every surface: the CLI, ``create_rag_agent``,
Studio's graphs (``langgraph.json``), the LangChain / LlamaIndex adapters, Adaptive-RAG's C
and the harness agree on the default pipeline, and the knob surfaces (keyword arguments, CLI
flags, ``configurable``, Studio's context schema, the served allow-list) agree with the table.
Chat models are fakes: these tests are about wiring."""

from __future__ import annotations

import importlib.util
import inspect
import json
import threading
from pathlib import Path
from typing import Any, get_type_hints

import pytest
import typer.main
from agent_fakes import Script, ScriptedChat
from dropin_fakes import lean_store
from pydantic import TypeAdapter

import rag_complexity_agents as rca
from rag_complexity_agents.agents import context
from rag_complexity_agents.agents.context import ResourceProvider, serve_clients, served_options
from rag_complexity_agents.agents.state import RunOptions
from rag_complexity_agents.cli import app
from rag_complexity_agents.cli.ask import ask
from rag_complexity_agents.config import Config
from rag_complexity_agents.config.knobs import KNOBS, KNOBS_BY_NAME, KnobValues, bounds
from rag_complexity_agents.config.pipelines import DEFAULT_PIPELINE, PIPELINES
from rag_complexity_agents.errors import ConfigError
from rag_complexity_agents.eval.strategies import available_strategies
from rag_complexity_agents.integrations.langchain import as_runnable, as_tool
from rag_complexity_agents.integrations.llamaindex import RCAQueryEngine

ROOT = Path(__file__).resolve().parents[1]
Q = "In which country was the director of Spirited Away born?"


def _default(func: Any, name: str) -> Any:
    return inspect.signature(func).parameters[name].default


def _studio_graphs() -> dict[str, Any]:
    """The graphs ``langgraph dev`` would load, by their langgraph.json names."""
    spec = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
    graphs = {}
    for name, target in spec.items():
        path, attr = target.rsplit(":", 1)
        if not path.endswith("pipelines.py"):
            continue
        module_spec = importlib.util.spec_from_file_location("studio_pipelines", ROOT / path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        graphs[name] = getattr(module, attr)
    return graphs


@pytest.fixture
def fresh_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(context, "_SERVING", threading.Event())


def test_every_entry_point_runs_the_one_default_pipeline(fresh_serving: None) -> None:
    assert _default(ask, "pipeline") == DEFAULT_PIPELINE  # rca ask with no flags
    assert _default(rca.create_rag_agent, "pipeline") == DEFAULT_PIPELINE
    assert _default(RCAQueryEngine.from_defaults, "graph") == DEFAULT_PIPELINE
    assert _default(as_runnable, "graph") == DEFAULT_PIPELINE
    assert _default(as_tool, "graph") == DEFAULT_PIPELINE
    assert Config().adaptive.c_strategy == DEFAULT_PIPELINE  # Adaptive-RAG's C
    assert _studio_graphs()["agent"].name == DEFAULT_PIPELINE  # Studio's default graph
    _, store = lean_store()
    built = rca.create_rag_agent(ScriptedChat(script=Script()), vectorstore=store)
    assert built.name == DEFAULT_PIPELINE


def test_every_pipeline_is_a_harness_strategy_and_studio_names_are_pipelines(
    fresh_serving: None,
) -> None:
    strategies = {spec.name for spec in available_strategies()}
    assert set(PIPELINES) <= strategies
    for name, graph in _studio_graphs().items():
        assert graph.name == (DEFAULT_PIPELINE if name == "agent" else name)
        assert graph.name in PIPELINES


def test_knob_surfaces_agree_with_the_table() -> None:
    names = {name for knob in KNOBS for name in knob.names}
    assert set(get_type_hints(KnobValues)) == names  # keyword arguments
    assert set(KNOBS_BY_NAME) == names
    command = typer.main.get_command(app).commands["ask"]  # type: ignore[attr-defined]
    flags = {opt for param in command.params for opt in param.opts}
    assert {knob.flag for knob in KNOBS} <= flags
    assert "--no-mer" in {opt for param in command.params for opt in param.secondary_opts}
    short = [opt for param in command.params for opt in param.opts if not opt.startswith("--")]
    assert len(short) == len(set(short))  # no two options share a short flag
    schema = TypeAdapter(RunOptions).json_schema()  # Studio's context schema
    assert set(schema["properties"]) == {knob.name for knob in KNOBS}
    for knob in KNOBS:
        low, high = bounds(knob)
        prop = schema["properties"][knob.name]
        assert prop.get("minimum") == low and prop.get("maximum") == high, knob.name
        assert prop["description"]
        for name in knob.names:  # the served allow-list accepts every name of every knob
            value = True if knob.name == "mer" else "nar" if knob.name == "retrieval" else 1
            assert served_options({name: value}) == {knob.name: value}
        if high is not None:
            with pytest.raises(ConfigError, match=f"knob {knob.name}"):
                served_options({knob.name: int(high) + 1})


def test_in_process_configurable_takes_names_and_symbols() -> None:
    by_symbol = ResourceProvider.options_of({"configurable": {"k": 1, "thread_id": "t"}})
    by_name = ResourceProvider.options_of({"configurable": {"passages": 1}})
    assert by_symbol == by_name == {"passages": 1}
    with pytest.raises(ConfigError, match="given twice"):
        ResourceProvider.options_of({"configurable": {"k": 1, "passages": 2}})


def test_served_runs_refuse_anything_but_knobs(fresh_serving: None) -> None:
    serve_clients()
    for bad in ({"chat_model": "x"}, {"collection": "other"}, {"overrides": {"nar.c": 2}}):
        with pytest.raises(ConfigError, match="does not accept"):
            ResourceProvider.options_of({"configurable": bad}, served=True)  # type: ignore[typeddict-item]


def test_a_knob_the_pipeline_cannot_use_is_named_once_in_the_notes() -> None:
    _, store = lean_store()
    chat = ScriptedChat(script=Script(plan="1. Who directed Spirited Away?", answer=["Japan"]))
    agent = rca.create_rag_agent(chat, vectorstore=store, pipeline="single_step", samples=4, c=6)
    trace = agent.invoke({"question": Q})["trace"]
    idle = [note for note in trace["notes"] if note.startswith("knob ")]
    assert len(idle) == 2
    assert any("samples" in note and "asu" in note for note in idle)
    assert any("budget" in note and "nar" in note for note in idle)
    assert trace["pipeline"] == "single_step" and trace["version"] == 1


def test_invoke_returns_the_output_schema() -> None:
    _, store = lean_store()
    agent = rca.create_rag_agent(ScriptedChat(script=Script(answer=["Japan"])), vectorstore=store)
    out = agent.invoke({"question": Q}, {"configurable": {"k": 2}})
    assert set(out) == {"answer", "sources", "trace", "messages"}
    assert out["trace"]["options"]["passages"] == 2
    assert all(source["text"] for source in out["sources"])


def test_the_public_surface_is_the_top_level_package() -> None:
    import rag_complexity_agents as package

    assert sorted(package.__all__) == sorted(package._EXPORTS)
    for name in package.__all__:
        assert getattr(package, name) is not None
