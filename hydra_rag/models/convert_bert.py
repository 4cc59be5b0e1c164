"""Convert a BERT model folder (WordPiece vocabulary plus safetensors or ONNX weights) to GGUF.

Only numpy, safetensors, onnx and the `gguf` package: no torch. Mirrors what llama.cpp's own
converter does for the `bert` architecture, which is what its loader expects:
tensor names from gguf's name map, the WordPiece vocabulary in llama.cpp's "phantom space"
spelling, and the BERT hyper-parameters plus the sentence-transformers pooling type.

Two kinds of model: a sentence embedder (pooled vectors), and a cross-encoder reranker
(`rank=True`: BertForSequenceClassification, one relevance logit per query-document pair). For
the reranker the pooler (dense + tanh on [CLS]) and the classifier are written as llama.cpp's
`cls` and `cls.output` tensors with rank pooling, which computes exactly that head; llama.cpp's
own converter drops the pooler, which changes every score.

ONNX weights may be dynamically quantised (int8/uint8 MatMulInteger weights with a scale and
zero point per tensor or per channel, as ONNX Runtime's quantiser writes them); they are
dequantised to float.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hydra_rag.errors import ModelError

# Tensors llama.cpp does not use for embeddings.
_DROP = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")
# A reranker's head under llama.cpp's names: pooler (dense + tanh), then the classifier.
_HEAD = {"pooler.dense.weight": "cls.weight", "pooler.dense.bias": "cls.bias",
         "classifier.weight": "cls.output.weight", "classifier.bias": "cls.output.bias"}
# GGUF key: where a reranker's second-segment token copies start (see _fold_segments).
SEGMENT_B_KEY = "hydra_rag.segment_b_offset"
SEGMENT_B_MARK = "\ue000"  # private use: marks the copies' spelling, stripped from all input
# Hyper-parameters the GGUF needs; a folder without config.json gives them in its catalog
# source (`config`) or they are read off the weights' shapes.
_HPARAMS = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
            "max_position_embeddings", "type_vocab_size", "layer_norm_eps")
_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _pooling(model_dir: Path) -> str:
    cfg_path = model_dir / "1_Pooling" / "config.json"
    if not cfg_path.is_file():
        return "cls"
    cfg = json.loads(cfg_path.read_text())
    if cfg.get("pooling_mode_mean_tokens"):
        return "mean"
    if cfg.get("pooling_mode_cls_token"):
        return "cls"
    raise ModelError(f"{cfg_path}: only mean or CLS pooling can be converted")


def _vocab_tokens(model_dir: Path) -> list[str]:
    vocab = (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    return vocab


# Initializers already under their Hugging Face names (with or without the "bert." prefix).
_NAMED = ("bert.", "classifier.", "embeddings.", "encoder.", "pooler.")


def _dequantise(q: np.ndarray, scale: np.ndarray, zero: np.ndarray, what: str) -> np.ndarray:
    """(q - zero point) * scale, per tensor or per channel. A per-channel scale runs along the
    last axis (MatMulInteger quantises its weight per output column; DequantizeLinear's default
    axis is 1), or along the first when only that one matches."""
    scale = np.asarray(scale, np.float32)
    zero = np.asarray(zero, np.float32)
    if scale.size == 1 and zero.size == 1:
        return (q.astype(np.float32) - float(zero.reshape(-1)[0])) * float(scale.reshape(-1)[0])
    if scale.ndim != 1 or zero.shape not in (scale.shape, ()) or q.ndim != 2:
        raise ModelError(f"{what}: quantisation scales of shape {scale.shape} cannot be applied")
    if scale.size == q.shape[1]:
        return (q.astype(np.float32) - zero) * scale
    if scale.size == q.shape[0]:
        return (q.astype(np.float32) - zero.reshape(-1, 1)) * scale.reshape(-1, 1)
    raise ModelError(f"{what}: {scale.size} quantisation scales for a {q.shape} tensor")


def _onnx_weights(path: Path) -> dict[str, np.ndarray]:
    """Float weights under their Hugging Face names from an ONNX export of a BERT model.

    Plain exports keep the names on their initializers. Dynamically quantised ones name the
    linear weights after the graph (`onnx::MatMul_123_quantized`): their names are recovered
    from the MatMulInteger node that reads them (`/bert/encoder/layer.0/…/query/MatMul…`), and
    the ONNX [in, out] layout is transposed back to the [out, in] of a linear layer."""
    import onnx
    from onnx import numpy_helper

    try:
        model = onnx.load(str(path))
    except Exception as exc:  # onnx raises DecodeError and friends for a damaged file
        raise ModelError(f"{path}: not a readable ONNX model ({exc})") from None
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    names: dict[str, str] = {}
    transposed: set[str] = set()
    for node in model.graph.node:
        if node.op_type not in ("MatMul", "MatMulInteger") or len(node.input) < 2:
            continue
        weight = node.input[1]
        if weight not in init:
            continue  # an activation times an activation (attention), not a weight
        base = weight.removesuffix("_quantized")
        transposed.add(base)  # a MatMul weight is [in, out], whatever its name
        if base.startswith(_NAMED):
            continue  # already under its Hugging Face name
        found = re.match(r"/(.+)/MatMul", node.output[0])
        if not found:
            raise ModelError(f"{path}: cannot tell which layer the weight {weight} belongs to "
                             f"(its MatMul output is {node.output[0]!r}); export the model "
                             "with named layers or as safetensors")
        names[base] = found.group(1).replace("/", ".") + ".weight"
    out: dict[str, np.ndarray] = {}
    for name, data in init.items():
        if name.endswith(("_scale", "_zero_point")):
            continue
        base = name.removesuffix("_quantized")
        if name.endswith("_quantized"):
            scale, zero = init.get(base + "_scale"), init.get(base + "_zero_point")
            if scale is None or zero is None:
                raise ModelError(f"{path}: quantised tensor {name} has no scale or zero point")
            data = _dequantise(data, scale, zero, f"{path}: {name}")
        elif base not in names and not base.startswith(_NAMED):
            continue  # graph constants (shapes, masks), not weights
        out[names.get(base, base)] = data.T if base in transposed else data
    return out


def _fold_segments(tensors: dict[str, np.ndarray], n_vocab: int) -> bool:
    """Make the token-type (segment) embeddings part of a doubled token table.

    A cross-encoder reads [CLS] question [SEP] passage [SEP] with token type 0 on the question
    and 1 on the passage, but llama.cpp's BERT adds type 0 to every token. Embeddings are
    summed (word + position + type), so a table of word + type 0 for ids below n_vocab and
    word + type 1 for the same tokens at n_vocab + id, with a zero type table, gives exactly
    the original sums once the passage's ids are shifted by n_vocab (SEGMENT_B_KEY tells the
    sidecar by how much). Without it the MS MARCO MiniLM reranker fell from nDCG@10 0.688 to
    0.604 on 100 SciFact claims (ONNX Runtime, type ids all 0), below the fused order it reranks.
    """
    word = tensors.get("embeddings.word_embeddings.weight")
    types = tensors.get("embeddings.token_type_embeddings.weight")
    if word is None or types is None or types.shape[0] < 2 or word.shape[0] != n_vocab:
        return False
    tensors["embeddings.word_embeddings.weight"] = np.concatenate([word + types[0], word + types[1]])
    tensors["embeddings.token_type_embeddings.weight"] = np.zeros_like(types)
    return True


def read_weights(model_dir: Path) -> dict[str, np.ndarray]:
    """The model's tensors as float32 under their Hugging Face names, "bert." prefix removed."""
    st, ox = model_dir / "model.safetensors", model_dir / "model.onnx"
    if st.is_file():
        from safetensors.numpy import load_file

        raw = load_file(str(st))
    elif ox.is_file():
        raw = _onnx_weights(ox)
    else:
        raise ModelError(f"cannot convert {model_dir}: neither model.safetensors nor model.onnx")
    return {k.removeprefix("bert."): v.astype(np.float32) for k, v in raw.items()}


def hparams(model_dir: Path, weights: Mapping[str, np.ndarray],
            given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The BERT hyper-parameters: config.json, then `given`, then what the weights' shapes
    tell; the number of attention heads cannot be read off the weights."""
    hp: dict[str, Any] = {}
    config_path = model_dir / "config.json"
    if config_path.is_file():
        hp = json.loads(config_path.read_text())
        if hp.get("model_type", "bert") != "bert":
            raise ModelError(f"{config_path}: model_type {hp.get('model_type')!r} is not bert")
    hp.update(given or {})
    layers = [int(m.group(1)) for k in weights
              if (m := re.match(r"encoder\.layer\.(\d+)\.", k))]

    def dim(name: str, axis: int) -> int | None:
        w = weights.get(name)
        return None if w is None else int(w.shape[axis])

    shapes = {
        "num_hidden_layers": max(layers) + 1 if layers else None,
        "hidden_size": dim("embeddings.word_embeddings.weight", 1),
        "intermediate_size": dim("encoder.layer.0.intermediate.dense.weight", 0),
        "max_position_embeddings": dim("embeddings.position_embeddings.weight", 0),
        "type_vocab_size": dim("embeddings.token_type_embeddings.weight", 0) or 2,
        "layer_norm_eps": 1e-12,
    }
    for key, value in shapes.items():
        if key not in hp and value:
            hp[key] = value
    missing = [k for k in _HPARAMS if k not in hp]
    if missing:
        raise ModelError(f"cannot convert {model_dir}: no config.json and the weights do not "
                         f"give {', '.join(missing)} (set them under the source's `config`)")
    if int(hp["hidden_size"]) % int(hp["num_attention_heads"]):
        raise ModelError(f"{model_dir}: hidden_size {hp['hidden_size']} is not a multiple of "
                         f"num_attention_heads {hp['num_attention_heads']}")
    return hp


def convert_bert(
    model_dir: Path,
    out_path: Path,
    qtype: str = "q8_0",
    progress: Callable[[str], None] | None = None,
    rank: bool = False,
    config: Mapping[str, Any] | None = None,
) -> Path:
    """Write `out_path` (GGUF) from a BERT model folder; returns the path written. `rank`:
    a cross-encoder reranker (classification head kept); `config`: hyper-parameters for a
    folder without config.json."""
    import logging

    import gguf

    # gguf logs a warning for the [CLS] id it has no key for; llama.cpp's BERT vocab
    # already defaults [CLS] to 101, so the message is noise.
    logging.getLogger("gguf").setLevel(logging.ERROR)

    say = progress or (lambda _msg: None)
    if not (model_dir / "vocab.txt").is_file():
        raise ModelError(f"cannot convert {model_dir}: vocab.txt is missing")
    say(f"reading the weights in {model_dir.name}")
    tensors = read_weights(model_dir)
    hp = hparams(model_dir, tensors, config)
    if rank and not all(k in tensors for k in _HEAD):
        raise ModelError(f"{model_dir}: no pooler and classifier weights; a reranker must be a "
                         "BERT sequence classifier (cross-encoder)")

    n_layers = int(hp["num_hidden_layers"])
    arch = gguf.MODEL_ARCH.BERT
    name_map = gguf.get_tensor_name_map(arch, n_layers)
    quant = {
        "q8_0": gguf.GGMLQuantizationType.Q8_0,
        "f16": gguf.GGMLQuantizationType.F16,
        "f32": gguf.GGMLQuantizationType.F32,
    }.get(qtype)
    if quant is None:
        raise ModelError(f"unknown quantisation {qtype!r}: use q8_0, f16 or f32")
    file_type = {
        "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
        "f16": gguf.LlamaFileType.MOSTLY_F16,
        "f32": gguf.LlamaFileType.ALL_F32,
    }[qtype]

    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = out_path.with_name(out_path.name + ".partial")
    writer = gguf.GGUFWriter(str(tmp_path), gguf.MODEL_ARCH_NAMES[arch])
    writer.add_name(model_dir.name)
    writer.add_context_length(int(hp["max_position_embeddings"]))
    writer.add_embedding_length(int(hp["hidden_size"]))
    writer.add_feed_forward_length(int(hp["intermediate_size"]))
    writer.add_block_count(n_layers)
    writer.add_head_count(int(hp["num_attention_heads"]))
    writer.add_layer_norm_eps(float(hp.get("layer_norm_eps", 1e-12)))
    writer.add_causal_attention(False)
    if rank:
        writer.add_pooling_type(gguf.PoolingType.RANK)
    else:
        writer.add_pooling_type(
            gguf.PoolingType.MEAN if _pooling(model_dir) == "mean" else gguf.PoolingType.CLS
        )
    writer.add_file_type(file_type)

    tokens = _vocab_tokens(model_dir)
    types = [
        gguf.TokenType.CONTROL if t in _SPECIAL else gguf.TokenType.NORMAL for t in tokens
    ]
    # llama.cpp's WordPiece tokenizer expects word-initial pieces marked with U+2581 and
    # continuation pieces without their "##"; control tokens stay as they are.
    spelled = [
        t if ty == gguf.TokenType.CONTROL else (t[2:] if t.startswith("##") else "\u2581" + t)
        for t, ty in zip(tokens, types, strict=True)
    ]
    if rank and _fold_segments(tensors, len(tokens)):
        # Second-segment copies of every token, spelled so no text ever tokenizes to them.
        spelled += [SEGMENT_B_MARK + t for t in spelled]
        types += types
        writer.add_uint32(SEGMENT_B_KEY, len(tokens))
    writer.add_token_type_count(int(hp.get("type_vocab_size", 2)))
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(spelled)
    writer.add_token_types(types)
    special = gguf.SpecialVocab(str(model_dir), n_vocab=len(tokens))
    special.add_to_gguf(writer)

    for name, data in tensors.items():
        if rank and name in _HEAD:
            new_name: str | None = _HEAD[name]
        elif name in _DROP:
            continue
        else:
            new_name = name_map.get_name(name, try_suffixes=(".weight", ".bias"))
        if new_name is None:
            raise ModelError(f"cannot map tensor {name!r} of {model_dir} to GGUF")
        # Norms, biases, the small embedding tables and the reranker's head stay in f32:
        # quantising them costs accuracy and saves almost nothing.
        keep_f32 = data.ndim == 1 or new_name.startswith(("token_types", "position_embd", "cls"))
        if keep_f32 or quant == gguf.GGMLQuantizationType.F32 or data.shape[-1] % 32 != 0:
            writer.add_tensor(new_name, data)
        else:
            q = gguf.quants.quantize(data, quant)
            writer.add_tensor(new_name, q, raw_shape=q.shape, raw_dtype=quant)

    say(f"writing {out_path.name}")
    return write_gguf(writer, tmp_path, out_path)


def write_gguf(writer: Any, tmp_path: Path, out_path: Path) -> Path:
    """Write a filled GGUFWriter to `tmp_path`, then move it to `out_path` in one step (an
    interrupted conversion never leaves a half-written model under the final name)."""
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp_path.replace(out_path)
    return out_path
