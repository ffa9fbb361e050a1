"""The kind of answer a question asks for, and answers that plainly are not of that kind."""

from __future__ import annotations

from typing import Any

import pytest

from rag_complexity_agents.agents.answer import final_answer
from rag_complexity_agents.agents.kinds import Kind, asks_for, not_of_kind


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("When did Jaws come out?", "time"),
        ("In what year was Harvard founded?", "time"),
        ("Where was Mozart born?", "place"),
        ("In which country is Ulm?", "place"),
        ("Who founded Studio Ghibli?", "person"),
        ("How many moons has Mars?", "number"),
        ("What is the capital of #1?", None),
        ("The city where X was born is in which country?", None),
    ],
)
def test_asks_for(question: str, kind: str | None) -> None:
    assert asks_for(question) == kind


@pytest.mark.parametrize(
    ("answer", "kind", "off"),
    [
        ("June 13, 2008", "place", True),
        ("1941", "person", True),
        ("the 19th century", "place", True),
        ("Washington, D.C.", "place", False),
        ("Route 66", "place", False),  # a name with a number in it
        ("Apollo 11", "person", False),
        ("June Carter", "person", False),  # a month's name alone is no date
        ("Paris", "time", True),
        ("May 1945", "time", False),
        ("the 1990s", "time", False),
        ("spring", "time", False),
        ("two decades", "time", False),
        ("during World War II", "time", False),
        ("the Middle Ages", "time", False),
        ("Paris", "number", True),
        ("12", "number", False),
        ("three hours", "number", False),
        ("several", "number", False),
        ("Paris", None, False),  # the question does not say
        ("", "place", False),
    ],
)
def test_not_of_kind(answer: str, kind: Kind | None, off: bool) -> None:
    assert not_of_kind(answer, kind) is off


def test_a_mer_answer_of_the_wrong_kind_gives_way_to_the_loop() -> None:
    state: Any = {"question": "Where did the presenter of Meet the Press die?"}
    mer = {"answer": "June 13, 2008", "extraction": "marker", "off_kind": True}
    assert final_answer({**state, "mer": mer, "loop_answer": "Washington, D.C."}) == (
        "Washington, D.C.",
        "loop (MER's answer is not of the kind the question asks for)",
    )
    # the loop's answer is no better: MER's stands
    assert final_answer({**state, "mer": mer, "loop_answer": "2008"})[0] == "June 13, 2008"
    # agents.check_kind off (no flag): MER's stands
    unmarked = {**state, "mer": {**mer, "off_kind": False}, "loop_answer": "Washington, D.C."}
    assert final_answer(unmarked)[0] == "June 13, 2008"
