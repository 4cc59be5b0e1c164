"""Convert a Hugging Face BERT sentence-embedding folder (safetensors + WordPiece) to GGUF.

Only numpy, safetensors and the `gguf` package: no torch. Mirrors what llama.cpp's own
converter does for the `bert` architecture, which is what its loader expects:
tensor names from gguf's name map, the WordPiece vocabulary in llama.cpp's "phantom space"
spelling, and the BERT hyper-parameters plus the sentence-transformers pooling type.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hydra_rag.errors import ModelError

# Tensors llama.cpp does not use for embeddings.
_DROP = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")
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


def convert_bert(
    model_dir: Path,
    out_path: Path,
    qtype: str = "q8_0",
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Write `out_path` (GGUF) from a BERT model folder; returns the path written."""
    import logging

    import gguf
    from safetensors.numpy import load_file

    # gguf logs a warning for the [CLS] id it has no key for; llama.cpp's BERT vocab
    # already defaults [CLS] to 101, so the message is noise.
    logging.getLogger("gguf").setLevel(logging.ERROR)

    say = progress or (lambda _msg: None)
    config_path = model_dir / "config.json"
    weights_path = model_dir / "model.safetensors"
    for needed in (config_path, weights_path, model_dir / "vocab.txt"):
        if not needed.is_file():
            raise ModelError(f"cannot convert {model_dir}: {needed.name} is missing")
    hp = json.loads(config_path.read_text())
    if hp.get("model_type") != "bert":
        raise ModelError(f"{config_path}: model_type {hp.get('model_type')!r} is not bert")

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
    writer.add_token_type_count(int(hp.get("type_vocab_size", 2)))
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(spelled)
    writer.add_token_types(types)
    special = gguf.SpecialVocab(str(model_dir), n_vocab=len(tokens))
    special.add_to_gguf(writer)

    say(f"reading {weights_path.name}")
    tensors = load_file(str(weights_path))
    for name, data in tensors.items():
        if name.startswith("bert."):
            name = name[5:]
        if name in _DROP:
            continue
        new_name = name_map.get_name(name, try_suffixes=(".weight", ".bias"))
        if new_name is None:
            raise ModelError(f"cannot map tensor {name!r} of {weights_path} to GGUF")
        data = data.astype(np.float32)
        # Norms, biases and the small embedding tables stay in f32: quantising them costs
        # accuracy and saves almost nothing.
        keep_f32 = data.ndim == 1 or new_name.startswith(("token_types", "position_embd"))
        if keep_f32 or quant == gguf.GGMLQuantizationType.F32 or data.shape[-1] % 32 != 0:
            writer.add_tensor(new_name, data)
        else:
            q = gguf.quants.quantize(data, quant)
            writer.add_tensor(new_name, q, raw_shape=q.shape, raw_dtype=quant)

    say(f"writing {out_path.name}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp_path.replace(out_path)
    return out_path
