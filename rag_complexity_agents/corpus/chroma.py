"""Chroma glue for a collection: our embedder as Chroma's embedding function, chunk metadata."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..models.embeddings import SentenceTransformerEmbedder
from ..types import Chunk


def chroma_metadata(chunk: Chunk) -> dict[str, str | int | float | bool]:
    """Chroma accepts scalar metadata only; other values are stored as JSON strings."""
    out: dict[str, str | int | float | bool] = {"title": chunk.title}
    for key, value in chunk.metadata.items():
        if isinstance(value, str | int | float | bool):
            out[key] = value
        elif value is not None:
            out[key] = json.dumps(value, ensure_ascii=False)
    return out


class ChromaEmbeddingFunction:
    """Chroma embedding function backed by our encoder (Chroma's default would download one)."""

    def __init__(self, embedder: SentenceTransformerEmbedder) -> None:
        self._embedder = embedder

    def __call__(self, input: Sequence[str]) -> list[np.ndarray]:
        return list(self._embedder.encode(list(input)))

    def embed_query(self, input: Sequence[str]) -> list[np.ndarray]:
        return self(input)

    @staticmethod
    def name() -> str:
        return "rag-complexity-agents"

    def get_config(self) -> dict[str, Any]:
        return {"path": str(self._embedder.path)}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> ChromaEmbeddingFunction:
        return ChromaEmbeddingFunction(SentenceTransformerEmbedder(config["path"]))

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine"]

    def is_legacy(self) -> bool:
        return False
