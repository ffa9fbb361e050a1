"""Answer Semantic Uncertainty (ASU, SUNAR §3.2): LLM feedback for NAR batches.

For a (sub-)question and a scored batch B: draw m answers from the chat model with B as
context (one prompt, m samples), cut each to a short answer, group the answers into semantic
clusters with an :class:`~rag_complexity_agents.models.base.Equivalence`, and penalise the
batch by s = the number of clusters. By default the batch's min-max normalised scores are
divided by s (``batch``: our deviation, not the paper's rule; below); ``paper`` divides each
score by s as the paper states. More clusters = the model is less sure what the batch says =
the batch is pushed down (for ``paper``, only where the scores are positive).

The pure parts (answer extraction, clustering, entropy, rescoring) take plain data and are
separate from :class:`AnswerSemanticUncertainty`, which makes the LLM call and plugs into
NAR as a batch hook.

**Clustering** follows Kuhn et al. (2023): each answer joins the first cluster whose first
member it is equivalent to, otherwise it opens a new cluster. Whether two answers are
equivalent is the equivalence's decision; for the NLI and LLM judges ``rule`` selects
``strict`` (entailment in both directions: the paper) or ``lenient`` (no contradiction in
either direction: the official code). An answer with no letter or digit (empty output,
punctuation, control characters) is never equivalent to anything, so an LLM that returns
garbage m times yields s = m: maximal uncertainty, no crash. Decisions are cached per
(question, unordered normalised answer pair).

**Semantic entropy** is the discrete estimate over clusters (Farquhar et al. 2024):
``H = -Σ_k p_k ln p_k`` with ``p_k = |cluster_k| / m``; sampling probabilities are not
needed. It is exposed for traces only; the rescoring uses s, as the paper does.

**The rescore modes** (``asu.rescore``). The paper divides each score by s. Applied to raw
scorer scores that rule (and any fixed shift such as ``score - ln s``) depends on the
scorer's scale: with bi-encoder cosines (0.3–0.8) ln 2 = 0.69 outweighs every relevance
difference, with SPLADE scores (tens) it changes nothing; and for negative scores
(cross-encoder logits) division moves a score *up*. The official code is worse: it computes
``score / (penalty / 2)`` with penalty = the number of contradicting answer pairs, so one
contradicting pair *doubles* every score. The default applies the division to the batch's
min-max normalised scores instead:

* ``batch`` (default; our deviation, not the paper's rule): with ``lo``/``hi`` the
  lowest/highest score of the batch, the normalised score ``n = (score - lo) / (hi - lo)``
  lies in [0, 1] and is divided by s, then mapped back: ``lo + (score - lo) / s`` (``hi``
  cancels). It is not the paper's division of each score by s: it never lowers the batch's
  lowest document, and with b = 2 it can at most pull the top document down to its
  partner's score. It is invariant under any increasing affine change of the scorer
  (``a·score + b``, a > 0): the final order across batches is the same for cosines, logits
  or SPLADE scores. The penalty is bounded: a document of an uncertain batch falls at most
  to its batch's lowest score, i.e. ASU re-orders documents whose scores the scorer put
  close together and never buries a document the scorer ranked far above the rest. It keeps
  the order within a batch, s = 1 is the identity, and a batch of one document (b = 1) or of
  equal scores has no scale, so it is left unchanged.
* ``multiplicative``: ``score / s`` for ``score >= 0`` and ``score * s`` for ``score < 0``.
  It equals the paper's rule wherever the paper's rule is a penalty and does not depend on
  the scorer's unit, but it does on its zero (a shift of the scores changes the ranking).
* ``paper``: ``score / s`` for every score, the paper's rule as it states it. It depends on
  the scorer's scale and zero (above), and for a negative score (a cross-encoder logit) it
  *raises* the score: the more clusters, the closer a negative score moves to 0.
"""

from __future__ import annotations

import copy
import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..models.base import Equivalence
from ..text import as_text, normalize_answer
from ..types import ScoredDoc
from .nar import BatchFeedback

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

Rule = Literal["strict", "lenient"]
RescoreMode = Literal["batch", "multiplicative", "paper"]

# --------------------------------------------------------------------------------------------
# Short answers
# --------------------------------------------------------------------------------------------

# Linear patterns: a run of whitespace or stars is only matched right after a literal, so no
# input makes them backtrack (the earlier "\s*\**\s*" took cubic time on long space runs).
_LEAD = re.compile(
    r"^\s*(?:(?:\*+\s*)?(?:final\s+)?(?:short\s+)?answer\s*(?:\*+\s*)?[:：\-]\s*"
    r"|the answer is\s*:?\s*)",
    re.IGNORECASE,
)
_ANSWER_ONLY = re.compile(
    r"(?:\*+\s*)?(?:final\s+)?answer\s*(?:\*+\s*)?(?:[:：]\s*)?\**", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[^\s.]{2}[.!?])\s+(?=[A-Z\"'(])")
_WRAPPERS = "\"'`*_“”‘’«»[]()"
_MAX_ANSWER_WORDS = 16


def is_usable_answer(answer: str) -> bool:
    """An answer is usable when it has at least one letter or digit."""
    return any(ch.isalnum() for ch in answer)


def sample_answer(text: str) -> str:
    """The short answer inside one sampled reply ('' when there is none).

    Takes the first non-empty line, drops a leading "Answer:" / "The answer is", wrapping
    quotes or markdown, keeps the first sentence and at most 16 words, and strips the final
    full stop. Replies without any letter or digit give ''. Reads at most the first
    :data:`~rag_complexity_agents.text.MAX_CHARS` characters, in linear time.
    """
    text = as_text(text)
    lines = [line.strip() for line in text.splitlines() if is_usable_answer(line)]
    if not lines:
        return ""
    line = lines[0]
    # "Answer:" on its own line: the answer is on the next line
    if _ANSWER_ONLY.fullmatch(line):
        if len(lines) < 2:
            return ""
        line = lines[1]
    line = _LEAD.sub("", line, count=1).strip()
    line = _SENTENCE_END.split(line, maxsplit=1)[0]
    words = line.split()[:_MAX_ANSWER_WORDS]
    answer = " ".join(words).strip(_WRAPPERS + " ").rstrip(".;,:").strip(_WRAPPERS + " ")
    return answer if is_usable_answer(answer) else ""


# --------------------------------------------------------------------------------------------
# Clustering with a per-pair cache
# --------------------------------------------------------------------------------------------


class EquivalenceCache:
    """Caches an equivalence's decisions per (question, unordered normalised answer pair).

    Identical normalised answers are equivalent without asking; unusable answers (see
    :func:`is_usable_answer`) are equivalent to nothing, not even to each other.
    Thread-safe; the oldest entries are dropped beyond ``max_entries``.
    """

    def __init__(self, equivalence: Equivalence, *, max_entries: int = 100_000) -> None:
        self.equivalence = equivalence
        self.max_entries = max_entries
        self._decisions: dict[tuple[str, str, str], bool] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._decisions)

    def equivalent(self, a: str, b: str, *, question: str | None = None) -> bool:
        if not (is_usable_answer(a) and is_usable_answer(b)):
            return False
        na, nb = normalize_answer(a), normalize_answer(b)
        if na == nb:
            return True
        first, second = sorted((na, nb))
        key = (question or "", first, second)
        with self._lock:
            cached = self._decisions.get(key)
            if cached is not None:
                self.hits += 1
                return cached
            self.misses += 1
        decision = bool(self.equivalence.equivalent(a, b, question=question))
        with self._lock:
            if len(self._decisions) >= self.max_entries:
                self._decisions.pop(next(iter(self._decisions)))
            self._decisions[key] = decision
        return decision

    def stats(self) -> dict[str, int]:
        return {"entries": len(self), "hits": self.hits, "misses": self.misses}


EquivalentFn = Callable[[str, str], bool]


def cluster_answers(answers: Sequence[str], equivalent: EquivalentFn) -> list[list[int]]:
    """Kuhn et al.'s greedy semantic clustering; returns clusters as lists of answer indices.

    Answer i joins the first existing cluster whose first member is equivalent to it, else
    it starts a new cluster. ``equivalent`` should already check both directions.
    """
    clusters: list[list[int]] = []
    for i, answer in enumerate(answers):
        for cluster in clusters:
            if equivalent(answers[cluster[0]], answer):
                cluster.append(i)
                break
        else:
            clusters.append([i])
    return clusters


def semantic_entropy(clusters: Sequence[Sequence[int]]) -> float:
    """Discrete semantic entropy ``-Σ p_k ln p_k`` with p_k = cluster size / answer count."""
    total = sum(len(c) for c in clusters)
    if total == 0:
        return 0.0
    return float(-sum((len(c) / total) * math.log(len(c) / total) for c in clusters if c))


def rescore(
    scores: np.ndarray | Sequence[float], s: int, mode: RescoreMode = "batch"
) -> np.ndarray:
    """Apply the 1/s penalty to one batch's scores (see the module docstring).

    ``batch`` (our deviation, not the paper's rule): ``lo + (score - lo) / s`` with lo = the
    batch's lowest score (1/s applied to the min-max normalised scores). ``multiplicative``:
    ``score / s`` if ``score >= 0`` else ``score * s``. Both keep the order within the batch,
    never raise a score, are non-increasing in s, and s = 1 changes nothing; ``batch`` is also
    invariant under an increasing affine change of the scores. ``paper``: ``score / s`` for
    every score, the paper's rule as stated; it depends on the scorer's scale and raises a
    negative score (s = 1 changes nothing here too).
    """
    if s < 1:
        raise ValueError(f"the number of clusters s must be at least 1, got {s}")
    values = np.asarray(scores, dtype=np.float64)
    if mode == "batch":
        if values.size == 0:
            return values.copy()
        low = float(values.min())
        return low + (values - low) / s
    if mode == "multiplicative":
        return np.where(values >= 0, values / s, values * s)
    if mode == "paper":
        return values / s
    raise ValueError(f"unknown rescore mode {mode!r}; use 'batch', 'multiplicative' or 'paper'")


@dataclass(slots=True)
class Uncertainty:
    """The outcome of one ASU step (for traces)."""

    raw: list[str]
    answers: list[str]
    clusters: list[list[int]]
    s: int
    entropy: float
    cache: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "s": self.s,
            "semantic_entropy": round(self.entropy, 6),
            "answers": list(self.answers),
            "clusters": [list(c) for c in self.clusters],
            "cluster_answers": [self.answers[c[0]] for c in self.clusters],
            **({"equivalence_cache": self.cache} if self.cache else {}),
        }


def measure_uncertainty(
    raw_answers: Sequence[str], cache: EquivalenceCache, *, question: str | None
) -> Uncertainty:
    """Extract short answers, cluster them with ``cache``'s equivalence, and count s."""
    answers = [sample_answer(text) for text in raw_answers]
    clusters = cluster_answers(answers, lambda a, b: cache.equivalent(a, b, question=question))
    return Uncertainty(
        raw=[str(text) for text in raw_answers],
        answers=answers,
        clusters=clusters,
        s=max(1, len(clusters)),
        entropy=semantic_entropy(clusters),
        cache=cache.stats(),
    )


def with_rule(equivalence: Equivalence, rule: Rule) -> Equivalence:
    """A shallow copy of ``equivalence`` using ``rule`` when it has one (NLI, LLM judge).

    Equivalences without a rule (lexical, embedding) are returned unchanged.
    """
    if getattr(equivalence, "rule", None) in (None, rule):
        return equivalence
    clone = copy.copy(equivalence)
    clone.rule = rule  # type: ignore[attr-defined]
    return clone


# --------------------------------------------------------------------------------------------
# The LLM step
# --------------------------------------------------------------------------------------------

ASU_INSTRUCTION = (
    "Answer the question using only the passages below. Reply with the short answer alone "
    "(a name, a date, a number or a few words), without explanation. If the passages do not "
    "say, give your best guess."
)


def build_asu_messages(
    question: str, passages: Sequence[ScoredDoc], *, max_passage_chars: int = 600
) -> list[tuple[str, str]]:
    """The one prompt whose m samples are clustered: instruction, numbered passages, question."""
    blocks = []
    for i, doc in enumerate(passages, start=1):
        text = " ".join(doc.chunk.text.split())
        if len(text) > max_passage_chars:
            text = text[:max_passage_chars].rsplit(" ", 1)[0] + " …"
        title = f"{doc.chunk.title}: " if doc.chunk.title else ""
        blocks.append(f"[{i}] {title}{text}")
    body = "Passages:\n" + "\n".join(blocks) + f"\n\nQuestion: {question}\nAnswer:"
    return [("system", ASU_INSTRUCTION), ("human", body)]


SampleFn = Callable[[Any, int], list[str]]


def draw_samples(
    chat: BaseChatModel,
    messages: Sequence[tuple[str, str]],
    m: int,
    *,
    temperature: float,
    seed: int,
    max_tokens: int,
) -> list[str]:
    """m sampled replies to one prompt (seeds ``seed .. seed + m - 1``) via
    :func:`~rag_complexity_agents.models.calls.sample_answers`, which evaluates the prompt once
    for the llama.cpp model and makes m calls for other backends."""
    # deferred: models.calls imports langchain_core, which ASU with a custom sampler never needs
    from ..models.calls import sample_answers

    replies = sample_answers(
        chat, list(messages), m, temperature=temperature, seed=seed, max_tokens=max_tokens
    )
    return [str(reply) for reply in replies]


class AnswerSemanticUncertainty:
    """ASU as a NAR batch hook: ``hook(query, batch, index) -> BatchFeedback``.

    ``sampler`` replaces the chat model for tests or other backends: it receives the prompt
    messages and m and returns m raw replies. The last step's details are in ``last``; every
    step's are appended to ``history`` (cleared by :meth:`reset`).
    """

    def __init__(
        self,
        equivalence: Equivalence,
        *,
        chat: BaseChatModel | None = None,
        sampler: SampleFn | None = None,
        m: int = 10,
        temperature: float = 0.3,
        max_tokens: int = 24,
        rule: Rule = "strict",
        rescore_mode: RescoreMode = "batch",
        max_passage_chars: int = 600,
        seed: int = 0,
        cache: EquivalenceCache | None = None,
    ) -> None:
        if chat is None and sampler is None:
            raise ValueError("AnswerSemanticUncertainty needs a chat model or a sampler")
        if m < 1:
            raise ValueError(f"m must be at least 1, got {m}")
        self.chat = chat
        self.sampler = sampler
        self.m = m
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.rescore_mode: RescoreMode = rescore_mode
        self.max_passage_chars = max_passage_chars
        self.seed = seed
        self.cache = cache or EquivalenceCache(with_rule(equivalence, rule))
        self.history: list[Uncertainty] = []

    @property
    def last(self) -> Uncertainty | None:
        return self.history[-1] if self.history else None

    def reset(self) -> None:
        self.history.clear()

    def sample(self, question: str, batch: Sequence[ScoredDoc], batch_index: int = 0) -> list[str]:
        messages = build_asu_messages(question, batch, max_passage_chars=self.max_passage_chars)
        if self.sampler is not None:
            replies = list(self.sampler(messages, self.m))
        else:
            assert self.chat is not None
            replies = draw_samples(
                self.chat,
                messages,
                self.m,
                temperature=self.temperature,
                seed=self.seed + 1000 * batch_index,
                max_tokens=self.max_tokens,
            )
        # a backend returning fewer replies than asked: the missing ones count as unusable
        replies = [r if isinstance(r, str) else "" for r in replies[: self.m]]
        return replies + [""] * (self.m - len(replies))

    def uncertainty(
        self, question: str, batch: Sequence[ScoredDoc], batch_index: int = 0
    ) -> Uncertainty:
        replies = self.sample(question, batch, batch_index)
        result = measure_uncertainty(replies, self.cache, question=question)
        self.history.append(result)
        return result

    def __call__(self, query: str, batch: Sequence[ScoredDoc], batch_index: int) -> BatchFeedback:
        if not batch:
            return BatchFeedback(np.zeros(0), {"s": None})
        result = self.uncertainty(query, batch, batch_index)
        scores = rescore([doc.score for doc in batch], result.s, self.rescore_mode)
        return BatchFeedback(scores, {**result.to_dict(), "rescore": self.rescore_mode})
