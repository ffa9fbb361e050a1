"""LangGraph Studio against our graphs: a real ``langgraph dev`` (the repository's
``langgraph.json``, offline settings, started once for the module) driven through
langgraph-sdk, the way Studio drives it.

* every assistant publishes its input, output and context schemas; the context schema of a
  pipeline (and of the adaptive router) is the knob table with its bounds and descriptions,
  and a run is accepted at the bounds the schema shows and refused just outside them;
* Studio's debugging moves: interrupt before a node, read and edit the thread's state,
  resume with the edit; fork a run from an earlier checkpoint of the thread's history into a
  new branch; stream the events of the adaptive router's routes (graphs run inside its
  nodes) as subgraph events;
* a chat UI streaming ``messages-tuple`` gets only the final answer, in pieces.

The served graphs' chat model is ``ollama:`` pointed at an Ollama-API-compatible server on
127.0.0.1 that answers from the scripted fake (no real model runs); the adaptive router uses
the model-free heuristic classifier, so a one-hop question takes route B (single-step
retrieval over the demo collection).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import Script, ScriptedChat, demo_home
from langgraph_server import SPEC, langgraph_dev
from ollama_fake import OllamaLike, serve

from rag_complexity_agents.config.knobs import KNOBS, bounds, field_of

langgraph_sdk = pytest.importorskip("langgraph_sdk")
pytest.importorskip("langchain_ollama")

ROOT = Path(__file__).resolve().parents[1]
FOUNDER = "Who founded Amazon?"
DIRECTOR = "Who directed Spirited Away?"
ANSWERS = {"Amazon": "Jeff Bezos", "Spirited Away": "Hayao Miyazaki"}


def _reply(human: str) -> str:
    """The answer to whichever known question the prompt asks."""
    return next((answer for key, answer in ANSWERS.items() if key in human), "unknown")


@pytest.fixture(scope="module")
def ollama() -> Iterator[OllamaLike]:
    script = Script(answer=_reply, no_retrieval=_reply)
    with serve(ScriptedChat(script=script), {"studio-fake": "1M"}) as server:
        yield server


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, ollama: OllamaLike) -> Iterator[Any]:
    """A langgraph-sdk client of ``langgraph dev`` serving the repository's graphs."""
    home = demo_home(tmp_path_factory.getbasetemp())
    workdir = tmp_path_factory.mktemp("studio")
    env = {
        "RCA_HOME": str(workdir / "rca-home"),
        "RCA_CORPUS__HOME": str(home),
        "RCA_MODELS__CHAT": "ollama:studio-fake",
        "RCA_MODELS__OLLAMA_HOST": ollama.url,
        "RCA_ADAPTIVE__CLASSIFIER": "heuristic",
    }
    with langgraph_dev(workdir, env) as (url, _):
        yield langgraph_sdk.get_sync_client(url=url, timeout=300)


@pytest.fixture(scope="module")
def schemas(client: Any) -> dict[str, dict[str, Any]]:
    """Each assistant's schemas, by graph name."""
    assistants = client.assistants.search(limit=100)
    return {a["graph_id"]: client.assistants.get_schemas(a["assistant_id"]) for a in assistants}


def _knob_graphs() -> list[str]:
    """The graphs whose runs take the knobs: every pipeline and the adaptive router."""
    return [name for name in SPEC["graphs"] if name != "retrieval_complexity"]


# ------------------------------------------------------------------------------ schemas


def test_every_assistant_publishes_its_schemas(schemas: dict[str, dict[str, Any]]) -> None:
    assert set(schemas) == set(SPEC["graphs"])
    for name, schema in schemas.items():
        for kind in ("input_schema", "output_schema", "context_schema"):
            assert schema[kind] is not None, f"{name}: no {kind}"
        assert "question" in schema["input_schema"]["properties"], name
    for name in _knob_graphs():
        assert {"answer", "sources", "trace"} <= set(schemas[name]["output_schema"]["properties"])
    rc = schemas["retrieval_complexity"]
    assert set(rc["input_schema"]["properties"]) == {"question", "references"}
    assert "retrieval_complexity" in rc["output_schema"]["properties"]
    assert rc["context_schema"]["properties"] == {}  # it takes no run options


@pytest.mark.parametrize("graph", _knob_graphs())
def test_context_schema_is_the_knob_table(schemas: dict[str, dict[str, Any]], graph: str) -> None:
    fields = schemas[graph]["context_schema"]["properties"]
    assert list(fields) == [knob.name for knob in KNOBS]
    for knob in KNOBS:
        field = fields[knob.name]
        low, high = bounds(knob)
        assert (field.get("minimum"), field.get("maximum")) == (low, high), knob.name
        description = field_of(knob).description
        assert description and field["description"].startswith(description), knob.name
        if knob.symbol:
            assert f"Paper symbol: {knob.symbol}." in field["description"]
    assert fields["retrieval"]["enum"] and fields["mer"]["type"] == "boolean"


def _within(fields: dict[str, Any], end: str) -> dict[str, Any]:
    """A context with every knob at the ``end`` ("minimum" or "maximum") the schema offers."""
    pick = 0 if end == "minimum" else -1
    values: dict[str, Any] = {}
    for name, field in fields.items():
        if "enum" in field:
            values[name] = field["enum"][pick]
        elif field["type"] == "boolean":
            values[name] = end == "maximum"
        else:
            values[name] = field[end]
    return values


def test_runs_accept_the_schema_bounds_and_refuse_beyond(
    client: Any, schemas: dict[str, dict[str, Any]]
) -> None:
    fields = schemas["no_retrieval"]["context_schema"]["properties"]
    for end in ("minimum", "maximum"):
        context = _within(fields, end)
        if end == "maximum":
            context["mer"] = False  # MER would need evidence the chat model alone has not got
        out = client.runs.wait(None, "no_retrieval", input={"question": FOUNDER}, context=context)
        assert out["answer"] == "Jeff Bezos"
        options = out["trace"]["options"]
        assert {name: options.get(name) for name in context} == context, end
    beyond = [(name, value) for name, field in fields.items() for value in _outside(field)]

    def refused(case: tuple[str, Any]) -> dict[str, Any]:
        name, value = case
        out = client.runs.wait(
            None,
            "no_retrieval",
            input={"question": FOUNDER},
            context={name: value},
            raise_error=False,
        )
        return dict(out.get("__error__") or {})

    with ThreadPoolExecutor(max_workers=4) as pool:
        errors = list(pool.map(refused, beyond))
    for (name, value), error in zip(beyond, errors, strict=True):
        assert error.get("error") == "ConfigError", (name, value, error)
        assert f"knob {name}" in error["message"] and repr(value) in error["message"]


def _outside(field: dict[str, Any]) -> list[Any]:
    """Values just beyond what a context field offers."""
    values = [field[k] + d for k, d in (("minimum", -1), ("maximum", 1)) if k in field]
    return values + (["bogus"] if "enum" in field else [])


# ------------------------------------------------------------------------------ debugging


def test_interrupt_edit_the_state_and_resume(client: Any) -> None:
    thread = client.threads.create()["thread_id"]
    client.runs.wait(
        thread, "no_retrieval", input={"question": FOUNDER}, interrupt_before=["answer"]
    )
    state = client.threads.get_state(thread)
    assert state["next"] == ["answer"] and state["values"]["question"] == FOUNDER
    assert not state["values"].get("loop_answer")
    client.threads.update_state(thread, {"question": DIRECTOR})
    assert client.threads.get_state(thread)["values"]["question"] == DIRECTOR
    out = client.runs.wait(thread, "no_retrieval", input=None)
    assert out["answer"] == "Hayao Miyazaki"
    assert out["trace"]["steps"][0]["sub_question"] == DIRECTOR
    final = client.threads.get_state(thread)
    assert final["next"] == [] and final["values"]["answer"] == "Hayao Miyazaki"


def _checkpoint(entry: dict[str, Any]) -> str:
    return str(entry["checkpoint"]["checkpoint_id"])


def _parent(entry: dict[str, Any]) -> str | None:
    parent = entry.get("parent_checkpoint") or {}
    return parent.get("checkpoint_id")


def test_fork_from_an_earlier_checkpoint_makes_a_new_branch(client: Any) -> None:
    thread = client.threads.create()["thread_id"]
    first = client.runs.wait(thread, "no_retrieval", input={"question": FOUNDER})
    assert first["answer"] == "Jeff Bezos"
    history = client.threads.get_history(thread, limit=50)
    done = _checkpoint(history[0])
    before_answer = next(h for h in history if h["next"] == ["answer"])
    fork_point = _checkpoint(before_answer)
    # replay from the checkpoint as it is, then fork it with an edited question
    replay = client.runs.wait(thread, "no_retrieval", input=None, checkpoint_id=fork_point)
    assert replay["answer"] == "Jeff Bezos"
    edited = client.threads.update_state(thread, {"question": DIRECTOR}, checkpoint_id=fork_point)
    forked = client.runs.wait(thread, "no_retrieval", input=None, checkpoint_id=_checkpoint(edited))
    assert forked["answer"] == "Hayao Miyazaki"
    history = client.threads.get_history(thread, limit=100)
    children = [h for h in history if _parent(h) == fork_point]
    assert len(children) == 3  # the first run, its replay and the edited fork
    assert client.threads.get_state(thread)["values"]["question"] == DIRECTOR
    original = client.threads.get_state(thread, checkpoint_id=done)
    assert original["values"]["answer"] == "Jeff Bezos"
    assert original["values"]["question"] == FOUNDER


def test_adaptive_router_streams_its_route_as_a_subgraph(client: Any) -> None:
    thread = client.threads.create()["thread_id"]
    events = [
        (part.event, part.data)
        for part in client.runs.stream(
            thread,
            "adaptive",
            input={"question": FOUNDER},
            stream_mode="updates",
            stream_subgraphs=True,
        )
    ]
    errors = [data for event, data in events if event == "error"]
    assert not errors, errors
    outer = [data for event, data in events if event == "updates"]
    inner = [(event, data) for event, data in events if event.startswith("updates|")]
    assert [next(iter(u)) for u in outer] == ["classify", "B"]
    assert {event.split("|", 1)[1].split(":", 1)[0] for event, _ in inner} == {"B"}
    nodes = [node for _, data in inner for node in data]
    assert nodes[0] == "start" and nodes[-1] == "finish"
    assert {"retrieve", "answer"} <= set(nodes)
    finish = inner[-1][1]["finish"]
    route = outer[-1]["B"]
    assert finish["answer"] == route["answer"] == "Jeff Bezos"
    assert route["trace"]["route"] == "B" and route["trace"]["retrieval"] == "first_stage"


def test_a_chat_ui_streams_only_the_final_answer(client: Any) -> None:
    thread = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(
            thread,
            "single_step",
            input={"messages": [{"type": "human", "content": DIRECTOR}]},
            stream_mode="messages-tuple",
        )
    )
    assert not [part.data for part in parts if part.event == "error"]
    chunks = [part.data for part in parts if part.event == "messages"]
    assert {meta["langgraph_node"] for _, meta in chunks} == {"finish"}
    assert "".join(chunk["content"] for chunk, _ in chunks) == "Hayao Miyazaki"
    assert len(chunks) == 2 and {chunk["type"] for chunk, _ in chunks} == {"AIMessageChunk"}
