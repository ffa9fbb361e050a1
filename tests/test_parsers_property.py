"""Property tests for every parser of model output: it never raises anything but our own
errors, and its work is bounded by construction: it only reads the first ``MAX_CHARS``
characters (so a 100k-character reply costs what a 20k one does) and its patterns are linear.
The wall-clock cost of adversarial inputs up to 100k characters is measured in
benchmarks/robustness.py (``parsers`` rows), not asserted here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rag_complexity_agents.agents import parsers
from rag_complexity_agents.agents.answer import shorten_answer
from rag_complexity_agents.agents.parsers import MAX_CHARS
from rag_complexity_agents.agents.single_step import extract_short_answer as single_step_answer
from rag_complexity_agents.complexity.adaptive.zero_shot import parse_label_reply
from rag_complexity_agents.complexity.grade.claims import parse_numbered
from rag_complexity_agents.complexity.grade.equivalence import parse_groups
from rag_complexity_agents.complexity.grade.questions import parse_description, parse_question
from rag_complexity_agents.complexity.grade.triples import parse_triples
from rag_complexity_agents.errors import RCAError
from rag_complexity_agents.retrieval.asu import extract_short_answer
from rag_complexity_agents.retrieval.mer import extract_final_answer

#: name -> parser; every one takes the raw model reply.
PARSERS: dict[str, Callable[[str], Any]] = {
    "mer.extract_final_answer": extract_final_answer,
    "asu.extract_short_answer": extract_short_answer,
    "grade.parse_triples": lambda text: parse_triples(text, ["c1", "c2"]),
    "grade.parse_groups": parse_groups,
    "grade.parse_numbered": lambda text: parse_numbered(text, 3),
    "grade.parse_question": parse_question,
    "grade.parse_description": lambda text: parse_description(text, "Lyon"),
    "adaptive.parse_label_reply": parse_label_reply,
    "agents.clean_answer": parsers.clean_answer,
    "agents.clean_query": parsers.clean_query,
    "agents.find_answer": parsers.find_answer,
    "agents.parse_self_ask": parsers.parse_self_ask,
    "agents.parse_react": parsers.parse_react,
    "agents.parse_searchain": parsers.parse_searchain,
    "agents.parse_ircot": parsers.parse_ircot,
    "agents.parse_plan": parsers.parse_plan,
    "agents.parse_cot": parsers.parse_cot,
    "answer.shorten_answer": shorten_answer,
    "single_step.extract_short_answer": single_step_answer,
}

#: Repeated units that made parsers backtrack or rescan and format fragments.
FILLERS = (
    " ",
    "\n",
    "[",
    "(|",
    "a",
    "**",
    "answer ",
    "final answer",
    "[Final Answer]:\n",
    "the answer is .\n",
    "Follow up: ",
    "Search[",
    "[Query 1]: ",
    "(s | r | o | 1)\n",
    "[a | b] always\n",
)

texts = st.text(max_size=300)
big_texts = st.builds(
    lambda head, filler, size, tail: head + filler * (size // len(filler) + 1) + tail,
    texts,
    st.sampled_from(FILLERS),
    st.integers(0, 100_000),
    texts,
)


def _call(parser: Callable[[str], Any], text: str) -> Any:
    try:
        return parser(text)
    except RCAError as exc:  # our own error type is allowed
        return exc


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(texts, big_texts))
@example(text=" " * 16_000)
@example(text="[" * 100_000)
@example(text="a" * 100_000 + "(|")
@example(text="answer" + " " * 100_000 + "x")
@example(text="\n" * 100_000 + "Question: Which city is the capital of France?")
@example(text="\n" * 100_000 + "B the city on the river")
@example(text="\n" * 100_000 + "1. Lyon is a city.")
@example(text=" is" * 40_000 + ",")
@example(text="x " * 50_000 + "It was Lyon.")
def test_parsers_never_raise_and_read_a_bounded_prefix(name: str, text: str) -> None:
    parser = PARSERS[name]
    result = _call(parser, text)
    assert not isinstance(result, BaseException) or isinstance(result, RCAError)
    if len(text) > MAX_CHARS:
        assert result == _call(parser, text[:MAX_CHARS])


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_parsers_accept_non_text(name: str) -> None:
    for value in (None, 3, b"bytes"):
        _call(PARSERS[name], value)  # type: ignore[arg-type]


def test_grade_parsers_keep_their_meaning() -> None:
    triples, bad = parse_triples(
        "(Paris | capital of | France | 1)\n- [Rome | in | Italy | 2] extra\nx | y\n(a|b|a|1)",
        ["c1", "c2"],
    )
    assert [(t.subject, t.relation, t.object, t.sentence_id) for t in triples] == [
        ("Paris", "capital of", "France", "c1"),
        ("Rome", "in", "Italy", "c2"),
    ]
    assert bad == {"triple_wrong_fields": 1, "triple_self_loop": 1}
    again, _ = parse_triples("(s | r | o | 1)\n" * 3, ["c1"])
    assert len(again) == 1  # duplicates dropped
    groups, bad = parse_groups(
        '[NYC | New York City] always\n["Bizet"; "Georges Bizet"]\n[x] context'
    )
    assert groups == [(["NYC", "New York City"], "always")]
    assert bad == {"equivalence_no_kind": 1, "equivalence_single_name": 1}
    assert parse_groups("[[a | b] context")[0] == [(["a", "b"], "context")]
