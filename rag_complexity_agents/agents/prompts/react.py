"""ReAct (Yao et al. 2023; SUNAR Fig. 9): Thought / Action / Observation. Our own wording;
exemplars are data. Observations come from the loop's retrieval node, not from Wikipedia.

Actions: ``Search[query]`` (retrieve passages), ``Lookup[keyword]`` (the next sentence with
the keyword in the passages found so far), ``Finish[answer]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SYSTEM = (
    "You answer a question by alternating Thought, Action and Observation lines. A Thought "
    "reasons about what is known and what is missing. An Action is one of: Search[query] "
    "to find passages about something, Lookup[keyword] to get the next sentence containing "
    "the keyword in the passages already found, Finish[answer] to give the short final "
    "answer. After each Action you receive an Observation. Write only the next Thought and "
    "Action lines, then stop."
)

STOP = ["\nObservation", "Observation:", "\nQuestion:"]


@dataclass(frozen=True, slots=True)
class ReActTurn:
    thought: str
    action: str  # e.g. "Search[Rembrandt]"
    observation: str = ""


@dataclass(frozen=True, slots=True)
class ReActExemplar:
    question: str
    turns: tuple[ReActTurn, ...]


EXEMPLARS: tuple[ReActExemplar, ...] = (
    ReActExemplar(
        question="Which river runs through the city where the painter of The Night Watch died?",
        turns=(
            ReActTurn(
                "I need the painter of The Night Watch first.",
                "Search[The Night Watch painter]",
                "The Night Watch is a 1642 painting by Rembrandt van Rijn.",
            ),
            ReActTurn(
                "The painter is Rembrandt. Now I need the city where he died.",
                "Search[Rembrandt death city]",
                "Rembrandt died in Amsterdam in 1669.",
            ),
            ReActTurn(
                "He died in Amsterdam. I need the river of Amsterdam.",
                "Lookup[river]",
                "Amsterdam's name comes from a dam on the river Amstel.",
            ),
            ReActTurn("The river is the Amstel.", "Finish[the Amstel]"),
        ),
    ),
    ReActExemplar(
        question="What language is spoken in the country whose capital is Lima?",
        turns=(
            ReActTurn(
                "I need the country whose capital is Lima.",
                "Search[Lima capital of which country]",
                "Lima is the capital and largest city of Peru.",
            ),
            ReActTurn(
                "The country is Peru. I need its language.",
                "Search[Peru official language]",
                "Spanish is the most widely spoken language of Peru.",
            ),
            ReActTurn("Peru mainly speaks Spanish.", "Finish[Spanish]"),
        ),
    ),
)


def transcript(turns: Sequence[ReActTurn]) -> str:
    lines = []
    for number, turn in enumerate(turns, start=1):
        lines.append(f"Thought {number}: {turn.thought}")
        lines.append(f"Action {number}: {turn.action}")
        if turn.observation:
            lines.append(f"Observation {number}: {turn.observation}")
    return "\n".join(lines)


def format_exemplar(exemplar: ReActExemplar) -> str:
    return f"Question: {exemplar.question}\n{transcript(exemplar.turns)}"


def exemplar_answers() -> set[str]:
    """Every Finish[...] answer of the exemplars (to spot a model copying one)."""
    out = set()
    for exemplar in EXEMPLARS:
        for turn in exemplar.turns:
            if turn.action.startswith("Finish["):
                out.add(turn.action[len("Finish[") : -1])
    return out


def messages(
    question: str,
    turns: Sequence[ReActTurn],
    *,
    exemplars: int = 2,
    force_finish: bool = False,
    format_hint: bool = False,
) -> list[tuple[str, str]]:
    """The prompt for the next Thought/Action. ``force_finish`` demands Finish[...] now."""
    shown = "\n\n".join(format_exemplar(e) for e in EXEMPLARS[: max(0, exemplars)])
    body = f"Question: {question}"
    if turns:
        body += "\n" + transcript(turns)
    number = len(turns) + 1
    if force_finish:
        task = (
            f"No more searches are allowed. Write Thought {number} and "
            f"Action {number}: Finish[<answer>]."
        )
    else:
        task = f"Write Thought {number} and Action {number}."
    if format_hint:
        task += " The Action must be Search[...], Lookup[...] or Finish[...]."
    examples = f"Examples:\n\n{shown}\n\n" if shown else ""
    return [("system", SYSTEM), ("human", f"{examples}{task}\n\n{body}")]
