"""Answer equivalence: does answer a mean the same as answer b (checked in both directions)?

Kuhn et al.'s semantic clustering (used by SUNAR's ASU) calls two answers equivalent when each
entails the other. No NLI model ships offline, so the implementations range from a local NLI
model (faithful) through an LLM judge to cheap lexical and embedding rules.

``rule`` (NLI and LLM judges): ``strict`` = entailment both ways (the paper); ``lenient`` = no
contradiction either way (what SUNAR's official code does).
"""

from __future__ import annotations

import os
import re
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import ConfigError, ModelNotAvailable
from ..optional import require
from ..text import normalize_answer
from .base import Embedder, Equivalence

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from .structured import StructuredOutput

Rule = Literal["strict", "lenient"]
Verdict = Literal["entailment", "neutral", "contradiction"]


class LexicalEquivalence:
    """Equal after SQuAD normalisation, or one answer's tokens are a subset of the other's.

    The subset rule makes "Miyazaki" ≈ "Hayao Miyazaki" (the same containment idea as the
    cover-EM metric); it can over-merge ("Paris" ≈ "Paris, Texas"), which only lowers s.
    """

    name = "lexical"

    def equivalent(self, a: str, b: str, *, question: str | None = None) -> bool:
        ta, tb = normalize_answer(a).split(), normalize_answer(b).split()
        if not ta or not tb:
            return ta == tb
        small, large = (ta, tb) if len(ta) <= len(tb) else (tb, ta)
        return set(small) <= set(large)


class EmbeddingEquivalence:
    """Cosine similarity of the two answers' embeddings at or above ``threshold``."""

    name = "embedding"

    def __init__(self, embedder: Embedder, threshold: float = 0.85) -> None:
        self.embedder = embedder
        self.threshold = threshold

    def equivalent(self, a: str, b: str, *, question: str | None = None) -> bool:
        if normalize_answer(a) == normalize_answer(b):
            return True
        va, vb = self.embedder.encode([a, b])
        return float(np.dot(va, vb)) >= self.threshold


def _combine(forward: Verdict, backward: Verdict, rule: Rule) -> bool:
    if rule == "strict":
        return forward == backward == "entailment"
    return "contradiction" not in (forward, backward)


class NLIEquivalence:
    """A local NLI sequence classifier (e.g. a DeBERTa MNLI checkpoint) by path."""

    name = "nli"

    def __init__(self, path: str | Path, rule: Rule = "strict") -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_dir():
            raise ModelNotAvailable(
                f"NLI model {str(path)!r} is not a local directory; models are never downloaded"
            )
        self.rule = rule

    @cached_property
    def _model(self) -> tuple[Any, Any, dict[int, Verdict]]:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        hf = require("transformers", "the NLI equivalence")
        tokenizer = hf.AutoTokenizer.from_pretrained(str(self.path), local_files_only=True)
        model = hf.AutoModelForSequenceClassification.from_pretrained(
            str(self.path), local_files_only=True
        ).eval()
        labels: dict[int, Verdict] = {}
        for index, label in model.config.id2label.items():
            name = str(label).lower()
            for verdict in ("entailment", "neutral", "contradiction"):
                if name.startswith(verdict[:6]):
                    labels[int(index)] = verdict
        if "entailment" not in labels.values():
            raise ModelNotAvailable(
                f"{self.path} has labels {model.config.id2label}; none looks like 'entailment'"
            )
        return tokenizer, model, labels

    def verdict(self, premise: str, hypothesis: str) -> Verdict:
        import torch

        tokenizer, model, labels = self._model
        enc = tokenizer(premise, hypothesis, return_tensors="pt", truncation=True)
        with torch.inference_mode():
            index = int(model(**enc).logits[0].argmax())
        return labels.get(index, "neutral")

    def equivalent(self, a: str, b: str, *, question: str | None = None) -> bool:
        prefix = f"{question} " if question else ""
        return _combine(
            self.verdict(prefix + a, prefix + b), self.verdict(prefix + b, prefix + a), self.rule
        )


_YES_NO = re.compile(r"\b(yes|no|contradict\w*)\b", re.IGNORECASE)


def _entailment_word(text: str) -> str | None:
    """The judge's word in a text reply: yes, no or contradiction (None if there is none)."""
    match = _YES_NO.search(text)
    if not match:
        return None
    word = match.group(1).lower()
    return "contradiction" if word.startswith("contradict") else word


class LLMJudgeEquivalence:
    """The chat model judges entailment in each direction; unreadable replies count as neutral.

    Treating an unreadable reply as "neutral" makes the strict rule say "different" and the
    lenient rule say "same": each rule's conservative reading. The verdict is an
    :class:`~.schemas.Entailment` object when the model has structured output (a format
    failure of kind ``equivalence_judge`` when it cannot be read), else the one-word reply.
    """

    name = "llm"

    def __init__(self, chat: BaseChatModel, rule: Rule = "strict") -> None:
        self.chat = chat
        self.rule = rule
        self._structured: StructuredOutput | None = None

    def verdict(self, premise: str, hypothesis: str, question: str | None) -> Verdict:
        # the LLM judge's pydantic schemas and LangChain's chat stack (about 1.5 s) load on
        # its first call; the embedding equivalence needs neither
        from .schemas import Entailment
        from .structured import StructuredOutput, ask_choice

        context = f"Question: {question}\n" if question else ""
        prompt = (
            f"{context}Statement 1: {premise}\nStatement 2: {hypothesis}\n"
            "If statement 1 is true, is statement 2 necessarily true as an answer to the "
            "question? Reply with one word: Yes, No, or Contradiction (if they cannot both "
            "be true)."
        )
        if self._structured is None:
            self._structured = StructuredOutput(self.chat)
        word = ask_choice(
            self._structured, prompt, Entailment, _entailment_word, kind="equivalence_judge"
        )
        if word == "yes":
            return "entailment"
        return "contradiction" if word == "contradiction" else "neutral"

    def equivalent(self, a: str, b: str, *, question: str | None = None) -> bool:
        if normalize_answer(a) == normalize_answer(b):
            return True
        return _combine(self.verdict(a, b, question), self.verdict(b, a, question), self.rule)


def load_equivalence(
    spec: str,
    *,
    embedder: Embedder | None = None,
    chat: BaseChatModel | None = None,
    rule: Rule = "strict",
    cosine_threshold: float = 0.85,
) -> Equivalence:
    """``lexical`` | ``embedding`` | ``llm`` | ``nli:<local path>``."""
    if spec == "lexical":
        return LexicalEquivalence()
    if spec == "embedding":
        if embedder is None:
            raise ConfigError("the 'embedding' equivalence needs an embedder")
        return EmbeddingEquivalence(embedder, cosine_threshold)
    if spec == "llm":
        if chat is None:
            raise ConfigError("the 'llm' equivalence needs a chat model")
        return LLMJudgeEquivalence(chat, rule)
    if spec.startswith("nli:"):
        return NLIEquivalence(spec.split(":", 1)[1], rule)
    raise ConfigError(
        f"unknown equivalence {spec!r}; use 'lexical', 'embedding', 'llm' or 'nli:<local path>'"
    )
