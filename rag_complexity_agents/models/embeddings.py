"""Dense text encoders (sentence-transformers), loaded lazily and cached per process."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ModelNotAvailable
from .packaged import packaged_embedding_path

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

PACKAGED_PREFIX = "packaged:"


def resolve_embedding_path(spec: str) -> Path:
    """Turn an embedding spec (``packaged:<name>`` or a local directory) into a path."""
    if spec.startswith(PACKAGED_PREFIX):
        return packaged_embedding_path(spec[len(PACKAGED_PREFIX) :])
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise ModelNotAvailable(
            f"embedding model {spec!r} is neither 'packaged:all-minilm-l6-v2' nor an existing "
            "local sentence-transformers directory (models are never downloaded)"
        )
    return path


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local directory; rows are L2-normalised float32."""

    def __init__(self, path: str | Path, *, batch_size: int = 64, device: str = "cpu") -> None:
        self.path = Path(path)
        self.batch_size = batch_size
        self.device = device
        self._lock = threading.Lock()

    @cached_property
    def model(self) -> SentenceTransformer:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        try:
            return SentenceTransformer(str(self.path), device=self.device, local_files_only=True)
        except Exception as exc:  # the library raises many types for a bad directory
            raise ModelNotAvailable(
                f"could not load the sentence-transformers model at {self.path}: {exc}"
            ) from exc

    @property
    def dimension(self) -> int:
        dim = self.model.get_embedding_dimension()
        if dim is None:
            raise ModelNotAvailable(f"{self.path} does not report an embedding dimension")
        return int(dim)

    @property
    def max_tokens(self) -> int:
        length = self.model.max_seq_length
        if length is None:
            raise ModelNotAvailable(f"{self.path} does not report a maximum sequence length")
        return int(length)

    def count_tokens(self, text: str) -> int:
        return len(self.model.tokenizer.tokenize(text))

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of every token of ``text`` (no special tokens), for chunking."""
        encoded = self.model.tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
        )
        return [(int(a), int(b)) for a, b in encoded["offset_mapping"]]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = self.model.encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(vectors, dtype=np.float32)


_CACHE: dict[tuple[str, int], SentenceTransformerEmbedder] = {}
_CACHE_LOCK = threading.Lock()


def load_embedder(spec: str, *, batch_size: int = 64) -> SentenceTransformerEmbedder:
    """The process-wide embedder for ``spec`` (weights load on first use, not here)."""
    path = resolve_embedding_path(spec)
    key = (str(path), batch_size)
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = SentenceTransformerEmbedder(path, batch_size=batch_size)
        return _CACHE[key]
