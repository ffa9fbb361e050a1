"""Self-Ask (Press et al. 2023; SUNAR Fig. 5–6): follow-up questions, intermediate answers,
final answer. Our own wording; exemplars are data (:data:`EXEMPLARS`).

The model sees the exemplars, the question and the scratchpad so far, and writes the next
line: either ``Follow up: …`` (generation stops before ``Intermediate answer:``, which the
loop fills in from retrieval) or ``So the final answer is: …``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FOLLOW_UP = "Follow up:"
INTERMEDIATE = "Intermediate answer:"
FINAL = "So the final answer is:"
NEEDED = "Are follow up questions needed here:"

SYSTEM = (
    "You answer complex questions by splitting them into simple follow-up questions that can "
    "be looked up one at a time. Follow the format of the examples exactly. Each time, write "
    f"only the next line: either '{FOLLOW_UP} <one simple question>' or, once the "
    f"intermediate answers are enough, '{FINAL} <short answer>'. Use the intermediate "
    "answers you were given; never invent them yourself."
)

STOP = ["\nIntermediate answer", "Intermediate answer:", "\nQuestion:", "\n\n\n"]


@dataclass(frozen=True, slots=True)
class SelfAskExemplar:
    question: str
    steps: tuple[tuple[str, str], ...]  # (follow-up question, intermediate answer)
    answer: str


EXEMPLARS: tuple[SelfAskExemplar, ...] = (
    SelfAskExemplar(
        question="Which river runs through the city where the painter of The Night Watch died?",
        steps=(
            ("Who painted The Night Watch?", "Rembrandt"),
            ("In which city did Rembrandt die?", "Amsterdam"),
            ("Which river runs through Amsterdam?", "the Amstel"),
        ),
        answer="the Amstel",
    ),
    SelfAskExemplar(
        question="What language is spoken in the country whose capital is Lima?",
        steps=(
            ("Which country has Lima as its capital?", "Peru"),
            ("What language is spoken in Peru?", "Spanish"),
        ),
        answer="Spanish",
    ),
    SelfAskExemplar(
        question="Who was older when their first novel came out, the author of Dracula or "
        "the author of Emma?",
        steps=(
            (
                "Who wrote Dracula, and how old was he when his first novel came out?",
                "Bram Stoker, 42",
            ),
            (
                "Who wrote Emma, and how old was she when her first novel came out?",
                "Jane Austen, 35",
            ),
        ),
        answer="Bram Stoker",
    ),
    SelfAskExemplar(
        question="In which year did the first person to walk on the Moon die?",
        steps=(
            ("Who was the first person to walk on the Moon?", "Neil Armstrong"),
            ("In which year did Neil Armstrong die?", "2012"),
        ),
        answer="2012",
    ),
)


def exemplar_answers() -> set[str]:
    """Every answer that appears in the exemplars (to spot a model copying one)."""
    return {a for e in EXEMPLARS for a in (e.answer, *(sa for _, sa in e.steps))}


def scratchpad(steps: Sequence[tuple[str, str]], *, pending: str | None = None) -> str:
    """The lines after the question: 'Yes', then follow-ups with their intermediate answers."""
    lines = [f"{NEEDED} Yes."]
    for sub_question, answer in steps:
        lines.append(f"{FOLLOW_UP} {sub_question}")
        lines.append(f"{INTERMEDIATE} {answer or 'unknown'}")
    if pending is not None:
        lines.append(pending)
    return "\n".join(lines)


def format_exemplar(exemplar: SelfAskExemplar) -> str:
    return f"Question: {exemplar.question}\n{scratchpad(exemplar.steps)}\n{FINAL} {exemplar.answer}"


def messages(
    question: str,
    steps: Sequence[tuple[str, str]],
    *,
    exemplars: int = 2,
    force_final: bool = False,
    force_follow_up: bool = False,
    format_hint: bool = False,
) -> list[tuple[str, str]]:
    """The prompt for the next line. ``force_final`` asks for the final answer now;
    ``force_follow_up`` for one more follow-up question (the answers so far found a bridge
    entity, not the answer); ``format_hint`` repeats the format after a reply that broke it."""
    shown = "\n\n".join(format_exemplar(e) for e in EXEMPLARS[: max(0, exemplars)])
    body = f"Question: {question}\n{scratchpad(steps)}"
    if force_final:
        task = (
            "No more follow-up questions are allowed. Write the last line of the block below: "
            f"'{FINAL} <answer>'."
        )
    elif force_follow_up:
        task = (
            "The intermediate answers do not answer the question yet. Write the next line of "
            f"the block below: '{FOLLOW_UP} <question>', the simple question that is still "
            "missing, using the last intermediate answer."
        )
    elif not steps:
        task = f"Write the first line of the block below: '{FOLLOW_UP} <simple question>'."
    else:
        task = (
            f"Write the next line of the block below: '{FOLLOW_UP} <question>' if something "
            f"is still missing, otherwise '{FINAL} <answer>'."
        )
    if format_hint:
        task += f" The line must start with '{FOLLOW_UP}' or with '{FINAL}'."
    examples = f"Examples:\n\n{shown}\n\n" if shown else ""
    return [("system", SYSTEM), ("human", f"{examples}{task}\n\n{body}")]
