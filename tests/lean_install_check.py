"""The lean install, proven: run as a script, it blocks torch, transformers,
sentence-transformers, llama.cpp, safetensors and threadpoolctl (an import hook raises
ImportError for them, as if they were not installed), then answers with every loop and
retrieves with the SUNAR retriever over a user's LangChain ``Embeddings`` +
``InMemoryVectorStore`` and chat model. It prints ``LEAN OK`` when everything worked and no
blocked module was imported. Used by tests/test_dropin.py."""

from __future__ import annotations

import importlib.abc
import sys
from pathlib import Path

#: What the [local] extra installs (safetensors and threadpoolctl: the NumPy MiniLM twin).
BLOCKED = (
    "torch",
    "transformers",
    "sentence_transformers",
    "llama_cpp",
    "safetensors",
    "threadpoolctl",
)


class BlockHeavyImports(importlib.abc.MetaPathFinder):
    """A meta-path finder that makes the blocked libraries look uninstalled."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"No module named {name!r} (blocked: lean install)")
        return None


def main() -> None:
    sys.meta_path.insert(0, BlockHeavyImports())
    sys.path.insert(0, str(Path(__file__).parent))
    from agent_fakes import ScriptedChat
    from dropin_fakes import LOOP_SCRIPTS, lean_store

    from rag_complexity_agents import Components, Config, SunarLangChainRetriever, create_rag_agent
    from rag_complexity_agents.errors import MissingDependency

    embeddings, store = lean_store()
    question = "Where was the director of Spirited Away born?"
    for loop, script in LOOP_SCRIPTS.items():
        chat = ScriptedChat(script=script())
        agent = create_rag_agent(chat, pipeline=loop, vectorstore=store, b=2, c=4, m=2)
        out = agent.invoke({"question": question})
        assert out["answer"], (loop, out)
        assert out["trace"]["loop"] == loop, out["trace"]
        print(loop, "->", out["answer"], out["trace"]["retrieval"])
    chat = ScriptedChat(script=LOOP_SCRIPTS["self_ask"]())
    retriever = SunarLangChainRetriever.from_defaults(
        llm=chat, vectorstore=store, embeddings=embeddings, k=3, b=2, c=4, m=2
    )
    docs = retriever.invoke("Who directed Spirited Away?")
    assert len(docs) == 3 and retriever.last_trace["retriever"] == "sunar", docs
    assert {d.metadata["provenance"] for d in docs} <= {"first_stage", "neighbour", "backfill"}
    try:  # the packaged embedder needs the [local] extra: a one-line error says so
        _ = Components(Config()).embedder.dimension
    except MissingDependency as exc:
        assert "rag-complexity-agents[local]" in str(exc) and "\n" not in str(exc), exc
    else:
        raise AssertionError("the packaged embedder loaded without sentence-transformers")
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not loaded, loaded
    print("LEAN OK")


if __name__ == "__main__":
    main()
