"""``benchmarks/latency.py``'s measurement helpers: the rates use the thread count the runs
use, and the idle verdict leaves out the benchmark's own CPU use."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def latency(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    module = importlib.import_module("latency")
    monkeypatch.delitem(sys.modules, "latency")
    return module


class Lock:
    """A no-op context manager in place of the runtime's lock."""

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        pass


class FakeLlama:
    """What ``measure_rates`` uses of a ``Llama``; records the thread count of each eval."""

    def __init__(self, runtime: FakeRuntime) -> None:
        self.runtime = runtime
        self.eval_threads: list[int] = []

    def tokenize(self, text: bytes, add_bos: bool = False) -> list[int]:
        return list(range(len(text.split())))

    def reset(self) -> None:
        pass

    def eval(self, tokens: list[int]) -> None:
        self.eval_threads.append(self.runtime.threads)

    def token_eos(self) -> int:
        return 0

    def generate(self, tokens: list[int], **kwargs: Any) -> Iterator[int]:
        self.eval_threads.append(self.runtime.threads)
        while True:
            yield 1


class FakeRuntime:
    """A runtime loaded with 1 thread (the load average was high at load) whose free-core
    monitor now sees 2 free cores."""

    def __init__(self) -> None:
        self.threads = 1
        self.core_monitor = SimpleNamespace(update=lambda: 2)
        self.lock = Lock()
        self.llama = FakeLlama(self)
        self.canon = self.primed = 0
        self.generating = False

    def _fit_threads(self, threads: int) -> None:
        self.threads = threads


def test_rates_are_measured_with_the_threads_the_runs_fit(latency: ModuleType) -> None:
    runtime = FakeRuntime()
    chat = SimpleNamespace(_runtime=lambda: runtime)
    rates = latency.measure_rates(chat)
    assert rates["threads"] == 2
    assert runtime.llama.eval_threads and set(runtime.llama.eval_threads) == {2}


def test_other_load_leaves_out_the_benchmarks_own_cpu(
    latency: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (wall s, machine busy CPU s, own + children CPU s) at successive readings
    samples = iter([(0.0, 100.0, 10.0), (10.0, 118.0, 28.0), (20.0, 133.0, 30.0)])
    monkeypatch.setattr(latency.OtherLoad, "_sample", staticmethod(lambda: next(samples)))
    others = latency.OtherLoad()
    assert others.reading("warm") == 0.0  # all 1.8 busy cores were the benchmark's own
    assert others.reading("cold") == 1.3  # 15 s busy, 2 s own, over 10 s
    assert others.peak() == 1.3
    assert [p["part"] for p in others.parts] == ["warm", "cold"]


def test_idle_verdict(latency: ModuleType) -> None:
    assert latency.idle(0.3, 0.1)
    assert latency.idle(0.3, None)  # no /proc/stat: the start load decides
    assert not latency.idle(0.9, 0.1)  # busy before the benchmark started
    assert not latency.idle(0.3, 1.2)  # another job started during the run


def test_cold_runs_wait_for_the_load_average_to_settle(
    latency: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = iter([1.8, 1.2, 0.7, 0.4, 0.3])
    seen: list[float] = []

    def load() -> float:
        seen.append(next(loads))
        return seen[-1]

    monkeypatch.setattr(latency, "load_average", load)
    monkeypatch.setattr(latency.time, "sleep", lambda s: None)
    latency.settle(0.5, 60.0)
    assert seen == [1.8, 1.2, 0.7, 0.4]  # stops at the first load at or below the target
    assert latency.settle(0.5, 0.0) == 0.0  # no waiting when told so


def test_markdown_reports_the_new_fields(latency: ModuleType, tmp_path: Path) -> None:
    summary = {
        "strategy": "single_step",
        "warm_s": 2.0,
        "floor_s": 1.9,
        "ratio": 1.05,
        "one_fact_warm_s": 1.5,
        "multi_hop_warm_s": 2.5,
        "demo_warm_s": 2.1,
        "cold_s": 9.0,
        "cold_settle_s": 12.0,
        "new_tokens": 300,
        "reused_tokens": 0,
        "decoded_tokens": 4,
        "model_calls": 1,
        "llm_calls": 1,
        "retrieval_s": 0.1,
        "llm_busy_s": 1.8,
    }
    profile = {
        "import_s": 0.4,
        "model_load_s": 0.9,
        "collection_open_s": 1.0,
        "bm25_load_s": 0.3,
        "graph_load_s": 0.0,
        "embedder_load_s": 0.2,
        "chroma_open_s": 0.5,
        "first_search_s": 0.0,
        "first_token_s": 0.3,
        "load": 0.2,
        "slowest_imports": [["chromadb", 0.8]],
    }
    data = {
        "command": "benchmarks/latency.py",
        "chat_model": "auto (qwen2.5-coder-1.5b)",
        "machine": "test",
        "threads": 2,
        "questions": 1,
        "load_average": {"start": 0.2, "end": 1.6, "max": 1.9},
        "other_load": [{"part": "warm single_step", "seconds": 30.0, "cores": 0.1}],
        "idle": True,
        "prefill_tok_s": 130.0,
        "decode_tok_s": 40.0,
        "rates": [{"prefill_tok_s": 130.0, "decode_tok_s": 40.0, "threads": 2}],
        "summary": [summary],
        "targets": [],
        "cold_profile": profile,
    }
    path = tmp_path / "latency.md"
    latency.write_markdown(data, path)
    text = path.read_text()
    assert "idle. Load average" in text and "NON-IDLE" not in text  # own load 1.9 ignored
    assert "chat model `auto (qwen2.5-coder-1.5b)`" in text and "| 1.5 | 2.5 |" in text
    assert "130.0/40.0 (2 thr.)" in text and "single_step 12.0 s" in text
    assert "(BM25 0.3 + graph 0.0 + query embedder 0.2 + Chroma 0.5 + first search 0.0)" in text


def test_the_default_pipeline_is_held_to_its_floor_and_to_times_per_kind(
    latency: ModuleType,
) -> None:
    def row(question: str, hops: int, warm: float) -> dict[str, object]:
        counts = dict.fromkeys(
            ("new_tokens", "reused_tokens", "decoded_tokens", "model_calls", "llm_calls"), 1
        )
        return {
            "strategy": latency.DEFAULT_PIPELINE,
            "question": question,
            "hops": hops,
            "demo": question == "demo",
            "warm_s": warm,
            "floor_s": warm / 1.2,
            "retrieval_s": 0.0,
            "llm_busy_s": warm,
            **counts,
        }

    rows = [row("demo", 2, 9.0), row("one", 1, 3.0), row("two", 1, 5.0), row("multi", 3, 16.0)]
    summary = latency.summarise(rows, {})
    assert summary[0]["one_fact_warm_s"] == 4.0 and summary[0]["multi_hop_warm_s"] == 12.5
    verdicts = {t["target"]: (t["limit"], t["met"]) for t in latency.targets(summary)}
    default = latency.DEFAULT_PIPELINE
    assert verdicts[f"{default} warm / floor"] == (1.1, False)  # 1.2 x its floor
    assert verdicts[f"{default} one-fact warm s (mean)"] == (4.0, True)
    assert verdicts[f"{default} multi-hop warm s (mean)"] == (15.0, True)


def test_a_short_run_asks_one_fact_and_multi_hop_questions(latency: ModuleType) -> None:
    asked = latency.questions(5)
    assert asked[0] == (latency.DEMO_QUESTION, 2)
    assert [hops == 1 for _, hops in asked[1:]] == [True, False, True, False]
