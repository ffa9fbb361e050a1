"""Messages in and out: a pipeline's graph is a node of a ``MessagesState`` app with no
adapter, multi-turn on a checkpointed thread (a follow-up is rewritten as a standalone
question before retrieval), and ``stream_mode="messages"`` shows only the final answer, in
pieces. The chat model is a fake (control flow); the store is a real in-memory LangChain
store."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_fakes import Script, ScriptedChat
from dropin_fakes import lean_store
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

import rag_complexity_agents as rca
from rag_complexity_agents.errors import InputError


def _chat() -> ScriptedChat:
    return ScriptedChat(
        script=Script(
            followup="Where was Hayao Miyazaki born?",
            answer=["Hayao Miyazaki", "Tokyo"],
        )
    )


def test_a_pipeline_is_a_node_of_a_messages_app_and_answers_follow_ups() -> None:
    _, store = lean_store()
    chat = _chat()
    app = StateGraph(MessagesState)
    app.add_node("rag", rca.create_rag_agent(chat, vectorstore=store, pipeline="single_step"))
    app.add_edge(START, "rag")
    app.add_edge("rag", END)
    graph = app.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "chat"}}

    first = graph.invoke({"messages": [HumanMessage("Who directed Spirited Away?")]}, thread)
    assert [(m.type, m.content) for m in first["messages"]] == [
        ("human", "Who directed Spirited Away?"),
        ("ai", "Hayao Miyazaki"),
    ]
    assert [call["kind"] for call in chat.calls] == ["answer"]  # a first turn is not rewritten

    second = graph.invoke({"messages": [HumanMessage("And where was he born?")]}, thread)
    assert [m.content for m in second["messages"]][-2:] == ["And where was he born?", "Tokyo"]
    rewrite, answer = chat.calls[-2:]
    assert rewrite["kind"] == "followup" and "Who directed Spirited Away?" in rewrite["last"]
    assert answer["kind"] == "answer" and "Where was Hayao Miyazaki born?" in answer["last"]


def test_the_graph_alone_takes_messages_or_a_question_and_appends_the_answer() -> None:
    _, store = lean_store()
    agent = rca.create_rag_agent(_chat(), vectorstore=store, pipeline="single_step")
    out = agent.invoke({"messages": [HumanMessage("Who directed Spirited Away?")]})
    assert out["answer"] == "Hayao Miyazaki"
    assert isinstance(out["messages"][-1], AIMessage)
    asked = agent.invoke({"question": "Who directed Spirited Away?"})
    assert [m.type for m in asked["messages"]] == ["human", "ai"]
    try:
        agent.invoke({"messages": [AIMessage("hello")]})
    except InputError as exc:
        assert "'question'" in str(exc) and "'messages'" in str(exc)
    else:  # pragma: no cover - the assertion above must run
        raise AssertionError("a chat without a human message must be refused")


def _of(chunks: list[tuple[str, Any]], mode: str) -> list[tuple[str, Any]]:
    return [chunk for chunk in chunks if chunk[0] == mode]


def test_messages_stream_shows_only_the_final_answer_token_by_token() -> None:
    _, store = lean_store()
    script = Script(plan="1. Who directed Spirited Away?\n2. Where was #1 born?")
    script.replies["answer"] = ["Hayao Miyazaki", "Tokyo, Japan"]
    script.replies["mer"] = [
        "[Reasoning]: Miyazaki was born in Tokyo.\n[Final Answer]: Tokyo, Japan"
    ]
    agent = rca.create_rag_agent(ScriptedChat(script=script), vectorstore=store)
    asked = {"messages": [HumanMessage("Where was the director born?")]}
    chunks = list(agent.stream(asked, stream_mode=["messages", "values"]))
    streamed = [(c.content, meta["langgraph_node"]) for mode, (c, meta) in _of(chunks, "messages")]
    assert streamed == [("Tokyo,", "finish"), (" Japan", "finish")]
    assert all(isinstance(c, AIMessageChunk) for _, (c, _) in _of(chunks, "messages"))
    (_, last), *_ = reversed(_of(chunks, "values"))
    assert last["messages"][-1].content == "Tokyo, Japan"
    assert {c.id for _, (c, _) in _of(chunks, "messages")} == {last["messages"][-1].id}

    shown = agent.stream(asked, {"configurable": {"stream_steps": True}}, stream_mode="messages")
    nodes = [meta["langgraph_node"] for _, meta in shown]
    assert {"plan", "answer_sub", "finish"} <= set(nodes) and nodes[-1] == "finish"

    async def internal_calls() -> list[str]:
        return [
            event["metadata"].get("langgraph_node", "")
            async for event in agent.astream_events(
                {"question": "Where was the director born?"},
                version="v2",
                include_tags=["rca:step"],
            )
            if event["event"] == "on_chat_model_end"
        ]

    assert asyncio.run(internal_calls()) == ["plan", "answer_sub", "answer_sub", "mer"]
