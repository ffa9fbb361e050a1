"""Property tests for every parser of model output (and GRADE's sentence splitting of
documents): it never raises anything but our own errors, and its work is bounded: it reads
only the first ``MAX_CHARS`` characters (so a 100k-character reply costs what a 20k one does;
the sentence splitter and the tool-reply reader read everything) and an adversarial input of
four times the size costs about four times the CPU time, not sixteen times. Absolute times
of inputs up to 100k characters are measured in benchmarks/robustness.py (``parsers`` rows),
not asserted here."""

from __future__ import annotations

import gc
import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rag_complexity_agents.agents import parsers
from rag_complexity_agents.agents.answer import shorten_answer
from rag_complexity_agents.agents.single_step import extract_short_answer
from rag_complexity_agents.complexity.adaptive.zero_shot import parse_label_reply
from rag_complexity_agents.complexity.grade.claims import parse_numbered
from rag_complexity_agents.complexity.grade.equivalence import parse_groups
from rag_complexity_agents.complexity.grade.questions import parse_description, parse_question
from rag_complexity_agents.complexity.grade.sentences import split_sentences
from rag_complexity_agents.complexity.grade.triples import parse_triples
from rag_complexity_agents.errors import RCAError
from rag_complexity_agents.models.calls import parse_yes_no
from rag_complexity_agents.models.llamacpp.tools import read_tool_reply
from rag_complexity_agents.retrieval.asu import sample_answer
from rag_complexity_agents.retrieval.mer import extract_final_answer
from rag_complexity_agents.text import MAX_CHARS

#: name -> parser; every one takes the raw model reply.
PARSERS: dict[str, Callable[[str], Any]] = {
    "mer.extract_final_answer": extract_final_answer,
    "asu.sample_answer": sample_answer,
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
    "single_step.extract_short_answer": extract_short_answer,
    "calls.parse_yes_no": parse_yes_no,
}

#: Readers of whole texts (no prefix cap): documents, and tool replies that must stay JSON.
WHOLE_TEXT: dict[str, Callable[[str], Any]] = {
    "grade.split_sentences": split_sentences,
    "llamacpp.read_tool_reply": read_tool_reply,
    "agents.names_passage": parsers.names_passage,
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
    "[Final Answer]: ",
    "final answer:",
    "Follow up: Intermediate answer: ",
    "J. R. ",
    "a. B ",
    "1",
    "{",
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
@example(text="1" * 5000 + ". x")
@example(text="(a | b | c | " + "1" * 5000 + ")")
@example(text="[Final Answer]: " * 6_250)
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


@pytest.mark.parametrize("name", sorted(WHOLE_TEXT))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(texts, big_texts))
@example(text="[" * 100_000)
@example(text="{" * 100_000)
@example(text="1" * 5000)
@example(text='{"answer": ' + "1" * 5000 + "}")
@example(text="J. R. " * 20_000)
@example(text="[1]" + " " * 100_000 + "x")
def test_whole_text_readers_never_raise(name: str, text: str) -> None:
    result = _call(WHOLE_TEXT[name], text)
    assert not isinstance(result, BaseException) or isinstance(result, RCAError)


def test_known_failures_are_read_as_unusable() -> None:
    assert parse_numbered("1" * 5000 + ". x", 5) == ({}, Counter({"claim_bad_number": 1}))
    assert parse_numbered("0001. x\n2) y", 5) == ({1: "x", 2: "y"}, Counter())
    triples, bad = parse_triples("(a | b | c | " + "1" * 5000 + ")", ["c1"])
    assert (triples, bad) == ([], Counter({"triple_bad_claim_number": 1}))
    assert read_tool_reply("[" * 100_000) == ("[" * 100_000, [])
    assert read_tool_reply("1" * 5000) == ("1" * 5000, [])
    content, calls = read_tool_reply('{"name": "s", "arguments": {"n": ' + "9" * 5000 + "}}")
    assert (content, [c["name"] for c in calls]) == ("", ["s"])
    assert parsers.find_answer("[Final Answer]: " * 2_000) == ""
    assert split_sentences("J. R. R. Tolkien wrote it. It sold well.") == [
        "J. R. R. Tolkien wrote it.",
        "It sold well.",
    ]


@settings(max_examples=60, deadline=None)
@given(answer=st.text(max_size=200), nested=st.integers(0, 60))
def test_tool_reply_reads_every_json_answer(answer: str, nested: int) -> None:
    assert read_tool_reply(json.dumps({"answer": answer})) == (answer, [])
    args = {"q": json.loads("[" * nested + "1" + "]" * nested)}
    _, calls = read_tool_reply(json.dumps({"name": "search", "arguments": args}))
    assert calls[0]["args"] == args


#: Repeated units that once cost quadratic time (or deep recursion) in some parser.
SCALING_FILLERS = (
    "[Final Answer]: ",
    "final answer:",
    "Follow up: Intermediate answer: ",
    "J. R. ",
    "1. ",
    "[",
    "(|",
    " ",
)
#: Quadrupling a linear parser's input quadruples its CPU time; a quadratic one's multiplies
#: it by 16. The bound sits between, far enough from both that jitter does not cross it.
SCALING_FACTOR = 4
SCALING_RATIO = 8.0
SCALING_SLACK_S = 0.002  # CPU-time jitter of calls that take well under a millisecond
SCALING_ATTEMPTS = 3  # a superlinear parser exceeds the bound on every attempt; jitter does not


def _cpu_seconds(parser: Callable[[str], Any], text: str, repeats: int = 5) -> float:
    """The least thread CPU time of ``repeats`` calls (the least disturbed run), with the
    garbage collector paused so that a collection of other tests' garbage is not counted."""
    best = float("inf")
    gc.disable()
    try:
        for _ in range(repeats):
            started = time.thread_time()
            _call(parser, text)
            best = min(best, time.thread_time() - started)
    finally:
        gc.enable()
    return best


def _scales_linearly(parser: Callable[[str], Any], text: str) -> tuple[bool, float, float]:
    small, large = _cpu_seconds(parser, text), _cpu_seconds(parser, text * SCALING_FACTOR)
    return large <= SCALING_RATIO * small + SCALING_SLACK_S, small, large


@pytest.mark.parametrize("name", sorted({**PARSERS, **WHOLE_TEXT}))
def test_a_larger_adversarial_input_costs_proportionally_more(name: str) -> None:
    parser = {**PARSERS, **WHOLE_TEXT}[name]
    # the larger input is read in full: at most MAX_CHARS for the parsers that cut there
    size = MAX_CHARS // SCALING_FACTOR if name in PARSERS else 20_000
    for filler in SCALING_FILLERS:
        text = filler * (size // len(filler))
        results = []
        for _ in range(SCALING_ATTEMPTS):
            results.append(_scales_linearly(parser, text))
            if results[-1][0]:
                break
        assert results[-1][0], (filler, [(small, large) for _, small, large in results])
