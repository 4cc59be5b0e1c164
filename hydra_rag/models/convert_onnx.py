"""Write a BERT sentence embedder (safetensors weights, as `convert_bert` reads them) as an ONNX
graph for ONNX Runtime, its linear layers quantised to int8 but for the feed-forward
down-projections; the tokenizer travels inside it.

The graph is built from the weights with the `onnx` package alone (no torch, no export):
embeddings, then per layer self-attention and the feed-forward block with post-layer-norm, as
BERT computes them. It takes `input_ids` and `attention_mask` ([batch, tokens], int64) and
returns the pooled last hidden states ([batch, hidden]: the mean over the tokens the mask keeps,
or the first token's); the client normalises. Quantisation is ONNX Runtime's own dynamic int8
quantiser (weights per output channel, activations per call): its int8 kernels are what make
this backend faster than llama.cpp's q8_0 on a CPU.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hydra_rag.errors import ModelError
from hydra_rag.models.convert_bert import _pooling, hparams, read_weights

OPSET = 17  # LayerNormalization is a standard operator from 17 on


class _Graph:
    """A small builder: initializers and nodes with fresh names."""

    def __init__(self) -> None:
        from onnx import helper

        self.helper = helper
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.n = 0

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def op(self, kind: str, *inputs: str, **attrs: Any) -> str:
        self.n += 1
        out = f"{kind.lower()}_{self.n}"
        self.nodes.append(self.helper.make_node(kind, list(inputs), [out], name=out, **attrs))
        return out


def _linear(g: _Graph, x: str, w: np.ndarray, b: np.ndarray, name: str) -> str:
    """x @ w.T + b, the weight stored [in, out] as a MatMul reads it; the MatMul node is named
    after the layer (`<name>.matmul`), so the quantiser can be told to leave it alone."""
    wt = g.const(f"{name}.weight", np.ascontiguousarray(w.T.astype(np.float32)))
    bias = g.const(f"{name}.bias", b.astype(np.float32))
    g.nodes.append(g.helper.make_node("MatMul", [x, wt], [f"{name}.matmul"],
                                      name=f"{name}.matmul"))
    return g.op("Add", f"{name}.matmul", bias)


def _norm(g: _Graph, x: str, w: dict[str, np.ndarray], name: str, eps: float) -> str:
    return g.op("LayerNormalization", x, g.const(f"{name}.weight", w[f"{name}.weight"]),
                g.const(f"{name}.bias", w[f"{name}.bias"]), axis=-1, epsilon=eps)


def build_graph(weights: dict[str, np.ndarray], hp: dict[str, Any], pooling: str = "mean") -> Any:
    """The float ONNX model of a BERT encoder with mean or CLS pooling."""
    from onnx import TensorProto, helper

    g = _Graph()
    w = weights  # float32 under names without "bert.", as read_weights gives them
    hidden, heads = int(hp["hidden_size"]), int(hp["num_attention_heads"])
    head = hidden // heads
    eps = float(hp.get("layer_norm_eps", 1e-12))

    # Embeddings: word + position + token type 0, then a layer norm.
    word = g.op("Gather", g.const("word", w["embeddings.word_embeddings.weight"]), "input_ids")
    length = g.op("Gather", g.op("Shape", "input_ids"), g.const("one", np.array(1, np.int64)))
    pos_ids = g.op("Range", g.const("zero", np.array(0, np.int64)), length, "one")
    pos = g.op("Gather", g.const("pos", w["embeddings.position_embeddings.weight"]), pos_ids)
    kind0 = g.const("kind0", w["embeddings.token_type_embeddings.weight"][0])
    x = _norm(g, g.op("Add", g.op("Add", word, pos), kind0), w, "embeddings.LayerNorm", eps)

    # Attention mask as an additive bias [batch, 1, 1, tokens]; the float mask is kept for pooling.
    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    bias = g.op("Mul", g.op("Sub", g.const("onef", np.array(1.0, np.float32)), mask),
                g.const("neg", np.array(-10000.0, np.float32)))
    bias = g.op("Unsqueeze", bias, g.const("axes12", np.array([1, 2], np.int64)))
    split = g.const("split", np.array([0, 0, heads, head], np.int64))
    merge = g.const("merge", np.array([0, 0, hidden], np.int64))
    scale = g.const("scale", np.array(1.0 / math.sqrt(head), np.float32))
    half, root2 = g.const("half", np.array(0.5, np.float32)), g.const(
        "root2", np.array(math.sqrt(2.0), np.float32))

    for i in range(int(hp["num_hidden_layers"])):
        p = f"encoder.layer.{i}"

        def proj(part: str, x: str = x, p: str = p) -> str:
            lin = _linear(g, x, w[f"{p}.attention.self.{part}.weight"],
                          w[f"{p}.attention.self.{part}.bias"], f"{p}.{part}")
            return g.op("Reshape", lin, split)

        q = g.op("Transpose", proj("query"), perm=[0, 2, 1, 3])
        k = g.op("Transpose", proj("key"), perm=[0, 2, 3, 1])
        v = g.op("Transpose", proj("value"), perm=[0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), bias)
        ctx = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        ctx = g.op("Reshape", g.op("Transpose", ctx, perm=[0, 2, 1, 3]), merge)
        out = _linear(g, ctx, w[f"{p}.attention.output.dense.weight"],
                      w[f"{p}.attention.output.dense.bias"], f"{p}.attention.output")
        x = _norm(g, g.op("Add", out, x), w, f"{p}.attention.output.LayerNorm", eps)
        up = _linear(g, x, w[f"{p}.intermediate.dense.weight"],
                     w[f"{p}.intermediate.dense.bias"], f"{p}.intermediate")
        # GELU, erf form (BERT's): 0.5 x (1 + erf(x / sqrt 2)); ONNX Runtime fuses it.
        gelu = g.op("Mul", g.op("Mul", up, half),
                    g.op("Add", g.op("Erf", g.op("Div", up, root2)), "onef"))
        down = _linear(g, gelu, w[f"{p}.output.dense.weight"], w[f"{p}.output.dense.bias"],
                       f"{p}.output")
        x = _norm(g, g.op("Add", down, x), w, f"{p}.output.LayerNorm", eps)

    if pooling == "cls":  # the first token's state
        g.nodes.append(helper.make_node("Gather", [x, "zero"], ["embedding"], axis=1))
    elif pooling == "mean":  # the mean over the kept tokens
        m3 = g.op("Unsqueeze", mask, g.const("axis2", np.array([2], np.int64)))
        axis1 = g.const("axis1", np.array([1], np.int64))
        total = g.op("ReduceSum", g.op("Mul", x, m3), axis1, keepdims=0)
        count = g.op("Max", g.op("ReduceSum", m3, axis1, keepdims=0),
                     g.const("tiny", np.array(1e-9, np.float32)))
        g.nodes.append(helper.make_node("Div", [total, count], ["embedding"]))
    else:
        raise ModelError(f"{pooling} pooling cannot be written as ONNX here (mean or cls)")

    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"])
    am = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"])
    emb = helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])
    graph = helper.make_graph(g.nodes, "bert-mean", [ids, am], [emb], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="hydra-rag")
    model.ir_version = 8
    return model


def float_layers(model: Any) -> list[str]:
    """The MatMuls left in float32: each layer's feed-forward down-projection, whose input (the
    GELU's output) has the widest range. Quantised too, vectors were at a cosine of 0.995 to
    the float model's and SciFact's hybrid nDCG@10 0.004 lower; kept in float, 0.998, for a
    fifth of the speed (BENCHMARKS.md, issue 32)."""
    return [n.name for n in model.graph.node if n.op_type == "MatMul"
            and n.name.endswith(".output.matmul") and ".attention." not in n.name]


TOKENIZER_KEY = "hydra_rag.tokenizer"  # the tokenizer.json text, kept inside the model file
MAX_TOKENS_KEY = "hydra_rag.max_tokens"


def convert_onnx(model_dir: Path, out_path: Path,
                 progress: Callable[[str], None] | None = None, quantise: bool = True) -> Path:
    """`out_path`, one ONNX file (int8 unless `quantise` is False) holding the model and, in its
    metadata, the tokenizer (tokenizer.json) and the context length, from a BERT sentence
    embedder folder (safetensors or ONNX weights, config.json, tokenizer.json, mean or CLS
    pooling). Written beside and renamed into place: a failure leaves no half model."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tok = model_dir / "tokenizer.json"
    if not tok.is_file():
        raise ModelError(f"{model_dir}: no tokenizer.json, which the ONNX backend needs")
    pooling = _pooling(model_dir)
    weights = read_weights(model_dir)
    hp = hparams(model_dir, weights)
    say = progress or (lambda _m: None)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    float_path = out_path.with_name(out_path.name + ".float.part")
    part = out_path.with_name(out_path.name + ".part")
    try:
        say("writing the ONNX graph")
        model = build_graph(weights, hp, pooling)
        onnx.save(model, str(float_path))
        if quantise:
            say("quantising to int8 (ONNX Runtime's dynamic quantiser, per channel)")
            logging.disable(logging.WARNING)  # its advice to pre-process, on the root logger
            try:
                quantize_dynamic(str(float_path), str(part), per_channel=True,
                                 weight_type=QuantType.QInt8,
                                 nodes_to_exclude=float_layers(model))
            finally:
                logging.disable(logging.NOTSET)
            model = onnx.load(str(part))
        meta = {TOKENIZER_KEY: tok.read_text(encoding="utf-8"),
                MAX_TOKENS_KEY: str(int(hp["max_position_embeddings"]))}
        for key, value in meta.items():
            model.metadata_props.add(key=key, value=value)
        onnx.save(model, str(part))
        os.replace(part, out_path)
    finally:
        float_path.unlink(missing_ok=True)
        part.unlink(missing_ok=True)
    return out_path


def carried_tokenizer(meta: dict[str, str]) -> Any:
    """The tokenizer a converted model carries (`read_meta`), without padding or truncation:
    texts are cut where the callers say."""
    import tokenizers

    tok = tokenizers.Tokenizer.from_str(meta[TOKENIZER_KEY])
    tok.no_padding()
    tok.no_truncation()
    return tok


def read_meta(path: Path) -> dict[str, str]:
    """The metadata a converted model carries (tokenizer, context length)."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError and friends for a damaged file
        raise ModelError(f"{path}: not a readable ONNX model ({exc})") from None
    meta = {p.key: p.value for p in model.metadata_props}
    if TOKENIZER_KEY not in meta:
        raise ModelError(f"{path}: this ONNX model carries no tokenizer; hydra-rag serves ONNX "
                         "embedders it converted itself (a catalog source with "
                         "`convert: onnx-int8`)")
    return meta
