"""The loop output parsers: known formats and breaks, then hypothesis fuzzing — at least
1,000 random or garbled replies per parser, no exception may escape and the results keep
their invariants (types, bounded lengths, kinds consistent with fields)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_complexity_agents.agents import parsers as P
from rag_complexity_agents.agents.parsers import (
    CoTParse,
    ReActParse,
    SearChainParse,
    SelfAskParse,
    clean_answer,
    clean_query,
    find_answer,
    parse_cot,
    parse_ircot,
    parse_plan,
    parse_react,
    parse_searchain,
    parse_self_ask,
)

# ------------------------------------------------------------------------------ known cases


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("Follow up: Who directed Spirited Away?", "follow_up", "Who directed Spirited Away?"),
        ("follow-up 2 : Where was he born?\nIntermediate answer: Tokyo", "follow_up", None),
        ("So the final answer is: So the final answer is: Japan.", "final", "Japan"),
        ("[Final Answer]:\n**Mount Fuji**", "final", "Mount Fuji"),
        ("Are follow up questions needed here: No.\nJapan", "final", "Japan"),
        ("Who was born in Tokyo?", "follow_up", "Who was born in Tokyo?"),
        ("Intermediate answer: Tokyo", "none", None),
        ("", "none", None),
        ("Follow up:\nSo the final answer is: Japan", "final", "Japan"),
        ("Are follow up questions needed here: Yes.", "none", None),
    ],
)
def test_self_ask_formats(text: str, kind: str, value: str | None) -> None:
    parsed = parse_self_ask(text)
    assert parsed.kind == kind
    if value is not None:
        assert (parsed.follow_up if kind == "follow_up" else parsed.answer) == value


def test_self_ask_earliest_marker_wins() -> None:
    parsed = parse_self_ask("Follow up: A?\nIntermediate answer: B\nSo the final answer is: C")
    assert parsed == SelfAskParse("follow_up", follow_up="A?")
    parsed = parse_self_ask("So the final answer is: C\nFollow up: A?")
    assert parsed.kind == "final" and parsed.answer == "C"


@pytest.mark.parametrize(
    ("text", "action", "argument"),
    [
        ("Thought 1: I need X.\nAction 1: Search[Spirited Away]", "search", "Spirited Away"),
        ("Thought: found it\nAction: Finish[Japan]", "finish", "Japan"),
        ("Action 2: Lookup: born\n", "lookup", "born"),
        ("Thought 3: x\nAction 3: look up[river]", "lookup", "river"),
        ("Search[Hayao Miyazaki", "search", "Hayao Miyazaki"),
        ("[Final Answer]: Tokyo", "finish", "Tokyo"),
        ("Thought: I am not sure what to do.", "none", ""),
        ("Action 1: Search[]\nAction 2: Search[Tokyo]", "search", "Tokyo"),
    ],
)
def test_react_formats(text: str, action: str, argument: str) -> None:
    parsed = parse_react(text)
    assert (parsed.action, parsed.argument) == (action, argument)


def test_react_thought() -> None:
    assert parse_react("Thought 1: I need the director.\nAction 1: Search[x]").thought == (
        "I need the director."
    )


def test_searchain_chain_unsolved_final() -> None:
    parsed = parse_searchain(
        "[Query 1]: Who performed Spirit If...?\n[Answer 1]: Kevin Drew.\n"
        "[Query 2]: Where was Kevin Drew born?\n[Unsolved Query]: Where was Kevin Drew born?\n"
        "[Final Content]: Kevin Drew was born in Toronto. So the final answer is Toronto.\n"
    )
    assert [(n.query, n.answer, n.unsolved) for n in parsed.nodes] == [
        ("Who performed Spirit If...?", "Kevin Drew", False),
        ("Where was Kevin Drew born?", None, True),
    ]
    assert parsed.final == "Toronto" and parsed.kind == "chain"


def test_searchain_without_brackets_and_final_only() -> None:
    parsed = parse_searchain("Query 1: A?\nAnswer 1: B\n[Final Answer]: C")
    assert [(n.query, n.answer) for n in parsed.nodes] == [("A?", "B")] and parsed.final == "C"
    only = parse_searchain("[Final Answer]: Paris")
    assert only.kind == "final" and only.final == "Paris" and not only.nodes
    assert parse_searchain("no markers here").kind == "none"
    many = parse_searchain("\n".join(f"[Query {i}]: q{i}?" for i in range(100)))
    assert len(many.nodes) == P.MAX_CHAIN_NODES


def test_plan_numbered_and_bulleted_questions() -> None:
    reply = "1. Who wrote Dune?\n2) Where was #1 born?\n- Question 3: Who is the mayor of #2?"
    assert parse_plan(reply) == [
        "Who wrote Dune?",
        "Where was #1 born?",
        "Who is the mayor of #2?",
    ]
    # prose lines, repeats and lines that are not questions are dropped; a cap applies
    assert parse_plan("Here is the plan:\n1. A?\n1. A?\n2. not a question\n3. B?") == ["A?", "B?"]
    assert parse_plan("1. A?\n2. B?\n3. C?", 2) == ["A?", "B?"]
    # one bare question is a plan of one; prose is no plan
    assert parse_plan("Who wrote Dune?") == ["Who wrote Dune?"]
    assert parse_plan("I cannot split this.") == []
    assert parse_plan("") == [] and parse_plan(None) == []


def test_ircot_and_cot() -> None:
    step = parse_ircot("Spirited Away was directed by Hayao Miyazaki. He was born in Tokyo.")
    assert step == CoTParse(
        "Spirited Away was directed by Hayao Miyazaki.",
        "",
        "Spirited Away was directed by Hayao Miyazaki. He was born in Tokyo.",
    )
    done = parse_ircot("Miyazaki was born in Tokyo, so the answer is: Japan.")
    assert done.answer == "Japan" and done.sentence.endswith("Japan.")
    cot = parse_cot("Miyazaki directed it. He was born in Tokyo.\nSo the answer is: Japan")
    assert cot.answer == "Japan" and cot.reasoning.startswith("Miyazaki directed it.")
    assert parse_cot("Japan").answer == "Japan"
    assert parse_cot("").answer == ""


def test_cleaners() -> None:
    assert clean_answer('  **"Hayao Miyazaki".**  ') == "Hayao Miyazaki"
    assert clean_answer("Answer: Answer: 1969.") == "1969"
    assert clean_answer("?!") == ""
    assert len(clean_answer("word " * 500)) <= P.MAX_ANSWER_CHARS
    assert clean_query("  Who directed it? Intermediate answer: X") == "Who directed it?"
    assert find_answer("blah\nthe answer is: 42") == "42"


def test_adversarial_inputs_parse_to_bounded_results() -> None:
    """Huge, repetitive or marker-only replies, the inputs on which a backtracking pattern
    would not finish: every parser finishes on them and finds no move, no chain and no
    answer marker; the texts it keeps stay within their bounds, and only the first
    MAX_CHARS characters count (the "x" after 200,000 spaces is never read)."""
    nasty = [  # (reply, its cleaned answer, which CoT also takes as its answer)
        ("follow up" + " " * 19_000, "follow up"),
        ("[ " * 9_000, ""),
        ("Action 1" + " " * 19_000, "Action 1"),
        ("the final answer is" * 1_000, ""),
        ("\n" * 20_000, ""),
        ("answer:\n" * 2_500, ""),
        ("[Query 1]: " * 1_800, ("[Query 1]: " * 19)[1:197].rstrip()),  # cut at a space
        (" " * 200_000 + "x", ""),
    ]
    for text, answer in nasty:
        where = text[:30]
        assert parse_self_ask(text).kind == "none", where
        react = parse_react(text)
        assert (react.action, react.argument) == ("none", ""), where
        assert len(react.thought) <= 500, where
        chain = parse_searchain(text)
        assert (chain.nodes, chain.final) == ([], ""), where
        assert find_answer(text) == "", where
        ircot = parse_ircot(text)
        assert ircot.answer == "" and len(ircot.sentence) <= 400, where
        cot = parse_cot(text)
        assert cot.answer == answer and len(cot.sentence) <= 400, where
        assert len(cot.reasoning) <= 2000 and len(ircot.reasoning) <= 2000, where
        assert clean_answer(text) == answer, where
        assert len(clean_query(text)) <= P.MAX_QUERY_CHARS, where


# ------------------------------------------------------------------------------ fuzzing

FRAGMENTS = [
    "Follow up:",
    "follow-up 3:",
    "Intermediate answer:",
    "So the final answer is:",
    "[Final Answer]:",
    "Final answer:",
    "Are follow up questions needed here: No",
    "Are follow up questions needed here: Yes.",
    "Thought 1:",
    "Action 1:",
    "Action:",
    "Search[",
    "Lookup[",
    "Finish[",
    "look up[",
    "]",
    "[Query 1]:",
    "[Answer 1]:",
    "[Unsolved Query]:",
    "[Final Content]:",
    "Query 2:",
    "Answer:",
    "the answer is",
    "So the answer is:",
    "?",
    ".",
    "\n",
    "\n\n",
    " ",
    "\t",
    "**",
    '"',
    "：",
    "\x00",
    "Hayao Miyazaki",
    "東京",
    "Ελλάδα",
    "🙂",
    "ﬁnal answer:",
]

garbled = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=40)), max_size=40).map(
    "".join
)
anything = st.one_of(
    garbled,
    st.text(max_size=400),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.none(),
    st.integers(),
    st.lists(st.text(max_size=5), max_size=3),
)
FUZZ = settings(
    max_examples=1_000,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _bounded(text: str, limit: int) -> bool:
    return isinstance(text, str) and len(text) <= limit


@FUZZ
@given(anything)
def test_fuzz_self_ask(text: Any) -> None:
    parsed = parse_self_ask(text)
    assert isinstance(parsed, SelfAskParse)
    assert parsed.kind in ("follow_up", "final", "none")
    assert _bounded(parsed.follow_up, P.MAX_QUERY_CHARS)
    assert _bounded(parsed.answer, P.MAX_ANSWER_CHARS)
    if parsed.kind == "follow_up":
        assert P.has_content(parsed.follow_up)
    if parsed.kind == "final":
        assert P.has_content(parsed.answer)


@FUZZ
@given(anything)
def test_fuzz_react(text: Any) -> None:
    parsed = parse_react(text)
    assert isinstance(parsed, ReActParse)
    assert parsed.action in ("search", "lookup", "finish", "none")
    assert _bounded(parsed.thought, 500) and _bounded(parsed.argument, P.MAX_QUERY_CHARS)
    assert (parsed.action == "none") == (parsed.argument == "")


@FUZZ
@given(anything)
def test_fuzz_searchain(text: Any) -> None:
    parsed = parse_searchain(text)
    assert isinstance(parsed, SearChainParse)
    assert parsed.kind in ("chain", "final", "none")
    assert len(parsed.nodes) <= P.MAX_CHAIN_NODES
    for node in parsed.nodes:
        assert P.has_content(node.query) and _bounded(node.query, P.MAX_QUERY_CHARS)
        assert node.answer is None or _bounded(node.answer, P.MAX_ANSWER_CHARS)
    assert _bounded(parsed.final, P.MAX_ANSWER_CHARS) and _bounded(parsed.content, 1000)


@FUZZ
@given(anything)
def test_fuzz_ircot(text: Any) -> None:
    parsed = parse_ircot(text)
    assert isinstance(parsed, CoTParse)
    assert _bounded(parsed.sentence, 1000) and _bounded(parsed.answer, P.MAX_ANSWER_CHARS)


@FUZZ
@given(anything)
def test_fuzz_cot(text: Any) -> None:
    parsed = parse_cot(text)
    assert isinstance(parsed, CoTParse)
    assert _bounded(parsed.answer, P.MAX_ANSWER_CHARS) and _bounded(parsed.reasoning, 2000)


@FUZZ
@given(anything)
def test_fuzz_cleaners(text: Any) -> None:
    for value in (clean_answer(text), clean_query(text), find_answer(text)):
        assert isinstance(value, str) and len(value) <= P.MAX_QUERY_CHARS
        assert value == "" or P.has_content(value)
