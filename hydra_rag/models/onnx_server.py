"""The ONNX Runtime backend of an embedder sidecar: the same OpenAI-compatible
`POST /v1/embeddings` as llama-cpp-python's server, for a model `convert_onnx` wrote (the
tokenizer travels inside it). Run by `sidecar_server --backend onnx`, behind the same key, guard,
health route and idle exit as every sidecar.

Texts are tokenized with the Hugging Face `tokenizers` library (the model's own tokenizer.json),
cut to the context like llama.cpp cuts them, and run one at a time (no padding);
ONNX Runtime's threads sleep when they wait (no spinning), so that a busy machine never makes
more threads slower than fewer.
"""

from __future__ import annotations

import argparse
import math
import threading
from typing import Any

from pydantic import BaseModel


class EmbeddingRequest(BaseModel):
    input: str | list[str]
    model: str | None = None


class OnnxEmbedder:
    """One ONNX session and its tokenizer."""

    def __init__(self, path: str, threads: int, n_ctx: int, spin: bool = False) -> None:
        """`spin`: let ONNX Runtime's threads spin while they wait (only benchmarks ask)."""
        from pathlib import Path

        import onnxruntime as ort

        from hydra_rag.models.convert_onnx import MAX_TOKENS_KEY, carried_tokenizer, read_meta

        meta = read_meta(Path(path))
        self.tokenizer = carried_tokenizer(meta)
        self.limit = min(n_ctx, int(meta.get(MAX_TOKENS_KEY, n_ctx)))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        for scope in ("intra_op", "inter_op"):
            opts.add_session_config_entry(f"session.{scope}.allow_spinning",
                                          "1" if spin else "0")
        self.session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        self.dims = int(self.session.get_outputs()[0].shape[-1])

    def ids(self, texts: list[str]) -> list[list[int]]:
        out = []
        for enc in self.tokenizer.encode_batch(texts):
            ids = list(enc.ids)
            if len(ids) > self.limit:  # as llama.cpp does: the first tokens of the context
                ids = ids[: self.limit]
            out.append(ids)
        return out

    def embed(self, texts: list[str]) -> tuple[list[list[float]], int]:
        """Pooled vectors, in the order of `texts`, and the tokens read. One text per run:
        the int8 model quantises its activations per run, so a text padded beside others got
        another vector (cosine 0.991 to its own), and one at a time was no slower."""
        import numpy as np

        ids = self.ids(texts)
        vecs = []
        for one in ids:
            tokens = np.asarray([one], np.int64)
            out = self.session.run(None, {"input_ids": tokens,
                                          "attention_mask": np.ones_like(tokens)})[0]
            vecs.append(out[0].tolist())
        return vecs, sum(len(x) for x in ids)


def onnx_app(args: argparse.Namespace, threads: int) -> tuple[Any, Any, Any]:
    """The embeddings app, its self-test and its timing (`speed(text)`, as llama.cpp's)."""
    from fastapi import FastAPI, HTTPException

    if args.role != "embed":
        raise SystemExit("the ONNX backend serves embedders only")
    model = OnnxEmbedder(args.model, threads, args.n_ctx)
    lock = threading.Lock()
    app = FastAPI()

    def self_test() -> None:
        vecs, _ = model.embed(["self-test"])
        if len(vecs[0]) != model.dims or not all(math.isfinite(x) for x in vecs[0]):
            raise SystemExit("self-test: the embedder gave no valid vector")

    @app.post("/v1/embeddings")
    def embeddings(req: EmbeddingRequest) -> dict[str, Any]:
        texts = [req.input] if isinstance(req.input, str) else req.input
        if not texts:
            raise HTTPException(400, "input is empty")
        with lock:  # one session run at a time: its threads are the sidecar's threads
            vecs, used = model.embed(texts)
        return {"object": "list", "model": args.alias,
                "data": [{"object": "embedding", "index": i, "embedding": v}
                         for i, v in enumerate(vecs)],
                "usage": {"prompt_tokens": used, "total_tokens": used}}

    def speed(text: str) -> dict[str, float]:
        """Tokens per second embedding `text` three times, as the llama.cpp sidecar times."""
        import time

        start = time.perf_counter()
        used = sum(model.embed([text])[1] for _ in range(3))
        return {"tokens_per_s": round(used / (time.perf_counter() - start), 1)}

    return app, self_test, speed


def system_info() -> str:
    import onnxruntime as ort

    return f"ONNX Runtime {ort.__version__}, providers {', '.join(ort.get_available_providers())}"
