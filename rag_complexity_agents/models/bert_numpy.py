"""Sentence vectors of a plain BERT sentence-transformers model, computed with NumPy.

Answering a question embeds a few short texts (the queries, ASU's sampled answers).
Importing sentence-transformers for that, with torch, transformers, scikit-learn and scipy
behind it, took most of a fresh ``rca ask`` process's start-up. A
:class:`NumpyBertEncoder` reads the same files (``model.safetensors``, ``tokenizer.json``)
and runs the same computation as sentence-transformers for a directory of the plain layout
(:func:`plain_bert_layout`: BERT, mean pooling over the attention mask, L2 normalisation) in
float32 NumPy: its vectors equal sentence-transformers' up to float rounding (< 1e-5 per
component). It imports only ``tokenizers`` and ``safetensors`` (both installed with
transformers) and loads in well under a second.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelNotAvailable
from ..optional import require

#: The modules of a plain sentence-transformers directory, in order.
_PLAIN_MODULES = (
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
)
#: Keys of ``sentence_bert_config.json`` whose meaning this encoder reproduces.
_TRANSFORMER_KEYS = {"max_seq_length", "do_lower_case"}
#: Texts per forward pass of :meth:`NumpyBertEncoder.encode` (sorted by length, padded).
BATCH_SIZE = 32


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def plain_bert_layout(path: Path) -> bool:
    """Whether ``path`` is a sentence-transformers directory that :class:`NumpyBertEncoder`
    computes exactly: a BERT with absolute positions and exact GELU (``model.safetensors``,
    ``tokenizer.json``), mean pooling only, then normalisation; no prompts, no lower-casing
    by sentence-transformers. Anything else (or unreadable) is False."""
    try:
        modules = _json(path / "modules.json")
        if tuple(m["type"] for m in modules) != _PLAIN_MODULES or modules[0]["path"] != "":
            return False
        pooling = _json(path / modules[1]["path"] / "config.json")
        modes = {key for key, on in pooling.items() if key.startswith("pooling_mode") and on}
        if modes != {"pooling_mode_mean_tokens"} or not pooling.get("include_prompt", True):
            return False
        transformer = _json(path / "sentence_bert_config.json")
        if set(transformer) - _TRANSFORMER_KEYS or transformer.get("do_lower_case"):
            return False
        config = _json(path / "config.json")
        if (
            config.get("model_type") != "bert"
            or config.get("hidden_act") != "gelu"
            or config.get("position_embedding_type", "absolute") != "absolute"
        ):
            return False
        st_config = path / "config_sentence_transformers.json"
        if st_config.is_file():
            extra = _json(st_config)
            if any((extra.get("prompts") or {}).values()) or extra.get("default_prompt_name"):
                return False
        return (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file()
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return False


def _gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU, x * Phi(x) = x / 2 * (1 + erf(x / sqrt 2)), in place on float32 ``x``.

    erf by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7, below float32 rounding of
    the activations that follow)."""
    z = np.abs(x) * np.float32(1.0 / math.sqrt(2.0))
    t = 1.0 / (1.0 + np.float32(0.3275911) * z)
    poly = t * np.float32(1.061405429) + np.float32(-1.453152027)
    poly = poly * t + np.float32(1.421413741)
    poly = poly * t + np.float32(-0.284496736)
    poly = poly * t + np.float32(0.254829592)
    poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # erfc(|x| / sqrt 2)
    # Phi(x) = 1 - erfc/2 for x >= 0, erfc/2 for x < 0
    half = np.where(x >= 0, np.float32(1.0) - np.float32(0.5) * poly, np.float32(0.5) * poly)
    x *= half
    return x


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return np.asarray(centred / np.sqrt(var + eps) * weight + bias, dtype=np.float32)


def _layer(w: dict[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
    """Layer ``i``'s weights from the model's weights ``w``, matrices transposed for
    ``x @ W``, query, key and value fused into one."""
    p = f"encoder.layer.{i}."
    att = p + "attention.self."
    return {
        "qkv": np.ascontiguousarray(
            np.concatenate([w[att + n + ".weight"] for n in ("query", "key", "value")]).T
        ),
        "qkv_b": np.concatenate([w[att + n + ".bias"] for n in ("query", "key", "value")]),
        "out": np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
        "out_b": w[p + "attention.output.dense.bias"],
        "ln1_w": w[p + "attention.output.LayerNorm.weight"],
        "ln1_b": w[p + "attention.output.LayerNorm.bias"],
        "up": np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
        "up_b": w[p + "intermediate.dense.bias"],
        "down": np.ascontiguousarray(w[p + "output.dense.weight"].T),
        "down_b": w[p + "output.dense.bias"],
        "ln2_w": w[p + "output.LayerNorm.weight"],
        "ln2_b": w[p + "output.LayerNorm.bias"],
    }


class NumpyBertEncoder:
    """The sentence vectors of a :func:`plain_bert_layout` directory: rows are L2-normalised
    float32, texts truncated to the model's ``max_seq_length`` tokens (special tokens
    included), like sentence-transformers. The tokenizer loads in the constructor (which
    needs ``tokenizers``, ``safetensors`` and ``threadpoolctl``: MissingDependency without
    them), the weights on the first :meth:`encode`.

    Meant for a few short texts at a time: :meth:`encode` runs on one BLAS thread, because
    OpenBLAS's threads spin-wait like llama.cpp's (on a busy machine a query took 118 ms on
    two threads, 15 ms on one).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not plain_bert_layout(self.path):
            raise ModelNotAvailable(
                f"{self.path} is not a plain BERT + mean pooling + normalise "
                "sentence-transformers directory"
            )
        purpose = "the NumPy BERT encoder"
        tokenizers = require("tokenizers", purpose)
        self._safetensors = require("safetensors.numpy", purpose)
        #: BLAS thread pools (threadpoolctl): :meth:`encode` runs on one thread
        self._blas = require("threadpoolctl", purpose).ThreadpoolController()
        config = _json(self.path / "config.json")
        self.dimension = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.layer_count = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.max_tokens = self._max_length(config)
        self.tokenizer = tokenizers.Tokenizer.from_file(str(self.path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_tokens)

    @cached_property
    def _weights(self) -> tuple[dict[str, np.ndarray], list[dict[str, np.ndarray]]]:
        """The embedding weights by name, and per layer its weights (see :func:`_layer`)."""
        raw = self._safetensors.load_file(str(self.path / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in raw else ""
        weights = {
            key[len(prefix) :]: np.ascontiguousarray(value, dtype=np.float32)
            for key, value in raw.items()
            if key.startswith(prefix) and value.dtype.kind == "f"
        }
        return weights, [_layer(weights, i) for i in range(self.layer_count)]

    def _max_length(self, config: dict[str, Any]) -> int:
        """sentence-transformers' truncation length: ``max_seq_length`` (else the
        tokenizer's ``model_max_length``), capped by the position embeddings."""
        limits = [int(config["max_position_embeddings"])]
        seq = _json(self.path / "sentence_bert_config.json").get("max_seq_length")
        if seq is not None:
            limits.append(int(seq))
        tokenizer_config = self.path / "tokenizer_config.json"
        if tokenizer_config.is_file():
            model_max = _json(tokenizer_config).get("model_max_length")
            if isinstance(model_max, int) and seq is None:
                limits.append(model_max)
        return min(limits)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One normalised row per text, in order."""
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            rows = order[start : start + BATCH_SIZE]
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=bool)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = True
            with self._blas.limit(limits=1, user_api="blas"):
                out[rows] = self._forward(ids, mask)
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """BERT, mean pooling and normalisation of a padded batch (``mask``: real tokens)."""
        w, layers = self._weights
        batch, width = ids.shape
        heads, hidden = self.heads, self.dimension
        size = hidden // heads
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:width]
            + w["embeddings.token_type_embeddings.weight"][0]
        ).reshape(batch * width, hidden)
        x = _layer_norm(
            x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps
        )
        # padded keys get the most negative float, as in transformers' additive mask
        key_bias = np.where(mask, 0.0, np.finfo(np.float32).min).astype(np.float32)
        key_bias = key_bias[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(size))
        for layer in layers:
            qkv = (x @ layer["qkv"] + layer["qkv_b"]).reshape(batch, width, 3, heads, size)
            # (batch, heads, width, size) each, contiguous so that matmul runs on BLAS
            q, k, v = (np.ascontiguousarray(qkv[:, :, j].transpose(0, 2, 1, 3)) for j in range(3))
            scores = (q * scale) @ np.ascontiguousarray(k.transpose(0, 1, 3, 2)) + key_bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * width, hidden)
            attended = context @ layer["out"] + layer["out_b"]
            x = _layer_norm(attended + x, layer["ln1_w"], layer["ln1_b"], self.eps)
            inner = _gelu(x @ layer["up"] + layer["up_b"])
            out = inner @ layer["down"] + layer["down_b"]
            x = _layer_norm(out + x, layer["ln2_w"], layer["ln2_b"], self.eps)
        weights = mask.reshape(batch, width, 1).astype(np.float32)
        pooled = (x.reshape(batch, width, hidden) * weights).sum(axis=1)
        pooled /= np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)
