"""all-MiniLM-L6-v2 in numpy: a 6-layer BERT encoder, mean pooling over the tokens, L2 norm (no torch).

The weights are read with safetensors' numpy API and the text cut with ``tokenizers`` (the model's own
``tokenizer.json``); both are data, nothing of the package that shipped them is imported. The forward pass is
the one of Hugging Face's ``BertModel`` in eval mode (no dropout), with GELU's exact (erf) form, and
sentence-transformers' pooling (``1_Pooling/config.json``: mean of the token vectors, padding masked out),
then ``normalize``: each vector has length 1, so a dot product is the cosine.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

MAX_TOKENS = 256  # sentence_bert_config.json's max_seq_length: longer text is cut, as sentence-transformers does


def _erf(x: np.ndarray) -> np.ndarray:
    """erf by Abramowitz & Stegun 7.1.26 (error under 1.5e-7, well under float32 noise here)."""
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-x * x))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class MiniLM:
    """The encoder, loaded from a folder holding ``model.safetensors``, ``tokenizer.json`` and ``config.json``."""

    def __init__(self, folder: Path):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        weights = load_file(str(folder / "model.safetensors"))
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items()}
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()

    def ids(self, text: str) -> list[int]:
        """The token ids of ``text`` ([CLS] … [SEP]), as the forward pass sees them."""
        return self.tokenizer.encode(text).ids

    def encode(self, texts: list[str]) -> np.ndarray:
        """One unit vector (384 floats) per text.

        One BLAS thread: the matrices of a sentence are small, and BLAS's threads spinning for a core cost 25x
        on a busy machine (measured at load 20: 94 ms a product with threads, 3.5 ms with one)."""
        from threadpoolctl import threadpool_limits

        if not texts:
            return np.zeros((0, 384), np.float32)
        with threadpool_limits(1):
            return np.stack([self._one(self.ids(t)) for t in texts])

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        return _layer_norm(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"], self.eps)

    def _one(self, ids: list[int]) -> np.ndarray:
        # One text at a time: no padding, so no attention mask, and mean pooling is a plain mean.
        w, n = self.w, len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._norm(x, "embeddings.LayerNorm")
        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            x = self._norm(x + self._attention(x, f"{p}.attention"), f"{p}.attention.output.LayerNorm")
            h = _gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = self._norm(x + self._linear(h, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        pooled = x.mean(0)
        return (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)

    def _attention(self, x: np.ndarray, p: str) -> np.ndarray:
        n, width = x.shape
        d = width // self.heads

        def split(t: np.ndarray) -> np.ndarray:
            return t.reshape(n, self.heads, d).transpose(1, 0, 2)

        q, k, v = (split(self._linear(x, f"{p}.self.{m}")) for m in ("query", "key", "value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ v).transpose(1, 0, 2).reshape(n, width)
        return self._linear(context, f"{p}.output.dense")
