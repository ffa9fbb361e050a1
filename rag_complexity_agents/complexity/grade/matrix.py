"""The GRADE difficulty matrix of an evaluation-harness run: D_r per question, report, heatmap.

A run file (``rca eval run``) has one line per question with its id, hop count and answer
metrics; the supporting paragraphs come from the dataset file the run was made on (MuSiQue,
2WikiMultiHopQA, ... or a GRADE-generated ``qa.jsonl``), read by
:mod:`rag_complexity_agents.eval.grade`. D_r is computed with the packaged
MiniLM encoder: the cosine of the question with each supporting paragraph (``title\\ntext``,
as indexed by the pooled corpus), aggregated as configured (``grade.aggregation``).

Two deviations from GRADE's evaluation setting:

* D_r is computed over the dataset's **supporting paragraphs** as they are (MuSiQue's have a
  median of 80 words), not over the 128–256-token chunks with 50-token overlap that the paper
  retrieves (GRADE generation does chunk that way: ``corpus.documents.chunk_grade_setting``);
* correctness is an answer metric of the run file (``grade.metric``, default ``acc``: the
  normalised gold answer is a substring of the normalised prediction), not the paper's LLM
  judge answering True/False.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import InputError
from .difficulty import (
    Aggregation,
    DifficultyItem,
    DifficultyMatrix,
    correctness,
    cosine_similarities,
    infer_hops,
    retrieval_difficulty,
)

if TYPE_CHECKING:
    from ...models.embeddings import SentenceTransformerEmbedder


@dataclass(frozen=True, slots=True)
class Support:
    """What D_r needs about one question: its text, hop count and supporting texts."""

    question: str
    hops: int | None
    texts: tuple[str, ...]


@dataclass(slots=True)
class MatrixInputs:
    items: list[DifficultyItem]
    skipped: dict[str, int]


def difficulty_items(
    rows: Sequence[Mapping[str, Any]],
    supports: Mapping[str, Support],
    embedder: SentenceTransformerEmbedder,
    *,
    aggregation: Aggregation = "min",
    p: float = -2.0,
    metric: str = "acc",
) -> MatrixInputs:
    """One :class:`DifficultyItem` per run line that has a hop count, supporting texts and
    the metric; the rest are counted in ``skipped`` by reason."""
    skipped: dict[str, int] = {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    usable: list[tuple[str, int, float, Support]] = []
    for row in rows:
        qid = str(row.get("id", ""))
        support = supports.get(qid)
        if support is None:
            skip("not_in_dataset")
            continue
        hops = infer_hops(hops=row.get("hops"), question_id=qid) or support.hops
        if hops is None:
            skip("no_hop_count")
            continue
        if not support.texts:
            skip("no_supporting_paragraphs")
            continue
        correct = correctness(row.get("metrics"), metric)
        if correct is None:
            skip(f"no_metric_{metric}")
            continue
        usable.append((qid, hops, correct, support))
    items: list[DifficultyItem] = []
    for qid, hops, correct, support in usable:
        vectors = embedder.encode([support.question, *support.texts])
        sims = cosine_similarities(vectors[0], vectors[1:])
        dr = retrieval_difficulty(sims, aggregation, p=p)
        items.append(DifficultyItem(id=qid, hops=hops, dr=dr, correct=correct))
    return MatrixInputs(items=items, skipped=skipped)


def run_dataset_name(rows: Sequence[Mapping[str, Any]]) -> str | None:
    names = {str(r.get("dataset")) for r in rows if r.get("dataset")}
    return names.pop() if len(names) == 1 else None


# --------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _cells(n: int) -> str:
    return f"{n} cell" if n == 1 else f"{n} cells"


def matrix_markdown(matrix: DifficultyMatrix, *, title: str = "GRADE difficulty matrix") -> str:
    """A markdown table (rows = hops, columns = D_r bins; cell = error rate (n)) + stats."""
    by_hop_edges = matrix.extra.get("dr_edges_by_hop")
    if by_hop_edges:  # per-hop binning: each row has its own edges, listed below the table
        header = " | ".join(f"D_r bin {b + 1} (per hop)" for b in range(matrix.n_bins))
    else:
        bounds = ["min", *(f"{e:.3f}" for e in matrix.edges), "max"]
        header = " | ".join(
            f"D_r bin {b + 1} ({bounds[b]}–{bounds[b + 1]})" for b in range(matrix.n_bins)
        )
    lines = [f"### {title}", "", f"| hops | {header} | all |", "|---" * (matrix.n_bins + 2) + "|"]
    for h in matrix.hop_levels:
        cells = []
        for b in range(matrix.n_bins):
            c = matrix.cell(h, b)
            cells.append(f"{_fmt(c.error_rate, 2)} ({c.n})")
        lines.append(f"| {h} | {' | '.join(cells)} | {_fmt(matrix.error_rate_by_hop.get(h), 2)} |")
    by_bin = [_fmt(matrix.error_rate_by_bin.get(b), 2) for b in range(matrix.n_bins)]
    lines.append(f"| all | {' | '.join(by_bin)} | |")
    lines += [
        "",
        "Cells: error rate (1 − accuracy) and number of questions."
        + (
            " D_r quantile edges within each hop level (the paper's binning): "
            + "; ".join(
                f"{h} hops {', '.join(f'{e:.3f}' for e in edges)}"
                for h, edges in by_hop_edges.items()
            )
            + "."
            if by_hop_edges
            else " One set of D_r edges for every hop level (not the paper's per-hop binning)."
        ),
        "",
        "| Pearson r | bin level (GRADE): D_r vs error rate | item level: D_r vs correctness |",
        "|---|---|---|",
        *(
            f"| hops = {h} ({_cells(sum(matrix.cell(h, b).n > 0 for b in range(matrix.n_bins)))})"
            f" | {_fmt(matrix.r_bin_by_hop.get(h))} | "
            f"{_fmt(r)} |"
            for h, r in matrix.pearson_dr_accuracy_by_hop.items()
        ),
        f"| all questions | | {_fmt(matrix.pearson_dr_accuracy_all)} |",
        f"| diagonal ({_cells(sum(c.n > 0 for c in matrix.diagonal))}; position) | "
        f"{_fmt(matrix.r_bin_diagonal)} | {_fmt(matrix.pearson_diagonal)} |",
        "",
        "Bin level: Pearson r over the non-empty cells of a hop row (cell mean D_r vs error "
        "rate) or of the diagonal (position vs error rate); positive = harder → more errors "
        "(GRADE reports 0.31–0.98). Item level: r of each question's D_r (or diagonal "
        "position) with its own correctness; negative = harder → more errors. — = undefined "
        "(fewer than two points, or a constant error rate or correctness).",
        "",
        "Diagonal cells (hops, D_r bin → error rate): "
        + ", ".join(
            f"({c.hops}, {c.dr_bin + 1}) → {_fmt(c.error_rate, 2)} (n={c.n})"
            for c in matrix.diagonal
        ),
    ]
    return "\n".join(lines) + "\n"


def save_heatmap(matrix: DifficultyMatrix, path: str | Path, *, title: str = "Error rate") -> Path:
    """Write the error-rate heatmap (annotated with error rate and n) as a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is in the grade extra
        raise InputError(
            "the heatmap needs matplotlib: pip install 'rag-complexity-agents[grade]'"
        ) from exc
    import numpy as np

    grid = matrix.error_grid()
    counts = matrix.count_grid()
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * matrix.n_bins, 1.2 + 0.9 * len(matrix.hop_levels)))
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="Reds", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(matrix.n_bins), [f"Q{b + 1}" for b in range(matrix.n_bins)])
    ax.set_yticks(range(len(matrix.hop_levels)), [str(h) for h in matrix.hop_levels])
    ax.set_xlabel("retrieval difficulty D_r (quantile bin, low → high)")
    ax.set_ylabel("hops")
    ax.set_title(title, fontsize=10)
    for i in range(len(matrix.hop_levels)):
        for j in range(matrix.n_bins):
            text = "—" if np.isnan(grid[i, j]) else f"{grid[i, j]:.2f}"
            colour = "white" if not np.isnan(grid[i, j]) and grid[i, j] > 0.6 else "black"
            ax.text(
                j,
                i,
                f"{text}\nn={counts[i, j]}",
                ha="center",
                va="center",
                fontsize=8,
                color=colour,
            )
    fig.colorbar(image, ax=ax, label="error rate")
    fig.tight_layout()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=120)
    plt.close(fig)
    return target


def write_report(
    matrix: DifficultyMatrix, out_dir: str | Path, *, name: str, title: str
) -> dict[str, Path]:
    """``<name>.json``, ``<name>.md`` and ``<name>.png`` in ``out_dir``."""
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / f"{name}.json"
    json_path.write_text(json.dumps(matrix.to_dict(), indent=2) + "\n", encoding="utf-8")
    md_path = directory / f"{name}.md"
    md_path.write_text(matrix_markdown(matrix, title=title), encoding="utf-8")
    png = save_heatmap(matrix, directory / f"{name}.png", title=title)
    return {"json": json_path, "md": md_path, "png": png}
