"""Retrieval Complexity (RC) with the reference-based RC pipeline RRCP (Gabburo et al.).

Given a question Q, reference answers R and a retriever returning D = {d_1..d_k}, an evaluator
gives every document

* ``s_i`` = P(d_i contains a correct answer to Q, given R) (paper: GenEval's correctness head);
* a relevance distribution ``Rel(d_i, t_j)`` over the tokens t_j of Q (paper: GenEval's token
  relevance head).

Then (paper §4.3, Eqs. 1–3)::

    Ans  = 1  iff  max_i s_i >= T_ans                      (answerability, T_ans = 0.15)
    S_D  = mean_i  H(Rel(d_i, ·)) / log |Q|                 (completeness score)
    Com  = 1  iff  S_D >= T_com                             (T_com = 0.80)
    complex  iff  Ans = 0 and Com = 1                       (§4.4)

Eq. 2 of the paper writes S_D with a norm of a sum; the text says "normalise the entropy for
each document and average", which is what is implemented. The paper calls Com = 1 the
complete state in Eq. 3 but classifies a question as complex when Ans = 0 *and* Com = 1; the
decision rule is implemented exactly as stated and the symbol keeps its name.

Edge cases (the paper does not define them; our choices, tested):

* **one question token** (|Q| = 1): the normalised entropy is 0/0. A one-token question has no
  parts over which evidence could be fragmented, so its per-document entropy is defined as 0:
  S_D = 0, Com = 0, never complex by completeness.
* **a relevance row with no mass** (all zeros): the document prefers no question token, i.e. it
  is read as the uniform distribution, entropy 1.
* **empty retrieval** (D = ∅): no document answers, Ans = 0; no part of the question is
  covered, S_D = 1 (the uniform reading above), Com = 1: the question is retrieval-complex.
  The result says ``empty_retrieval=True``.
* **no references**: the reference-based evaluators need them; evaluators that can judge
  without references (the LLM judge, a cross-encoder) score reference-free and the result
  says ``reference_free=True``; the lexical evaluator raises :class:`InputError`.

Everything here below :class:`RetrievalComplexity` is pure (plain arrays in, numbers out).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np

from ..errors import InputError
from ..text import validate_question

if TYPE_CHECKING:
    from ..config import Config
    from ..types import ScoredDoc

Method = Literal["rrcp", "ans_only", "com_only"]
METHODS: tuple[Method, ...] = ("ans_only", "com_only", "rrcp")


# --------------------------------------------------------------------------------------------
# Pure formulas
# --------------------------------------------------------------------------------------------


def answerability(scores: Sequence[float] | np.ndarray, T_ans: float) -> int:
    """Eq. 1: 1 iff some document's answer probability s_i reaches ``T_ans`` (0 if D = ∅)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if s.size == 0:
        return 0
    if not np.all(np.isfinite(s)):
        raise InputError("answer scores s_i must be finite numbers")
    return int(float(s.max()) >= T_ans)


def normalized_entropy(relevance: Sequence[float] | np.ndarray) -> float:
    """H(p) / log n of one document's relevance over the n question tokens, in [0, 1].

    ``relevance`` is non-negative (it is normalised to a distribution here). n = 1 gives 0 and
    an all-zero row gives 1 (see the module docstring).
    """
    r = np.asarray(relevance, dtype=np.float64).reshape(-1)
    n = r.size
    if n == 0:
        raise InputError("a relevance distribution needs at least one question token")
    if not np.all(np.isfinite(r)) or np.any(r < 0):
        raise InputError("token relevance values must be finite and non-negative")
    if n == 1:
        return 0.0
    total = float(r.sum())
    if total <= 0.0:
        return 1.0
    p = r / total
    nz = p[p > 0]
    h = float(-(nz * np.log(nz)).sum())
    return min(1.0, max(0.0, h / math.log(n)))


def completeness_score(matrix: Sequence[Sequence[float]] | np.ndarray) -> tuple[float, list[float]]:
    """Eq. 2: S_D = mean normalised entropy of the rows of M (|D| × |Q|) and the row values.

    An empty M (no documents) gives S_D = 1 (see the module docstring).
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.size == 0:
        return 1.0, []
    if m.ndim != 2:
        raise InputError(f"the relevance matrix must be |D| x |Q|, got shape {m.shape}")
    entropies = [normalized_entropy(row) for row in m]
    return float(np.mean(entropies)), entropies


def completeness(S_D: float, T_com: float) -> int:
    """Eq. 3: 1 iff S_D >= ``T_com``."""
    return int(T_com <= S_D)


def is_complex(ans: int, com: int, method: Method = "rrcp") -> bool:
    """The decision table: ``rrcp`` = Ans 0 and Com 1; the ablations use one constraint each
    (``ans_only``: Ans = 0; ``com_only``: Com = 1), as in the paper's Table 3."""
    if method == "ans_only":
        return ans == 0
    if method == "com_only":
        return com == 1
    if method == "rrcp":
        return ans == 0 and com == 1
    raise InputError(f"unknown RRCP method {method!r}; use one of {METHODS}")


# --------------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RCResult:
    """Every intermediate quantity of one RRCP evaluation (they are diagnostics too).

    ``answer_scores`` are the s_i, ``relevance`` the rows of M (each a distribution over
    ``question_tokens``), ``entropies`` the normalised row entropies, ``S_D`` their mean.
    """

    question: str
    references: tuple[str, ...]
    doc_ids: tuple[str, ...]
    answer_scores: tuple[float, ...]
    question_tokens: tuple[str, ...]
    relevance: tuple[tuple[float, ...], ...]
    entropies: tuple[float, ...]
    max_s: float
    S_D: float
    Ans: int
    Com: int
    complex: bool
    T_ans: float
    T_com: float
    evaluator: str = ""
    relevance_method: str = ""
    empty_retrieval: bool = False
    reference_free: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def score(self) -> float:
        """A continuous RC score in [0, 1]: (1 - max s_i + S_D) / 2 (higher = more complex).

        Not in the paper (which only thresholds); used for correlations and routing."""
        return 0.5 * ((1.0 - self.max_s) + self.S_D)

    def decide(self, method: Method = "rrcp") -> bool:
        return is_complex(self.Ans, self.Com, method)

    def with_thresholds(self, T_ans: float, T_com: float) -> RCResult:
        """The same scores under other thresholds (no model is called)."""
        ans = answerability(self.answer_scores, T_ans)
        com = completeness(self.S_D, T_com)
        data = asdict(self)
        data.update(T_ans=T_ans, T_com=T_com, Ans=ans, Com=com, complex=is_complex(ans, com))
        return RCResult(**data)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable view (traces, CLI, benchmark caches)."""
        data = asdict(self)
        for key in ("references", "doc_ids", "answer_scores", "question_tokens", "entropies"):
            data[key] = list(data[key])
        data["relevance"] = [list(row) for row in self.relevance]
        data["score"] = self.score
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RCResult:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("references", "doc_ids", "answer_scores", "question_tokens", "entropies"):
            fields[key] = tuple(fields.get(key, ()))
        fields["relevance"] = tuple(tuple(row) for row in fields.get("relevance", ()))
        return cls(**fields)


def rrcp_from_scores(
    answer_scores: Sequence[float] | np.ndarray,
    relevance: Sequence[Sequence[float]] | np.ndarray,
    *,
    T_ans: float = 0.15,
    T_com: float = 0.80,
    question: str = "",
    references: Sequence[str] = (),
    doc_ids: Sequence[str] = (),
    question_tokens: Sequence[str] = (),
    **info: Any,
) -> RCResult:
    """Apply Eqs. 1–3 and the decision rule to an evaluator's outputs (pure).

    ``relevance`` rows are normalised to distributions. The number of rows must equal the
    number of answer scores.
    """
    s = np.asarray(answer_scores, dtype=np.float64).reshape(-1)
    m = np.asarray(relevance, dtype=np.float64)
    if m.size and (m.ndim != 2 or m.shape[0] != s.size):
        raise InputError(
            f"{s.size} answer scores but a relevance matrix of shape {m.shape}; "
            "need one row per document"
        )
    if s.size and not m.size:
        raise InputError("answer scores given without a relevance matrix")
    ans = answerability(s, T_ans)
    S_D, entropies = completeness_score(m)
    com = completeness(S_D, T_com)
    rows = []
    for row in m if m.size else ():
        total = float(row.sum())
        rows.append(
            tuple(float(x) for x in (row / total if total > 0 else np.full(row.size, 1 / row.size)))
        )
    return RCResult(
        question=question,
        references=tuple(references),
        doc_ids=tuple(doc_ids),
        answer_scores=tuple(float(x) for x in s),
        question_tokens=tuple(question_tokens),
        relevance=tuple(rows),
        entropies=tuple(entropies),
        max_s=float(s.max()) if s.size else 0.0,
        S_D=S_D,
        Ans=ans,
        Com=com,
        complex=is_complex(ans, com),
        T_ans=T_ans,
        T_com=T_com,
        empty_retrieval=s.size == 0,
        **info,
    )


# --------------------------------------------------------------------------------------------
# Calibration (grid search on labelled data)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scored:
    """What calibration needs of one labelled question."""

    max_s: float
    S_D: float
    label: bool


@dataclass(frozen=True)
class Calibration:
    """Best thresholds for one method and their metrics on the calibration data."""

    method: Method
    T_ans: float
    T_com: float
    f1: float
    accuracy: float
    n: int


def classification_metrics(predicted: Sequence[bool], gold: Sequence[bool]) -> dict[str, float]:
    """Accuracy, precision, recall and F1 of the positive ("complex") class."""
    if len(predicted) != len(gold):
        raise InputError("predictions and labels differ in length")
    tp = sum(p and g for p, g in zip(predicted, gold, strict=True))
    fp = sum(p and not g for p, g in zip(predicted, gold, strict=True))
    fn = sum((not p) and g for p, g in zip(predicted, gold, strict=True))
    n = len(gold)
    accuracy = sum(p == g for p, g in zip(predicted, gold, strict=True)) / n if n else 0.0
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"accuracy": accuracy, "precision": precision, "recall": recall, "f1": f1}


def predict(
    items: Iterable[Scored],
    T_ans: float,
    T_com: float,
    method: Method = "rrcp",
) -> list[bool]:
    return [is_complex(int(x.max_s >= T_ans), int(T_com <= x.S_D), method) for x in items]


def _candidates(values: Iterable[float]) -> list[float]:
    """Thresholds that realise every distinct split of ``values`` (plus one above all)."""
    unique = sorted({round(float(v), 6) for v in values})
    return [*unique, (unique[-1] + 1e-6) if unique else 1.0]


def calibrate(
    items: Sequence[Scored],
    method: Method = "rrcp",
    *,
    defaults: tuple[float, float] = (0.15, 0.80),
) -> Calibration:
    """Grid search of (T_ans, T_com) maximising F1 (then accuracy, then closeness to the
    paper's defaults) over every threshold that changes a decision on ``items``."""
    if not items:
        raise InputError("calibration needs at least one labelled question")
    gold = [x.label for x in items]
    ans_grid = _candidates(x.max_s for x in items) if method != "com_only" else [defaults[0]]
    com_grid = _candidates(x.S_D for x in items) if method != "ans_only" else [defaults[1]]
    best: tuple[float, float, float] | None = None
    choice = (defaults[0], defaults[1])
    for t_ans in ans_grid:
        for t_com in com_grid:
            metrics = classification_metrics(predict(items, t_ans, t_com, method), gold)
            closeness = -abs(t_ans - defaults[0]) - abs(t_com - defaults[1])
            key = (metrics["f1"], metrics["accuracy"], closeness)
            if best is None or key > best:
                best, choice = key, (t_ans, t_com)
    assert best is not None
    return Calibration(method, choice[0], choice[1], best[0], best[1], len(items))


# --------------------------------------------------------------------------------------------
# The pipeline
# --------------------------------------------------------------------------------------------


@runtime_checkable
class Retriever(Protocol):
    """Anything with ``search(query, k) -> list[ScoredDoc]`` (a first stage) ..."""

    def search(self, query: str, k: int) -> list[ScoredDoc]: ...


@runtime_checkable
class AnswerEvaluator(Protocol):
    """s_i for each passage: P(passage contains a correct answer to the question | refs)."""

    name: str

    def answer_scores(
        self, question: str, references: Sequence[str], passages: Sequence[str]
    ) -> np.ndarray: ...


@runtime_checkable
class TokenRelevance(Protocol):
    """Rel(d_i, t_j): per passage, non-negative relevance to each question token."""

    name: str

    def relevance(self, question: str, passages: Sequence[str]) -> tuple[list[str], np.ndarray]: ...


class RetrievalComplexity:
    """RRCP: retrieve k documents, evaluate them, apply the thresholds.

    ``retriever`` is a first stage (``search(query, k)``, hybrid BM25 + dense by default, the
    paper's hybrid BM25 + ColBERT being unavailable); ``evaluator`` gives s_i and
    ``relevance`` the token relevance (our split of GenEval's two heads).
    """

    def __init__(
        self,
        retriever: Retriever,
        evaluator: AnswerEvaluator,
        relevance: TokenRelevance,
        T_ans: float = 0.15,
        T_com: float = 0.80,
        *,
        k: int = 5,
        passage_chars: int = 600,
        max_question_chars: int = 4000,
    ) -> None:
        if not 0.0 <= T_ans <= 1.0 or not 0.0 <= T_com <= 1.0:
            raise InputError("T_ans and T_com must lie in [0, 1]")
        if k < 1:
            raise InputError("k (documents retrieved) must be at least 1")
        self.retriever = retriever
        self.evaluator = evaluator
        self.relevance = relevance
        self.T_ans = T_ans
        self.T_com = T_com
        self.k = k
        self.passage_chars = passage_chars
        self.max_question_chars = max_question_chars

    @classmethod
    def from_config(cls, config: Config, components: Any = None) -> RetrievalComplexity:
        """Build from ``config.rrcp`` with the collection's first stage and packaged models."""
        # The wiring and the evaluators' LangChain chat stack (about 3 s) load only here: the
        # measures of this module stay pure and cheap to import.
        from ..components import Components
        from .rrcp_evaluators import MaxSimTokenRelevance, load_answer_evaluator

        parts = components or Components(config)
        section = config.rrcp
        evaluator = load_answer_evaluator(
            section.evaluator, components=parts, passage_chars=section.passage_chars
        )
        relevance = MaxSimTokenRelevance(
            parts.local_embedder(), temperature=section.relevance_temperature
        )
        return cls(
            parts.first_stage,
            evaluator,
            relevance,
            section.T_ans,
            section.T_com,
            k=section.k,
            passage_chars=section.passage_chars,
            max_question_chars=config.max_question_chars,
        )

    def score_documents(
        self, question: str, references: Sequence[str], docs: Sequence[ScoredDoc]
    ) -> RCResult:
        """RRCP on already retrieved documents (no retrieval call)."""
        question = validate_question(question, max_chars=self.max_question_chars)
        refs = tuple(r.strip() for r in references if isinstance(r, str) and r.strip())
        passages = [d.text[: self.passage_chars] for d in docs]
        info: dict[str, Any] = {
            "evaluator": self.evaluator.name,
            "relevance_method": self.relevance.name,
            "reference_free": not refs,
        }
        if not passages:
            tokens, _ = self.relevance.relevance(question, [])
            return rrcp_from_scores(
                [], [], T_ans=self.T_ans, T_com=self.T_com, question=question,
                references=refs, question_tokens=tokens, **info,
            )  # fmt: skip
        scores = np.asarray(self.evaluator.answer_scores(question, refs, passages), np.float64)
        scores = np.clip(np.nan_to_num(scores, nan=0.0), 0.0, 1.0)
        tokens, matrix = self.relevance.relevance(question, passages)
        return rrcp_from_scores(
            scores,
            matrix,
            T_ans=self.T_ans,
            T_com=self.T_com,
            question=question,
            references=refs,
            doc_ids=[d.id for d in docs],
            question_tokens=tokens,
            **info,
        )

    def score(self, question: str, references: Sequence[str] = ()) -> RCResult:
        """Retrieve D for the question and run RRCP on it."""
        question = validate_question(question, max_chars=self.max_question_chars)
        docs = self.retriever.search(question, self.k)[: self.k]
        return self.score_documents(question, references, docs)

    __call__ = score


_PIPELINES: dict[str, RetrievalComplexity] = {}
_PIPELINES_LOCK = threading.Lock()


def retrieval_complexity(
    question: str,
    references: Sequence[str] = (),
    *,
    config: Config | None = None,
    components: Any = None,
    pipeline: RetrievalComplexity | None = None,
) -> RCResult:
    """One question's RC with the configured pipeline (for routers: ``result.complex`` or
    the continuous ``result.score`` can raise a route or a NAR budget).

    Without ``pipeline`` or ``components``, the pipeline built from ``config`` is cached per
    process (per distinct config), so repeated calls do not reopen the collection. Without
    references the LLM / cross-encoder evaluators judge reference-free.
    """
    if pipeline is None:
        # pydantic's config models load only when a pipeline is built (see from_config)
        from ..config import Config as _Config

        cfg = config or _Config()
        if components is not None:
            pipeline = RetrievalComplexity.from_config(cfg, components)
        else:
            key = cfg.model_dump_json()
            with _PIPELINES_LOCK:
                pipeline = _PIPELINES.get(key)
                if pipeline is None:
                    pipeline = _PIPELINES[key] = RetrievalComplexity.from_config(cfg)
    return pipeline.score(question, references)
