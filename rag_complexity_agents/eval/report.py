"""Compare runs: accuracy, retrieval quality and cost per (run, dataset), with 95% intervals.

Answer and retrieval metrics are recomputed from each line's prediction, gold answers,
evidence and gold supporting paragraphs, so a run file stays comparable when metric code
improves. Failed questions count as wrong (empty prediction) and are excluded from the cost
means. ``seconds`` per question is the wall time plus the time the LLM-cache hits originally
took, i.e. what the question costs without the cache. Each row also counts the format
failures its traces report (``trace["format_failures"]``; 0 where a trace has none), the
questions on which a peer framework broke (``trace["peer_break"]``), and the mean 1-minute
load average at the end of its questions. :func:`paired_delta` compares two runs question by
question.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .metrics import (
    ANSWER_METRICS,
    Estimate,
    answer_scores,
    mean_ci,
    paired_difference,
    retrieval_scores,
)
from .runner import RunFileError, read_meta, read_run

COST_KEYS: tuple[str, ...] = (
    "llm_calls",
    "retrieval_calls",
    "input_tokens",
    "output_tokens",
    "seconds",
)


@dataclass
class ReportRow:
    """One (run, dataset) cell of the comparison."""

    run: str
    path: str
    dataset: str
    strategy: str
    model: str
    n: int
    errors: int
    answer: dict[str, Estimate | None]
    retrieval: dict[str, Estimate | None]
    retrieval_n: int
    cost: dict[str, Estimate | None]
    cache_hit_rate: float | None
    settings: dict[str, Any] = field(default_factory=dict)
    format_failures: int = 0
    breaks: int = 0
    load_average: float | None = None

    def to_dict(self) -> dict[str, Any]:
        def est(value: Estimate | None, digits: int = 4) -> dict[str, float | int] | None:
            return value.to_dict(digits=digits) if value is not None else None

        return {
            "run": self.run,
            "path": self.path,
            "dataset": self.dataset,
            "strategy": self.strategy,
            "model": self.model,
            "n": self.n,
            "errors": self.errors,
            "answer": {k: est(v) for k, v in self.answer.items()},
            "retrieval": {k: est(v) for k, v in self.retrieval.items()},
            "retrieval_n": self.retrieval_n,
            "cost": {k: est(v, 3) for k, v in self.cost.items()},
            "cache_hit_rate": self.cache_hit_rate,
            "settings": self.settings,
            "format_failures": self.format_failures,
            "breaks": self.breaks,
            "load_average": self.load_average,
        }


def run_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand directories into their ``*.jsonl`` run files (sorted); keep files as given."""
    out: list[Path] = []
    for item in paths:
        path = Path(item).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.glob("*.jsonl") if p.is_file())
            if not found:
                raise RunFileError(f"{path} holds no *.jsonl run files")
            out.extend(found)
        elif path.is_file():
            out.append(path)
        else:
            raise RunFileError(f"run file {path} does not exist")
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _retrieval(line: Mapping[str, Any], ks: Sequence[int]) -> dict[str, Any] | None:
    supporting = line.get("supporting")
    trace = line.get("trace") or {}
    evidence = trace.get("evidence") if isinstance(trace.get("evidence"), list) else None
    if line.get("error") or evidence is None or trace.get("retrieval_calls") == 0:
        return None  # failed, or a strategy that does not retrieve
    if isinstance(supporting, Mapping):
        return retrieval_scores(
            evidence,
            supporting_ids=supporting.get("ids") or (),
            supporting_titles=supporting.get("titles") or (),
            ks=ks,
        )
    stored = line.get("retrieval")
    return dict(stored) if isinstance(stored, Mapping) else None


def summarize(
    lines: Sequence[Mapping[str, Any]],
    *,
    run: str = "",
    path: str = "",
    meta: Mapping[str, Any] | None = None,
    ks: Sequence[int] = (2, 5, 10),
    n_boot: int = 2000,
) -> ReportRow:
    """Aggregate the lines of one run (and one dataset) into a :class:`ReportRow`."""
    meta = meta or {}
    answers: dict[str, list[float]] = {m: [] for m in ANSWER_METRICS}
    retrieval: dict[str, list[float]] = {}
    cost: dict[str, list[float]] = {k: [] for k in COST_KEYS}
    hits = calls = errors = format_failures = breaks = 0
    loads: list[float] = []
    for line in lines:
        scores = _answer_scores(line)
        for metric in ANSWER_METRICS:
            answers[metric].append(scores[metric])
        trace = line.get("trace") or {}
        # Loop traces carry a per-question total "format_failures"; strategies without
        # structured steps (peers, no-retrieval) have none, which counts as 0.
        format_failures += int(_number(trace.get("format_failures")) or 0)
        breaks += int(bool(trace.get("peer_break")))
        load = _number(line.get("load_average"))
        if load is not None:
            loads.append(load)
        if line.get("error"):
            errors += 1
            continue
        found = _retrieval(line, ks)
        if found:
            for key, value in found.items():
                number = _number(value)
                if number is not None and (key.startswith("recall") or key.startswith("ndcg")):
                    retrieval.setdefault(key, []).append(number)
        cache = line.get("llm_cache") or {}
        for key in COST_KEYS[:-1]:
            number = _number(trace.get(key))
            if number is not None:
                cost[key].append(number)
        wall = _number(line.get("wall_seconds"))
        if wall is None:
            wall = _number(trace.get("seconds"))
        if wall is not None:
            cost["seconds"].append(wall + (_number(cache.get("saved_seconds")) or 0.0))
        hits += int(cache.get("hits") or 0)
        calls += int(cache.get("hits") or 0) + int(cache.get("misses") or 0)
    datasets = sorted({str(line.get("dataset") or "") for line in lines})
    strategies = sorted({str(line.get("strategy") or "") for line in lines})
    retrieval_n = max((len(v) for v in retrieval.values()), default=0)
    return ReportRow(
        run=run,
        path=path,
        dataset=",".join(datasets) or str(meta.get("dataset") or ""),
        strategy=str(meta.get("strategy") or ",".join(strategies)),
        model=str(meta.get("model") or ""),
        n=len(lines),
        errors=errors,
        answer={m: mean_ci(v, n_boot=n_boot) for m, v in answers.items()},
        retrieval={k: mean_ci(v, n_boot=n_boot) for k, v in sorted(retrieval.items())},
        retrieval_n=retrieval_n,
        cost={k: mean_ci(v, n_boot=n_boot) for k, v in cost.items()},
        cache_hit_rate=round(hits / calls, 4) if calls else None,
        settings=dict(meta.get("settings") or {}),
        format_failures=format_failures,
        breaks=breaks,
        load_average=round(sum(loads) / len(loads), 2) if loads else None,
    )


def _answer_scores(line: Mapping[str, Any]) -> dict[str, float]:
    gold = line.get("gold") or []
    return answer_scores(str(line.get("prediction") or ""), [str(g) for g in gold])


def paired_delta(
    lines: Sequence[Mapping[str, Any]],
    baseline: Sequence[Mapping[str, Any]],
    *,
    metric: str = "cover_em",
    n_boot: int = 2000,
    seed: int = 0,
) -> Estimate | None:
    """``metric`` of ``lines`` minus that of ``baseline`` on the questions both runs answered
    (matched by id, in the order of ``lines``), with a paired bootstrap interval (fixed seed);
    None when they share no question. Scores are recomputed as in :func:`summarize`."""
    if metric not in ANSWER_METRICS:
        raise ValueError(f"unknown answer metric {metric!r}; known: {ANSWER_METRICS}")
    base = {str(line["id"]): _answer_scores(line)[metric] for line in baseline}
    pairs = [
        (_answer_scores(line)[metric], base[str(line["id"])])
        for line in lines
        if str(line["id"]) in base
    ]
    return paired_difference([a for a, _ in pairs], [b for _, b in pairs], n_boot=n_boot, seed=seed)


def build_report(
    paths: Iterable[str | Path], *, ks: Sequence[int] = (2, 5, 10), n_boot: int = 2000
) -> list[ReportRow]:
    """One row per (run file, dataset) for the given run files or directories."""
    rows: list[ReportRow] = []
    for path in run_files(paths):
        lines = read_run(path)
        meta = read_meta(path)
        by_dataset: dict[str, list[dict[str, Any]]] = {}
        for line in lines:
            by_dataset.setdefault(str(line.get("dataset") or ""), []).append(line)
        if not by_dataset:
            by_dataset[str(meta.get("dataset") or "")] = []
        name = path.name.removesuffix(".jsonl")
        for group in by_dataset.values():
            rows.append(summarize(group, run=name, path=str(path), meta=meta, ks=ks, n_boot=n_boot))
    return rows


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def _pct(value: Estimate | None) -> str:
    if value is None:
        return "–"
    return f"{value.mean * 100:.1f} [{value.lo * 100:.1f}, {value.hi * 100:.1f}]"


def _num(value: Estimate | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value.mean:.{digits}f}"


def to_markdown(rows: Sequence[ReportRow]) -> str:
    """A markdown table: accuracy with 95% intervals, evidence quality, cost."""
    retrieval_keys = sorted({k for row in rows for k in row.retrieval})
    header = [
        "run",
        "dataset",
        "strategy",
        "n",
        "err",
        "cover-EM %",
        "EM %",
        "F1 %",
        "Acc %",
        *[k.replace("recall", "R") + " %" for k in retrieval_keys],
        "LLM calls",
        "retrievals",
        "tokens in/out",
        "s/question",
        "cache hits",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        tokens = f"{_num(row.cost['input_tokens'], 0)}/{_num(row.cost['output_tokens'], 0)}"
        hit = "–" if row.cache_hit_rate is None else f"{row.cache_hit_rate * 100:.0f}%"
        cells = [
            row.run,
            row.dataset,
            row.strategy,
            str(row.n),
            str(row.errors),
            _pct(row.answer["cover_em"]),
            _pct(row.answer["em"]),
            _pct(row.answer["f1"]),
            _pct(row.answer["acc"]),
            *[_pct(row.retrieval.get(k)) for k in retrieval_keys],
            _num(row.cost["llm_calls"]),
            _num(row.cost["retrieval_calls"]),
            tokens,
            _num(row.cost["seconds"], 1),
            hit,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    notes = (
        "\nPercentages are means over questions with percentile-bootstrap 95% intervals. "
        "Failed questions count as wrong and are left out of the cost columns. Retrieval "
        "columns score the distinct paragraphs behind the evidence each strategy used against "
        "the gold supporting paragraphs. s/question includes the time of LLM-cache hits.\n"
    )
    return "\n".join(lines) + "\n" + notes


def to_json(rows: Sequence[ReportRow]) -> dict[str, Any]:
    return {"rows": [row.to_dict() for row in rows]}


def write_report(rows: Sequence[ReportRow], markdown: Path | None, json_path: Path | None) -> None:
    """Write the markdown and/or JSON forms (parent directories are created)."""
    if markdown is not None:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(to_markdown(rows), encoding="utf-8")
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(to_json(rows), indent=2) + "\n", encoding="utf-8")
