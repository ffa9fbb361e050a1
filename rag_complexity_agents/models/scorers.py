"""Query–document scorers for re-ranking (NAR's ``score``): bi-encoder, SPLADE, cross-encoder.

No cross-encoder ships offline, so the default is the bi-encoder (cosine of the packaged
MiniLM embeddings); SPLADE-tiny gives a lexical-expansion signal that differs from the dense
first stage and the graph; a cross-encoder is used when the user has one on disk.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, ModelNotAvailable
from ..optional import require
from ..types import Chunk
from .base import Embedder, Scorer
from .packaged import packaged_splade_path

VectorLookup = Callable[[Sequence[str]], np.ndarray]


class BiEncoderScorer:
    """Cosine similarity between query and document embeddings.

    ``vector_lookup`` returns stored document vectors by chunk id (a collection's embedding
    matrix), so scoring a batch costs one query encoding instead of re-encoding documents.
    """

    name = "bi-encoder"

    def __init__(self, embedder: Embedder, vector_lookup: VectorLookup | None = None) -> None:
        self.embedder = embedder
        self.vector_lookup = vector_lookup

    def score(self, query: str, docs: Sequence[Chunk]) -> np.ndarray:
        if not docs:
            return np.zeros(0, dtype=np.float32)
        encode_query = getattr(self.embedder, "encode_query", None)  # asymmetric models
        query_vector = encode_query(query) if encode_query else self.embedder.encode([query])[0]
        if self.vector_lookup is not None:
            doc_vectors = self.vector_lookup([doc.id for doc in docs])
        else:
            doc_vectors = self.embedder.encode([doc.text for doc in docs])
        scores: np.ndarray = np.asarray(doc_vectors, dtype=np.float32) @ query_vector
        return scores


class SpladeScorer:
    """SPLADE: vector = max over tokens of log1p(relu(MLM logits)) · mask; score = dot product.

    Document vectors are cached by chunk id (a document is scored for many sub-questions).
    """

    name = "splade"

    def __init__(self, model_dir: str | Path, *, max_length: int = 256, batch_size: int = 32):
        self.model_dir = Path(model_dir)
        self.max_length = max_length
        self.batch_size = batch_size
        self._doc_cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    @cached_property
    def _model(self) -> tuple[Any, Any]:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        hf = require("transformers", "the SPLADE scorer")
        try:
            tokenizer = hf.AutoTokenizer.from_pretrained(str(self.model_dir), local_files_only=True)
            model = hf.AutoModelForMaskedLM.from_pretrained(
                str(self.model_dir), local_files_only=True
            ).eval()
        except Exception as exc:
            raise ModelNotAvailable(f"could not load SPLADE from {self.model_dir}: {exc}") from exc
        return tokenizer, model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        tokenizer, model = self._model
        out = []
        for start in range(0, len(texts), self.batch_size):
            enc = tokenizer(
                list(texts[start : start + self.batch_size]),
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            with torch.inference_mode():
                logits = model(**enc).logits
            # log1p(relu(.)) is monotone: pool the raw logits over tokens first, so the
            # element-wise work is on batch x vocab instead of batch x tokens x vocab.
            padding = enc["attention_mask"].unsqueeze(-1) == 0
            pooled = logits.masked_fill(padding, float("-inf")).amax(dim=1)
            out.append(torch.log1p(torch.relu(pooled)).numpy())
        return np.concatenate(out).astype(np.float32)

    def score(self, query: str, docs: Sequence[Chunk]) -> np.ndarray:
        if not docs:
            return np.zeros(0, dtype=np.float32)
        with self._lock:
            missing = [doc for doc in docs if doc.id not in self._doc_cache]
            if missing:
                vectors = self.encode([doc.text for doc in missing])
                for doc, vector in zip(missing, vectors, strict=True):
                    self._doc_cache[doc.id] = vector
            doc_matrix = np.stack([self._doc_cache[doc.id] for doc in docs])
            query_vector = self.encode([query])[0]
        scores: np.ndarray = doc_matrix @ query_vector
        return scores


class CrossEncoderScorer:
    """A sentence-transformers CrossEncoder from a local path (never downloaded)."""

    name = "cross-encoder"

    def __init__(self, path: str | Path, *, batch_size: int = 32) -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_dir():
            raise ModelNotAvailable(
                f"cross-encoder {str(path)!r} is not a local directory; download it on a "
                "connected machine (e.g. cross-encoder/ms-marco-MiniLM-L-6-v2) and pass its path"
            )
        self.batch_size = batch_size

    @cached_property
    def _model(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        st = require("sentence_transformers", "the cross-encoder scorer")
        try:
            return st.CrossEncoder(str(self.path), device="cpu", local_files_only=True)
        except Exception as exc:
            raise ModelNotAvailable(f"could not load cross-encoder {self.path}: {exc}") from exc

    def score(self, query: str, docs: Sequence[Chunk]) -> np.ndarray:
        if not docs:
            return np.zeros(0, dtype=np.float32)
        pairs = [(query, doc.text) for doc in docs]
        scores = self._model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
        return np.asarray(scores, dtype=np.float32).reshape(len(docs))


def load_scorer(
    spec: str, *, embedder: Embedder, vector_lookup: VectorLookup | None = None
) -> Scorer:
    """``bi-encoder`` | ``splade`` | ``cross-encoder:<local path>``."""
    if spec == "bi-encoder":
        return BiEncoderScorer(embedder, vector_lookup)
    if spec == "splade":
        return SpladeScorer(packaged_splade_path())
    if spec.startswith("cross-encoder:"):
        return CrossEncoderScorer(spec.split(":", 1)[1])
    raise ConfigError(
        f"unknown scorer {spec!r}; use 'bi-encoder', 'splade' or 'cross-encoder:<local path>'"
    )
