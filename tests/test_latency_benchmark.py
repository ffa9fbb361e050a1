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
