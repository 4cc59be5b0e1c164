"""A plain numpy forward pass of BERT, to check converted GGUF files against.

Independent of llama.cpp: reads the original weights and does the maths by hand (embeddings
with real token types, post-norm encoder layers with exact GELU), then either mean pooling and
L2 normalisation (a sentence embedder) or pooler + classifier (a cross-encoder reranker).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

# Texts converted models are checked on: prose, code, another script, a long text.
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "def check_token(request): return request.headers.get('X-Api-Key') in VALID_KEYS",
    "Привет, мир: valid Cyrillic text goes through WordPiece too.",
    "Tomatoes need full sun and deep watering twice a week. " * 20,
]


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _gelu(x: np.ndarray) -> np.ndarray:
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


class BertReference:
    """Mean-pooled, normalised sentence vectors, or a reranker's logit, from token ids."""

    def __init__(self, model_dir: Path, weights: dict[str, np.ndarray] | None = None,
                 hp: dict | None = None) -> None:
        if weights is None:
            from safetensors.numpy import load_file

            weights = load_file(str(model_dir / "model.safetensors"))
        self.hp = hp if hp is not None else json.loads((model_dir / "config.json").read_text())
        self.w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in weights.items()}

    def embed(self, ids: list[int], pooling: str = "mean") -> np.ndarray:
        hidden = self.hidden(ids, [0] * len(ids))
        pooled = hidden.mean(0) if pooling == "mean" else hidden[0]
        return pooled / np.linalg.norm(pooled)

    def rank(self, ids: list[int], types: list[int]) -> float:
        """A cross-encoder's relevance logit: tanh(pooler · [CLS]) then the classifier."""
        w = self.w
        cls = self.hidden(ids, types)[0]
        pooled = np.tanh(w["pooler.dense.weight"] @ cls + w["pooler.dense.bias"])
        return float((w["classifier.weight"] @ pooled + w["classifier.bias"])[0])

    def hidden(self, ids: list[int], types: list[int]) -> np.ndarray:
        w, hp = self.w, self.hp
        eps = hp["layer_norm_eps"]
        n_head = hp["num_attention_heads"]
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][: len(ids)]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        for i in range(hp["num_hidden_layers"]):
            p = f"encoder.layer.{i}."

            def lin(name: str, v: np.ndarray, p: str = p) -> np.ndarray:
                return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q = lin("attention.self.query", x)
            k = lin("attention.self.key", x)
            v = lin("attention.self.value", x)
            n, d = q.shape
            hd = d // n_head
            q = q.reshape(n, n_head, hd).transpose(1, 0, 2)
            k = k.reshape(n, n_head, hd).transpose(1, 0, 2)
            v = v.reshape(n, n_head, hd).transpose(1, 0, 2)
            att = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(1, 0, 2).reshape(n, d)
            x = _layer_norm(
                lin("attention.output.dense", ctx) + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                eps,
            )
            h = _gelu(lin("intermediate.dense", x))
            x = _layer_norm(
                lin("output.dense", h) + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                eps,
            )
        return x
