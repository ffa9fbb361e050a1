"""Adaptive-RAG with the harness: the strategy ``adaptive`` and the automatic labels.

:func:`build_adaptive_strategy` is the harness builder (``rca eval run --strategy adaptive``):
the router of :func:`rag_complexity_agents.complexity.adaptive.pipeline.build_adaptive_router`
over the harness's components (so A, B and C share its LLM cache). It is found through its
entry point of the group ``rag_complexity_agents.strategies`` in ``pyproject.toml``.
:func:`collect_labels` runs A, B and C over datasets through :func:`~.harness.evaluate` and
writes the labelled JSONL that the classifier trains on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..agents.run import run_graph
from ..complexity.adaptive.labels import (
    LABELS,
    LabelledQuestion,
    label_from_runs,
    strategies_for,
    write_labels,
)
from ..complexity.adaptive.pipeline import build_adaptive_router
from ..config import Config
from ..errors import InputError
from ..models.cache import open_llm_cache
from ..types import RunResult
from .base import EvalComponents, Strategy
from .datasets import default_data_dir, load_records, resolve_dataset
from .harness import default_run_path, evaluate
from .runner import read_run


def build_adaptive_strategy(parts: EvalComponents) -> Strategy:
    """Harness builder: the router graph run through ``run_graph`` per question."""
    graph = build_adaptive_router(parts.config, components=parts)

    def run(question: str) -> RunResult:
        return run_graph(graph, question)

    return run


def collect_labels(
    config: Config,
    datasets: Sequence[str],
    out: str | Path,
    *,
    limit: int | None = None,
    offset: int = 0,
    strategies: Mapping[str, str] | None = None,
    runs_dir: str | Path | None = None,
    progress: bool = True,
) -> tuple[Path, dict[str, int]]:
    """Run A, B, C on each dataset through the harness and write the labelled JSONL.

    Every (dataset, strategy) pair is a resumable harness run file (in ``runs_dir`` or the
    harness default), so an interrupted labelling continues where it stopped and reuses the
    LLM cache. Returns the output path and label counts (``A``/``B``/``C`` and
    ``bias``/``outcome``).
    """
    if not datasets:
        raise InputError("give at least one dataset to label")
    chosen = dict(strategies or strategies_for(config))
    if set(chosen) != set(LABELS):
        raise InputError("strategies must map exactly A, B and C to harness strategy names")
    parts = EvalComponents(config, llm_cache=open_llm_cache(config))
    data_dir = config.eval.data_dir or default_data_dir()
    items: list[LabelledQuestion] = []
    for dataset in datasets:
        path = resolve_dataset(dataset, data_dir)
        end = None if limit is None else offset + limit
        records = load_records(path)[offset:end]
        runs: dict[str, dict[str, Mapping[str, Any]]] = {}
        for label in LABELS:
            strategy = chosen[label]
            target = (
                Path(runs_dir) / f"{path.stem}__{strategy}.jsonl"
                if runs_dir is not None
                else default_run_path(config, strategy, path)
            )
            if progress:
                print(f"== {path.stem}: {label} = {strategy} → {target}", flush=True)
            evaluate(
                config,
                strategy,
                path,
                out=target,
                offset=offset,
                limit=limit,
                progress=progress,
                components=parts,
            )
            runs[label] = {line["id"]: line for line in read_run(target)}
        questions = [
            {"id": r.id, "dataset": r.dataset, "question": r.question, "hops": r.hops}
            for r in records
        ]
        items += label_from_runs(
            runs,
            metric=config.adaptive.correct_metric,
            min_score=config.adaptive.min_score,
            questions=questions,
        )
    target = write_labels(items, out)
    counts: dict[str, int] = {label: 0 for label in LABELS}
    counts.update(outcome=0, bias=0)
    for item in items:
        counts[item.label] += 1
        counts[item.source] += 1
    return target, counts
