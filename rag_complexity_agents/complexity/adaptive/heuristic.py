"""The heuristic complexity classifier: surface cues of multi-hop questions, no model."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from .base import Probabilities, normalise

_NESTING = re.compile(
    r"\b(of the|whose|who (?:was|is|founded|directed|wrote|created|played)|that (?:was|is)|"
    r"where the|the same|both|born first|died first|older|younger|earlier|later|"
    r"before|after|which (?:came|was) first|in the country|of the country|"
    r"performer of|director of|father of|mother of|spouse of|founder of)\b",
    re.IGNORECASE,
)
_POSSESSIVE = re.compile(r"\w's\b")


def multi_hop_score(question: str) -> float:
    """A rough count of multi-hop cues (nested entities, comparisons, length)."""
    words = len(question.split())
    cues = len(_NESTING.findall(question)) + len(_POSSESSIVE.findall(question))
    return cues + max(0.0, (words - 12) / 8.0)


class HeuristicClassifier:
    """Surface cues → P(C) via a logistic of :func:`multi_hop_score`; A gets a small share.

    Not trained and not from the paper: a model-free fallback (``adaptive.classifier=
    heuristic``) and the backstop of the zero-shot LLM classifier when a reply is unusable.
    """

    name = "heuristic"
    llm_calls_per_question = 0

    def predict_proba(self, questions: Sequence[str]) -> list[Probabilities]:
        out = []
        for question in questions:
            p_complex = 1.0 / (1.0 + math.exp(-(multi_hop_score(question) - 1.5) * 1.5))
            out.append(normalise({"A": 0.1, "B": 0.9 * (1 - p_complex), "C": 0.9 * p_complex}))
        return out
