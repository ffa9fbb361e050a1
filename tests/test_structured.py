"""Structured generation: every structured LLM step decoded under a JSON schema
(llama.cpp grammar) or asked as text with parse-and-repair, format failures counted per step
kind, tool calling for LangGraph's prebuilt ReAct agent, and the trace notes for features a
user's model lacks.

Control-flow tests use fakes; the ``llm`` tests run the packaged Qwen2.5-0.5B model with
small budgets."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from agent_fakes import Script, ScriptedChat, StructuredChat
from dropin_fakes import LOOP_SCRIPTS, SUNAR, lean_store
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic import BaseModel

import rag_complexity_agents as rca
from rag_complexity_agents.agents.run import run_graph
from rag_complexity_agents.models.equivalence import LLMJudgeEquivalence
from rag_complexity_agents.models.llamacpp.messages import template_dicts
from rag_complexity_agents.models.llamacpp.tools import (
    read_tool_reply,
    tool_choice_schema,
    tool_specs,
)
from rag_complexity_agents.models.schemas import (
    ChainStep,
    CoTStep,
    Entailment,
    MERAnswer,
    ReActMove,
    SearChainPlan,
    SelfAskMove,
    ShortAnswer,
    YesNo,
    format_instruction,
    json_token_bound,
)
from rag_complexity_agents.models.structured import (
    StructuredOutput,
    ask_yes_no,
    format_failures,
)

Q = "Where was the director of Spirited Away born?"
STEP_SCHEMAS = [SelfAskMove, ShortAnswer, ReActMove, SearChainPlan, CoTStep, MERAnswer, YesNo]


def objects_from(table: dict[str, list[dict[str, Any]]]) -> Callable[[str, int], dict[str, Any]]:
    """Replies per schema name, in order; the last one repeats."""

    def objects(name: str, n: int) -> dict[str, Any]:
        replies = table[name]
        return replies[min(n, len(replies)) - 1]

    return objects


# ------------------------------------------------------------------------------ schemas, tools


def test_every_step_schema_is_bounded_and_described() -> None:
    for schema in STEP_SCHEMAS:
        bound = json_token_bound(schema.model_json_schema())
        assert bound is not None and 0 < bound < 1500, (schema, bound)
        instruction = format_instruction(schema)
        assert all(f'"{name}"' in instruction for name in schema.model_fields)
    assert json_token_bound({"type": "object", "properties": {"a": {"type": "string"}}}) is None
    assert '"follow_up" or "final"' in format_instruction(SelfAskMove)


def test_tool_choice_schema_reply_reading_and_template_rendering() -> None:
    def search(query: str) -> str:
        """Search passages."""
        return query

    specs = tool_specs([search])
    auto = tool_choice_schema(specs, None)
    assert auto is not None and len(auto["anyOf"]) == 2  # a call of search, or an answer
    forced = tool_choice_schema(specs, "any")
    assert forced is not None and forced["properties"]["name"] == {"const": "search"}
    assert tool_choice_schema(specs, "none") is None
    with pytest.raises(ValueError, match="names none of the bound tools"):
        tool_choice_schema(specs, "lookup")
    content, calls = read_tool_reply('{"name": "search", "arguments": {"query": "Ghibli"}}')
    assert (
        content == "" and calls[0]["name"] == "search" and calls[0]["args"] == {"query": "Ghibli"}
    )
    assert read_tool_reply('{"answer": "Tokyo"}') == ("Tokyo", [])
    assert read_tool_reply('{"answer": "Tokyo, Ja') == ("Tokyo, Ja", [])  # cut off
    rendered = template_dicts(
        [
            HumanMessage("q"),
            AIMessage("", tool_calls=[{"name": "search", "args": {"query": "x"}, "id": "1"}]),
            ToolMessage("found", tool_call_id="1"),
        ]
    )
    assert rendered[1] == {
        "role": "assistant",
        "content": '{"name": "search", "arguments": {"query": "x"}}',
    }
    assert rendered[2] == {"role": "tool", "content": "found"}


def test_grammar_keeps_strings_strict_json() -> None:
    pytest.importorskip("llama_cpp")
    from rag_complexity_agents.models.llamacpp.tools import grammar_text

    grammar = grammar_text(SelfAskMove.model_json_schema())
    assert 'char ::= [^"\\\\\\x7F\\x00-\\x1F]' in grammar  # no raw newlines in strings
    assert '"\\"follow_up\\"" | "\\"final\\""' in grammar


# ------------------------------------------------------------------------------ fallback, counts


def test_text_fallback_counts_each_unreadable_reply_and_the_run_result_exposes_the_total() -> None:
    script = LOOP_SCRIPTS["self_ask"]()
    script.replies["self_ask"] = [
        "I am not sure.",  # breaks the format: a failure, repaired by the retry
        "Follow up: Who directed Spirited Away?",
        "So the final answer is: Japan",
    ]
    _, store = lean_store()
    agent = rca.create_rag_agent(
        ScriptedChat(script=script), pipeline="self_ask", vectorstore=store
    )
    result = run_graph(agent, Q, options={"retrieval": "nar"})
    trace = result.trace
    assert result.answer == "Japan" and trace["format_errors"] == 1
    assert trace["format_failures"] == 1 == result.format_failures
    assert trace["format_failures_by_step"] == {"decompose": 1}
    clean = run_graph(
        rca.create_rag_agent(
            ScriptedChat(script=LOOP_SCRIPTS["self_ask"]()), vectorstore=store, **SUNAR
        ),
        Q,
        options={"retrieval": "nar"},
    )
    assert clean.format_failures == 0 and clean.trace["format_failures_by_step"] == {}


def test_an_invalid_structured_reply_is_a_failure_and_the_step_falls_back_to_text() -> None:
    chat = StructuredChat(
        script=LOOP_SCRIPTS["self_ask"](),
        objects=objects_from({"SelfAskMove": [{"kind": "maybe", "text": "?"}]}),
    )
    _, store = lean_store()
    agent = rca.create_rag_agent(chat, pipeline="self_ask", vectorstore=store, retrieval="nar")
    trace = agent.invoke({"question": Q})["trace"]
    assert chat.asked == ["SelfAskMove"]  # then text only (the context stops asking)
    assert trace["answer"] == "Japan"
    assert trace["format_failures_by_step"] == {"decompose": 1}
    assert any("structured output failed" in n for n in trace["notes"])


STRUCTURED_RUNS: dict[str, dict[str, list[dict[str, Any]]]] = {
    "self_ask": {
        "SelfAskMove": [
            {"kind": "follow_up", "text": "Who directed Spirited Away?"},
            {"kind": "final", "text": "Japan"},
        ],
    },
    "react": {
        "ReActMove": [
            {"thought": "Find the director.", "action": "search", "argument": "Spirited Away"},
            {"thought": "He was born in Japan.", "action": "finish", "argument": "Japan"},
        ],
    },
    "searchain": {
        "SearChainPlan": [
            {
                "nodes": [{"query": "Who directed Spirited Away?", "answer": "Hayao Miyazaki"}],
                "final_answer": "Japan",
            }
        ],
    },
    "ircot": {
        "CoTStep": [
            {"sentence": "Spirited Away was directed by Hayao Miyazaki."},
            {"sentence": "Miyazaki was born in Tokyo, Japan. So the answer is: Japan."},
        ],
    },
}


@pytest.mark.parametrize("loop", sorted(STRUCTURED_RUNS))
def test_every_loop_step_asks_for_its_schema(loop: str) -> None:
    table = {
        **STRUCTURED_RUNS[loop],
        "ShortAnswer": [{"answer": "Hayao Miyazaki"}],
        "MERAnswer": [{"reasoning": "Miyazaki was born in Tokyo.", "answer": "Japan"}],
    }
    chat = StructuredChat(script=Script(), objects=objects_from(table))
    _, store = lean_store()
    agent = rca.create_rag_agent(chat, pipeline=loop, vectorstore=store, retrieval="nar", mer=True)
    trace = agent.invoke({"question": Q})["trace"]
    loop_schema = next(iter(STRUCTURED_RUNS[loop]))
    assert chat.calls == []  # no text call at all
    assert loop_schema in chat.asked and chat.asked[-1] == "MERAnswer"
    if loop in ("self_ask", "searchain"):
        assert "ShortAnswer" in chat.asked  # the sub-answers
    assert trace["answer"] == "Japan" and trace["mer"]["extraction"] == "structured"
    assert trace["format_failures"] == 0 and trace["llm_calls"] == len(chat.asked)


def test_structured_chain_nodes_without_an_answer_are_unsolved() -> None:
    from rag_complexity_agents.agents.searchain import _from_plan

    plan = SearChainPlan(
        nodes=[ChainStep(query="Who directed it?", answer=""), ChainStep(query=" ", answer="x")],
        final_answer="",
    )
    parsed = _from_plan(plan)
    assert [(n.query, n.answer, n.unsolved) for n in parsed.nodes] == [
        ("Who directed it?", None, True)
    ]
    assert parsed.kind == "chain"


def test_a_structured_call_gets_the_budget_of_its_schema() -> None:
    from rag_complexity_agents.models.structured import structured_budget

    chat = StructuredChat(
        script=Script(), objects=objects_from({"ShortAnswer": [{"answer": "x"}]}), max_tokens=8
    )
    obj, _, _ = StructuredOutput(chat).call("q?", ShortAnswer, kind="k", max_tokens=4)
    assert obj == ShortAnswer(answer="x") and chat.max_tokens == 8
    assert chat.budgets == [structured_budget(ShortAnswer, 4)] and chat.budgets[0] >= 4 + 48


def test_judges_count_unreadable_verdicts() -> None:
    text = ScriptedChat(script=Script(default="Hmm, hard to say."))
    judge = LLMJudgeEquivalence(text)
    with format_failures() as tally:
        assert judge.equivalent("Tokyo", "Kyoto") is False  # neutral both ways (strict)
    assert tally == {"equivalence_judge": 2}
    yes = ScriptedChat(script=Script(default="Yes, it is."))
    with format_failures() as tally:
        assert ask_yes_no(StructuredOutput(yes), "Is it?", kind="judge") is True
    assert not tally
    structured = StructuredChat(
        script=Script(), objects=objects_from({"Entailment": [{"answer": "contradiction"}]})
    )
    assert LLMJudgeEquivalence(structured).verdict("a", "b", None) == "contradiction"
    assert structured.calls == [] and structured.asked == ["Entailment"]


def test_models_without_prefix_cache_or_log_probabilities_say_so_once() -> None:
    _, store = lean_store()
    chat = ScriptedChat(script=LOOP_SCRIPTS["self_ask"]())
    trace = rca.create_rag_agent(chat, vectorstore=store, retrieval="nar").invoke({"question": Q})[
        "trace"
    ]
    notes = trace["notes"]
    assert (
        sum(n.startswith("prefix cache: none in this process (ScriptedChat)") for n in notes) == 1
    )
    assert sum(n.startswith("token log-probabilities: none (ScriptedChat)") for n in notes) == 1


# ------------------------------------------------------------------------------ the 0.5B model


@pytest.fixture(scope="module")
def qwen() -> Iterator[Any]:
    pytest.importorskip("llama_cpp")
    from rag_complexity_agents.config import Config
    from rag_complexity_agents.models.llamacpp import LlamaCppChatModel
    from rag_complexity_agents.models.packaged import chat_model_installed, packaged_chat_path

    home = Config().models.home
    if not chat_model_installed("qwen2.5-0.5b", home):
        pytest.skip("the packaged chat model qwen2.5-0.5b is not installed")
    path = packaged_chat_path("qwen2.5-0.5b", home)
    yield LlamaCppChatModel(model_path=str(path), n_ctx=2048, n_threads=2, max_tokens=8)


def _step_messages(step: str) -> tuple[list[tuple[str, str]], type[BaseModel]]:
    """The real prompt of a loop step and its schema."""
    from rag_complexity_agents.agents.prompts import cot, react, searchain, self_ask, single_step
    from rag_complexity_agents.retrieval.mer import build_mer_messages
    from rag_complexity_agents.types import Chunk, ScoredDoc

    docs = [ScoredDoc(Chunk(id="d1", text=SPIRITED, title="Spirited Away"), 1.0)]
    path = [("Who directed Spirited Away?", "Hayao Miyazaki")]
    if step == "self_ask":
        return self_ask.messages(Q, path, exemplars=1), SelfAskMove
    if step == "react":
        return react.messages(Q, [], exemplars=1), ReActMove
    if step == "searchain":
        return searchain.messages(Q, [], exemplars=1), SearChainPlan
    if step == "ircot":
        return cot.ircot_messages(Q, docs, [], exemplars=1, max_chars=300), CoTStep
    if step == "sub_answer":
        human = single_step.user_message(path[0][0], docs, max_chars=300)
        return [("system", single_step.SYSTEM), ("human", human)], ShortAnswer
    if step == "mer":
        return build_mer_messages(Q, path, docs, exemplars=()), MERAnswer
    if step == "judge":
        return [("human", "Is Tokyo a city in Japan? Reply Yes or No.")], YesNo
    return [("human", "Statement 1: Tokyo\nStatement 2: Kyoto\nSame answer?")], Entailment


SPIRITED = (
    "Spirited Away is a 2001 Japanese animated film written and directed by Hayao Miyazaki. "
    "Miyazaki was born in Tokyo, Japan."
)
STEPS = ["self_ask", "react", "searchain", "ircot", "sub_answer", "mer", "judge", "equivalence"]


@pytest.mark.llm
@pytest.mark.parametrize("step", STEPS)
def test_packaged_model_decodes_each_step_under_its_schema(qwen: Any, step: str) -> None:
    messages, schema = _step_messages(step)
    structured = StructuredOutput(qwen, "on")
    with format_failures() as tally:
        obj, reply, failure = structured.call(messages, schema, kind=step, max_tokens=4)
    assert failure is None and isinstance(obj, schema), (failure, reply)
    assert reply is not None and schema.model_validate(json.loads(reply.text)) == obj
    assert not tally and structured.enabled


@pytest.mark.llm
def test_structured_calls_keep_the_prefix_cache(qwen: Any) -> None:
    messages, schema = _step_messages("self_ask")
    structured = StructuredOutput(qwen, "on")
    structured.call(messages, schema, kind="self_ask", max_tokens=4)
    before = qwen.prefix_cache_stats()["reused_tokens"]
    structured.call(messages, schema, kind="self_ask", max_tokens=4)
    assert qwen.prefix_cache_stats()["reused_tokens"] - before >= 64


@pytest.mark.llm
def test_create_react_agent_calls_a_tool_with_the_packaged_model(qwen: Any) -> None:
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    seen: list[str] = []

    @tool
    def search(query: str) -> str:
        """Search Wikipedia passages for a query."""
        seen.append(query)
        return SPIRITED

    model = qwen.model_copy(update={"max_tokens": 48})
    agent = create_react_agent(model, [search])
    state = agent.invoke(
        {"messages": [("human", "Who directed Spirited Away? Use the search tool.")]},
        {"recursion_limit": 4},
    )
    messages = state["messages"]
    calls = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    assert calls and calls[0].tool_calls[0]["name"] == "search" and seen
    assert any(isinstance(m, ToolMessage) and m.content == SPIRITED for m in messages)


def test_a_marked_line_inside_a_structured_move_counts_as_its_marker() -> None:
    from rag_complexity_agents.agents.self_ask import _from_move

    final = _from_move(SelfAskMove(kind="follow_up", text="So the final answer is: Koganei"))
    assert (final.kind, final.answer) == ("final", "Koganei")
    follow = _from_move(SelfAskMove(kind="final", text="Follow up: Who directed it?"))
    assert (follow.kind, follow.follow_up) == ("follow_up", "Who directed it?")
    plain = _from_move(SelfAskMove(kind="follow_up", text="Who directed Spirited Away?"))
    assert (plain.kind, plain.follow_up) == ("follow_up", "Who directed Spirited Away?")
    assert _from_move(SelfAskMove(kind="final", text="  ")).kind == "none"
