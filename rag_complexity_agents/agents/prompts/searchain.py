"""SearChain (Xu et al. 2024; SUNAR Fig. 7): a global chain of [Query]/[Answer] nodes that the
loop checks against retrieved evidence; [Unsolved Query] asks for retrieval. Our own wording;
exemplars are data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SYSTEM = (
    "You plan how to answer a complex question as a chain of simple search queries. Write "
    "one node per step: '[Query n]: <simple question>' followed by '[Answer n]: <short "
    "answer>' when you know it, or '[Unsolved Query]: <the same question>' when you do not. "
    "Each query may use the answers before it. When the chain is complete, write '[Final "
    "Answer]: <short answer>'. Checked nodes you are given are correct; continue after them."
)

STOP = ["\n[Question]", "[Question]:", "\n\n\n"]


@dataclass(frozen=True, slots=True)
class SearChainExemplar:
    question: str
    nodes: tuple[tuple[str, str | None], ...]  # (query, answer or None for unsolved)
    answer: str


EXEMPLARS: tuple[SearChainExemplar, ...] = (
    SearChainExemplar(
        question="Which river runs through the city where the painter of The Night Watch died?",
        nodes=(
            ("Who painted The Night Watch?", "Rembrandt"),
            ("In which city did Rembrandt die?", "Amsterdam"),
            ("Which river runs through Amsterdam?", "the Amstel"),
        ),
        answer="the Amstel",
    ),
    SearChainExemplar(
        question="In which year was the university attended by the author of Dune founded?",
        nodes=(
            ("Who wrote Dune?", "Frank Herbert"),
            ("Which university did Frank Herbert attend?", "University of Washington"),
            ("In which year was the University of Washington founded?", None),
        ),
        answer="unknown until the last query is solved",
    ),
)


def chain_lines(nodes: Sequence[tuple[str, str | None]], *, checked: bool = False) -> str:
    lines = []
    for number, (query, answer) in enumerate(nodes, start=1):
        lines.append(f"[Query {number}]: {query}")
        if answer is None:
            lines.append(f"[Unsolved Query]: {query}")
        else:
            note = " (checked)" if checked else ""
            lines.append(f"[Answer {number}]: {answer}{note}")
    return "\n".join(lines)


def format_exemplar(exemplar: SearChainExemplar) -> str:
    text = f'[Question]: "{exemplar.question}"\n{chain_lines(exemplar.nodes)}'
    if all(answer is not None for _, answer in exemplar.nodes):
        text += f"\n[Final Answer]: {exemplar.answer}"
    return text


def exemplar_answers() -> set[str]:
    """Every answer that appears in the exemplars (to spot a model copying one)."""
    return {a for e in EXEMPLARS for a in (e.answer, *(x for _, x in e.nodes if x))}


def messages(
    question: str,
    checked: Sequence[tuple[str, str]],
    *,
    exemplars: int = 2,
    force_final: bool = False,
    format_hint: bool = False,
) -> list[tuple[str, str]]:
    """The prompt for the rest of the chain after the ``checked`` (query, answer) nodes."""
    shown = "\n\n".join(format_exemplar(e) for e in EXEMPLARS[: max(0, exemplars)])
    body = f'[Question]: "{question}"'
    if checked:
        body += "\n" + chain_lines(checked, checked=True)
    if force_final:
        task = "Write only '[Final Answer]: <short answer>'."
    elif checked:
        task = (
            f"Continue the chain from [Query {len(checked) + 1}], or write '[Final Answer]: "
            "<short answer>' if the checked nodes already answer the question."
        )
    else:
        task = "Write the chain, starting with [Query 1]."
    if format_hint:
        task += " Use the bracketed markers exactly as in the examples."
    examples = f"Examples:\n\n{shown}\n\n" if shown else ""
    return [("system", SYSTEM), ("human", f"{examples}{task}\n\n{body}")]
