"""The GRADE difficulty matrix of an evaluation-harness run file (``rca grade matrix``).

The matrix itself is :mod:`rag_complexity_agents.complexity.grade.matrix`; this module reads
its inputs from the harness's files: the run's lines (:func:`read_run_rows`) and the
supporting paragraphs of the dataset file the run was made on (:func:`supports_from_dataset`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..complexity.grade.difficulty import DifficultyMatrix, difficulty_matrix, infer_hops
from ..complexity.grade.matrix import MatrixInputs, Support, difficulty_items, run_dataset_name
from ..errors import InputError
from ..models.embeddings import load_embedder
from .datasets import default_data_dir, iter_records, resolve_dataset
from .runner import read_run


def supports_from_dataset(path: str | Path) -> dict[str, Support]:
    """Question id → :class:`Support` from a dataset file of the shared schema."""
    out: dict[str, Support] = {}
    for record in iter_records(path):
        texts = tuple(
            f"{p.title}\n{p.text}" if p.title else p.text
            for p in record.paragraphs or ()
            if p.is_supporting
        )
        hops = infer_hops(
            hops=record.hops, question_id=record.id, decomposition=record.decomposition
        )
        out[record.id] = Support(record.question, hops, texts)
    return out


def read_run_rows(path: str | Path) -> list[dict[str, Any]]:
    """The lines of a harness run file (InputError when it has none)."""
    rows = read_run(path)
    if not rows:
        raise InputError(f"{path} has no answered questions")
    return rows


def matrix_for_run(
    run: str | Path,
    *,
    dataset: str | Path | None,
    config: Any,
    data_dir: str | Path | None = None,
) -> tuple[DifficultyMatrix, MatrixInputs]:
    """The difficulty matrix of one harness run file (``rca grade matrix``).

    ``dataset`` is a dataset name or file; by default the run's own ``dataset`` field.
    """
    rows = read_run_rows(run)
    name = dataset or run_dataset_name(rows)
    if name is None:
        raise InputError(f"{run} mixes datasets or names none; pass --dataset")
    directory = data_dir or config.eval.data_dir or default_data_dir()
    supports = supports_from_dataset(resolve_dataset(name, directory))
    embedder = load_embedder(config.models.embedding, batch_size=config.models.embed_batch_size)
    grade = config.grade
    inputs = difficulty_items(
        rows, supports, embedder, aggregation=grade.aggregation, p=grade.p, metric=grade.metric
    )
    if not inputs.items:
        raise InputError(f"no question of {run} has hops, supporting paragraphs and a metric")
    matrix = difficulty_matrix(inputs.items, n_bins=grade.n_dr_bins, binning=grade.binning)
    matrix.extra["skipped"] = inputs.skipped
    matrix.extra["metric"] = grade.metric
    matrix.extra["aggregation"] = grade.aggregation
    return matrix, inputs
