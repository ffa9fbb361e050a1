"""One call from a Config to a finished run file: what ``rca eval run`` and the benchmarks use."""

from __future__ import annotations

import hashlib
import json
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Config, answer_neutral_keys
from ..errors import InputError
from ..models.cache import open_llm_cache
from .base import EvalComponents
from .datasets import dataset_subset, default_data_dir, load_records, resolve_dataset
from .runner import RunSummary, run_eval
from .strategies import build_strategy, get_strategy_spec


def _flatten(data: dict[str, Any], skip: set[str], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if dotted in skip:
            continue
        if isinstance(value, dict):
            flat.update(_flatten(value, skip, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def semantic_settings(config: Config, *, uses_retrieval: bool = True) -> dict[str, Any]:
    """The config values that can change answers, flattened to dotted keys: every field but
    those that say they cannot (:func:`~rag_complexity_agents.config.answer_neutral_keys`).

    Without retrieval only the ``models.*`` values matter.
    """
    flat = _flatten(config.model_dump(mode="json"), answer_neutral_keys())
    if not uses_retrieval:
        flat = {k: v for k, v in flat.items() if k.startswith("models.")}
    return flat


def run_fingerprint(config: Config, strategy: str, dataset_file: str | Path) -> str:
    """Short hash of (strategy, dataset file or subset name, answer-relevant settings).

    The settings are the values the run uses. Code is not in the fingerprint: a run file
    written before a change of prompts or logic must be moved away to be rerun.
    """
    uses_retrieval = get_strategy_spec(strategy).uses_retrieval
    payload: dict[str, Any] = {
        "strategy": strategy,
        "dataset": Path(dataset_file).name,
        "settings": semantic_settings(config, uses_retrieval=uses_retrieval),
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def runs_dir(config: Config) -> Path:
    return config.eval.runs_dir or (config.corpus.home / "runs")


def default_run_path(config: Config, strategy: str, dataset_file: str | Path) -> Path:
    """``<runs_dir>/<dataset>__<strategy>__<fingerprint>.jsonl`` (same settings → same file)."""
    stem = Path(dataset_file).name.removesuffix(".jsonl")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", strategy).strip("-")
    fingerprint = run_fingerprint(config, strategy, dataset_file)
    return runs_dir(config) / f"{stem}__{safe}__{fingerprint}.jsonl"


@dataclass(frozen=True)
class EvalOutcome:
    summary: RunSummary
    dataset_file: Path
    fingerprint: str


def evaluate(
    config: Config,
    strategy: str,
    dataset: str | Path,
    *,
    out: str | Path | None = None,
    offset: int = 0,
    limit: int | None = None,
    concurrency: int | None = None,
    progress: bool = True,
    retry_errors: bool = True,
    components: EvalComponents | None = None,
    extra_meta: dict[str, Any] | None = None,
) -> EvalOutcome:
    """Run ``strategy`` over records ``offset .. offset + limit`` of ``dataset``.

    ``dataset`` is a file, a short name resolved in ``eval.data_dir`` or the name of a
    :data:`~.datasets.DATASET_SUBSETS` subset (then offset and limit count within the subset,
    and the subset's name replaces the file's in the fingerprint and the default run path);
    ``out`` defaults to :func:`default_run_path`. Safe to call again: finished questions are
    skipped.
    """
    spec = get_strategy_spec(strategy)
    subset = dataset_subset(dataset)
    dataset_file = resolve_dataset(
        subset.dataset if subset else dataset, config.eval.data_dir or default_data_dir()
    )
    all_records = load_records(dataset_file)
    if offset < 0 or (limit is not None and limit < 0):
        raise InputError("--offset and --limit must be zero or positive")
    pool = subset.select(all_records) if subset else all_records
    selected = pool[offset : None if limit is None else offset + limit]
    label: str | Path = subset.name if subset else dataset_file
    fingerprint = run_fingerprint(config, strategy, label)
    target = Path(out) if out is not None else default_run_path(config, strategy, label)
    parts = components or EvalComponents(config, llm_cache=open_llm_cache(config))
    built = build_strategy(strategy, parts)
    datasets = sorted({r.dataset for r in all_records})
    meta: dict[str, Any] = {
        "dataset": subset.name if subset else ",".join(datasets),
        "dataset_file": str(dataset_file),
        "model": config.models.chat,
        "collection": config.collection if spec.uses_retrieval else None,
        "fingerprint": fingerprint,
        "settings": {
            "retrieval.mode": config.retrieval.mode,
            "answer.passages": config.answer.passages,
            "answer.passage_chars": config.answer.passage_chars,
            "models.temperature": config.models.temperature,
            "models.max_tokens": config.models.max_tokens,
        }
        if spec.uses_retrieval
        else {
            "models.temperature": config.models.temperature,
            "models.max_tokens": config.models.max_tokens,
        },
        "config": semantic_settings(config, uses_retrieval=spec.uses_retrieval),
        "python": platform.python_version(),
        **(extra_meta or {}),
    }
    summary = run_eval(
        selected,
        built,
        target,
        strategy_name=strategy,
        meta=meta,
        order=[r.id for r in all_records],
        concurrency=concurrency or config.eval.concurrency,
        progress=progress,
        retry_errors=retry_errors,
        resolve=parts.paragraph_resolver if spec.uses_retrieval else None,
        recall_ks=config.eval.recall_ks,
        fsync=config.eval.fsync,
    )
    return EvalOutcome(summary, dataset_file, fingerprint)
