"""Self-Ask that decomposes: the bridge entity carried into the next hop, each
hop's NAR pool holding the earlier hops' documents, sub-questions answered from the top-l,
evidence-driven stopping and abstention. Scripted chat over the real demo collection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import Script, ScriptedChat, demo_config, demo_home

from rag_complexity_agents.agents.context import AgentContext, derive_components
from rag_complexity_agents.agents.registry import build_pipeline
from rag_complexity_agents.agents.retrieve import bridge_query
from rag_complexity_agents.agents.run import run_graph
from rag_complexity_agents.components import Components
from rag_complexity_agents.config import Config
from rag_complexity_agents.config.pipelines import get_pipeline
from rag_complexity_agents.types import RunResult

Q = "In which country was the director of Spirited Away born?"


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Components:
    home: Path = demo_home(tmp_path_factory.getbasetemp())
    return Components(demo_config(home))


def run(
    parts: Components, pipeline: str, script: Script, **sections: Any
) -> tuple[RunResult, ScriptedChat]:
    cfg = demo_config(parts.config.corpus.home, **sections)
    derived = derive_components(parts, cfg)
    chat = ScriptedChat(script=script)
    derived.chat = chat  # type: ignore[misc]
    result = run_graph(build_pipeline(pipeline, derived.config, components=derived), Q)
    json.dumps(result.trace)
    return result, chat


def context(config: Config) -> AgentContext:
    """A Self-Ask run's context without components (enough for the passage counts)."""
    return AgentContext(config=config, parts=None, options={}, pipeline=get_pipeline("self_ask"))  # type: ignore[arg-type]


def humans(chat: ScriptedChat, kind: str) -> list[str]:
    return [c["human"] for c in chat.calls if c["kind"] == kind]


def test_bridge_query() -> None:
    assert bridge_query("Where was he born?", "Hayao Miyazaki") == (
        "Where was he born? (Hayao Miyazaki)"
    )
    assert bridge_query("Where was Hayao Miyazaki born?", "Miyazaki") == (
        "Where was Hayao Miyazaki born?"
    )
    assert bridge_query("Where was he born?", "unknown") == "Where was he born?"
    assert bridge_query("Where was he born?", " ") == "Where was he born?"


def test_sub_questions_get_the_papers_l_and_the_question_gets_k() -> None:
    paper = Config.preset("paper")
    ctx = context(paper)
    assert ctx.sub_passages == 10 and ctx.keep_k == 10  # the paper's top-l
    assert context(Config()).sub_passages == 3  # the cpu preset
    assert context(Config(answer={"sub_passages": 2})).sub_passages == 2


def test_hops_carry_the_bridge_and_the_earlier_evidence(parts: Components) -> None:
    script = Script(
        self_ask=[
            "Follow up: Who directed Spirited Away?",
            "Follow up: Where was he born?",
            "So the final answer is: Japan",
        ],
        answer=["Hayao Miyazaki", "Tokyo, Japan"],
    )
    result, chat = run(parts, "self_ask_nar", script, mer={"l": 3}, agents={"mer": False})
    steps = result.trace["steps"]
    assert steps[1]["sub_question"] == "Where was he born?"
    answers = humans(chat, "answer")
    # the second hop is retrieved for and answered with the bridge entity
    assert "Question: Where was he born? (Hayao Miyazaki)" in answers[1]
    # each sub-question is answered from the top-l (mer.l = 3 here), not answer.passages
    assert [h.count("\n[") for h in answers] == [3, 3]
    # the second hop's NAR pool holds the first hop's documents
    pools = [s["retrieval"]["rounds"][0]["retriever"]["initial"] for s in steps]
    assert "carried" not in pools[0] and pools[1]["carried"] >= 3
    assert result.answer == "Japan"


def test_hop_pool_holds_the_earlier_hops_documents(parts: Components) -> None:
    from rag_complexity_agents.agents.retrieve import carried_ids

    state: Any = {
        "question": Q,
        "retrievals": [
            {"step": 0, "docs": [{"id": "a"}, {"id": "b"}]},
            {"step": 1, "docs": [{"id": "c"}, {"id": "a"}]},
            {"step": 2, "docs": [{"id": "z"}]},
        ],
    }
    assert carried_ids(state, 0) == []
    assert carried_ids(state, 2) == ["c", "a", "b"]  # the latest hop first, no duplicates
    retriever = parts.sunar_retriever(with_asu=False)
    ids = [d.id for d in retriever.retrieve("Hayao Miyazaki", 3)]
    ranking, info = retriever.initial_ranking("Spirited Away", Q, carried=ids)
    assert info["carried"] == 3 and set(ids) <= {d.id for d in ranking}


def test_a_first_hop_answer_asks_for_the_missing_follow_up(parts: Components) -> None:
    script = Script(
        self_ask=[
            "Follow up: Who directed Spirited Away?",
            "So the final answer is: Hayao Miyazaki",
            "Follow up: In which country was Hayao Miyazaki born?",
            "So the final answer is: Japan",
        ],
        answer=["Hayao Miyazaki", "Japan"],
    )
    result, chat = run(parts, "self_ask", script, agents={"mer": False, "stop": "evidence"})
    steps = result.trace["steps"]
    assert [s["sub_question"] for s in steps] == [
        "Who directed Spirited Away?",
        "In which country was Hayao Miyazaki born?",
    ]
    prompts = humans(chat, "self_ask")
    assert ["do not answer the question yet" in p for p in prompts] == [False, False, True, False]
    assert result.answer == "Japan"
    # the model's first final answer ends the loop with agents.stop = "model" (the default)
    script.used.clear()
    first, _ = run(parts, "self_ask", script, agents={"mer": False})
    assert first.answer == "Hayao Miyazaki" and len(first.trace["steps"]) == 1


def test_a_first_hop_answer_given_twice_looks_the_question_up(parts: Components) -> None:
    script = Script(
        self_ask=[
            "Follow up: Who directed Spirited Away?",
            "So the final answer is: Hayao Miyazaki",
            "So the final answer is: Hayao Miyazaki",
            "So the final answer is: Japan",
        ],
        answer=["Hayao Miyazaki", "Japan"],
    )
    result, chat = run(parts, "self_ask", script, agents={"mer": False, "stop": "evidence"})
    steps = result.trace["steps"]
    assert [s["kind"] for s in steps] == ["follow_up", "lookup"]
    assert steps[1]["sub_question"] == Q
    assert "Question: " + Q + " (Hayao Miyazaki)" in humans(chat, "answer")[1]
    assert result.answer == "Japan"


def test_unsupported_answers_are_looked_up_then_abstained(parts: Components) -> None:
    script = Script(
        self_ask=["Follow up: Who directed Spirited Away?", "So the final answer is: Atlantis"],
        answer=["Hayao Miyazaki", "Atlantis"],
    )
    evidence = {"mer": False, "stop": "evidence"}
    result, _ = run(parts, "self_ask", script, agents={**evidence, "abstain": "ungrounded"})
    steps = result.trace["steps"]
    assert steps[-1]["kind"] == "lookup"  # looked the question up before giving up
    assert result.answer == "not found"
    script.used.clear()
    kept, _ = run(parts, "self_ask", script, agents=evidence)
    assert kept.answer == "Atlantis"  # without abstain the loop's answer stays


def test_later_hops_read_the_passages_no_earlier_step_read_first(parts: Components) -> None:
    from rag_complexity_agents.agents.answer import shown_docs

    state: Any = {
        "question": Q,
        "steps": [{"index": 0, "sub_question": "a?"}, {"index": 1, "sub_question": "b?"}],
        "retrievals": [
            {"step": 0, "docs": [{"id": "a"}, {"id": "b"}, {"id": "c"}, {"id": "d"}]},
            {"step": 1, "docs": [{"id": "a"}, {"id": "e"}, {"id": "c"}, {"id": "f"}]},
        ],
    }
    l2 = Config(answer={"sub_passages": 2})
    ctx = context(l2)
    assert [d["id"] for d in shown_docs(ctx, state, 1)] == ["a", "e"]
    fresh = l2.model_copy(update={"agents": l2.agents.model_copy(update={"fresh_evidence": True})})
    ctx = context(fresh)
    assert [d["id"] for d in shown_docs(ctx, state, 0)] == ["a", "b"]
    # "c" was retrieved but not read for step 0: it stays in rank order after "e"
    assert [d["id"] for d in shown_docs(ctx, state, 1)] == ["e", "c"]


def test_an_echoed_sub_answer_is_asked_for_again(parts: Components) -> None:
    from rag_complexity_agents.agents.answer import echoes_question

    assert echoes_question("Spirited Away", "Who directed Spirited Away?")
    assert not echoes_question("Spirited Away", "Which came first, Spirited Away or Ponyo?")
    assert not echoes_question("yes", "Is yes a word?") and not echoes_question("", "Who?")
    # an identity question is answered by the name it asks about
    assert not echoes_question("Avery Brundage", "Who is Avery Brundage?")
    assert echoes_question("Henry Baring", "Who is the father of Henry Baring?")
    script = Script(
        self_ask=[
            "Follow up: Who directed Spirited Away?",
            "Follow up: Where was Hayao Miyazaki born?",
            "So the final answer is: Japan",
        ],
        answer=["Spirited Away", "Hayao Miyazaki"],
        quote=[
            "Evidence: directed by Hayao Miyazaki\nAnswer: Hayao Miyazaki",
            "Evidence: Hayao Miyazaki was born in Tokyo\nAnswer: Hayao Miyazaki",
        ],
    )
    echo = {"mer": False, "reject_echo": True}
    result, chat = run(parts, "self_ask", script, agents=echo)
    steps = result.trace["steps"]
    # asked again, quoting its evidence, with the echo ruled out; an echo given twice
    # becomes "unknown"
    assert [s["answer"] for s in steps] == ["Hayao Miyazaki", "unknown"]
    assert len(humans(chat, "answer")) == 2
    again = humans(chat, "quote")
    assert len(again) == 2 and '(Not "Spirited Away"' in again[0]
    assert '(Not "Hayao Miyazaki"' in again[1]
    assert result.trace["llm_calls"] == len(chat.calls)


def test_a_sub_answer_naming_a_passage_becomes_unknown(parts: Components) -> None:
    script = Script(
        self_ask=["Follow up: Who directed Spirited Away?", "So the final answer is: Japan"],
        answer=["[1]"],
    )
    result, _ = run(parts, "self_ask", script, agents={"mer": False})
    steps = result.trace["steps"]
    assert steps[0]["answer"] == "unknown"
    assert any("names a passage" in note for note in result.trace["notes"])


def test_a_sub_answer_of_the_wrong_kind_is_asked_for_again(parts: Components) -> None:
    script = Script(
        self_ask=[
            "Follow up: Who directed Spirited Away?",
            "Follow up: Where was Hayao Miyazaki born?",
            "So the final answer is: Tokyo",
        ],
        answer=["Hayao Miyazaki", "January 5, 1941"],
        quote=["Evidence: born in Tokyo\nAnswer: Tokyo"],
    )
    result, chat = run(parts, "self_ask", script, agents={"mer": False, "check_kind": True})
    # a date for "Where ...?" is asked for again, quoting, with the date ruled out; a person
    # for "Who ...?" is left alone
    assert [s["answer"] for s in result.trace["steps"]] == ["Hayao Miyazaki", "Tokyo"]
    (again,) = humans(chat, "quote")
    assert '(Not "January 5, 1941": the question asks for a place.)' in again
    assert any("is not a place; asked again" in note for note in result.trace["notes"])
    assert result.trace["llm_calls"] == len(chat.calls)


LEGO = "Who voices Batman in The Lego Batman Movie?"
LEGO_DOCS = [
    {
        "id": "a",
        "title": "The Lego Batman Movie",
        "text": "The Lego Batman Movie is a 2017 animated film in which Will Arnett voices Batman.",
    },
    {"id": "b", "title": "Mr. Freeze", "text": "Michael Ansara voiced Mr. Freeze on television."},
    {"id": "c", "title": "Lego Batman 3", "text": "Lego Batman 3 is a game set in space."},
]


def answer_lego(parts: Components, reply: Any, **agents: Any) -> tuple[str, Any, ScriptedChat]:
    """One plan step answered from :data:`LEGO_DOCS` by a chat that replies ``reply``."""
    from rag_complexity_agents.agents.answer import answer_from_evidence

    cfg = demo_config(parts.config.corpus.home, agents=agents)
    derived = derive_components(parts, cfg)
    chat = ScriptedChat(script=Script(answer=[reply]))
    derived.chat = chat  # type: ignore[misc]
    ctx = AgentContext(
        config=derived.config, parts=derived, options={}, pipeline=get_pipeline("plan_execute")
    )
    state: Any = {
        "question": LEGO,
        "pending_step": 0,
        "steps": [{"index": 0, "sub_question": LEGO, "answer": ""}],
        "retrievals": [{"step": 0, "docs": LEGO_DOCS}],
    }
    reread = ctx.agents.reread_unsupported  # plan-and-execute's knob
    _, answer, update = answer_from_evidence(ctx, state, 0, reread=reread)
    return answer, update, chat


def test_a_sub_answer_no_passage_on_its_query_holds_is_read_again(parts: Components) -> None:
    def misreads(human: str) -> str:  # the off-topic passage's name while it is in view
        return "Michael Ansara" if "Mr. Freeze" in human else "Will Arnett"

    answer, _, chat = answer_lego(parts, misreads, reread_unsupported=False)
    assert answer == "Michael Ansara" and len(chat.calls) == 1  # off: the misreading stands
    answer, update, chat = answer_lego(parts, misreads)  # on by default
    # read again from the passages about the query (1 and 3), whose answer one of them holds
    assert answer == "Will Arnett"
    first, again = humans(chat, "answer")
    assert "Mr. Freeze" in first and "Mr. Freeze" not in again and "Lego Batman 3" in again
    assert any("read again from passages [1, 3]" in note for note in update["notes"])
    assert update["llm_calls"] == 2
    # an answer a passage on the query holds is not read again, nor is 'unknown'
    for reply in ("Will Arnett", "unknown"):
        answer, _, chat = answer_lego(parts, reply)
        assert answer == reply and len(chat.calls) == 1
    # a reading again that no passage holds either leaves the first answer
    answer, update, chat = answer_lego(
        parts,
        lambda h: "Michael Ansara" if "Mr. Freeze" in h else "Adam West",
        reread_unsupported=True,
    )
    assert answer == "Michael Ansara" and len(chat.calls) == 2
    assert any("the first kept" in note for note in update["notes"])
