"""benchmarks/grade.py without a model: the matrices follow the end-to-end benchmark's rows
(the run file each row writes under the end-to-end settings, every model of the plan), report
n against the planned size, and list rows that have not run."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_complexity_agents.config import Config

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def grade() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("grade")
    finally:
        sys.path.remove(str(BENCHMARKS))


class _Embedder:
    """Deterministic vectors from the text's length (D_r differs per question)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([[1.0, (len(t) % 7) / 7.0] for t in texts])


def _record(qid: str, dataset: str, question: str, hops: int) -> dict[str, Any]:
    paragraphs = [
        {"idx": i, "title": f"{qid} p{i}", "text": f"paragraph {i} of {question}"}
        | {"is_supporting": i < hops}
        for i in range(hops + 1)
    ]
    return {
        "dataset": dataset,
        "id": qid,
        "question": question,
        "answer": "x",
        "answers": ["x"],
        "paragraphs": paragraphs,
    }


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    musique = [
        _record("2hop__1_2", "musique", "Who is it?", 2),
        _record("3hop1__3_4_5", "musique", "Where was the founder born?", 3),
        _record("2hop__6_7", "musique", "When did the author die?", 2),
    ]
    wiki = [_record("w1", "2wikimultihopqa", "Who directed it?", 2)]
    for name, records in (
        ("musique_dev_ctx.jsonl", musique),
        ("2wikimultihopqa_dev_ctx.jsonl", wiki),
    ):
        (data / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    return data


def _write_run(path: Path, ids_correct: Sequence[tuple[str, float]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        {"id": qid, "dataset": "musique", "prediction": "p", "metrics": {"acc": ok}}
        for qid, ok in ids_correct
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_matrices_follow_the_end_to_end_rows(
    grade: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grade, "load_embedder", lambda *_: _Embedder())
    args = argparse.Namespace(
        data=str(_data(tmp_path)),
        dataset="musique",
        cache=str(tmp_path / "cache"),
        model="llamacpp:qwen2.5-0.5b",
        strong_model="llamacpp:qwen2.5-coder-1.5b",
        e2e_args="--strong-model llamacpp:qwen2.5-coder-1.5b",
    )
    rows = {(p.strategy, p.model): (p, run) for p, run in grade.plan_rows(args)}
    assert all(p.dataset == "musique" for p, _ in rows.values())
    single, single_run = rows["single_step", "llamacpp:qwen2.5-0.5b"]
    strong, strong_run = rows["single_step", "llamacpp:qwen2.5-coder-1.5b"]
    assert single_run.parent.name == "llamacpp-qwen2.5-0.5b"
    assert single_run.name.startswith("musique__single_step__")
    _write_run(single_run, [("2hop__1_2", 1.0), ("3hop1__3_4_5", 0.0)])
    _write_run(strong_run, [("2hop__1_2", 1.0)])
    # a run file of the same row under other settings is not the row's
    _write_run(single_run.with_name("musique__single_step__0123456789ab.jsonl"), [])

    found = grade.matrices(args, Config())
    matrices = found["strategies"]
    assert set(matrices) == {"single_step", "single_step (qwen2.5-coder-1.5b)"}
    data = matrices["single_step"]["data"]
    assert (data["n"], data["planned_n"], data["role"]) == (2, single.limit, "main")
    assert data["run_file"] == f"llamacpp-qwen2.5-0.5b/{single_run.name}"
    assert "r_bin_by_hop" in data and "r_bin_diagonal" in data
    strong_data = matrices["single_step (qwen2.5-coder-1.5b)"]["data"]
    assert (strong_data["n"], strong_data["planned_n"]) == (1, strong.limit)
    assert strong_data["model"] == "llamacpp:qwen2.5-coder-1.5b"
    # every other row of the plan is listed as not run, with its planned size
    assert (
        f"gold_evidence (n={rows['gold_evidence', 'llamacpp:qwen2.5-0.5b'][0].limit})"
        in (found["not_run"])
    )
    assert len(found["not_run"]) == len(rows) - 2
    # the strong model's rows compare the D_r aggregations, binned within each hop level
    compared = found["aggregations"]
    assert [(a["row"], a["aggregation"]) for a in compared] == [
        ("single_step (qwen2.5-coder-1.5b)", aggregation)
        for aggregation in ("min", "mean", "power")
    ]
    assert {(a["binning"], a["n"]) for a in compared} == {("per_hop", 1)}


def test_generated_questions_read_only_their_own_lines(
    grade: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scoring run file is shared by every generation from the same documents (a rerun
    with other questions appends to it): only the current questions count, split into those
    whose path uses an equivalence-only link and the rest; the file names its model."""
    from rag_complexity_agents.corpus.documents import SourceDocument
    from rag_complexity_agents.eval import harness

    written: list[Path] = []

    def fake_evaluate(config: Config, strategy: str, dataset: Path, **kw: Any) -> None:
        out = Path(kw["out"])
        written.append(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        lines = {"old": 1.0, "linked": 0.0, "rest1": 1.0, "rest2": 0.0}
        out.write_text(
            "".join(json.dumps({"id": i, "metrics": {"acc": v}}) + "\n" for i, v in lines.items())
        )

    monkeypatch.setattr(harness, "evaluate", fake_evaluate)
    args = argparse.Namespace(
        cache=str(tmp_path / "cache"), generate_strategy="single_step", quiet=True
    )
    config = Config().with_overrides({"models.chat": "llamacpp:qwen2.5-0.5b"})
    docs = [SourceDocument(id="d1", text="Alpha founded Beta.")]
    result = grade.score_generated(
        args,
        config,
        docs,
        "musique",
        tmp_path / "qa.jsonl",
        {"linked", "rest1", "rest2"},
        {"linked"},
    )
    assert written[0].name.endswith("__single_step__llamacpp-qwen2.5-0.5b.jsonl")
    assert (result["n_missing_link"], result["n_rest"]) == (1, 2)
    assert (result["error_missing_link"], result["error_rest"]) == (1.0, 0.5)
    diff = result["difference"]  # Newcombe's interval stays wide at one question
    assert diff["delta"] == 0.5 and diff["lo"] < 0 < diff["hi"] < 1
