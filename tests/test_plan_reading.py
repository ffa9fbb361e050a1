"""How plan-and-execute plans and reads its steps: the planning rules, bridge votes (the pure
choice in agents/votes.py and the vote over the real demo collection with a scripted chat
model) and the answer prompt that quotes its evidence first."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from agent_fakes import Script, ScriptedChat, demo_config, demo_home

from rag_complexity_agents.agents.context import derive_components
from rag_complexity_agents.agents.plan_execute import is_bridge, plan_flaws
from rag_complexity_agents.agents.prompts import plan_execute as plan_prompt
from rag_complexity_agents.agents.registry import build_pipeline
from rag_complexity_agents.agents.run import run_graph
from rag_complexity_agents.agents.single_step import quoted_answer
from rag_complexity_agents.agents.votes import vote
from rag_complexity_agents.components import Components
from rag_complexity_agents.models.equivalence import LexicalEquivalence

SAME = LexicalEquivalence().equivalent


def held(*names: str):  # type: ignore[no-untyped-def]
    return lambda answer: answer in names


def test_the_largest_cluster_wins_and_one_of_its_members_is_the_answer() -> None:
    v = vote(["Toshio Suzuki", "Hayao Miyazaki", "Miyazaki"], SAME, held("Hayao Miyazaki"))
    assert v.answer == "Hayao Miyazaki" and v.clusters == [[0], [1, 2]] and v.kept == 1
    assert v.grounded == [False, True, False]


def test_a_grounded_cluster_beats_a_larger_ungrounded_one() -> None:
    v = vote(["Osaka, I think", "Osaka, I think", "Tokyo"], SAME, held("Tokyo"))
    assert v.answer == "Tokyo" and v.kept == 1


def test_a_sentence_gives_way_to_the_name_of_its_cluster_a_passage_holds() -> None:
    v = vote(["He was born in Tokyo in 1941", "Tokyo"], SAME, held("Tokyo"))
    assert v.answer == "Tokyo" and v.clusters == [[0, 1]]


def test_ties_go_to_the_greedy_answer() -> None:
    assert vote(["Paris", "Lyon"], SAME, held("Paris", "Lyon")).answer == "Paris"
    assert vote(["Paris", "Lyon", "Lyon", "Paris"], SAME, held()).answer == "Paris"


def test_unknown_answers_do_not_vote() -> None:
    v = vote(["unknown", "Lyon", "not found"], SAME, held())
    assert v.answer == "Lyon" and v.clusters == [[1]]
    nothing = vote(["unknown", "", "none"], SAME, held())
    assert nothing.answer == "unknown" and nothing.kept is None and nothing.clusters == []


@pytest.mark.parametrize(
    ("plan", "index", "bridge"),
    [
        (["Who directed Jaws?", "Where was #1 born?"], 0, True),
        (["Who directed Jaws?", "Where was #1 born?"], 1, False),
        (["Who directed Jaws?", "Who wrote Jaws?", "Were #1 and #2 the same?"], 1, True),
        (["Who directed Jaws?", "Who wrote Jaws?"], 0, False),
    ],
)
def test_is_bridge(plan: list[str], index: int, bridge: bool) -> None:
    assert is_bridge(plan, index) is bridge


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Components:
    return Components(demo_config(demo_home(tmp_path_factory.getbasetemp())))


def _run(parts: Components, votes: int) -> tuple[dict, ScriptedChat]:  # type: ignore[type-arg]
    answers = ["Toshio Suzuki", "Hayao Miyazaki", "Hayao Miyazaki", "Toshio Suzuki", "Miyazaki"]
    chat = ScriptedChat(  # no one-prompt sampling: the m - 1 samples are separate calls
        script=Script(
            plan="1. Who directed Spirited Away?\n2. Where was #1 born?",
            answer=[*answers[: 1 if votes == 1 else votes], "Tokyo, Japan"],
        )
    )
    cfg = demo_config(parts.config.corpus.home, agents={"max_steps": 3, "bridge_votes": votes})
    derived = derive_components(parts, cfg)
    derived.chat = chat  # type: ignore[misc]
    graph = build_pipeline("plan_execute", cfg, components=derived)
    result = run_graph(graph, "In which country was the director of Spirited Away born?")
    return result.trace, chat


def test_a_bridge_is_voted_on_and_the_next_step_uses_the_winner(parts: Components) -> None:
    trace, chat = _run(parts, votes=5)
    first, second = trace["steps"]
    assert first["vote"]["answers"] == [
        "Toshio Suzuki",
        "Hayao Miyazaki",
        "Hayao Miyazaki",
        "Toshio Suzuki",
        "Miyazaki",
    ]
    assert first["answer"] == "Hayao Miyazaki" and first["vote"]["clusters"] == [[0, 3], [1, 2, 4]]
    assert second["sub_question"] == "Where was Hayao Miyazaki born?"
    assert "vote" not in second  # the last step is nobody's bridge
    samples = [c for c in chat.calls if c["kind"] == "answer"][1:-1]
    assert len(samples) == 4 and all(c["temperature"] == 0.7 for c in samples)
    assert trace["llm_calls"] == 7  # plan, two answers, four samples


def test_one_vote_is_the_greedy_answer_alone(parts: Components) -> None:
    trace, chat = _run(parts, votes=1)
    assert trace["steps"][0]["answer"] == "Toshio Suzuki" and "vote" not in trace["steps"][0]
    assert chat.kinds().count("answer") == 2


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        (
            "Evidence: [1] Van Hook Township, Mountrail County\nAnswer: Mountrail County",
            "Mountrail County",
        ),
        ("Evidence: Pearl Bailey as Copper. Answer: Pearl Bailey", "Pearl Bailey"),
        ("**Answer:** Laura Knight", "Laura Knight"),
        ("Mach", "Mach"),  # no marks: the reply is the answer
        ("Evidence: the passage says so\nErnst Mach", "Ernst Mach"),
        ("Evidence: the answer: is here\nAnswer: Bharat Ratna", "Bharat Ratna"),  # the last mark
        ("Evidence: cut off before the answer", ""),
    ],
)
def test_quoted_answer(reply: str, answer: str) -> None:
    assert quoted_answer(reply) == answer


@pytest.mark.parametrize(
    ("quoting", "kinds"),
    [("final", ["answer", "quote"]), ("all", ["quote", "quote"]), ("none", ["answer", "answer"])],
)
def test_quote_evidence_picks_the_prompt_of_each_step(
    parts: Components, quoting: str, kinds: list[str]
) -> None:
    def reply(quoted: bool) -> Callable[[str], str]:
        def answer(human: str) -> str:
            found = "Tokyo, Japan" if "born" in human.split("Question:")[-1] else "Hayao Miyazaki"
            return f"Evidence: the passage names {found}\nAnswer: {found}" if quoted else found

        return answer

    plan = "1. Who directed Spirited Away?\n2. Where was #1 born?"
    chat = ScriptedChat(script=Script(plan=plan, answer=reply(False), quote=reply(True)))
    cfg = demo_config(parts.config.corpus.home, agents={"max_steps": 3, "quote_evidence": quoting})
    derived = derive_components(parts, cfg)
    derived.chat = chat  # type: ignore[misc]
    graph = build_pipeline("plan_execute", cfg, components=derived)
    result = run_graph(graph, "In which country was the director of Spirited Away born?")
    assert [k for k in chat.kinds() if k in ("answer", "quote")] == kinds
    assert [s["answer"] for s in result.trace["steps"]] == ["Hayao Miyazaki", "Tokyo, Japan"]
    assert result.answer == "Tokyo, Japan"
    budgets = [c["max_tokens"] for c in chat.calls if c["kind"] in ("answer", "quote")]
    assert [b > cfg.agents.answer_max_tokens for b in budgets] == [k == "quote" for k in kinds]


def test_a_quote_cut_off_before_its_answer_is_asked_again_plainly(parts: Components) -> None:
    plan = "1. Who directed Spirited Away?\n2. Where was #1 born?"

    def answer(human: str) -> str:
        return "Tokyo, Japan" if "born" in human.split("Question:")[-1] else "Hayao Miyazaki"

    chat = ScriptedChat(
        script=Script(plan=plan, answer=answer, quote="Evidence: Hayao Miyazaki was born in")
    )
    cfg = demo_config(parts.config.corpus.home, agents={"max_steps": 3, "quote_evidence": "final"})
    derived = derive_components(parts, cfg)
    derived.chat = chat  # type: ignore[misc]
    graph = build_pipeline("plan_execute", cfg, components=derived)
    result = run_graph(graph, "In which country was the director of Spirited Away born?")
    assert [k for k in chat.kinds() if k in ("answer", "quote")] == ["answer", "quote", "answer"]
    assert result.answer == "Tokyo, Japan" and result.trace["format_errors"] == 0
    assert any("asked without quoting" in note for note in result.trace["notes"])
    assert result.trace["llm_calls"] == 4  # plan, first answer, the quote, the plain answer


@pytest.mark.parametrize("rules", [True, False])
def test_plan_rules_end_the_planning_prompt_only_when_asked(parts: Components, rules: bool) -> None:
    chat = ScriptedChat(
        script=Script(plan="1. Who founded Studio Ghibli?", answer="Hayao Miyazaki")
    )
    cfg = demo_config(parts.config.corpus.home, agents={"max_steps": 3, "plan_rules": rules})
    derived = derive_components(parts, cfg)
    derived.chat = chat  # type: ignore[misc]
    graph = build_pipeline("plan_execute", cfg, components=derived)
    result = run_graph(graph, "Who founded Studio Ghibli?")
    (system,) = [c["system"] for c in chat.calls if c["kind"] == "plan"]
    assert system.endswith(plan_prompt.RULES) is rules
    assert system.startswith(plan_prompt.SYSTEM.format(max_steps=3))
    assert len(result.trace["steps"]) == 1 and result.answer == "Hayao Miyazaki"


@pytest.mark.parametrize("one_step", [True, False])
def test_the_one_step_exemplar_comes_first_only_when_asked(
    parts: Components, one_step: bool
) -> None:
    chat = ScriptedChat(
        script=Script(plan="1. Who founded Studio Ghibli?", answer="Hayao Miyazaki")
    )
    cfg = demo_config(parts.config.corpus.home, agents={"one_step_exemplar": one_step})
    derived = derive_components(parts, cfg)
    derived.chat = chat  # type: ignore[misc]
    run_graph(build_pipeline("plan_execute", cfg, components=derived), "Who founded Studio Ghibli?")
    (human,) = [c["human"] for c in chat.calls if c["kind"] == "plan"]
    shown = [line for line in human.splitlines() if line.startswith("Question: ")]
    chains = [f"Question: {q}" for q, _ in plan_prompt.EXEMPLARS[: cfg.agents.exemplars]]
    first = [f"Question: {plan_prompt.ONE_STEP[0]}"] if one_step else []
    assert shown == [*first, *chains, "Question: Who founded Studio Ghibli?"]


def test_a_copied_one_step_exemplar_is_not_the_plan(parts: Components) -> None:
    copied = plan_prompt.numbered(plan_prompt.ONE_STEP[1])
    chat = ScriptedChat(script=Script(plan=[copied, copied], answer="Hayao Miyazaki"))
    cfg = demo_config(parts.config.corpus.home)
    derived = derive_components(parts, cfg)
    derived.chat = chat  # type: ignore[misc]
    result = run_graph(
        build_pipeline("plan_execute", cfg, components=derived), "Who founded Studio Ghibli?"
    )
    asked = [s["sub_question"] for s in result.trace["steps"]]
    assert asked == ["Who founded Studio Ghibli?"] and chat.kinds().count("plan") == 2


@pytest.mark.parametrize(
    ("plan", "flaws"),
    [
        (["Who directed Spirited Away?", "Where was #1 born?"], []),
        (["Where was the director of Spirited Away born?"], []),
        (
            ["Who played the monarch at the end of WW2?", "In which film was #1 played?"],
            ["drops 'king'", "drops 'speech'"],
        ),
        (
            ["Where was the director of Spirited Away born?", "Who directed Spirited Away?"],
            ["restates the question"],
        ),
        (
            ["What is the name of the film?", "Where was the director of #1 born?"],
            ["asks the name of a thing it does not name", "drops 'away'", "drops 'spirited'"],
        ),
    ],
)
def test_plan_flaws(plan: list[str], flaws: list[str]) -> None:
    question = {
        "Who played the monarch at the end of WW2?": "Who played the monarch at the end of "
        "WW2 in The King's Speech?"
    }.get(plan[0], "Where was the director of Spirited Away born?")
    assert plan_flaws(plan, question) == flaws


def test_a_number_the_plan_drops_is_a_flaw() -> None:
    question = "Which party did the socialist candidate for president in 1912 belong to?"
    plan = ["Who was the socialist candidate for president?", "Which party did #1 belong to?"]
    assert plan_flaws(plan, question) == ["drops '1912'"]


def _planned(parts: Components, plans: list[str], samples: int) -> tuple[dict, ScriptedChat]:  # type: ignore[type-arg]
    chat = ScriptedChat(script=Script(plan=plans, answer=["Hayao Miyazaki", "Tokyo"]))
    cfg = demo_config(parts.config.corpus.home, agents={"plan_samples": samples})
    derived = derive_components(parts, cfg)
    derived.chat = chat  # type: ignore[misc]
    graph = build_pipeline("plan_execute", cfg, components=derived)
    return run_graph(graph, "Where was the director of Spirited Away born?").trace, chat


def test_a_flawed_plan_runs_the_least_flawed_sample_and_the_trace_lists_them(
    parts: Components,
) -> None:
    trace, chat = _planned(
        parts,
        [
            "1. Who is the director?\n2. Where was #1 born?",  # drops the film
            "1. Where was the director of Spirited Away born?",  # only the question
            "1. Who directed Spirited Away?\n2. Where was #1 born?",
        ],
        samples=2,
    )
    assert [s["sub_question"] for s in trace["steps"]] == [
        "Who directed Spirited Away?",
        "Where was Hayao Miyazaki born?",
    ]
    sampled = [c for c in chat.calls if c["kind"] == "plan"][1:]
    assert len(sampled) == 2 and all(c["temperature"] == 0.7 for c in sampled)
    (note,) = [n for n in trace["notes"] if n.startswith("plan candidates")]
    assert "model: Who is the director? / Where was #1 born? [drops 'away', drops " in note
    assert "sample 1 (kept): Who directed Spirited Away? / Where was #1 born? [no flaw]" in note
    assert trace["llm_calls"] == 5  # plan, two samples (separate calls here), two answers


def test_a_plan_without_flaws_is_not_resampled_and_the_model_wins_a_tie(
    parts: Components,
) -> None:
    trace, chat = _planned(parts, ["1. Who directed Spirited Away?\n2. Where was #1 born?"], 3)
    assert chat.kinds().count("plan") == 1 and trace["llm_calls"] == 3
    restated = "Where was the director of Spirited Away born?"
    tie = [f"1. Who directed Spirited Away?\n2. {restated}", f"1. {restated}\n2. Who directed it?"]
    trace, _ = _planned(parts, tie, samples=1)
    assert [s["sub_question"] for s in trace["steps"]] == ["Who directed Spirited Away?", restated]
