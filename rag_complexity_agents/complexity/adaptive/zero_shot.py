"""The zero-shot LLM complexity classifier: the chat model reads our own prompt and the
probability of each label is the next-token probability of its letter (one forward pass,
llama.cpp); backends without next-token probabilities generate a reply that is parsed
robustly; an unusable reply falls back to the heuristic."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...models.calls import call_chat
from ...text import as_text
from .base import ComplexityClassifier, Probabilities, normalise
from .heuristic import HeuristicClassifier
from .labels import LABELS, Label

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

ZERO_SHOT_SYSTEM = (
    "You sort questions by how much searching they need before they can be answered. "
    "Reply with one letter.\n"
    "A = a very well-known fact that can be answered from memory.\n"
    "B = one specific fact, found by looking it up in one document.\n"
    "C = several facts from different documents, found one after another: the question "
    "describes a person, place or work through another one, or compares two things."
)

#: Worked examples shown as earlier chat turns (our own questions; data, not prompt text).
ZERO_SHOT_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("What is the capital of Italy?", "A"),
    ("In what year was the Treaty of Ryswick signed?", "B"),
    ("Who is the father of the director of the film Heat?", "C"),
    ("How many legs does a spider have?", "A"),
    ("Which company made the engines of the first Boeing 747?", "B"),
    ("Which was founded earlier, Oxfam or Amnesty International?", "C"),
)

#: The content-free input used to calibrate the letter probabilities (see the class).
CONTENT_FREE = "N/A"


def zero_shot_prompt(question: str) -> str:
    """The user turn for one question (the label definitions are in the system turn)."""
    return f"Question: {question.strip()}\nKind:"


def zero_shot_messages(question: str, examples: int = len(ZERO_SHOT_EXAMPLES)) -> list[Any]:
    """System turn, ``examples`` worked examples as chat turns, then the question."""
    messages: list[Any] = [("system", ZERO_SHOT_SYSTEM)]
    for shown, label in ZERO_SHOT_EXAMPLES[:examples]:
        messages += [("human", zero_shot_prompt(shown)), ("ai", label)]
    messages.append(("human", zero_shot_prompt(question)))
    return messages


_LETTER = re.compile(r"\b([ABC])\b")
_WORDS = (
    ("C", re.compile(r"multi|several|two or more|complex|compar", re.IGNORECASE)),
    ("B", re.compile(r"single|one (?:fact|document)|look(?:ed)? up|retriev", re.IGNORECASE)),
    ("A", re.compile(r"memory|no search|well[- ]known|without", re.IGNORECASE)),
)


def parse_label_reply(reply: str) -> Label | None:
    """The label in a generated reply: a standalone A/B/C first, then telling words (in the
    first :data:`~...agents.parsers.MAX_CHARS` characters)."""
    text = as_text(reply).strip()
    if not text:
        return None
    head = text.lstrip("*\"'`([ ").upper()
    if head[:1] in LABELS and (len(head) == 1 or not head[1].isalpha()):
        return head[0]  # type: ignore[return-value]
    match = _LETTER.search(text.replace("kind", " "))
    if match:
        return match.group(1)  # type: ignore[return-value]
    for label, pattern in _WORDS:
        if pattern.search(text):
            return label  # type: ignore[return-value]
    return None


class LLMZeroShotClassifier:
    """The chat model as a zero-shot A/B/C classifier (one LLM call per question).

    With a llama.cpp model, P(label) = the next-token probability mass of the letter's
    spellings after the prompt (system turn with the label definitions, six worked examples
    as chat turns, then the question), renormalised over A, B, C; when the model puts under
    ``min_mass`` on the three letters the reply counts as unusable. Small models prefer
    some letters whatever the question, so with ``calibrate`` the probabilities are divided
    by those for a content-free question ("N/A", computed once) and renormalised
    ("calibrate before use", Zhao et al. 2021 — our addition, not in Adaptive-RAG, which
    has no LLM classifier). Other chat models generate a short reply, parsed by
    :func:`parse_label_reply`; a parsed letter gets ``confidence`` and the rest is shared.
    Unusable replies fall back to :class:`HeuristicClassifier` (``fallbacks`` counts them).
    """

    llm_calls_per_question = 1

    def __init__(
        self,
        chat: BaseChatModel,
        *,
        confidence: float = 0.8,
        min_mass: float = 0.05,
        calibrate: bool = True,
        examples: int = len(ZERO_SHOT_EXAMPLES),
        fallback: ComplexityClassifier | None = None,
    ) -> None:
        self.chat = chat
        self.confidence = confidence
        self.min_mass = min_mass
        self.calibrate = calibrate
        self.examples = examples
        self._prior: Probabilities | None = None
        self.fallback = fallback or HeuristicClassifier()
        self.name = f"llm-zero-shot:{getattr(chat, 'model_name', type(chat).__name__)}"
        self.fallbacks = 0

    def _messages(self, question: str) -> list[Any]:
        return zero_shot_messages(question, self.examples)

    def _letter_mass(self, question: str) -> Probabilities | None:
        top = getattr(self.chat, "top_next_tokens", None)
        if not callable(top):
            return None
        mass: dict[str, float] = dict.fromkeys(LABELS, 0.0)
        for token, logprob in top(self._messages(question), k=40):
            key = token.strip().upper()
            if key in mass:
                mass[key] += math.exp(logprob)
        if sum(mass.values()) < self.min_mass:
            return None
        return normalise(mass)

    def _from_logprobs(self, question: str) -> Probabilities | None:
        probs = self._letter_mass(question)
        if probs is None or not self.calibrate:
            return probs
        if self._prior is None:
            self._prior = self._letter_mass(CONTENT_FREE) or dict.fromkeys(LABELS, 1.0)
        prior = self._prior
        return normalise({k: probs[k] / max(prior.get(k, 0.0), 1e-6) for k in LABELS})

    def _from_reply(self, question: str) -> Probabilities | None:
        label = parse_label_reply(call_chat(self.chat, self._messages(question)).text)
        if label is None:
            return None
        rest = (1.0 - self.confidence) / (len(LABELS) - 1)
        return {lab: (self.confidence if lab == label else rest) for lab in LABELS}

    def predict_proba(self, questions: Sequence[str]) -> list[Probabilities]:
        out: list[Probabilities] = []
        for question in questions:
            probs = self._from_logprobs(question)
            if probs is None:
                probs = self._from_reply(question)
            if probs is None:
                self.fallbacks += 1
                probs = self.fallback.predict_proba([question])[0]
            out.append(probs)
        return out
