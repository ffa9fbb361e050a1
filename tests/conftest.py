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
from rag_complexity_agents.models.embeddings import (
    SentenceTransformerEmbedder,
    load_embedder,
)


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    return load_embedder("packaged:all-minilm-l6-v2")


@pytest.fixture
def config(tmp_path: Path) -> Config:
    """A config whose collections live in a fresh temporary directory (models stay shared)."""
    return Config(corpus={"home": tmp_path / "home"}, graph={"k": 8})
