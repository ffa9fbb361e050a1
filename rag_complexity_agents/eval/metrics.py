"""Answer and retrieval metrics (pure functions over plain data).

Answer metrics compare a prediction with every gold answer (primary answer and aliases) and
keep the best score. All use SQuAD normalisation (:func:`~rag_complexity_agents.text.
normalize_answer`: lower case, no punctuation, no articles, single spaces):

* ``em``: normalised prediction equals a normalised gold answer (SQuAD exact match);
* ``f1``: SQuAD token F1 (bag-of-tokens overlap); both empty → 1, one empty → 0;
* ``cover_em``: the normalised gold answer occurs in the normalised prediction as a whole
  run of tokens (SUNAR's "cover exact match": the answer is covered by the generation;
  defined in :mod:`rag_complexity_agents.text`, which the loops use too);
* ``acc``: the normalised gold answer is a character substring of the normalised prediction
  (the "Acc" column of Adaptive-RAG). It differs from ``cover_em`` only at word boundaries,
  e.g. gold "no" is inside "norway" for ``acc`` but not for ``cover_em``.

"Acc" / ``acc`` means this substring match everywhere in the package (reports, GRADE's
correctness, ``adaptive.correct_metric``); cover-EM is always called ``cover_em``.

A gold answer that normalises to the empty string (e.g. "The") matches only an empty
prediction, so an empty prediction never covers anything else.

Retrieval metrics look at the evidence a strategy actually used (``trace["evidence"]``): the
distinct paragraphs behind it in order, matched against the gold supporting paragraphs by
paragraph id (the pooled corpus) or, when ids are not available, by title.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..text import Golds, cover_em, gold_list, normalize_answer
from .datasets import is_paragraph_id

MatchBy = Literal["auto", "id", "title"]

ANSWER_METRICS: tuple[str, ...] = ("cover_em", "em", "f1", "acc")


def _norm(text: str | None) -> str:
    return normalize_answer(text or "")


def exact_match(prediction: str | None, golds: Golds) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer."""
    pred = _norm(prediction)
    return float(any(pred == _norm(g) for g in gold_list(golds)))


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str | None, golds: Golds) -> float:
    """SQuAD token F1, maximised over the gold answers."""
    pred_tokens = _norm(prediction).split()
    return max((_f1(pred_tokens, _norm(g).split()) for g in gold_list(golds)), default=0.0)


def substring_match(prediction: str | None, golds: Golds) -> float:
    """1.0 if some normalised gold answer is a substring of the normalised prediction."""
    pred = _norm(prediction)
    for gold in gold_list(golds):
        norm = _norm(gold)
        if (not norm and not pred) or (norm and norm in pred):
            return 1.0
    return 0.0


def answer_scores(prediction: str | None, golds: Golds) -> dict[str, float]:
    """All four answer metrics: ``cover_em``, ``em``, ``f1``, ``acc``."""
    return {
        "cover_em": cover_em(prediction, golds),
        "em": exact_match(prediction, golds),
        "f1": token_f1(prediction, golds),
        "acc": substring_match(prediction, golds),
    }


# --------------------------------------------------------------------------------------------
# Retrieval
# --------------------------------------------------------------------------------------------


def normalize_title(title: str) -> str:
    """Titles compare case-insensitively with collapsed whitespace (punctuation matters)."""
    return " ".join(title.casefold().split())


def evidence_paragraph_id(item: Mapping[str, Any]) -> str | None:
    """The pooled paragraph id behind one evidence entry (``paragraph_id``, ``doc_id``, ``id``)."""
    for key in ("paragraph_id", "doc_id", "id"):
        value = item.get(key)
        if is_paragraph_id(value):
            return str(value)
    return None


def evidence_ranking(
    evidence: Sequence[Mapping[str, Any]], *, by: Literal["id", "title"]
) -> list[str]:
    """Distinct paragraph keys (ids or normalised titles) of the evidence, in order of use."""
    out: list[str] = []
    seen: set[str] = set()
    for item in evidence:
        key = (
            evidence_paragraph_id(item)
            if by == "id"
            else normalize_title(str(item.get("title") or "")) or None
        )
        if key is not None and key not in seen:
            seen.add(key)
            out.append(key)
    return out


def recall_at_k(ranking: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """Share of the relevant items among the first ``k`` of ``ranking`` (0 if none relevant)."""
    gold = set(relevant)
    if not gold:
        return 0.0
    return len(gold.intersection(ranking[:k])) / len(gold)


def ndcg_at_k(ranking: Sequence[str], relevant: Iterable[str], k: int = 10) -> float:
    """Binary-gain nDCG@k (log2 discount)."""
    gold = set(relevant)
    if not gold or k < 1:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, key in enumerate(ranking[:k]) if key in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(gold))))
    return dcg / ideal


def retrieval_scores(
    evidence: Sequence[Mapping[str, Any]],
    *,
    supporting_ids: Sequence[str] = (),
    supporting_titles: Sequence[str] = (),
    ks: Sequence[int] = (2, 5, 10),
    by: MatchBy = "auto",
) -> dict[str, Any] | None:
    """``recall@k`` for each k, ``ndcg@10``, ``recall`` over all evidence, and how matched.

    ``auto`` matches by paragraph id when the question has supporting ids and the evidence
    carries pooled paragraph ids, else by title. Returns None when the question has no gold
    for the chosen matching (nothing to score).
    """
    mode: Literal["id", "title"]
    if by == "auto":
        has_ids = any(evidence_paragraph_id(item) for item in evidence)
        mode = "id" if supporting_ids and (has_ids or not supporting_titles) else "title"
    else:
        mode = by
    relevant = (
        list(supporting_ids)
        if mode == "id"
        else [normalize_title(t) for t in supporting_titles if t.strip()]
    )
    if not relevant:
        return None
    ranking = evidence_ranking(evidence, by=mode)
    scores: dict[str, Any] = {f"recall@{k}": recall_at_k(ranking, relevant, k) for k in ks}
    scores["ndcg@10"] = ndcg_at_k(ranking, relevant, 10)
    scores["recall"] = recall_at_k(ranking, relevant, len(ranking))
    scores["evidence_paragraphs"] = len(ranking)
    scores["gold_paragraphs"] = len(set(relevant))
    scores["match"] = mode
    return scores


# --------------------------------------------------------------------------------------------
# Aggregation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean with a percentile-bootstrap confidence interval (``lo``/``hi``)."""

    mean: float
    lo: float
    hi: float
    n: int

    def to_dict(self, scale: float = 1.0, digits: int = 4) -> dict[str, float | int]:
        return {
            "mean": round(self.mean * scale, digits),
            "lo": round(self.lo * scale, digits),
            "hi": round(self.hi * scale, digits),
            "n": self.n,
        }


def mean_ci(
    values: Sequence[float], *, level: float = 0.95, n_boot: int = 2000, seed: int = 0
) -> Estimate | None:
    """Mean of ``values`` with a percentile bootstrap interval (None for no values)."""
    data = np.asarray(list(values), dtype=np.float64)
    if data.size == 0:
        return None
    mean = float(data.mean())
    if data.size == 1 or np.all(data == data[0]):
        return Estimate(mean, mean, mean, int(data.size))
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(n_boot, data.size))].mean(axis=1)
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(means, [tail, 100.0 - tail])
    return Estimate(mean, float(lo), float(hi), int(data.size))


def paired_difference(
    values: Sequence[float],
    baseline: Sequence[float],
    *,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> Estimate | None:
    """Mean of ``values[i] - baseline[i]`` with a paired percentile-bootstrap interval.

    Both sequences score the same questions in the same order; each bootstrap sample draws
    questions (so a question's two scores always move together), which makes the interval
    much narrower than comparing two independent intervals. Fixed ``seed``: the same inputs
    give the same interval. None for no questions; ValueError when the lengths differ.
    """
    if len(values) != len(baseline):
        raise ValueError(f"paired scores need equal lengths, got {len(values)} and {len(baseline)}")
    differences = [float(a) - float(b) for a, b in zip(values, baseline, strict=True)]
    return mean_ci(differences, level=level, n_boot=n_boot, seed=seed)
