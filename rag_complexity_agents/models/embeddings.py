"""Dense text encoders: sentence-transformers models (loaded lazily and cached per process) and
the user's own embedding objects (LangChain ``Embeddings``, LlamaIndex ``BaseEmbedding``)
adapted to the :class:`~.base.Embedder` protocol."""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..errors import InputError, ModelNotAvailable
from ..optional import require
from .base import Embedder
from .bert_numpy import NumpyBertEncoder, plain_bert_layout
from .packaged import packaged_embedding_path

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

PACKAGED_PREFIX = "packaged:"
#: ``encode`` of at most this many texts (queries, ASU's answer pairs) runs on the NumPy
#: encoder when the model has its layout; larger batches (indexing) on sentence-transformers,
#: whose multi-threaded torch kernels were 1.5x faster there (154 demo chunks). The two agree
#: to float rounding (< 1e-6 seen), so which one encodes a text does not matter.
NUMPY_MAX_TEXTS = 8


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
    """A sentence-transformers model from a local directory; rows are L2-normalised float32.

    A few texts at a time (a query; up to :data:`NUMPY_MAX_TEXTS`) are encoded by the
    model's :class:`~.bert_numpy.NumpyBertEncoder` twin when the directory has its plain
    layout (the packaged MiniLM does): the same vectors up to float rounding, without
    importing torch and sentence-transformers, which took most of a fresh ``rca ask``
    process's start-up. Larger batches, other layouts and the tokenizer features use
    sentence-transformers (:attr:`model`).

    :meth:`encode_query` remembers the vectors of the last :attr:`QUERY_CACHE_SIZE` single
    texts: one retrieval embeds its query for the dense first stage and again for every NAR
    batch the bi-encoder scores.
    """

    QUERY_CACHE_SIZE = 256

    def __init__(self, path: str | Path, *, batch_size: int = 64, device: str = "cpu") -> None:
        self.path = Path(path)
        self.batch_size = batch_size
        self.device = device
        self._lock = threading.Lock()
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queries_lock = threading.Lock()

    @cached_property
    def model(self) -> SentenceTransformer:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        st = require("sentence_transformers", "the sentence-transformers embedder")
        try:
            model: SentenceTransformer = st.SentenceTransformer(
                str(self.path), device=self.device, local_files_only=True
            )
            return model
        except Exception as exc:  # the library raises many types for a bad directory
            raise ModelNotAvailable(
                f"could not load the sentence-transformers model at {self.path}: {exc}"
            ) from exc

    @cached_property
    def numpy_encoder(self) -> NumpyBertEncoder | None:
        """The NumPy twin of :attr:`model` (weights load on first use); None when the
        directory does not have the plain BERT + mean pooling + normalise layout."""
        return NumpyBertEncoder(self.path) if plain_bert_layout(self.path) else None

    @property
    def dimension(self) -> int:
        if self.numpy_encoder is not None:
            return self.numpy_encoder.dimension
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
            return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`encode` of a non-empty list; the caller holds ``_lock``."""
        if len(texts) <= NUMPY_MAX_TEXTS and self.numpy_encoder is not None:
            return self.numpy_encoder.encode(texts)
        vectors = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        """``encode([text])[0]`` (read-only), from the cache when ``text`` was seen lately.

        A single short text is encoded on one thread (BLAS or torch): their threads
        spin-wait like llama.cpp's, so on a busy machine two torch threads took 13x longer
        (1.7 s vs 0.13 s per query, load average 12 on 2 cores). The vector equals the
        multi-threaded one up to float rounding (~1e-7; no top-20 ranking of 89 test queries
        changed)."""
        with self._queries_lock:
            vector = self._queries.get(text)
            if vector is not None:
                self._queries.move_to_end(text)
                return vector
        one_thread = nullcontext() if self.numpy_encoder is not None else _torch_threads(1)
        with self._lock, one_thread:  # the NumPy encoder always runs on one BLAS thread
            vector = self._encode([text])[0]
        vector.flags.writeable = False
        with self._queries_lock:
            self._queries[text] = vector
            while len(self._queries) > self.QUERY_CACHE_SIZE:
                self._queries.popitem(last=False)
        return cast(np.ndarray, vector)


@contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    """Run the block with ``threads`` torch intra-op threads, then restore the setting."""
    import torch

    before = torch.get_num_threads()
    if before == threads:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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


_WORD_OR_MARK = re.compile(r"\w+|[^\w\s]")


class ExternalEmbedder:
    """A LangChain ``Embeddings`` (``embed_documents`` / ``embed_query``) or a LlamaIndex
    ``BaseEmbedding`` (``get_text_embedding_batch`` / ``get_query_embedding``) as an
    :class:`~.base.Embedder`: rows are L2-normalised float32.

    Token counts and offsets come from the object's tokenizer when it exposes one (e.g. a
    sentence-transformers client); otherwise words and punctuation marks count as tokens, an
    approximation (subword tokenizers count somewhat more) that ``token_source`` reports.
    """

    def __init__(self, embeddings: Any) -> None:
        if not (
            hasattr(embeddings, "embed_documents")
            or hasattr(embeddings, "get_text_embedding_batch")
        ):
            raise InputError(
                f"{type(embeddings).__name__} is not an embedding model: pass a LangChain "
                "Embeddings or a LlamaIndex BaseEmbedding"
            )
        self.embeddings = embeddings
        self.tokenizer = _tokenizer_of(embeddings)
        self.token_source = "tokenizer" if self.tokenizer is not None else "words"

    @cached_property
    def dimension(self) -> int:
        return int(self.encode(["dimension"]).shape[1])

    def _rows(self, rows: Any) -> np.ndarray:
        matrix = np.asarray(rows, dtype=np.float32)
        if matrix.ndim != 2:
            raise ModelNotAvailable(
                f"{type(self.embeddings).__name__} returned embeddings of shape {matrix.shape}"
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return np.ascontiguousarray(matrix / np.where(norms == 0, 1.0, norms), dtype=np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if hasattr(self.embeddings, "embed_documents"):
            return self._rows(self.embeddings.embed_documents(list(texts)))
        return self._rows(self.embeddings.get_text_embedding_batch(list(texts)))

    def encode_query(self, text: str) -> np.ndarray:
        """The query vector the way the model embeds queries (some models prefix them)."""
        if hasattr(self.embeddings, "embed_query"):
            vector = self.embeddings.embed_query(text)
        else:
            vector = self.embeddings.get_query_embedding(text)
        return cast(np.ndarray, self._rows([vector])[0])

    def count_tokens(self, text: str) -> int:
        return len(self.token_offsets(text))

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of every token of ``text``, for chunking."""
        if self.tokenizer is not None:
            try:
                encoded = self.tokenizer(
                    text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
                )
                return [(int(a), int(b)) for a, b in encoded["offset_mapping"]]
            except (TypeError, KeyError, NotImplementedError, ValueError):
                pass  # a tokenizer without offsets: fall back to words
        return [m.span() for m in _WORD_OR_MARK.finditer(text)]


def _tokenizer_of(embeddings: Any) -> Any:
    """The Hugging Face tokenizer behind an embedding object, if it exposes one."""
    for holder in (
        embeddings,
        getattr(embeddings, "client", None),
        getattr(embeddings, "_client", None),
    ):
        tokenizer = getattr(holder, "tokenizer", None)
        if callable(tokenizer):
            return tokenizer
    return None


def as_embedder(embeddings: Any) -> Embedder:
    """``embeddings`` as an :class:`~.base.Embedder`: our own embedders (anything with
    ``encode`` / ``dimension`` / ``count_tokens``) as they are, a LangChain ``Embeddings`` or a
    LlamaIndex ``BaseEmbedding`` through :class:`ExternalEmbedder`."""
    kind = type(embeddings)  # class attributes only: an instance check would load the model
    if all(hasattr(kind, name) for name in ("encode", "dimension", "count_tokens")):
        return cast(Embedder, embeddings)
    return ExternalEmbedder(embeddings)
