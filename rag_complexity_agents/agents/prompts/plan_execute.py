"""Plan-and-execute: the chain of simple questions written before any retrieval, in
MuSiQue's decomposition form (``#k`` stands for the answer of question k). Our own wording;
the exemplars are invented and hold no dataset question.
"""

from __future__ import annotations

from collections.abc import Sequence

SYSTEM = (
    "You split a complex question into a chain of simple questions. Each simple question "
    "asks for one fact about one named thing. Where a question needs the answer of an "
    "earlier one, write #1, #2, ... in its place. Reply with the numbered questions only, "
    "one per line, at most {max_steps}."
)

RULES = (
    " Keep every detail the complex question gives (names, titles, dates, places) in the "
    "simple question that needs it. Never ask who or what a named thing is: ask for the one "
    "fact the question needs about it. Never repeat the complex question as a step. A "
    "question that already asks one fact about one named thing is one line: the question."
)
"""What the planning prompt adds with ``agents.plan_rules``: one rule against each way small
models' plans fail (a dropped qualifier, a "Who is X?" step, the whole question as a step,
an invented step for a one-fact question)."""

FINAL_SYSTEM = (
    "You answer a complex question from the answers found for its simple questions. Reply "
    "with the answer only: a name, date, number or short phrase, with no explanation."
)

FORMAT_HINT = (
    "One simple question per line, each starting with its number; #k may only stand for the "
    "answer of an earlier question k."
)

STOP = ["\n\n", "Question:"]

EXEMPLARS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Who is the mayor of the city where the author of Dracula was born?",
        (
            "Who is the author of Dracula?",
            "In which city was #1 born?",
            "Who is the mayor of #2?",
        ),
    ),
    (
        "In what year did the company that makes the Walkman go public?",
        ("Which company makes the Walkman?", "In what year did #1 go public?"),
    ),
    (
        "Who is the father of the director of the film Jaws?",
        ("Who is the director of the film Jaws?", "Who is the father of #1?"),
    ),
)


OWN_PHRASES: tuple[str, ...] = ("Dracula", "Walkman", "go public", "Jaws", "Sistine Chapel")
"""The exemplars' own words: the things they name, and "go public", the one thing they ask
that other questions seldom do. A step of a plan for another question that holds one the
question does not was copied from an exemplar (the 0.5B model plans "In which city did #1 go
public?" for "Where was the husband of Emily Davenport born?"). Generic words such as "city",
"born" or "father" are not here: right steps use them too."""


ONE_STEP: tuple[str, tuple[str, ...]] = (
    "Who painted the ceiling of the Sistine Chapel?",
    ("Who painted the ceiling of the Sistine Chapel?",),
)
"""A one-fact question planned as one line, shown before the chains with
``agents.one_step_exemplar`` (off by default): with only chains to copy, the 1.5B model
plans about half of the one-fact questions with an invented second step."""


def numbered(questions: Sequence[str]) -> str:
    return "\n".join(f"{number}. {q}" for number, q in enumerate(questions, start=1))


def exemplar_questions() -> set[str]:
    """Every simple question of the exemplars (to spot a model copying one)."""
    return {q for _, chain in (ONE_STEP, *EXEMPLARS) for q in chain}


def messages(
    question: str,
    *,
    max_steps: int,
    exemplars: int = 3,
    format_hint: bool = False,
    rules: bool = False,
    one_step: bool = False,
) -> list[tuple[str, str]]:
    """The planning prompt: the first ``exemplars`` chains as earlier turns (after
    :data:`ONE_STEP` with ``one_step`` when there are any), then ``question``; with ``rules``
    the system message ends with :data:`RULES`."""
    out = [("system", SYSTEM.format(max_steps=max_steps) + (RULES if rules else ""))]
    shown_chains = list(EXEMPLARS[: max(0, exemplars)])
    for shown, chain in [ONE_STEP, *shown_chains] if one_step and shown_chains else shown_chains:
        out += [("human", f"Question: {shown}"), ("ai", numbered(chain))]
    hint = f"\n({FORMAT_HINT})" if format_hint else ""
    out.append(("human", f"Question: {question}{hint}"))
    return out


def final_messages(question: str, path: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The prompt for the final answer from the (simple question, answer) pairs found."""
    found = "\n".join(f"- {q} {a}" for q, a in path) or "- nothing"
    return [
        ("system", FINAL_SYSTEM),
        ("human", f"Found:\n{found}\n\nQuestion: {question}\nAnswer:"),
    ]
