"""GRADE difficulty measures and the hops × retrieval-difficulty matrix (pure functions).

A question's difficulty in GRADE (Lee et al.) has two coordinates:

* **hops** k: the number of reasoning steps (MuSiQue: the length of its decomposition; a
  generated question: the number of edges of its knowledge-graph path);
* **retrieval difficulty** D_r(q) = 1 − min_i sim(q, c_i) over the question's supporting chunks
  c_i (the paper's default). The paper's ablation also aggregates with the mean and the power
  mean with p = −2, which sits between the harmonic mean and the minimum
  (:func:`retrieval_difficulty` ``aggregation=`` ``"min" | "mean" | "power"``).

The difficulty matrix bins questions by hops (rows) × D_r quantile bins (columns, quartiles by
default) and reports per cell the number of questions and the error rate (1 − accuracy) of a
RAG system. The paper bins D_r within each hop level (``binning="per_hop"``); the default
``binning="global"`` takes the quantile edges over all questions, a deviation from the paper
that lets one set of edges serve every hop row and every system compared on them. Its
headline statistics are GRADE's **bin-level** Pearson correlations (the paper's Tables 1
and 3):

* per hop row (``r_bin_by_hop``): r of the cells' mean D_r with their error rates, one point
  per non-empty cell (4 points with quartiles);
* along the diagonal (``r_bin_diagonal``): r of the position on the diagonal (2 hops / lowest
  D_r bin first) with the error rates of its non-empty cells.

A positive r means "harder → more errors". The paper reports r of 0.31–0.98, all positive; its
table captions say "accuracy", but those positive values and its own reading (a higher D_r
leads "to reduced accuracy") fit the error rate, which is what is correlated here.

As an extra, the **item-level** (point-biserial) r of each question's D_r with its own 0/1
correctness is kept (``pearson_dr_accuracy_*``, ``pearson_diagonal``): there a *negative* r
means "harder → more errors", and it is usually much smaller in magnitude than the bin-level r
because single answers are not averaged. The paper does not report it.

Nothing here loads a model: similarities come in as numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from ...errors import InputError

Aggregation = Literal["min", "mean", "power"]
Binning = Literal["global", "per_hop"]
AGGREGATIONS: tuple[str, ...] = ("min", "mean", "power")

#: Similarities are clipped to this before a power mean with p < 0 (cosine can be ≤ 0).
POWER_MEAN_EPS = 1e-6


# --------------------------------------------------------------------------------------------
# D_r
# --------------------------------------------------------------------------------------------


def power_mean(values: Sequence[float] | np.ndarray, p: float) -> float:
    """The power (generalised) mean ``(mean(v^p))^(1/p)``; p = 0 is the geometric mean.

    For p < 0 values are clipped to :data:`POWER_MEAN_EPS` first (a similarity of 0 or below
    would make the mean undefined; the clip sends it to ≈ 0, i.e. "very dissimilar").
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        raise InputError("power_mean needs at least one value")
    if p < 0 or p == 0:
        arr = np.clip(arr, POWER_MEAN_EPS, None)
    if p == 0:
        return float(np.exp(np.mean(np.log(arr))))
    return float(np.mean(arr**p) ** (1.0 / p))


def aggregate_similarity(
    similarities: Sequence[float] | np.ndarray,
    aggregation: Aggregation = "min",
    *,
    p: float = -2.0,
) -> float:
    """min, mean or power mean (exponent ``p``) of query–chunk similarities."""
    sims = np.asarray(similarities, dtype=np.float64)
    if sims.size == 0:
        raise InputError("D_r needs at least one supporting chunk similarity")
    if not np.all(np.isfinite(sims)):
        raise InputError("similarities must be finite numbers")
    if aggregation == "min":
        return float(sims.min())
    if aggregation == "mean":
        return float(sims.mean())
    if aggregation == "power":
        return power_mean(sims, p)
    raise InputError(f"unknown D_r aggregation {aggregation!r}; use one of {AGGREGATIONS}")


def retrieval_difficulty(
    similarities: Sequence[float] | np.ndarray,
    aggregation: Aggregation = "min",
    *,
    p: float = -2.0,
) -> float:
    """D_r(q) = 1 − agg_i sim(q, c_i) (GRADE §3.2; paper default ``agg = min``)."""
    return 1.0 - aggregate_similarity(similarities, aggregation, p=p)


def cosine_similarities(query: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    """Cosine of one query vector with each row of ``chunks`` (vectors need not be unit)."""
    q = np.asarray(query, dtype=np.float64).reshape(-1)
    c = np.asarray(chunks, dtype=np.float64)
    if c.ndim != 2 or c.shape[1] != q.shape[0]:
        raise InputError(f"chunk vectors of shape {c.shape} do not match a query of {q.shape}")
    qn = np.linalg.norm(q)
    cn = np.linalg.norm(c, axis=1)
    denom = np.where(cn * qn > 0, cn * qn, 1.0)
    return (c @ q) / denom


# --------------------------------------------------------------------------------------------
# Hops
# --------------------------------------------------------------------------------------------

_HOP_PREFIX = re.compile(r"^(\d+)hop", re.IGNORECASE)


def hops_from_id(question_id: str) -> int | None:
    """MuSiQue ids start with the hop count (``2hop__…``, ``3hop1__…``, ``4hop3__…``)."""
    match = _HOP_PREFIX.match(question_id.strip())
    return int(match.group(1)) if match else None


def infer_hops(
    *,
    hops: object = None,
    question_id: str | None = None,
    decomposition: Sequence[object] | None = None,
    path: Sequence[object] | None = None,
) -> int | None:
    """The hop count from the first source that has it: an explicit value, a generation path
    (edges = nodes − 1), a decomposition (one step per hop), a MuSiQue id prefix."""
    if isinstance(hops, int | float) and not isinstance(hops, bool) and hops > 0:
        return int(hops)
    if path:
        return max(len(path) - 1, 1)
    if decomposition:
        return len(decomposition)
    if question_id:
        return hops_from_id(question_id)
    return None


# --------------------------------------------------------------------------------------------
# Binning
# --------------------------------------------------------------------------------------------


def quantile_edges(values: Sequence[float], n_bins: int = 4) -> list[float]:
    """The n_bins − 1 inner quantile edges of ``values`` (quartiles for n_bins = 4)."""
    if n_bins < 1:
        raise InputError("n_bins must be at least 1")
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return []
    qs = [i / n_bins for i in range(1, n_bins)]
    return [float(x) for x in np.quantile(arr, qs)]


def assign_bins(values: Sequence[float], edges: Sequence[float]) -> list[int]:
    """Bin index of each value: bin j holds edges[j-1] < v ≤ edges[j] (0-based, len(edges)+1
    bins), so a value equal to the first quartile goes to the lowest bin."""
    arr = np.asarray(values, dtype=np.float64)
    return [int(b) for b in np.searchsorted(np.asarray(edges, dtype=np.float64), arr, "left")]


# --------------------------------------------------------------------------------------------
# The matrix
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DifficultyItem:
    """One answered question: its coordinates and whether the system got it right."""

    id: str
    hops: int
    dr: float
    correct: float

    def __post_init__(self) -> None:
        if not math.isfinite(self.dr):
            raise InputError(f"{self.id}: D_r must be a finite number")


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell of the matrix (``dr_bin`` is 0-based, lowest D_r first)."""

    hops: int
    dr_bin: int
    n: int
    error_rate: float | None
    dr_mean: float | None


@dataclass(slots=True)
class DifficultyMatrix:
    """Cells, bin edges, the bin-level correlations of D_r with the error rate (GRADE's
    statistic) and the item-level correlations of D_r with correctness (an extra)."""

    hop_levels: list[int]
    n_bins: int
    edges: list[float]
    cells: list[Cell]
    r_bin_by_hop: dict[int, float | None]
    r_bin_diagonal: float | None
    pearson_dr_accuracy_by_hop: dict[int, float | None]
    pearson_dr_accuracy_all: float | None
    diagonal: list[Cell]
    pearson_diagonal: float | None
    error_rate_by_hop: dict[int, float]
    error_rate_by_bin: dict[int, float]
    n: int
    extra: dict[str, Any] = field(default_factory=dict)

    def cell(self, hops: int, dr_bin: int) -> Cell:
        for c in self.cells:
            if c.hops == hops and c.dr_bin == dr_bin:
                return c
        raise KeyError((hops, dr_bin))

    def error_grid(self) -> np.ndarray:
        """Error rates as a (hops × bins) array, NaN where a cell is empty."""
        grid = np.full((len(self.hop_levels), self.n_bins), np.nan)
        for c in self.cells:
            if c.error_rate is not None:
                grid[self.hop_levels.index(c.hops), c.dr_bin] = c.error_rate
        return grid

    def count_grid(self) -> np.ndarray:
        grid = np.zeros((len(self.hop_levels), self.n_bins), dtype=int)
        for c in self.cells:
            grid[self.hop_levels.index(c.hops), c.dr_bin] = c.n
        return grid

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "hop_levels": self.hop_levels,
            "n_bins": self.n_bins,
            "dr_edges": [round(e, 6) for e in self.edges],
            "cells": [asdict(c) for c in self.cells],
            "r_bin_by_hop": {str(k): v for k, v in self.r_bin_by_hop.items()},
            "r_bin_diagonal": self.r_bin_diagonal,
            "pearson_dr_accuracy_by_hop": {
                str(k): v for k, v in self.pearson_dr_accuracy_by_hop.items()
            },
            "pearson_dr_accuracy_all": self.pearson_dr_accuracy_all,
            "diagonal": [asdict(c) for c in self.diagonal],
            "pearson_diagonal": self.pearson_diagonal,
            "error_rate_by_hop": {str(k): v for k, v in self.error_rate_by_hop.items()},
            "error_rate_by_bin": {str(k): v for k, v in self.error_rate_by_bin.items()},
            **self.extra,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DifficultyMatrix:
        """The matrix of a :meth:`to_dict` result (e.g. a saved report); the bin-level r are
        recomputed from its cells, so reports written before they existed gain them."""
        known = {f for f in cls.__dataclass_fields__ if f != "extra"} | {
            "dr_edges",
            "r_bin_by_hop",
            "r_bin_diagonal",
        }
        levels = [int(h) for h in data["hop_levels"]]
        cells = [Cell(**c) for c in data["cells"]]
        diagonal = [Cell(**c) for c in data["diagonal"]]
        by_hop, diag = bin_correlations(cells, levels, diagonal)

        def by_int(mapping: Mapping[str, Any]) -> dict[int, Any]:
            return {int(k): v for k, v in mapping.items()}

        return cls(
            hop_levels=levels,
            n_bins=int(data["n_bins"]),
            edges=[float(e) for e in data["dr_edges"]],
            cells=cells,
            r_bin_by_hop=by_hop,
            r_bin_diagonal=diag,
            pearson_dr_accuracy_by_hop=by_int(data["pearson_dr_accuracy_by_hop"]),
            pearson_dr_accuracy_all=data["pearson_dr_accuracy_all"],
            diagonal=diagonal,
            pearson_diagonal=data["pearson_diagonal"],
            error_rate_by_hop=by_int(data["error_rate_by_hop"]),
            error_rate_by_bin=by_int(data["error_rate_by_bin"]),
            n=int(data["n"]),
            extra={k: v for k, v in data.items() if k not in known},
        )


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson r, or None when it is undefined (fewer than 2 points or a constant input)."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.size != b.size:
        raise InputError("pearson needs two sequences of the same length")
    if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def diagonal_bins(hop_levels: Sequence[int], n_bins: int) -> dict[int, int]:
    """The main diagonal of a (hop levels × bins) matrix: hop level i ↦ bin
    round(i·(B−1)/(H−1)) (the identity for a square matrix; for MuSiQue's 3 hop levels and
    4 quartiles: 2 → 0, 3 → 2 (1.5 rounds to even), 4 → 3)."""
    levels = sorted(hop_levels)
    if len(levels) == 1:
        return {levels[0]: 0}
    return {h: round(i * (n_bins - 1) / (len(levels) - 1)) for i, h in enumerate(levels)}


def bin_correlations(
    cells: Sequence[Cell], hop_levels: Sequence[int], diagonal: Sequence[Cell]
) -> tuple[dict[int, float | None], float | None]:
    """GRADE's bin-level Pearson r: per hop level, of the non-empty cells' mean D_r with their
    error rates; along ``diagonal`` (in order), of the cell's position with its error rate.
    None where r is undefined (fewer than two non-empty cells, or a constant error rate)."""
    by_hop: dict[int, float | None] = {}
    for h in hop_levels:
        row = [
            (c.dr_mean, c.error_rate)
            for c in cells
            if c.hops == h and c.dr_mean is not None and c.error_rate is not None
        ]
        by_hop[h] = pearson([x for x, _ in row], [y for _, y in row])
    points = [(i, c.error_rate) for i, c in enumerate(diagonal) if c.error_rate is not None]
    return by_hop, pearson([float(i) for i, _ in points], [e for _, e in points])


def _rate(values: Iterable[float]) -> float | None:
    vals = list(values)
    return float(1.0 - np.mean(vals)) if vals else None


def difficulty_matrix(
    items: Sequence[DifficultyItem],
    *,
    n_bins: int = 4,
    edges: Sequence[float] | None = None,
    hop_levels: Sequence[int] | None = None,
    binning: Binning = "global",
) -> DifficultyMatrix:
    """Bin ``items`` by hops × D_r quantile bins; error rate and count per cell.

    ``binning="global"`` (default; not the paper's way): ``edges`` (inner bin edges) default
    to the quantiles of all the items' D_r; pass edges from another set to compare systems on
    the same bins. ``binning="per_hop"`` (the paper's way): each hop level gets the quantiles
    of its own items' D_r (``extra["dr_edges_by_hop"]``; ``edges`` is then empty and may not
    be passed). The bin-level r (GRADE's statistic, see :func:`bin_correlations`) are positive
    when error rises with difficulty; the item-level r (``pearson_*``: D_r with each
    question's correctness) are negative then.
    """
    if not items:
        raise InputError("the difficulty matrix needs at least one answered question")
    dr = [it.dr for it in items]
    extra: dict[str, Any] = {}
    if binning == "per_hop":
        if edges is not None:
            raise InputError("per-hop binning takes its edges from each hop level's D_r")
        by_hop_edges = {
            h: quantile_edges([it.dr for it in items if it.hops == h], n_bins)
            for h in sorted({it.hops for it in items})
        }
        inner: list[float] = []
        bins = [assign_bins([it.dr], by_hop_edges[it.hops])[0] for it in items]
        extra = {
            "binning": "per_hop",
            "dr_edges_by_hop": {
                str(h): [round(e, 6) for e in e_h] for h, e_h in by_hop_edges.items()
            },
        }
    elif binning == "global":
        inner = list(edges) if edges is not None else quantile_edges(dr, n_bins)
        if len(inner) != n_bins - 1:
            raise InputError(f"{n_bins} bins need {n_bins - 1} inner edges, got {len(inner)}")
        bins = assign_bins(dr, inner)
    else:
        raise InputError(f"unknown binning {binning!r}; use 'global' or 'per_hop'")
    levels = sorted(set(hop_levels) if hop_levels is not None else {it.hops for it in items})
    grouped: dict[tuple[int, int], list[DifficultyItem]] = {}
    for it, b in zip(items, bins, strict=True):
        grouped.setdefault((it.hops, b), []).append(it)
    cells = []
    for h in levels:
        for b in range(n_bins):
            members = grouped.get((h, b), [])
            cells.append(
                Cell(
                    hops=h,
                    dr_bin=b,
                    n=len(members),
                    error_rate=_rate(m.correct for m in members),
                    dr_mean=float(np.mean([m.dr for m in members])) if members else None,
                )
            )
    by_hop: dict[int, float | None] = {}
    for h in levels:
        members = [it for it in items if it.hops == h]
        by_hop[h] = pearson([m.dr for m in members], [m.correct for m in members])
    diag_map = diagonal_bins(levels, n_bins)
    diagonal = [c for c in cells if diag_map.get(c.hops) == c.dr_bin]
    on_diag = [
        (levels.index(it.hops), it.correct)
        for it, b in zip(items, bins, strict=True)
        if diag_map.get(it.hops) == b
    ]
    pearson_diag = pearson([p for p, _ in on_diag], [c for _, c in on_diag])
    r_bin_by_hop, r_bin_diagonal = bin_correlations(cells, levels, diagonal)
    hop_rates = {h: _rate(it.correct for it in items if it.hops == h) for h in levels}
    bin_rates = {
        b: _rate(it.correct for it, bb in zip(items, bins, strict=True) if bb == b)
        for b in range(n_bins)
    }
    return DifficultyMatrix(
        hop_levels=levels,
        n_bins=n_bins,
        edges=inner,
        cells=cells,
        r_bin_by_hop=r_bin_by_hop,
        r_bin_diagonal=r_bin_diagonal,
        pearson_dr_accuracy_by_hop=by_hop,
        pearson_dr_accuracy_all=pearson(dr, [it.correct for it in items]),
        diagonal=diagonal,
        pearson_diagonal=pearson_diag,
        error_rate_by_hop={h: r for h, r in hop_rates.items() if r is not None},
        error_rate_by_bin={b: r for b, r in bin_rates.items() if r is not None},
        n=len(items),
        extra=extra,
    )


def correctness(metrics: Mapping[str, Any] | None, metric: str = "acc") -> float | None:
    """The chosen answer metric of a run-file line (None when absent)."""
    if not isinstance(metrics, Mapping):
        return None
    value = metrics.get(metric)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None
