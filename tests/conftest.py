"""Shared fixtures: real packaged models, temporary collection homes, no network."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["LANGSMITH_TRACING"] = "false"
os.environ["LANGCHAIN_TRACING_V2"] = "false"
os.environ.pop("RCA_CONFIG", None)

from pathlib import Path

import pytest

from rag_complexity_agents.config import Config
from rag_complexity_agents.models import packaged
from rag_complexity_agents.models.embeddings import (
    SentenceTransformerEmbedder,
    load_embedder,
)

# The suite runs on the packaged 0.5B model whatever else is installed: 'auto' would pick the
# 1.5B after `make demo`, and the suite's time and figures are the 0.5B's.
UNPINNED_AUTO = packaged.AUTO_CHAT_MODELS
packaged.AUTO_CHAT_MODELS = tuple(m for m in UNPINNED_AUTO if m != packaged.QWEN15)


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    return load_embedder("packaged:all-minilm-l6-v2")


@pytest.fixture
def config(tmp_path: Path) -> Config:
    """A config whose collections live in a fresh temporary directory (models stay shared)."""
    return Config(corpus={"home": tmp_path / "home"}, graph={"k": 8})


@pytest.fixture(scope="session")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A collection home holding the demo corpus as collection ``demo`` (graph k=16), built once
    per test session; copy it with ``shutil.copytree`` before writing to it."""
    from rag_complexity_agents.corpus.demo import DEMO_CORPUS
    from rag_complexity_agents.corpus.documents import iter_documents
    from rag_complexity_agents.corpus.store import CorpusStore

    home = tmp_path_factory.mktemp("demo-home")
    store = CorpusStore.open_or_create("demo", Config(corpus={"home": home}, graph={"k": 16}))
    store.ingest(iter_documents(DEMO_CORPUS), progress=False)
    return home


@pytest.fixture
def demo_collection_config(demo_home: Path) -> Config:
    """A read-only config on the shared demo collection (packaged models, CPU defaults)."""
    return Config(corpus={"home": demo_home}, collection="demo", graph={"k": 16})
