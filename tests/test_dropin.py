"""The drop-in API: the top-level names, user objects injected into Components,
the lean install (torch & co. blocked), structured output with its fallback, the Studio
schema and the README's first example. Chat models here are fakes (control flow); the tests
with real models and stores are in tests/test_dropin_real.py."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agent_fakes import Prompt, Script, ScriptedChat, ToolChat, tool_call
from dropin_fakes import LOOP_SCRIPTS, MER, SUNAR, lean_store
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

import rag_complexity_agents as rca
from rag_complexity_agents.agents.context import derive_components
from rag_complexity_agents.config.knobs import KNOBS
from rag_complexity_agents.errors import ConfigError, MissingDependency
from rag_complexity_agents.models.embeddings import ExternalEmbedder, as_embedder
from rag_complexity_agents.models.equivalence import LexicalEquivalence
from rag_complexity_agents.optional import LOCAL_EXTRA, require

ROOT = Path(__file__).parent.parent
Q = "Where was the director of Spirited Away born?"


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


# ------------------------------------------------------------------------------ the API


def test_public_names_are_lazy_and_importing_is_cheap() -> None:
    assert {"create_rag_agent", "Config", "PIPELINES", "KNOBS", "Trace"} <= set(rca.__all__)
    code = (
        "import sys, rag_complexity_agents as r; "
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'transformers', 'langgraph', 'langchain_core', 'chromadb', 'llama_index')]; "
        "assert not heavy, heavy; assert callable(r.create_rag_agent); print('cheap')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120
    )
    assert out.stdout.strip() == "cheap", out.stderr
    with pytest.raises(AttributeError):
        _ = rca.no_such_name


def test_lean_install_runs_every_loop_and_the_sunar_retriever() -> None:
    """torch, transformers, sentence-transformers and llama.cpp blocked (as if uninstalled)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "lean_install_check.py")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("LEAN OK")
    assert set(re.findall(r"^(\w+) -> Japan", out.stdout, re.MULTILINE)) == set(LOOP_SCRIPTS)


def test_missing_library_is_one_line_naming_the_extra() -> None:
    with pytest.raises(MissingDependency) as info:
        require("no_such_module_xyz", "the frobnicator")
    message = str(info.value)
    assert "\n" not in message and LOCAL_EXTRA in message and "frobnicator" in message


def test_pyproject_core_dependencies_have_no_torch() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    for heavy in ("torch", "transformers", "sentence-transformers", "llama-cpp"):
        assert heavy not in core
    assert "langgraph" in core and "langchain-core" in core
    assert any("torch" in d for d in project["optional-dependencies"]["local"])
    assert "local" in project["optional-dependencies"]["all"][0]


def test_agent_invoke_stream_ainvoke_checkpointer_and_configurable() -> None:
    _, store = lean_store()
    chat = ScriptedChat(script=LOOP_SCRIPTS["self_ask"]())
    agent = rca.create_rag_agent(
        chat, vectorstore=store, checkpointer=InMemorySaver(), b=2, c=4, m=2, max_steps=3, **SUNAR
    )
    thread = {"configurable": {"thread_id": "t1", "retrieval": "nar", "mer": False}}
    out = agent.invoke({"question": Q}, thread)
    assert out["answer"] == "Japan" and out["trace"]["retrieval"] == "nar"
    assert out["trace"]["mer"] is None
    assert out["trace"]["steps"][0]["retrieval"]["rounds"][0]["c"] == 4  # the c= knob
    assert agent.get_state(thread).values["answer"] == "Japan"  # checkpointed
    nodes = [
        next(iter(update))
        for update in agent.stream(
            {"question": Q}, {"configurable": {"thread_id": "t2"}}, stream_mode="updates"
        )
    ]
    assert nodes[0] == "start" and nodes[-1] == "finish" and "mer" in nodes
    again = asyncio.run(agent.ainvoke({"question": Q}, {"configurable": {"thread_id": "t3"}}))
    assert again["answer"] == "Japan" and again["trace"]["retrieval"] == "sunar"
    batches = again["trace"]["steps"][0]["retrieval"]["rounds"][0]["batches"]
    assert batches and all(b["s"] == 1 for b in batches)  # ASU clustered m answers


def test_knobs_become_config_and_unknown_first_stage_combinations_fail() -> None:
    from rag_complexity_agents.api import rag_components

    _, store = lean_store()

    built = rag_components(vectorstore=store, b=3, c=5, k=2, m=4, l=6, max_steps=2)
    cfg = built.config
    assert (cfg.nar.b, cfg.nar.c, cfg.answer.passages, cfg.asu.m, cfg.mer.l) == (3, 5, 2, 4, 6)
    assert cfg.agents.max_steps == 2
    with pytest.raises(Exception, match="one first stage"):
        rag_components(vectorstore=store, retriever=store.as_retriever())


# ------------------------------------------------------------------------------ injection


def test_injected_objects_win_over_the_config_specs() -> None:
    chat = ScriptedChat(script=Script())
    equivalence = LexicalEquivalence()
    cfg = rca.Config(models={"chat": "ollama:not-there", "equivalence": "llm"})
    parts = rca.Components(
        cfg, chat=chat, embedder=DeterministicFakeEmbedding(size=8), equivalence=equivalence
    )
    assert parts.chat is chat and parts.equivalence is equivalence
    assert isinstance(parts.embedder, ExternalEmbedder) and parts.embedder.dimension == 8
    assert parts.injected == {"chat", "embedder", "equivalence"}
    derived = derive_components(parts, cfg.with_overrides({"models.equivalence": "embedding"}))
    assert derived.equivalence is equivalence and derived.embedder is parts.embedder
    assert derived.chat is chat  # the spec did not change between the two configs
    with pytest.raises(ConfigError):
        parts.inject(store=object())


def test_external_embedder_normalises_and_counts_tokens_without_a_tokenizer() -> None:
    embedder = as_embedder(DeterministicFakeEmbedding(size=16))
    rows = embedder.encode(["one text", "another text"])
    assert rows.dtype == np.float32 and rows.shape == (2, 16)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)
    assert embedder.encode([]).shape == (0, 16)
    assert embedder.count_tokens("Who directed Spirited Away?") == 5  # 4 words + '?'
    assert embedder.token_source == "words"
    same = as_embedder(embedder)
    assert same is embedder
    with pytest.raises(Exception, match="not an embedding model"):
        as_embedder(object())


def test_the_store_embeddings_are_used_by_default_and_the_graph_needs_no_torch() -> None:
    from rag_complexity_agents.api import rag_components
    from rag_complexity_agents.corpus.graph.memory import numpy_topk

    embeddings, store = lean_store()

    built = rag_components(vectorstore=store)
    assert isinstance(built.store.embedder, ExternalEmbedder)
    assert built.store.embedder.embeddings is embeddings
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(40, 8)).astype(np.float32)
    cols, sims = numpy_topk(matrix, 5)
    full = matrix @ matrix.T
    np.fill_diagonal(full, -np.inf)
    assert (cols == np.argsort(-full, axis=1, kind="stable")[:, :5]).all()
    assert np.allclose(sims, np.take_along_axis(full, cols.astype(int), axis=1))


def test_numpy_topk_matches_the_torch_kernel() -> None:
    pytest.importorskip("torch")
    from rag_complexity_agents.corpus.graph import exact_topk
    from rag_complexity_agents.corpus.graph.memory import numpy_topk

    matrix = np.random.default_rng(1).normal(size=(300, 16)).astype(np.float32)
    cols, sims = numpy_topk(matrix, 7)
    ref_cols, ref_sims = exact_topk(matrix, 7)
    assert (cols == ref_cols).mean() > 0.99 and np.allclose(sims, ref_sims, atol=1e-5)


# ------------------------------------------------------------------------------ structured output


def test_self_ask_steps_and_sub_answers_use_structured_output() -> None:
    moves = iter(
        [
            {"kind": "follow_up", "text": "Who directed Spirited Away?"},
            {"kind": "final", "text": "Japan"},
        ]
    )

    def args(prompt: Prompt) -> AIMessage:
        (tool,) = prompt.tools  # with_structured_output binds the schema as the one tool
        move = next(moves) if tool == "SelfAskMove" else {"answer": "Hayao Miyazaki"}
        return tool_call(tool, move)

    chat = ToolChat(script=Script(asu="Hayao Miyazaki", mer=MER), tool_reply=args)
    _, store = lean_store()
    out = rca.create_rag_agent(
        chat, pipeline="self_ask", vectorstore=store, retrieval="nar", mer=False
    ).invoke({"question": Q})
    trace = out["trace"]
    assert out["answer"] == "Japan" and trace["stop_reason"] == "final_answer"
    assert trace["reasoning_path"] == [["Who directed Spirited Away?", "Hayao Miyazaki"]]
    assert [c["kind"] for c in chat.calls] == ["tools"] * 3
    assert trace["notes"][0].startswith("structured output: ToolChat")
    assert trace["llm_calls"] == 3


def test_structured_output_failure_falls_back_to_text_once_and_says_so() -> None:
    def broken(prompt: Prompt) -> AIMessage:
        return tool_call(prompt.tools[0], {"unexpected": True})  # does not validate

    chat = ToolChat(script=LOOP_SCRIPTS["self_ask"](), tool_reply=broken)
    _, store = lean_store()
    agent = rca.create_rag_agent(chat, pipeline="self_ask", vectorstore=store, retrieval="nar")
    trace = agent.invoke({"question": Q})["trace"]
    kinds = [c["kind"] for c in chat.calls]
    assert kinds[0] == "tools" and kinds.count("tools") == 1  # then text only
    assert kinds[1:] == ["self_ask", "answer", "self_ask"]
    assert trace["answer"] == "Japan" and trace["llm_calls"] == 4
    assert any("structured output failed" in n for n in trace["notes"])
    second = agent.invoke({"question": Q})["trace"]  # the same context: no second try
    assert second["notes"][0].startswith("structured output: text + parse-and-repair")


def test_models_without_kv_cache_sampling_say_so_in_the_trace() -> None:
    _, store = lean_store()
    chat = ScriptedChat(script=LOOP_SCRIPTS["self_ask"]())
    agent = rca.create_rag_agent(chat, vectorstore=store, m=2, **SUNAR)
    trace = agent.invoke({"question": Q})["trace"]
    assert (
        "structured output: text + parse-and-repair (ScriptedChat has no structured output)"
        in (trace["notes"])
    )
    assert any(n.startswith("ASU: 2 separate calls per batch") for n in trace["notes"])
    off = rca.create_rag_agent(
        ToolChat(script=LOOP_SCRIPTS["self_ask"]()),
        vectorstore=store,
        config=rca.Config(agents={"structured_output": "off"}),
        **SUNAR,
    )
    assert "'off'" in off.invoke({"question": Q})["trace"]["notes"][0]


# ------------------------------------------------------------------------------ Studio, README


def test_studio_shows_every_knob_with_a_description() -> None:
    _, store = lean_store()
    agent = rca.create_rag_agent(ScriptedChat(script=Script()), vectorstore=store)
    schema = agent.get_context_jsonschema()
    assert schema is not None
    properties = schema["properties"]
    assert set(properties) == {knob.name for knob in KNOBS}
    assert all(p.get("description") for p in properties.values())
    assert properties["retrieval"]["enum"] == ["none", "first_stage", "rerank", "nar", "sunar"]
    config_schema = agent.get_config_jsonschema()
    assert "configurable" in json.dumps(config_schema)


def _readme_first_python_block() -> str:
    text = (ROOT / "README.md").read_text()
    return re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1)  # type: ignore[union-attr]


def test_readme_first_example_uses_top_level_imports_and_runs() -> None:
    code = _readme_first_python_block()
    imports = re.findall(r"^(?:from|import) (\S+)", code, re.MULTILINE)
    ours = [name for name in imports if name.startswith("rag_complexity_agents")]
    assert ours == ["rag_complexity_agents"], imports
    chat = ScriptedChat(script=LOOP_SCRIPTS["plan_execute"]())
    namespace: dict[str, Any] = {"chat_model": chat}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["result"]["answer"] == "Japan"
    assert namespace["result"]["trace"]["sub_questions"]
