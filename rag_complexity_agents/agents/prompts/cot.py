"""Chain of thought over retrieved passages: the few-shot CoT baseline and IRCoT's one
sentence per step (Trivedi et al. 2023). Our own wording; exemplars are data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...types import ScoredDoc
from .single_step import format_passages

ANSWER_MARKER = "So the answer is:"

SYSTEM = (
    "You answer questions from numbered passages by reasoning step by step in a few short "
    f"sentences, then end with '{ANSWER_MARKER} <short answer>' (a name, date, number or "
    "short phrase). If the passages do not say, reason from what you know."
)

IRCOT_SYSTEM = (
    "You answer questions from numbered passages by reasoning one sentence at a time. Write "
    "only the next single sentence of reasoning. When the reasoning so far is enough, the "
    f"sentence ends with '{ANSWER_MARKER} <short answer>'."
)

IRCOT_STOP = ["\n", "Q:", "Passages:"]


@dataclass(frozen=True, slots=True)
class CoTExemplar:
    question: str
    sentences: tuple[str, ...]
    answer: str


EXEMPLARS: tuple[CoTExemplar, ...] = (
    CoTExemplar(
        question="Which river runs through the city where the painter of The Night Watch died?",
        sentences=(
            "The Night Watch was painted by Rembrandt.",
            "Rembrandt died in Amsterdam.",
            "The river Amstel runs through Amsterdam.",
        ),
        answer="the Amstel",
    ),
    CoTExemplar(
        question="What language is spoken in the country whose capital is Lima?",
        sentences=("Lima is the capital of Peru.", "The main language of Peru is Spanish."),
        answer="Spanish",
    ),
    CoTExemplar(
        question="In which year did the first person to walk on the Moon die?",
        sentences=(
            "The first person to walk on the Moon was Neil Armstrong.",
            "Neil Armstrong died in 2012.",
        ),
        answer="2012",
    ),
)


def format_exemplar(exemplar: CoTExemplar) -> str:
    return f"Q: {exemplar.question}\nA: {' '.join(exemplar.sentences)} {ANSWER_MARKER} " + (
        exemplar.answer
    )


def _examples(exemplars: int) -> str:
    shown = "\n\n".join(format_exemplar(e) for e in EXEMPLARS[: max(0, exemplars)])
    return f"Examples of reasoning:\n\n{shown}\n\n" if shown else ""


def exemplar_answers() -> set[str]:
    """Every answer of the exemplars (to spot a model copying one)."""
    return {e.answer for e in EXEMPLARS}


def messages(
    question: str, docs: Sequence[ScoredDoc], *, exemplars: int = 2, max_chars: int = 700
) -> list[tuple[str, str]]:
    """Few-shot CoT: passages, exemplars, question; the reply reasons and ends with the
    answer marker."""
    passages = format_passages(docs, max_chars=max_chars) if docs else "(no passages)"
    return [
        ("system", SYSTEM),
        ("human", f"{_examples(exemplars)}Passages:\n{passages}\n\nQ: {question}\nA:"),
    ]


def ircot_messages(
    question: str,
    docs: Sequence[ScoredDoc],
    sentences: Sequence[str],
    *,
    exemplars: int = 2,
    max_chars: int = 700,
    force_answer: bool = False,
) -> list[tuple[str, str]]:
    """IRCoT: passages, exemplars, question, the reasoning so far; the reply is the next
    sentence (``force_answer``: a sentence that ends with the answer marker)."""
    passages = format_passages(docs, max_chars=max_chars) if docs else "(no passages)"
    so_far = " ".join(sentences)
    if force_answer:
        task = f"Write the last sentence, ending with '{ANSWER_MARKER} <short answer>'."
    else:
        task = "Write the next sentence only."
    return [
        ("system", IRCOT_SYSTEM),
        (
            "human",
            f"{_examples(exemplars)}Passages:\n{passages}\n\nQ: {question}\n"
            f"A (so far): {so_far or '(nothing yet)'}\n\n{task}",
        ),
    ]
