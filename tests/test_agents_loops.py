"""Every loop with a scripted fake chat model over the real demo collection (real first stage,
scorer, graph, NAR and ASU clustering): normal runs, format breaks, step limits, the ASU
edges, MER, per-run knobs, checkpointing, streaming, async and bad input."""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import Script, ScriptedChat, demo_config, demo_home

from rag_complexity_agents.agents.plan_execute import (
    beyond_the_question,
    called_for,
    chained_step,
    ends_on_the_answer,
    in_order,
    is_chain,
    leaks_an_exemplar,
    loses_the_subject,
    named_steps,
    splice,
    the_question_alone,
    with_relations,
)
from rag_complexity_agents.agents.prompts import plan_execute as plan_prompt
from rag_complexity_agents.agents.registry import build_pipeline
from rag_complexity_agents.agents.retrieve import expand_query
from rag_complexity_agents.agents.run import arun_graph, astream_graph, run_graph, stream_graph
from rag_complexity_agents.agents.trace import build_trace
from rag_complexity_agents.agents.wiring import STREAM_STEPS
from rag_complexity_agents.components import Components
from rag_complexity_agents.config import Config
from rag_complexity_agents.config.pipelines import PIPELINES
from rag_complexity_agents.errors import CorpusError, InputError, ModelServerError
from rag_complexity_agents.types import RunResult

Q = "In which country was the director of Spirited Away born?"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_home(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def parts(home: Path) -> Components:
    return Components(demo_config(home))


def make(parts: Components, script: Script, **sections: Any) -> tuple[Components, ScriptedChat]:
    """Components sharing the store/scorer of ``parts`` with a fresh scripted chat."""
    from rag_complexity_agents.agents.context import derive_components

    cfg = demo_config(parts.config.corpus.home, **sections)
    derived = derive_components(parts, cfg)
    chat = ScriptedChat(script=script)
    derived.chat = chat  # type: ignore[misc]
    return derived, chat


def run(
    parts: Components, pipeline: str, script: Script, question: str = Q, **kwargs: Any
) -> tuple[RunResult, ScriptedChat]:
    options = kwargs.pop("options", None)
    recursion_limit = kwargs.pop("recursion_limit", None)
    derived, chat = make(parts, script, **kwargs)
    graph = build_pipeline(pipeline, derived.config, components=derived)
    result = run_graph(graph, question, options=options, recursion_limit=recursion_limit)
    json.dumps(result.trace)  # always JSON-serialisable
    return result, chat


def spirited(**extra: Any) -> Script:
    replies: dict[str, Any] = {
        "self_ask": [
            "Follow up: Who directed Spirited Away?",
            "Follow up: Where was Hayao Miyazaki born?",
            "So the final answer is: Japan",
        ],
        "answer": ["Hayao Miyazaki", "Tokyo, Japan"],
        "asu": "Hayao Miyazaki",
        "mer": "[Reasoning]: The evidence says Miyazaki was born in Tokyo.\n[Final Answer]: Japan",
    }
    replies.update(extra)
    return Script(**replies)


def rounds_of(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for s in trace["steps"] for r in s.get("retrieval", {}).get("rounds", [])]


# ------------------------------------------------------------------------------ Self-Ask


def test_self_ask_sunar_mer_normal_run(parts: Components) -> None:
    result, chat = run(parts, "self_ask_sunar_mer", spirited())
    t = result.trace
    assert result.answer == "Japan" and t["answer_source"] == "mer"
    assert t["stop_reason"] == "final_answer" and t["loop_answer"] == "Japan"
    assert t["sub_questions"] == ["Who directed Spirited Away?", "Where was Hayao Miyazaki born?"]
    assert t["reasoning_path"] == [
        ["Who directed Spirited Away?", "Hayao Miyazaki"],
        ["Where was Hayao Miyazaki born?", "Tokyo, Japan"],
    ]
    # SUNAR: NAR batches from R and N, ASU clusters per batch, provenance of the evidence
    for step in t["steps"]:
        (rnd,) = step["retrieval"]["rounds"]
        assert rnd["c"] == 8 and [b["pool"] for b in rnd["batches"]] == ["R", "N"]
        assert all(
            b["s"] == 1 and b["cluster_answers"] == ["Hayao Miyazaki"] for b in rnd["batches"]
        )
        assert rnd["retriever"]["initial"]["pool_used"] == "union"
    titles = [e["title"] for e in t["steps"][0]["retrieval"]["evidence"]]
    assert "Spirited Away" in titles
    sources = {e["source"] for s in t["steps"] for e in s["retrieval"]["evidence"]}
    assert sources <= {"first_stage", "neighbour", "backfill"}
    assert all(r["retriever"]["nar"]["scored_neighbours"] > 0 for r in rounds_of(t))
    assert all(e["batch"] is not None for e in t["evidence"])
    neighbours = [e for e in t["evidence"] if e["source"] == "neighbour"]
    assert all(e["via"] and e["batch"] >= 1 for e in neighbours)
    assert {e["doc_id"] for e in t["evidence"]} >= {"demo-134", "demo-077"}
    # MER saw the path and the top-l evidence re-scored against the question
    assert t["mer"]["answer"] == "Japan" and t["mer"]["extraction"] == "marker"
    assert 1 <= len(t["mer"]["evidence"]) <= 4
    # costs: 3 decompositions + 2 sub-answers + MER + 4 ASU prompts (2 batches x 2 steps)
    assert t["llm_calls"] == 10 and t["asu_samples"] == 12 and t["retrieval_calls"] == 2
    assert chat.kinds().count("asu") == 12 and chat.kinds()[-1] == "mer"
    assert t["input_tokens"] == 10 * (len(chat.calls) - 12) and t["seconds"] > 0


def test_self_ask_format_break_is_retried_with_a_reminder(parts: Components) -> None:
    script = spirited(
        self_ask=[
            "I think it is Japan maybe",
            "Follow up: Who directed Spirited Away?",
            "So the final answer is: Japan",
        ],
    )
    result, chat = run(parts, "self_ask", script)
    assert result.answer == "Japan" and result.trace["format_errors"] == 1
    prompts = [c["human"] for c in chat.calls if c["kind"] == "self_ask"]
    assert "must start with" not in prompts[0] and "must start with" in prompts[1]


def test_self_ask_always_broken_still_answers(parts: Components) -> None:
    script = spirited(self_ask="<<garbage>>", answer="Hayao Miyazaki")
    result, _ = run(parts, "self_ask", script)
    t = result.trace
    # one retry, then the question itself as the only follow-up, then a format stop
    assert t["steps"][0]["sub_question"] == Q and t["steps"][0]["kind"] == "question"
    assert t["stop_reason"] == "format_error" and t["format_errors"] == 3
    assert result.answer == "Hayao Miyazaki" and t["answer_source"] == "last_intermediate"


def test_self_ask_repeated_follow_up_stops(parts: Components) -> None:
    script = spirited(self_ask="Follow up: Who directed Spirited Away?")
    result, _ = run(parts, "self_ask", script)
    assert result.trace["stop_reason"] == "repeated_query" and len(result.trace["steps"]) == 1
    assert result.answer == "Hayao Miyazaki"


def test_copied_exemplar_answer_is_not_trusted(parts: Components) -> None:
    script = spirited(
        self_ask=["Follow up: Who directed Spirited Away?", "So the final answer is: the Amstel"]
    )
    result, _ = run(parts, "self_ask", script, agents={"max_format_errors": 0})
    assert result.answer != "the Amstel" and result.trace["stop_reason"] == "format_error"


# ------------------------------------------------------------------------------ ReAct


def test_react_normal_run_with_lookup(parts: Components) -> None:
    script = Script(
        react=[
            "Thought 1: I need the director.\nAction 1: Search[Spirited Away director]",
            "Thought 2: Hayao Miyazaki directed it; where was he born?\nAction 2: Lookup[born]",
            "Thought 3: He was born in Tokyo, Japan.\nAction 3: Finish[Japan]",
        ],
        asu="Hayao Miyazaki",
    )
    result, chat = run(parts, "react_sunar_mer", script, mer={"l": 3})
    t = result.trace
    assert t["stop_reason"] == "final_answer" and t["loop_answer"] == "Japan"
    search, lookup = t["steps"]
    assert search["action"] == "Search[Spirited Away director]" and "[1]" in search["observation"]
    assert lookup["action"] == "Lookup[born]" and "born" in lookup["observation"]
    assert lookup["observation"].startswith("(Result 1 /")
    assert search["answer"].startswith("Hayao Miyazaki directed it")  # the next thought
    assert t["mer"] is not None and chat.kinds()[-1] == "mer"
    assert t["retrieval_calls"] == 1


# ------------------------------------------------------------------------------ SearChain


def test_searchain_corrects_a_wrong_node_from_evidence(parts: Components) -> None:
    script = Script(
        searchain=[
            "[Query 1]: Who directed Spirited Away?\n[Answer 1]: Hayao Miyazaki\n"
            "[Query 2]: Where was Hayao Miyazaki born?\n[Answer 2]: Osaka\n[Final Answer]: Japan",
            "[Final Answer]: Japan",
        ],
        answer=["Hayao Miyazaki", "Tokyo"],
    )
    result, chat = run(parts, "searchain", script)
    t = result.trace
    assert [s["status"] for s in t["steps"]] == ["verified", "corrected"]
    assert t["steps"][1]["answer"] == "Tokyo"
    # the corrected node went back to planning with the checked nodes in the prompt
    replan = [c["human"] for c in chat.calls if c["kind"] == "searchain"][1]
    assert "[Answer 2]: Tokyo (checked)" in replan
    assert result.answer == "Japan" and t["stop_reason"] == "final_answer"


def test_searchain_unsolved_query_is_filled_then_final(parts: Components) -> None:
    script = Script(
        searchain=[
            "[Query 1]: Who directed Spirited Away?\n[Unsolved Query]: Who directed Spirited Away?",
            "[Final Answer]: Hayao Miyazaki",
        ],
        answer="Hayao Miyazaki",
    )
    result, _ = run(parts, "searchain_sunar", script)
    assert result.trace["steps"][0]["status"] == "filled" and result.answer == "Hayao Miyazaki"


# ------------------------------------------------------------------------------ Plan-and-execute

PLAN = "1. Who directed Spirited Away?\n2. Where was #1 born?"


@pytest.mark.parametrize("pipeline", ["plan_execute", "plan_execute_sunar"])
def test_plan_execute_answers_the_plan_in_order(parts: Components, pipeline: str) -> None:
    script = Script(plan=PLAN, answer=["Hayao Miyazaki", "Tokyo, Japan"], asu="Hayao Miyazaki")
    result, chat = run(parts, pipeline, script)
    t = result.trace
    assert [s["sub_question"] for s in t["steps"]] == [
        "Who directed Spirited Away?",
        "Where was Hayao Miyazaki born?",  # #1 replaced by the first answer
    ]
    assert t["steps"][1]["planned"] == "Where was #1 born?"
    assert result.answer == "Tokyo, Japan" and t["stop_reason"] == "final_answer"
    assert chat.kinds().count("plan") == 1 and "plan_final" not in chat.kinds()
    second = [c["human"] for c in chat.calls if c["kind"] == "answer"][1]
    assert "Question: Where was Hayao Miyazaki born?" in second
    assert t["format_failures"] == 0 and t["retrieval_calls"] >= 2


def test_plan_execute_unreadable_plan_is_retried_then_the_question(parts: Components) -> None:
    script = Script(plan="I would search the web.", answer="Japan")
    result, chat = run(parts, "plan_execute", script)
    t = result.trace
    assert chat.kinds().count("plan") == 2  # one retry with the format reminder
    assert "One simple question per line" in [c["human"] for c in chat.calls][1]
    assert [s["sub_question"] for s in t["steps"]] == [Q] and result.answer == "Japan"
    assert t["format_failures"] == 2


def test_plan_execute_copied_exemplar_plan_is_not_used(parts: Components) -> None:
    copied = "1. Who is the director of the film Jaws?\n2. Who is the father of #1?"
    script = Script(plan=[copied, PLAN], answer=["Hayao Miyazaki", "Tokyo"])
    result, _ = run(parts, "plan_execute", script)
    assert result.trace["steps"][0]["sub_question"] == "Who directed Spirited Away?"
    assert result.answer == "Tokyo"


def test_plan_execute_keeps_an_exemplar_step_the_question_calls_for(parts: Components) -> None:
    """A step worded like an exemplar's ("In which city was #1 born?") is the right step for
    a question about a birthplace: the plan is used as written, not asked for again."""
    plan = "1. Who is the director of Spirited Away?\n2. In which city was #1 born?"
    result, chat = run(parts, "plan_execute", Script(plan=plan, answer=["Hayao Miyazaki", "Tokyo"]))
    asked = [s["sub_question"] for s in result.trace["steps"]]
    assert asked == [
        "Who is the director of Spirited Away?",
        "In which city was Hayao Miyazaki born?",
    ]
    assert chat.kinds().count("plan") == 1 and result.answer == "Tokyo"


@pytest.mark.parametrize(
    ("shown", "question", "called"),
    [
        ("In which city was #1 born?", "Where was the father of Emily Eavis born?", True),
        ("Who is the father of #1?", "Who is the father of the director of film The Ride?", True),
        (
            "Who is the author of Dracula?",
            "Who is the mayor of the city where the author of Dracula was born?",
            True,
        ),
        (
            "Who is the director of the film Jaws?",
            "Where was the director of film Timber Falls born?",
            False,
        ),
        ("In what year did #1 go public?", "Who founded Studio Ghibli?", False),
        ("In what year did #1 go public?", "In which year was Harvard University founded?", False),
        ("Which company makes the Walkman?", "Which company makes the PlayStation?", False),
    ],
)
def test_called_for(shown: str, question: str, called: bool) -> None:
    assert shown in plan_prompt.exemplar_questions()
    assert called_for(shown, question) is called


@pytest.mark.parametrize(
    "bad_plan",
    [
        "1. Where did #1 study?\n2. Who directed Spirited Away?",
        "1. Who directed #2?\n2. Where was #1 born?",
        "1. Who directed #3?\n2. Where?",
    ],
)
def test_plan_execute_plan_referring_forward_is_retried(parts: Components, bad_plan: str) -> None:
    script = Script(plan=[bad_plan, PLAN], answer=["Hayao Miyazaki", "Tokyo"])
    result, chat = run(parts, "plan_execute", script)
    retry = [c["human"] for c in chat.calls if c["kind"] == "plan"][1]
    assert "#k may only stand for the answer of an earlier question" in retry
    assert [s["sub_question"] for s in result.trace["steps"]] == [
        "Who directed Spirited Away?",
        "Where was Hayao Miyazaki born?",
    ]
    assert result.answer == "Tokyo" and result.trace["format_errors"] == 1


def test_plan_execute_runs_an_out_of_order_plan_in_order(parts: Components) -> None:
    plan = "1. Where was #2 born?\n2. Who directed Spirited Away?"
    result, chat = run(parts, "plan_execute", Script(plan=plan, answer=["Hayao Miyazaki", "Tokyo"]))
    assert [s["sub_question"] for s in result.trace["steps"]] == [
        "Who directed Spirited Away?",
        "Where was Hayao Miyazaki born?",
    ]
    assert chat.kinds().count("plan") == 1 and result.answer == "Tokyo"


@pytest.mark.parametrize(
    ("plan", "ordered"),
    [
        (["A?", "B of #1?"], ["A?", "B of #1?"]),
        (["C of #2 and #3?", "A?", "B of #2?"], ["A?", "B of #1?", "C of #1 and #2?"]),
        (["B of #3?", "D?", "A?"], ["D?", "A?", "B of #2?"]),
        (["A of #1?"], None),
        (["A of #2?", "B of #1?"], None),
        (["A of #5?", "B?"], None),
    ],
)
def test_in_order(plan: list[str], ordered: list[str] | None) -> None:
    assert in_order(plan) == ordered


def test_plan_execute_plan_referring_forward_twice_falls_back(parts: Components) -> None:
    bad_plan = "1. Where did #1 study?"
    result, chat = run(parts, "plan_execute", Script(plan=[bad_plan, bad_plan], answer="Japan"))
    assert chat.kinds().count("plan") == 2
    assert [s["sub_question"] for s in result.trace["steps"]] == [Q] and result.answer == "Japan"


def test_plan_execute_unknown_last_answer_asks_from_the_path(parts: Components) -> None:
    script = Script(plan=PLAN, answer=["Hayao Miyazaki", "unknown"], plan_final="Japan")
    result, chat = run(parts, "plan_execute", script)
    final = [c["human"] for c in chat.calls if c["kind"] == "plan_final"]
    assert len(final) == 1 and "- Who directed Spirited Away? Hayao Miyazaki" in final[0]
    assert result.answer == "Japan" and result.trace["answer_source"] == "forced_final"


@pytest.mark.parametrize(
    ("plan", "chain"),
    [
        (["Who directed Spirited Away?", "Where was #1 born?"], True),
        (["Who directed Spirited Away?"], True),
        (["A?", "B of #1?", "C of #2 and #1?"], True),
        (["Where was the director of Spirited Away born?", "Who directed Spirited Away?"], False),
        (["A?", "B of #1?", "C of #1?"], False),  # the answer of question 2 is never used
    ],
)
def test_is_chain(plan: list[str], chain: bool) -> None:
    assert is_chain(plan) is chain


def test_plan_execute_plan_that_is_no_chain_is_concluded_from_all_answers(
    parts: Components,
) -> None:
    # the whole question first, its bridge question after it: the last answer is not the answer
    reversed_plan = (
        "1. Where was the director of Spirited Away born?\n2. Who directed Spirited Away?"
    )
    script = Script(plan=reversed_plan, answer=["Tokyo", "Hayao Miyazaki"], plan_final="Tokyo")
    result, chat = run(parts, "plan_execute", script)
    final = [c["human"] for c in chat.calls if c["kind"] == "plan_final"]
    assert len(final) == 1
    assert "- Where was the director of Spirited Away born? Tokyo" in final[0]
    assert "- Who directed Spirited Away? Hayao Miyazaki" in final[0]
    assert result.answer == "Tokyo" and result.trace["answer_source"] == "forced_final"


def test_a_one_fact_question_gets_one_step_not_an_invented_second(parts: Components) -> None:
    question = "Who designed the Statue of Liberty?"
    invented = f"1. {question}\n2. In which year was #1 designed?"
    script = Script(plan=invented, answer=["Frédéric Auguste Bartholdi", "1832"])
    result, chat = run(parts, "plan_execute", script, question=question)
    assert [s["sub_question"] for s in result.trace["steps"]] == [question]
    assert result.answer == "Frédéric Auguste Bartholdi" and chat.kinds().count("answer") == 1


@pytest.mark.parametrize("after_one_step_plan", [False, True])
def test_mer_after_a_one_step_plan_only_when_asked(
    parts: Components, after_one_step_plan: bool
) -> None:
    question = "Who directed Spirited Away?"
    script = spirited(plan=f"1. {question}", answer=["Hayao Miyazaki"])
    result, chat = run(
        parts,
        "plan_execute_mer",
        script,
        question,
        mer={"after_one_step_plan": after_one_step_plan},
    )
    assert ("mer" in chat.kinds()) is after_one_step_plan
    assert result.answer == ("Japan" if after_one_step_plan else "Hayao Miyazaki")


@pytest.mark.parametrize("after_chain", [False, True])
def test_mer_after_an_answered_chain_only_when_asked(parts: Components, after_chain: bool) -> None:
    script = spirited(plan=PLAN, answer=["Hayao Miyazaki", "Tokyo"])
    result, chat = run(parts, "plan_execute_mer", script, mer={"after_chain": after_chain})
    assert ("mer" in chat.kinds()) is after_chain
    assert result.answer == ("Japan" if after_chain else "Tokyo")
    assert result.trace["answer_source"] == ("mer" if after_chain else "loop")


@pytest.mark.parametrize("last", ["Hayao Miyazaki", "Miyazaki"])
def test_mer_after_a_chain_whose_last_answer_repeats_it(parts: Components, last: str) -> None:
    # the last answer repeats the bridge (an earlier answer) or a thing its own query names
    # ("Where was Hayao Miyazaki born?"): the chain has not concluded, so MER reads
    script = spirited(plan=PLAN, answer=["Hayao Miyazaki", last])
    result, chat = run(parts, "plan_execute_mer", script, mer={"after_chain": False})
    assert result.trace["loop_answer"] == last
    assert "mer" in chat.kinds() and result.answer == "Japan"


def test_mer_still_concludes_a_plan_that_is_not_a_chain(parts: Components) -> None:
    question = "Was Spirited Away or Princess Mononoke released first?"
    plan = "1. When was Spirited Away released?\n2. When was Princess Mononoke released?"
    script = spirited(plan=plan, answer=["2001", "1997"], mer="[Final Answer]: Princess Mononoke")
    result, chat = run(parts, "plan_execute_mer", script, question, mer={"after_chain": False})
    assert "mer" in chat.kinds() and result.trace["loop_answer"] == ""
    assert result.answer == "Princess Mononoke"


def test_mer_after_a_one_step_answer_that_repeats_the_question(parts: Components) -> None:
    question = "Which other name does the Miyazaki film Spirited Away have?"
    step = "What is another title of the film by Miyazaki about Chihiro?"  # not echoed
    script = spirited(plan=f"1. {step}", answer=["Spirited Away"])
    result, chat = run(
        parts, "plan_execute_mer", script, question, mer={"after_one_step_plan": False}
    )
    assert result.trace["steps"][0]["answer"] == "Spirited Away"
    assert "mer" in chat.kinds()  # the answer only repeats the question: MER reads again
    assert result.answer == "Japan"


@pytest.mark.parametrize("checks", [True, False])
def test_a_step_that_drops_the_relation_asks_for_it(parts: Components, checks: bool) -> None:
    question = "Where was the husband of Ada Lovelace born?"
    script = Script(plan="1. Who is Ada Lovelace?\n2. Where was #1 born?", answer=["X", "Y"])
    result, _ = run(
        parts, "plan_execute", script, question=question, agents={"plan_checks": checks}
    )
    steps = [s["sub_question"] for s in result.trace["steps"]]
    first = "Who is the husband of Ada Lovelace?" if checks else "Who is Ada Lovelace?"
    assert steps == [first, "Where was X born?"]


@pytest.mark.parametrize("checks", [True, False])
def test_a_plan_that_lost_the_subject_becomes_the_question(parts: Components, checks: bool) -> None:
    question = "Ulm Minster airport is in which German state?"
    nameless = "1. What is the name of the airport?\n2. In which German state is #1 located?"
    script = Script(plan=nameless, answer=["Ulm Airport", "Bavaria"])
    agents = {"plan_checks": checks, "reread_unsupported": False}  # one reading a step
    result, chat = run(parts, "plan_execute", script, question=question, agents=agents)
    steps = [s["sub_question"] for s in result.trace["steps"]]
    assert steps == (
        [question]
        if checks
        else ["What is the name of the airport?", "In which German state is Ulm Airport located?"]
    )
    assert chat.kinds().count("answer") == (1 if checks else 2)


@pytest.mark.parametrize(
    ("plan", "question", "lost"),
    [
        (
            ["What is the name of the airport?", "Where is #1?"],
            "Where is Ulm Minster airport?",
            True,
        ),
        (["What was the name of this beast?"], "Which beast has a lion's body?", True),
        (
            ["Which film came out first?", "When was #1 released?"],
            "Which came first, Jaws or Alien?",
            True,
        ),
        # a name kept, in any form ("Mozart's"), or a question that names nothing
        (
            ["Who is Mozart's father?", "Where was #1 born?"],
            "Where was Mozart's father born?",
            False,
        ),
        (["What is the name of Mozart's father?"], "Who was the father of Mozart?", False),
        (["Who starred in the film?"], "who starred in an officer and a gentleman", False),
    ],
)
def test_loses_the_subject(plan: list[str], question: str, lost: bool) -> None:
    assert loses_the_subject(plan, question) is lost


@pytest.mark.parametrize(
    ("plan", "question", "repaired"),
    [
        (
            ["Who is Ada Lovelace?", "Where was #1 born?"],
            "Where was the husband of Ada Lovelace born?",
            ["Who is the husband of Ada Lovelace?", "Where was #1 born?"],
        ),
        # the question's own words, a parenthesis and a comma in the name included
        (
            ["Who is John Smith?", "When was #1 born?"],
            "When was John Smith (1801–1870)'s father born?",
            ["Who is John Smith (1801–1870)'s father?", "When was #1 born?"],
        ),
        (
            ["Who is Anne, Countess Of Bar?", "Which country is #1 from?"],
            "Which country Anne, Countess Of Bar's mother is from?",
            ["Who is Anne, Countess Of Bar's mother?", "Which country is #1 from?"],
        ),
        # kept: the relation is asked, names the kind of answer, or is not in the question
        (
            ["Who is the father of Ada Lovelace?", "Where was #1 born?"],
            "Where was the father of Ada Lovelace born?",
            ["Who is the father of Ada Lovelace?", "Where was #1 born?"],
        ),
        (
            ["Who is Ada Lovelace?", "Where was #1 born?"],
            "What is the place of birth of Ada Lovelace?",
            ["Who is Ada Lovelace?", "Where was #1 born?"],
        ),
        (
            ["Who is Ada Lovelace?", "What did #1 write?"],
            "What did Ada Lovelace write?",
            ["Who is Ada Lovelace?", "What did #1 write?"],
        ),
        (  # the step already asks one relation; the other is the next hop's
            ["Who is Ada Lovelace's husband?", "Who is the father of #1?"],
            "Who is the father of Ada Lovelace's husband?",
            ["Who is Ada Lovelace's husband?", "Who is the father of #1?"],
        ),
    ],
)
def test_with_relations(plan: list[str], question: str, repaired: list[str]) -> None:
    assert with_relations(plan, question) == repaired


@pytest.mark.parametrize(
    ("plan", "kept"),
    [
        (["Q?", "When was #1 born?"], ["Q?"]),
        (["Who is X?", "Q?", "Where was #2 born?", "Who is Y?"], ["Who is X?", "Q?"]),
        (["Who is X?", "Where was #1 born?"], ["Who is X?", "Where was #1 born?"]),
        (["Q?", "Who is X?"], ["Q?", "Who is X?"]),  # the bridge question stays
    ],
)
def test_beyond_the_question(plan: list[str], kept: list[str]) -> None:
    assert beyond_the_question(plan, "Q?") == kept


@pytest.mark.parametrize(
    ("plan", "question", "tidied"),
    [
        (
            ["Which university is Harvard?", "In what year was #1 founded?"],
            "In which year was Harvard University founded?",
            ["In what year was Harvard founded?"],
        ),
        (
            ["Who is Hayao Miyazaki?", "Where was #1 born?", "Which river flows through #2?"],
            "Which river flows through the city where Hayao Miyazaki was born?",
            ["Where was Hayao Miyazaki born?", "Which river flows through #1?"],
        ),
        # a description, not a name: the step asks for a fact
        (
            ["Who is the director of the film Jaws?", "Who is the father of #1?"],
            "Who is the father of the director of the film Jaws?",
            ["Who is the director of the film Jaws?", "Who is the father of #1?"],
        ),
        # a thing the question does not name, or a step that is all the plan: kept
        (
            ["Who is Steven Spielberg?", "Where was #1 born?"],
            "Where was the director of Jaws born?",
            ["Who is Steven Spielberg?", "Where was #1 born?"],
        ),
        (["Who is Hayao Miyazaki?"], "Who is Hayao Miyazaki?", ["Who is Hayao Miyazaki?"]),
        # a step no later step uses or names again: kept, or the name would be lost
        (
            ["Who is Scott Derrickson?", "Who is Ed Wood?", "Are they of the same nationality?"],
            "Were Scott Derrickson and Ed Wood of the same nationality?",
            ["Who is Scott Derrickson?", "Who is Ed Wood?", "Are they of the same nationality?"],
        ),
        (
            ["Who is Avery Brundage?", "Which body is Avery Brundage in?", "Who leads #2?"],
            "Who leads the body Avery Brundage is in?",
            ["Which body is Avery Brundage in?", "Who leads #1?"],
        ),
        # a step that asks for a property of a named thing asks for a fact: kept
        (
            [
                "What nationality is Scott Derrickson?",
                "What nationality is Ed Wood?",
                "Are #1 and #2 the same?",
            ],
            "Were Scott Derrickson and Ed Wood of the same nationality?",
            [
                "What nationality is Scott Derrickson?",
                "What nationality is Ed Wood?",
                "Are #1 and #2 the same?",
            ],
        ),
        (
            ["What genre is Nirvana?", "Which band of #1 came from Seattle?"],
            "Which band of the genre of Nirvana came from Seattle?",
            ["What genre is Nirvana?", "Which band of #1 came from Seattle?"],
        ),
        (
            ["Who is Edmund on Days of Our Lives?", "What is Edmund's occupation?"],
            "who is edmund on days of our lives",
            ["Who is Edmund on Days of Our Lives?", "What is Edmund's occupation?"],
        ),
        (
            ["Which country is Paris in?", "Who leads #1?"],
            "Who leads the country Paris is in?",
            ["Which country is Paris in?", "Who leads #1?"],
        ),
    ],
)
def test_named_steps(plan: list[str], question: str, tidied: list[str]) -> None:
    assert named_steps(plan, question) == tidied


@pytest.mark.parametrize(
    ("plan", "kept"),
    [
        (["Q?", "What was the name of the team?"], ["Q?"]),
        (["Which team did they play?", "q"], ["q"]),  # the question in other words
        (["Q?"], ["Q?"]),
        (["Who is X?", "Where was #1 born?"], ["Who is X?", "Where was #1 born?"]),
    ],
)
def test_the_question_alone(plan: list[str], kept: list[str]) -> None:
    assert the_question_alone(plan, "Q?") == kept


WEST = "Which city served as the capital of West Germany from 1949 to 1990?"


@pytest.mark.parametrize(
    ("plan", "question", "kept"),
    [
        (
            ["Which city served as the capital of West Germany?", "When was #1 in power?"],
            WEST,
            ["Which city served as the capital of West Germany?"],
        ),
        # the last step asks for what the question asks for, or the kinds are unclear: kept
        (
            ["Who directed Jaws?", "Where was #1 born?"],
            "Where was the director of Jaws born?",
            None,
        ),
        (["Which city was X born in?", "What is #1 known for?"], "Which city is X from?", None),
        (["Who directed Jaws?", "When was #1 born?"], "What is the birth date of X?", None),
        (["When did X die?", "Where did #1 happen?"], "Who wrote X?", None),
    ],
)
def test_ends_on_the_answer(plan: list[str], question: str, kept: list[str] | None) -> None:
    assert ends_on_the_answer(plan, question) == (plan if kept is None else kept)


def test_a_tidied_plan_runs_and_its_notes_keep_the_plan_as_written(parts: Components) -> None:
    written = "1. Which city served as the capital of West Germany?\n2. When was #1 in power?"
    script = Script(plan=written, answer=["Bonn", "1949"])
    result, chat = run(parts, "plan_execute", script, question=WEST, agents={"tidy_plans": True})
    t = result.trace
    assert [s["sub_question"] for s in t["steps"]] == [
        "Which city served as the capital of West Germany?"
    ]
    assert result.answer == "Bonn" and chat.kinds().count("answer") == 1
    assert (
        "plan as written: Which city served as the capital of West Germany? / When was #1 in power?"
        in t["notes"]
    )
    result, _ = run(parts, "plan_execute", script, question=WEST)  # off by default
    assert len(result.trace["steps"]) == 2 and result.answer == "1949"


def test_a_tidied_plan_that_restates_the_question_runs_the_question_alone(
    parts: Components,
) -> None:
    question = "Who founded Studio Ghibli?"
    written = f"1. {question}\n2. In which year was Studio Ghibli founded?"
    script = Script(plan=written, answer=["Hayao Miyazaki", "1985"])
    result, chat = run(
        parts, "plan_execute", script, question=question, agents={"tidy_plans": True}
    )
    assert [s["sub_question"] for s in result.trace["steps"]] == [question]
    assert result.answer == "Hayao Miyazaki" and chat.kinds().count("answer") == 1
    assert "plan as written: " + written[3:].replace("\n2. ", " / ") in result.trace["notes"]
    result, _ = run(parts, "plan_execute", script, question=question)  # off by default
    assert len(result.trace["steps"]) == 2


@pytest.mark.parametrize("shown", range(len(plan_prompt.EXEMPLARS)))
def test_an_exemplar_plan_never_becomes_the_plan(parts: Components, shown: int) -> None:
    """The model writes an exemplar's own chain for a question that does not ask it: asked
    once more, then the question itself is the plan; no exemplar question is looked up."""
    copied = plan_prompt.numbered(plan_prompt.EXEMPLARS[shown][1])
    script = Script(plan=[copied, copied], answer="Hayao Miyazaki")
    result, chat = run(parts, "plan_execute", script)
    asked = [s["sub_question"] for s in result.trace["steps"]]
    assert asked == [Q] and chat.kinds().count("plan") == 2
    assert not set(asked) & plan_prompt.exemplar_questions()


def test_a_plan_with_an_exemplars_own_words_becomes_the_question(parts: Components) -> None:
    """The 0.5B model's copy: a chain step with the Walkman exemplar's "go public"."""
    question = "Where was the husband of Emily Davenport born?"
    leaked = "1. Where was Emily Davenport born?\n2. In which city did #1 go public?"
    script = Script(plan=leaked, answer="Boston")
    result, chat = run(parts, "plan_execute", script, question=question)
    assert [s["sub_question"] for s in result.trace["steps"]] == [question]
    assert chat.kinds().count("plan") == 1
    result, _ = run(parts, "plan_execute", script, question=question, agents={"plan_checks": False})
    assert len(result.trace["steps"]) == 2  # the check is part of agents.plan_checks


@pytest.mark.parametrize("own", plan_prompt.OWN_PHRASES)
def test_every_own_phrase_is_an_exemplars_and_leaks_only_where_not_asked(own: str) -> None:
    shown = " ".join(
        q for _, chain in (plan_prompt.ONE_STEP, *plan_prompt.EXEMPLARS) for q in chain
    )
    assert own in " ".join(q for q, _ in (plan_prompt.ONE_STEP, *plan_prompt.EXEMPLARS)) + shown
    step = f"What is {own} known for?"
    assert leaks_an_exemplar(["Who is X?", step], "Who founded Studio Ghibli?")
    assert not leaks_an_exemplar(["Who is X?", step], f"Why is {own} famous?")
    assert not leaks_an_exemplar(["Who directed Jawsome?"], "Who directed Jawsome?")


def test_plan_execute_plan_is_capped_at_max_steps(parts: Components) -> None:
    long_plan = "\n".join(f"{i}. Spirited Away question {i}?" for i in range(1, 7))
    result, _ = run(
        parts, "plan_execute", Script(plan=long_plan, answer="Japan"), agents={"max_steps": 2}
    )
    assert len(result.trace["steps"]) == 2 and result.answer == "Japan"


CHAINED = "1. Where was the director of the film that won the Golden Bear in 2002 born?"
GOLDEN_BEAR = "In which city was the director of the film that won the Golden Bear in 2002 born?"


def test_split_steps_plans_a_chained_step_again_and_runs_its_chain(parts: Components) -> None:
    split = "1. Which film won the Golden Bear in 2002?\n2. Who directed #1?"
    script = Script(
        plan=[
            "1. Who is the director of the film that won the Golden Bear in 2002?\n"
            "2. Where was #1 born?",
            split,
        ],
        answer=["Spirited Away", "Hayao Miyazaki", "Tokyo"],
    )
    result, chat = run(
        parts, "plan_execute", script, question=GOLDEN_BEAR, agents={"split_steps": True}
    )
    t = result.trace
    split_prompt = [c["human"] for c in chat.calls if c["kind"] == "plan"][1]
    assert "the director of the film that won the Golden Bear in 2002" in split_prompt
    assert [s.get("planned") or s["sub_question"] for s in t["steps"]] == [
        "Which film won the Golden Bear in 2002?",
        "Who directed #1?",
        "Where was #2 born?",  # the chain's last answer takes the split step's place
    ]
    assert t["steps"][2]["sub_question"] == "Where was Hayao Miyazaki born?"
    assert any(note.startswith("plan step 1 split into 2") for note in t["notes"])
    assert result.answer == "Tokyo" and t["format_failures"] == 0


@pytest.mark.parametrize(
    ("reply", "split"),
    [
        ("1. Who directed the film that won the Golden Bear in 2002?", False),  # one line
        ("1. Who directed #2?\n2. Which film won the Golden Bear in 2002?", True),  # reordered
        ("1. Which film won the Golden Bear?\n2. Who directed Jaws?", False),  # no chain
        ("I cannot split this.", False),
    ],
)
def test_split_steps_keeps_the_plan_unless_the_step_splits_into_a_chain(
    parts: Components, reply: str, split: bool
) -> None:
    script = Script(plan=[CHAINED, reply], answer=["Hayao Miyazaki", "Tokyo"])
    result, chat = run(
        parts, "plan_execute", script, question=GOLDEN_BEAR, agents={"split_steps": True}
    )
    assert chat.kinds().count("plan") == 2  # the plan, then the one split
    assert len(result.trace["steps"]) == (2 if split else 1)
    assert result.trace["format_failures"] == 0  # a step that does not split is no failure


def test_split_steps_off_or_without_room_asks_nothing_more(parts: Components) -> None:
    for agents in ({"split_steps": False}, {"split_steps": True, "max_steps": 1}):
        _, chat = run(parts, "plan_execute", Script(plan=CHAINED, answer="Tokyo"), agents=agents)
        assert chat.kinds().count("plan") == 1


@pytest.mark.parametrize(
    ("plan", "index"),
    [
        (["Who directed Jaws?", "Where was #1 born?"], None),
        (["Which county borders the county where #1 was born?"], None),  # uses an answer
        (["Who directed Jaws?", "Who is the actor who voices Batman in The Lego Movie?"], 1),
        (["In what county is the city that borders Columbia?"], 0),
    ],
)
def test_chained_step(plan: list[str], index: int | None) -> None:
    assert chained_step(plan) == index


@pytest.mark.parametrize(
    ("plan", "index", "parts", "spliced"),
    [
        (["X?", "Y of #1?"], 0, ["A?", "B of #1?"], ["A?", "B of #1?", "Y of #2?"]),
        (
            ["P?", "X?", "Y of #1 and #2?", "Z of #3?"],
            1,
            ["A?", "B of #1?", "C of #2?"],
            ["P?", "A?", "B of #2?", "C of #3?", "Y of #1 and #4?", "Z of #5?"],
        ),
    ],
)
def test_splice(plan: list[str], index: int, parts: list[str], spliced: list[str]) -> None:
    assert splice(plan, index, parts) == spliced
    assert in_order(spliced) == spliced


# ------------------------------------------------------------------------------ IRCoT, baselines


def test_ircot_normal_and_limits(parts: Components) -> None:
    script = Script(
        ircot=[
            "Spirited Away was directed by Hayao Miyazaki.",
            "Hayao Miyazaki was born in Tokyo, Japan. So the answer is: Japan",
        ]
    )
    result, _ = run(parts, "ircot_nar", script)
    t = result.trace
    assert result.answer == "Japan" and t["retrieval_calls"] == 2
    assert t["steps"][1]["sub_question"] == "Spirited Away was directed by Hayao Miyazaki."
    stuck, _ = run(parts, "ircot", Script(ircot="The film is famous."))
    assert stuck.trace["stop_reason"] == "no_progress" and stuck.answer


def test_baselines(parts: Components) -> None:
    cot, _ = run(parts, "cot", Script(cot="Miyazaki was born in Tokyo. So the answer is: Japan"))
    assert cot.answer == "Japan" and cot.trace["retrieval_calls"] == 1
    single, chat = run(parts, "single_step_sunar", Script(answer="Hayao Miyazaki", asu="x"))
    assert single.answer == "Hayao Miyazaki" and "asu" in chat.kinds()
    alone, chat = run(parts, "no_retrieval", Script(no_retrieval="Japan"))
    assert alone.answer == "Japan" and alone.trace["retrieval_calls"] == 0
    assert chat.kinds() == ["no_retrieval"]
    broken, _ = run(parts, "cot", Script(cot=""))
    assert broken.trace["stop_reason"] == "format_error" and broken.answer == "unknown"


# ------------------------------------------------------------------------------ every loop


def _endless(loop: str) -> Script:
    """A script that never stops on its own until the loop forces a final answer."""
    counter = itertools.count(1)
    if loop == "self_ask":
        return spirited(
            self_ask=lambda human: (
                "So the final answer is: Japan"
                if "No more follow-up" in human
                else f"Follow up: Which place number {next(counter)} matters?"
            )
        )
    if loop == "react":
        return Script(
            react=lambda human: (
                "Thought: done\nAction: Finish[Japan]"
                if "No more searches" in human
                else f"Thought: more\nAction: Search[topic {next(counter)}]"
            )
        )
    if loop == "searchain":
        return Script(
            searchain=lambda human: (
                "[Final Answer]: Japan"
                if "Write only" in human
                else f"[Query 1]: Question {next(counter)}?\n[Unsolved Query]: Question?"
            ),
            answer="something",
        )
    return Script(
        ircot=lambda human: (
            "So the answer is: Japan"
            if "last sentence" in human
            else f"Fact number {next(counter)}."
        )
    )


@pytest.mark.parametrize(
    ("loop", "max_steps", "exact", "source"),
    [
        ("self_ask", 2, True, "forced_final"),
        ("react", 3, True, "forced_final"),
        ("searchain", 2, False, None),
        ("ircot", 2, False, None),
    ],
)
def test_step_limit(
    parts: Components, loop: str, max_steps: int, exact: bool, source: str | None
) -> None:
    result, _ = run(parts, loop, _endless(loop), agents={"max_steps": max_steps})
    t = result.trace
    assert t["stop_reason"] == "max_steps" and result.answer == "Japan"
    assert len(t["steps"]) == max_steps if exact else len(t["steps"]) <= max_steps
    if source is not None:
        assert t["answer_source"] == source


@pytest.mark.parametrize(
    ("loop", "script", "answer"),
    [
        ("react", Script(react="I have no idea.", answer="x"), None),
        ("searchain", Script(searchain="nonsense", answer="Tokyo"), "Tokyo"),
    ],
)
def test_format_break_falls_back_to_the_question(
    parts: Components, loop: str, script: Script, answer: str | None
) -> None:
    broken, _ = run(parts, loop, script)
    assert broken.trace["stop_reason"] == "format_error" and broken.answer
    assert broken.trace["steps"][0]["sub_question"] == Q  # searched the question itself
    if answer is not None:
        assert broken.answer == answer


# ------------------------------------------------------------------------------ ASU edges


def test_asu_edges_explore_then_requery(parts: Components) -> None:
    counter = itertools.count()
    script = spirited(
        self_ask=["Follow up: Who directed Spirited Away?", "So the final answer is: Japan"],
        asu=lambda human: f"answer number {next(counter)}",  # m distinct answers: s = m
    )
    result, _ = run(parts, "self_ask_sunar", script, agents={"max_explore": 1, "max_requery": 1})
    rounds = result.trace["steps"][0]["retrieval"]["rounds"]
    assert [r["reason"] for r in rounds] == ["initial", "explore", "requery"]
    assert [r["c"] for r in rounds] == [8, 12, 8]
    assert all(r["all_uncertain"] for r in rounds)
    assert all(b["s"] == 3 and b["uncertain"] for r in rounds for b in r["batches"])
    assert rounds[2]["query"] == expand_query("Who directed Spirited Away?", Q)
    # exploration reuses the ASU results of batches it has seen: only the new batch costs
    assert result.trace["asu_samples"] == 3 * (2 + 1 + 2)


def test_asu_edges_not_taken_when_confident(parts: Components) -> None:
    result, _ = run(parts, "self_ask_sunar", spirited())
    assert all(len(s["retrieval"]["rounds"]) == 1 for s in result.trace["steps"])


def test_expand_query() -> None:
    assert expand_query("Who directed it?", "Where was the director of Alien born?") == (
        "Who directed it? director Alien born"
    )
    assert expand_query("Alien director born", "Where was the director of Alien born?") == ""


# ------------------------------------------------------------------------------ strategies, knobs


@pytest.mark.parametrize("strategy", ["none", "first_stage", "rerank", "nar"])
def test_retrieval_strategies(parts: Components, strategy: str) -> None:
    result, chat = run(parts, "self_ask", spirited(), options={"retrieval": strategy, "mer": False})
    t = result.trace
    assert t["retrieval"] == strategy and t["mer"] is None and "asu" not in chat.kinds()
    evidence = [e for s in t["steps"] for e in s.get("retrieval", {}).get("evidence", [])]
    if strategy == "none":
        assert not evidence and t["retrieval_calls"] == 0
        assert chat.kinds().count("no_retrieval") == 2
        return
    assert evidence and t["retrieval_calls"] == 2
    if strategy == "rerank":
        assert all(e["source"] != "neighbour" for e in evidence)
    if strategy == "nar":
        rnd = t["steps"][0]["retrieval"]["rounds"][0]
        assert all(b["s"] is None for b in rnd["batches"]) and rnd["c"] == 8


def test_per_run_knobs_via_configurable_and_context(parts: Components) -> None:
    result, _ = run(
        parts,
        "self_ask_sunar_mer",
        spirited(),
        options={"b": 2, "c": 4, "m": 2, "l": 2, "max_steps": 1, "mer": False},
    )
    t = result.trace
    assert len(t["steps"]) == 1 and t["mer"] is None and t["stop_reason"] == "max_steps"
    rnd = t["steps"][0]["retrieval"]["rounds"][0]
    assert rnd["c"] == 4 and [len(b["ids"]) for b in rnd["batches"]] == [2, 2]
    assert all(len(b["answers"]) == 2 for b in rnd["batches"])
    assert t["options"]["batch_size"] == 2 and t["options"]["graph"] == "self_ask_sunar_mer"
    # the same knobs through the run context (what Studio's assistant context sends)
    derived, _ = make(parts, spirited())
    graph = build_pipeline("self_ask_sunar_mer", derived.config, components=derived)
    state = graph.invoke({"question": Q}, context={"max_steps": 1, "mer": False, "c": 4})
    assert len(state["trace"]["steps"]) == 1 and state["trace"]["mer"] is None


def test_unknown_options_fail_clearly(parts: Components) -> None:
    from rag_complexity_agents.errors import ConfigError

    with pytest.raises(ConfigError, match=r"knob retrieval.*'sunar'.*got 'magic'"):
        run(parts, "self_ask", spirited(), options={"retrieval": "magic"})
    with pytest.raises(ConfigError, match="unknown pipeline"):
        build_pipeline("tree_of_thought")


def test_presets_are_starting_points_that_explicit_values_override() -> None:
    cfg = Config(nar={"b": 7})
    assert cfg.nar.b == 7 and cfg.nar.c == 8 and cfg.asu.m == 3 and cfg.models.n_threads is None
    assert Config.preset("paper").nar.c == 100
    assert Config.preset("paper").with_overrides({"nar.b": 7}).nar.b == 7


# ------------------------------------------------------------------------------ bounds, runtime


def test_recursion_limit_never_surfaces(parts: Components) -> None:
    counter = itertools.count(1)
    script = spirited(self_ask=lambda h: f"Follow up: Question {next(counter)}?")
    for limit in (40, 16, 6, 2):
        result, _ = run(
            parts, "self_ask_sunar_mer", script, agents={"max_steps": 20}, recursion_limit=limit
        )
        assert result.answer and result.trace["stop_reason"] in ("recursion_limit", "max_steps")
    # straight graph.invoke: the loop concludes before LangGraph's limit
    derived, _ = make(parts, script, agents={"max_steps": 20})
    state = build_pipeline("self_ask", derived.config, components=derived).invoke(
        {"question": Q}, {"recursion_limit": 30}
    )
    assert state["trace"]["stop_reason"] == "recursion_limit" and state["answer"]


def test_sqlite_checkpointer_and_thread_reuse(parts: Components, tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    saver = SqliteSaver(
        sqlite3.connect(str(tmp_path / "checkpoints.sqlite"), check_same_thread=False)
    )
    derived, _ = make(parts, spirited())
    graph = build_pipeline(
        "self_ask_sunar_mer", derived.config, components=derived, checkpointer=saver
    )
    first = run_graph(graph, Q, thread_id="t1")
    snapshot = graph.get_state({"configurable": {"thread_id": "t1"}})
    assert snapshot.values["answer"] == first.answer == "Japan"
    assert len(list(graph.get_state_history({"configurable": {"thread_id": "t1"}}))) > 10
    derived.chat.script = spirited()  # type: ignore[attr-defined]
    second = run_graph(graph, Q, thread_id="t1")  # the same thread again: state is reset
    # same steps; the 4 ASU prompts are served from the context's memo of seen batches
    assert len(second.trace["steps"]) == 2 and second.trace["llm_calls"] == 10 - 4
    assert second.trace["steps"][0]["retrieval"]["rounds"][0]["batches"][0]["s"] == 1
    assert second.trace["retrieval_calls"] == first.trace["retrieval_calls"] == 2
    assert build_trace(snapshot.values)["answer"] == "Japan"


def test_streaming_updates_and_tokens(parts: Components) -> None:
    derived, _ = make(parts, spirited())
    graph = build_pipeline("self_ask_nar_mer", derived.config, components=derived)
    events = list(stream_graph(graph, Q, options={STREAM_STEPS: True}))
    nodes = [node for mode, payload in events if mode == "updates" for node in payload]
    assert nodes[:3] == ["start", "decompose", "retrieve"] and nodes[-2:] == ["mer", "finish"]
    tokens = "".join(str(payload[0].content) for mode, payload in events if mode == "messages")
    assert "Follow up: Who directed Spirited Away?" in tokens and "[Final Answer]: Japan" in tokens


def test_async_run_and_stream(parts: Components) -> None:
    derived, _ = make(parts, spirited())
    graph = build_pipeline("self_ask_sunar_mer", derived.config, components=derived)

    async def go() -> tuple[RunResult, list[str]]:
        result = await arun_graph(graph, Q)
        derived.chat.script = spirited()  # type: ignore[attr-defined]
        modes = [mode async for mode, _ in astream_graph(graph, Q, stream_mode=("updates",))]
        return result, modes

    result, modes = asyncio.run(go())
    assert result.answer == "Japan" and set(modes) == {"updates"}


# ------------------------------------------------------------------------------ bad input


def test_bad_questions(parts: Components) -> None:
    with pytest.raises(InputError, match="empty"):
        run(parts, "self_ask_sunar_mer", spirited(), question="   ")
    with pytest.raises(InputError, match="102,400 characters long"):
        run(parts, "self_ask_sunar_mer", spirited(), question="x" * 102_400)
    with pytest.raises(InputError, match="garbled"):
        run(parts, "self_ask_sunar_mer", spirited(), question="\x00\x01\x02\x03")


def test_non_english_question_gets_an_answer(parts: Components) -> None:
    question = "¿En qué país nació el director de El viaje de Chihiro?"
    script = spirited(
        self_ask=["Follow up: ¿Quién dirigió El viaje de Chihiro?", "So the final answer is: Japón"]
    )
    result, _ = run(parts, "self_ask_sunar_mer", script, question=question)
    assert result.answer == "Japan" and result.trace["question"] == question
    assert result.trace["steps"][0]["retrieval"]["evidence"]  # dense retrieval still finds text


def test_model_down_is_a_clear_error(parts: Components) -> None:
    derived, chat = make(parts, spirited())
    chat.fail_with = ConnectionRefusedError("[Errno 111] Connection refused")
    graph = build_pipeline("self_ask_sunar_mer", derived.config, components=derived)
    with pytest.raises(ModelServerError, match=r"chat model failed.*Connection refused"):
        run_graph(graph, Q)


def test_missing_collection_fails_before_any_llm_call(parts: Components) -> None:
    derived, chat = make(parts, spirited(), collection="no-such-collection")
    graph = build_pipeline("self_ask_sunar_mer", derived.config, components=derived)
    with pytest.raises(CorpusError, match="does not exist"):
        run_graph(graph, Q)
    assert chat.calls == []


# ------------------------------------------------------------------------------ registry, harness


def test_every_pipeline_is_a_strategy_and_runs_in_the_harness(parts: Components) -> None:
    from rag_complexity_agents.eval.strategies import (
        EvalComponents,
        available_strategies,
        build_strategy,
    )

    assert set(PIPELINES) <= {spec.name for spec in available_strategies()}
    components = EvalComponents(demo_config(parts.config.corpus.home))
    components.store = parts.store  # type: ignore[misc]
    components.chat = ScriptedChat(script=spirited())  # type: ignore[misc]
    strategy = build_strategy("self_ask_sunar_mer", components)
    result = strategy(Q)
    assert result.answer == "Japan"
    for key in ("llm_calls", "retrieval_calls", "input_tokens", "output_tokens", "seconds"):
        assert isinstance(result.trace[key], int | float)
    assert all("id" in e and "title" in e for e in result.trace["evidence"])


def test_final_answer_preferences() -> None:
    from rag_complexity_agents.agents.answer import final_answer, shorten_answer

    assert final_answer({"mer": {"answer": "Japan", "extraction": "marker"}}) == ("Japan", "mer")
    long = "Based on the evidence provided, the country where he was born is Japan"
    state = {"mer": {"answer": long, "extraction": "last_line"}, "loop_answer": "Tokyo"}
    assert final_answer(state) == ("Japan", "mer (closing clause of an unformatted reply)")
    rambling = "I could not decide between several options given in the evidence passages here"
    state = {"mer": {"answer": rambling, "extraction": "last_line"}, "loop_answer": "Tokyo"}
    assert final_answer(state)[0] == "Tokyo"
    # a formatted MER sentence that contains the loop's answer agrees with it: the short one
    sentence = "The Arno river runs through the city where Galileo Galilei was born"
    state = {"mer": {"answer": sentence, "extraction": "marker"}, "loop_answer": "Arno"}
    assert final_answer(state) == ("Arno", "loop (MER's sentence agrees)")
    state = {"mer": {"answer": sentence, "extraction": "marker"}, "loop_answer": "Tiber"}
    assert final_answer(state) == (sentence, "mer")  # they disagree: MER's answer stands
    assert final_answer({"steps": [{"answer": "x"}, {"answer": ""}]}) == ("x", "last_intermediate")
    assert final_answer({}) == ("unknown", "none")
    assert shorten_answer("No closing clause here") == ""


def test_a_mer_answer_that_repeats_the_last_query_gives_way_to_the_loop() -> None:
    from rag_complexity_agents.agents.answer import echoes_last_query, final_answer

    steps = [
        {"index": 0, "sub_question": "Who published The North Star?", "answer": "Douglass"},
        {"index": 1, "sub_question": "Who married Douglass?", "answer": "Helen Pitts"},
    ]
    state: Any = {"question": "Who married the publisher of The North Star?", "steps": steps}
    assert echoes_last_query("Douglass", state)  # the bridge again, not the last hop's answer
    assert not echoes_last_query("Helen Pitts", state) and not echoes_last_query("Anna", state)
    # the last step echoing too leaves nothing better to fall back on
    echoing = [steps[0], {**steps[1], "answer": "Douglass"}]
    assert not echoes_last_query("Douglass", {**state, "steps": echoing})
    mer = {"answer": "Douglass", "extraction": "marker", "echo": True}
    assert final_answer({**state, "mer": mer, "loop_answer": "Helen Pitts"}) == (
        "Helen Pitts",
        "loop (MER's answer repeats the last step's query)",
    )
    unmarked = {**state, "mer": {**mer, "echo": False}, "loop_answer": "Helen Pitts"}
    assert final_answer(unmarked)[0] == "Douglass"  # agents.reject_echo off: MER's stands


def test_mer_copying_an_exemplar_is_ignored(parts: Components) -> None:
    script = spirited(mer="[Reasoning]: ...\n[Final Answer]: William Godwin")
    result, _ = run(parts, "self_ask_sunar_mer", script)
    assert result.trace["mer"]["extraction"] == "copied_exemplar" and result.answer == "Japan"
