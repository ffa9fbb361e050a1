"""Bridge votes: the answer a later step builds on, chosen from m answers to the same prompt.

A plan step whose answer becomes the next step's bridge entity ("Who directed Jaws?" before
"Who is the father of #1?") is where a wrong reading costs the whole chain. With
``agents.bridge_votes`` = m > 1 the step's greedy answer is joined by m − 1 answers sampled
from the same prompt (one prompt evaluation on llama.cpp), the answers are grouped with
ASU's clustering (:func:`~rag_complexity_agents.retrieval.asu.cluster_answers`, the run's
answer equivalence) and the largest cluster wins. Only clusters with an answer found in a
passage the step read take part when there is one (an answer the passages do not hold is a
guess or a sentence, not a name to carry on). Ties go to the greedy answer's cluster.

Not in the SUNAR paper, which samples answers to re-score retrieval batches (ASU), not to
choose an answer; this is self-consistency voting (Wang et al., 2023) with ASU's clusters.
The pure choice is :func:`vote`; the plan-and-execute node calls it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..retrieval.asu import cluster_answers
from ..text import normalize_answer
from .retrieve import UNANSWERED

VOTE_TEMPERATURE = 0.7
"""Sampling temperature of the m − 1 extra answers (self-consistency's usual setting)."""


@dataclass(frozen=True)
class Vote:
    """The outcome of one bridge vote (for the trace): the answers (the greedy one first),
    their clusters (answer indices), which answers a passage holds, and the chosen answer
    with its cluster's index (None when no answer was usable and the greedy one stands)."""

    answer: str
    answers: list[str]
    clusters: list[list[int]]
    grounded: list[bool]
    kept: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "answers": list(self.answers),
            "clusters": [list(c) for c in self.clusters],
            "grounded": list(self.grounded),
            "kept": self.kept,
            "answer": self.answer,
        }


def usable(answer: str) -> bool:
    """An answer that names something (not empty, not 'unknown' / 'not found')."""
    norm = normalize_answer(answer)
    return bool(norm) and norm not in UNANSWERED


def vote(
    answers: Sequence[str],
    equivalent: Callable[[str, str], bool],
    grounded: Callable[[str], bool],
) -> Vote:
    """The answer of the largest cluster of ``answers`` (``answers[0]`` is the greedy one).

    Unusable answers (:func:`usable`) do not vote. When some cluster holds an answer that
    ``grounded`` accepts, only such clusters compete, and the chosen answer is a grounded
    member. Ties go to the cluster of the greedy answer, then to the earlier cluster. With no
    usable answer the greedy one is returned unchanged."""
    answers = list(answers)
    held = [usable(a) and grounded(a) for a in answers]
    voters = [i for i, a in enumerate(answers) if usable(a)]
    if not voters:
        return Vote(answers[0] if answers else "", answers, [], held, None)
    local = cluster_answers([answers[i] for i in voters], equivalent)
    clusters = [[voters[j] for j in cluster] for cluster in local]
    candidates = [k for k, c in enumerate(clusters) if any(held[i] for i in c)] or list(
        range(len(clusters))
    )
    kept = max(candidates, key=lambda k: (len(clusters[k]), 0 in clusters[k], -k))
    members = clusters[kept]
    answer = answers[next((i for i in members if held[i]), members[0])]
    return Vote(answer, answers, clusters, held, kept)
