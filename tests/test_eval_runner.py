"""The run file: resume, crash safety (a killed subprocess), errors, order, settings guard."""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_complexity_agents.cli import app
from rag_complexity_agents.errors import ModelServerError
from rag_complexity_agents.eval.datasets import QARecord, load_records, parse_record
from rag_complexity_agents.eval.runner import (
    RunAborted,
    RunFileError,
    lock_path,
    meta_path,
    read_meta,
    read_run,
    run_eval,
    strip_volatile,
)
from rag_complexity_agents.types import RunResult

N_QUESTIONS = 40

FAKE_STRATEGY = '''
"""A fast deterministic strategy for harness tests: answers the last word of the question."""
import os
import time

from rag_complexity_agents.types import RunResult


def build(parts):
    delay = float(os.environ.get("FAKE_DELAY", "0"))
    hang_from = int(os.environ.get("FAKE_HANG_FROM", "-1"))  # questions numbered from it hang

    def run(question):
        time.sleep(delay)
        answer = question.rstrip("?").split()[-1]
        if 0 <= hang_from <= int(answer):
            time.sleep(3600)  # until the test kills the run
        return RunResult(
            answer=answer,
            trace={
                "llm_calls": 1,
                "retrieval_calls": 1,
                "input_tokens": len(question),
                "output_tokens": 1,
                "evidence": [{"id": "c-" + answer, "title": "Topic " + answer}],
            },
        )

    return run
'''


def _dataset(path: Path, n: int = N_QUESTIONS) -> Path:
    lines = []
    for i in range(n):
        lines.append(
            json.dumps(
                {
                    "id": f"q{i:03d}",
                    "dataset": "toy",
                    "question": f"Which number comes with {i}?",
                    "answer": str(i) if i % 3 else "wrong",
                    "paragraphs": [
                        {
                            "idx": 0,
                            "title": f"Topic {i}",
                            "text": f"About {i}.",
                            "is_supporting": True,
                        }
                    ],
                }
            )
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _fake(question: str) -> RunResult:
    answer = question.rstrip("?").split()[-1]
    return RunResult(
        answer=answer,
        trace={
            "llm_calls": 1,
            "retrieval_calls": 1,
            "input_tokens": len(question),
            "output_tokens": 1,
            "evidence": [{"id": "c-" + answer, "title": "Topic " + answer}],
        },
    )


def _clean(path: Path) -> list[dict]:
    return [strip_volatile(r) for r in read_run(path)]


@pytest.fixture
def records(tmp_path: Path) -> list[QARecord]:
    return load_records(_dataset(tmp_path / "toy.jsonl"))


def test_a_complete_run_scores_every_question(tmp_path: Path, records: list[QARecord]) -> None:
    out = tmp_path / "run.jsonl"
    summary = run_eval(records, _fake, out, strategy_name="fake", progress=False)
    assert (summary.selected, summary.answered, summary.already_done) == (40, 40, 0)
    assert summary.complete and summary.errors == 0
    lines = read_run(out)
    assert [line["id"] for line in lines] == [r.id for r in records]
    first, second = lines[0], lines[1]
    assert first["prediction"] == "0" and first["gold"] == ["wrong"]
    assert first["metrics"] == {"cover_em": 0.0, "em": 0.0, "f1": 0.0, "acc": 0.0}
    assert second["metrics"]["em"] == 1.0
    assert second["retrieval"]["match"] == "title" and second["retrieval"]["recall@2"] == 1.0
    assert second["trace"]["llm_calls"] == 1 and second["error"] is None
    assert read_meta(out)["strategy"] == "fake"
    # rerunning does nothing
    again = run_eval(records, _fake, out, strategy_name="fake", progress=False)
    assert (again.answered, again.already_done) == (0, 40)
    assert len(read_run(out)) == 40


def test_limit_windows_accumulate_in_dataset_order(tmp_path: Path, records: list[QARecord]) -> None:
    out = tmp_path / "run.jsonl"
    order = [r.id for r in records]
    run_eval(records[20:30], _fake, out, strategy_name="fake", progress=False, order=order)
    run_eval(records[0:25], _fake, out, strategy_name="fake", progress=False, order=order)
    ids = [line["id"] for line in read_run(out)]
    assert ids == order[:30]


def test_concurrency_gives_the_same_file(tmp_path: Path, records: list[QARecord]) -> None:
    def jittery(question: str) -> RunResult:
        time.sleep(random.random() * 0.01)
        return _fake(question)

    serial, parallel = tmp_path / "serial.jsonl", tmp_path / "parallel.jsonl"
    run_eval(records, _fake, serial, strategy_name="fake", progress=False)
    threads: set[str] = set()

    def recording(question: str) -> RunResult:
        threads.add(threading.current_thread().name)
        return jittery(question)

    summary = run_eval(
        records, recording, parallel, strategy_name="fake", progress=False, concurrency=4
    )
    assert summary.complete and len(threads) > 1
    assert _clean(parallel) == _clean(serial)


def test_torn_last_line_is_repaired(tmp_path: Path, records: list[QARecord]) -> None:
    reference, out = tmp_path / "reference.jsonl", tmp_path / "run.jsonl"
    run_eval(records, _fake, reference, strategy_name="fake", progress=False)
    run_eval(records[:5], _fake, out, strategy_name="fake", progress=False)
    with open(out, "ab") as handle:  # a write cut short by a crash
        handle.write(b'{"id": "q005", "prediction": "5", "gol')
    assert len(read_run(out)) == 5
    run_eval(records, _fake, out, strategy_name="fake", progress=False)
    assert _clean(out) == _clean(reference)


def test_corrupt_middle_line_is_refused(tmp_path: Path, records: list[QARecord]) -> None:
    out = tmp_path / "run.jsonl"
    run_eval(records[:3], _fake, out, strategy_name="fake", progress=False)
    lines = out.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1][:20]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RunFileError, match="not valid JSON"):
        run_eval(records, _fake, out, strategy_name="fake", progress=False)


def test_errors_are_recorded_then_retried(tmp_path: Path, records: list[QARecord]) -> None:
    out = tmp_path / "run.jsonl"
    broken = {"q003", "q007"}

    def flaky(question: str) -> RunResult:
        if any(question.endswith(f" {int(qid[1:])}?") for qid in broken):
            raise ValueError("parser failed")
        return _fake(question)

    summary = run_eval(records[:10], flaky, out, strategy_name="fake", progress=False)
    assert summary.errors == 2 and summary.complete
    failed = [line for line in read_run(out) if line["error"]]
    assert {line["id"] for line in failed} == broken
    assert failed[0]["error"]["type"] == "ValueError" and failed[0]["prediction"] == ""
    assert "parser failed" in failed[0]["error"]["traceback"]
    # --skip-errors keeps them; the default retries them (no duplicates either way)
    kept = run_eval(
        records[:10], _fake, out, strategy_name="fake", progress=False, retry_errors=False
    )
    assert kept.answered == 0
    retried = run_eval(records[:10], _fake, out, strategy_name="fake", progress=False)
    assert retried.answered == 2 and retried.errors == 0
    lines = read_run(out)
    assert [line["id"] for line in lines] == [r.id for r in records[:10]]
    assert not any(line["error"] for line in lines)


def test_fatal_and_repeated_errors_stop_the_run(tmp_path: Path, records: list[QARecord]) -> None:
    out = tmp_path / "run.jsonl"

    def server_down(question: str) -> RunResult:
        raise ModelServerError("the Ollama server at 127.0.0.1:9 refused the connection")

    with pytest.raises(ModelServerError):
        run_eval(records, server_down, out, strategy_name="fake", progress=False)
    assert read_run(out) == []  # nothing recorded for a fatal error

    def always(question: str) -> RunResult:
        raise RuntimeError("boom")

    with pytest.raises(RunAborted, match="3 questions in a row failed"):
        run_eval(
            records, always, out, strategy_name="fake", progress=False, max_consecutive_errors=3
        )
    assert len(read_run(out)) == 3


def test_settings_guard_and_lock(tmp_path: Path, records: list[QARecord]) -> None:
    out = tmp_path / "run.jsonl"
    run_eval(
        records[:2], _fake, out, strategy_name="fake", meta={"fingerprint": "aaa"}, progress=False
    )
    assert json.loads(meta_path(out).read_text())["fingerprint"] == "aaa"
    with pytest.raises(RunFileError, match="other settings"):
        run_eval(
            records, _fake, out, strategy_name="fake", meta={"fingerprint": "bbb"}, progress=False
        )
    with open(lock_path(out), "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        with pytest.raises(RunFileError, match="another run is writing"):
            run_eval(
                records,
                _fake,
                out,
                strategy_name="fake",
                meta={"fingerprint": "aaa"},
                progress=False,
            )


def test_bad_strategy_results_become_errors(tmp_path: Path) -> None:
    record = parse_record({"id": "x", "question": "Who?", "answer": "me"})
    out = tmp_path / "run.jsonl"
    run_eval([record], lambda q: "just a string", out, strategy_name="bad", progress=False)  # type: ignore[arg-type, return-value]
    line = read_run(out)[0]
    assert line["error"]["type"] == "TypeError" and "not RunResult" in line["error"]["message"]


# ----------------------------------------------------------------------------- a real kill


def _cli(
    dataset: Path, out: Path, module_dir: Path, home: Path
) -> tuple[list[str], dict[str, str]]:
    command = [
        sys.executable,
        "-m",
        "rag_complexity_agents.cli",
        "eval",
        "run",
        "--strategy",
        "fake_strategy:build",
        "--dataset",
        str(dataset),
        "--out",
        str(out),
        "--no-llm-cache",
        "--quiet",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(module_dir), os.environ.get("PYTHONPATH", "")]),
        "RCA_CORPUS__HOME": str(home),
        "RCA_MODELS__HOME": str(home / "models"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    return command, env


def test_killed_subprocess_loses_nothing_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = _dataset(tmp_path / "toy.jsonl")
    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    (module_dir / "fake_strategy.py").write_text(FAKE_STRATEGY, encoding="utf-8")
    home = tmp_path / "home"
    out = tmp_path / "killed.jsonl"

    command, env = _cli(dataset, out, module_dir, home)
    process = subprocess.Popen(  # questions 10 and later never finish: the kill comes first
        command,
        env={**env, "FAKE_DELAY": "0.1", "FAKE_HANG_FROM": "10"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if out.exists() and out.read_bytes().count(b"\n") >= 5:
                break
            if process.poll() is not None:
                pytest.fail(f"the run ended early: {process.stderr.read().decode()[-2000:]}")
            time.sleep(0.02)
        else:
            pytest.fail("the run wrote nothing within 120 s")
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    partial = read_run(out)
    assert 5 <= len(partial) <= 10
    assert len({line["id"] for line in partial}) == len(partial)

    # resume in a second process (no delay) and compare with an uninterrupted run
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert (
        f"{N_QUESTIONS - len(partial)} answered now, {len(partial)} already done" in finished.stdout
    )

    monkeypatch.syspath_prepend(str(module_dir))
    monkeypatch.setenv("RCA_CORPUS__HOME", str(home))
    reference = tmp_path / "reference.jsonl"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "run",
            "--strategy",
            "fake_strategy:build",
            "--dataset",
            str(dataset),
            "--out",
            str(reference),
            "--no-llm-cache",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    assert _clean(out) == _clean(reference)
    ids = [line["id"] for line in read_run(out)]
    assert len(ids) == len(set(ids)) == N_QUESTIONS


def test_fingerprint_leaves_out_the_fields_that_say_they_cannot_change_answers() -> None:
    from rag_complexity_agents.config import Config, answer_neutral_keys
    from rag_complexity_agents.eval.harness import run_fingerprint, semantic_settings

    # the keys the hand-kept list of earlier versions named: fingerprints stay as they were
    assert answer_neutral_keys() == {
        "models.home",
        "models.n_threads",
        "models.ollama_host",
        "models.ollama_timeout_s",
        "models.embed_batch_size",
        "corpus.home",
        "corpus.chroma_host",
        "corpus.chroma_port",
        "corpus.ingest_batch_size",
        "graph.block_size",
        "max_question_chars",
        "eval",
        "grade",
        "rrcp",
    }
    config = Config()
    settings = semantic_settings(config)
    assert "nar.c" in settings and "models.chat" in settings
    assert not any(k.startswith(("eval.", "grade.", "rrcp.", "corpus.home")) for k in settings)
    neutral = config.with_overrides({"models.n_threads": 3, "eval.concurrency": 4})
    semantic = config.with_overrides({"nar.c": 5})
    same = run_fingerprint(config, "self_ask", "a.jsonl")
    assert run_fingerprint(neutral, "self_ask", "a.jsonl") == same
    assert run_fingerprint(semantic, "self_ask", "a.jsonl") != same


def test_fingerprint_hashes_the_values_a_run_uses() -> None:
    import hashlib
    import json

    from rag_complexity_agents.config import Config
    from rag_complexity_agents.eval.harness import run_fingerprint, semantic_settings

    config = Config()
    # no hidden layer: a knob set to the value it has is the same run
    explicit = config.with_overrides({"nar.c": config.nar.c})
    assert run_fingerprint(explicit, "plan_execute", "a.jsonl") == run_fingerprint(
        config, "plan_execute", "a.jsonl"
    )
    assert run_fingerprint(Config.preset("paper"), "plan_execute", "a.jsonl") != run_fingerprint(
        config, "plan_execute", "a.jsonl"
    )
    payload = {
        "strategy": "plan_execute",
        "dataset": "a.jsonl",
        "settings": semantic_settings(config),
    }
    expected = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode())
    assert run_fingerprint(config, "plan_execute", "a.jsonl") == expected.hexdigest()[:12]
