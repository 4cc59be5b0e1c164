"""What a GGUF file says of itself, as a catalog entry: a chat model, an embedder or a
reranker, its context, chat template, architecture, embedding size and pooling.

Nothing is guessed that the file states; what it does not state gets the cautious default
(and the entry can be edited with `models add`/`embedders add` options)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra_rag.errors import ModelError
from hydra_rag.models.gguf import SPLIT, NotGguf, header, split_parts

# llama.cpp's enum llama_pooling_type.
POOLINGS = {0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}
# Architectures that only encode (no chat): an embedder unless they rank.
ENCODERS = frozenset({"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3",
                      "modern-bert", "neo-bert", "gemma-embedding", "t5encoder", "xlm-roberta"})
# A chat model runs with at most this context unless asked for more: a model trained on 128k
# tokens would otherwise reserve gigabytes for a cache a RAG turn never fills.
CHAT_CONTEXT = 8192
# Chunks are a few hundred tokens; an embedder's batch (its context) need not be longer.
EMBED_CONTEXT = 2048
ROLE_NAMES = {"chat": "a chat model", "embed": "an embedder", "rerank": "a reranker"}


@dataclass(frozen=True)
class Described:
    """A GGUF model as its metadata describes it."""

    path: Path
    role: str  # chat, embed, rerank
    architecture: str
    name: str
    context: int  # trained context length (0: not stated)
    dims: int  # embedding length
    pooling: str  # mean, cls, last, none, rank ("" when the file states none)
    chat_template: bool
    parts: tuple[Path, ...]  # every file of the model (a split GGUF's parts)

    @property
    def size(self) -> int:
        return sum(p.stat().st_size for p in self.parts if p.exists())


def describe(path: Path) -> Described:
    """Read the GGUF at `path` (its first part, if split); ModelError says why it cannot be."""
    try:
        h = header(path)
    except NotGguf as exc:
        raise ModelError(f"{path}: {exc}") from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    arch = str(h.get("general.architecture") or "")
    if not arch:
        raise ModelError(f"{path}: its GGUF metadata names no architecture")
    if int(h.get("split.no", 0) or 0) != 0:
        raise ModelError(f"{path} is part {int(h['split.no']) + 1} of a split model: give its "
                         "first part (…-00001-of-…)")
    parts = split_parts(path)
    count = int(h.get("split.count", 0) or 0)
    if count > 1 and len(parts) != count:
        raise ModelError(f"{path} is the first of {count} parts, but its name does not say so "
                         "(llama.cpp finds the others as NAME-0000K-of-0000N.gguf)")
    missing = [p.name for p in parts if not p.is_file()]
    if missing:
        raise ModelError(f"{path}: parts of this split model are missing: {', '.join(missing)}")
    pooling_code = h.get(f"{arch}.pooling_type")
    pooling = POOLINGS.get(int(pooling_code), "") if isinstance(pooling_code, int) else ""
    template = bool(h.get("tokenizer.chat_template"))
    if pooling == "rank":
        role = "rerank"
    elif pooling in ("mean", "cls", "last") or (arch in ENCODERS and not template):
        role = "embed"
    else:
        role = "chat"
    return Described(
        path=path, role=role, architecture=arch,
        name=str(h.get("general.name") or h.get("general.basename") or ""),
        context=int(h.get(f"{arch}.context_length", 0) or 0),
        dims=int(h.get(f"{arch}.embedding_length", 0) or 0),
        pooling=pooling, chat_template=template, parts=parts)


def suggest_id(text: str) -> str:
    """A catalog id from a repository or file name: lower case, `-GGUF` dropped, nothing but
    letters, digits, dots, dashes and underscores."""
    name = text.rsplit("/", 1)[-1]
    m = SPLIT.match(name)
    name = m.group("prefix") if m else re.sub(r"\.gguf$", "", name, flags=re.IGNORECASE)
    name = re.sub(r"[-_.]gguf$", "", name, flags=re.IGNORECASE)
    name = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._")
    return name[:64] or "model"


# llama.cpp's `-hf` downloads are named OWNER_REPO_FILE (bartowski_SmolLM2-…-GGUF_SmolLM2-…).
_LLAMA_CPP_NAME = re.compile(r"^[^/]*?[-_.]gguf_(?P<file>.+)$", re.IGNORECASE)


def readable_id(name: str) -> str:
    """A short id in the catalog's style from a model file's name (or another tool's name for
    it): llama.cpp's OWNER_REPO_ prefix and the quantisation dropped, lower case
    (`bartowski_SmolLM2-135M-Instruct-GGUF_SmolLM2-135M-Instruct-Q4_K_M.gguf` →
    `smollm2-135m-instruct`)."""
    from hydra_rag.models.hf.refs import quant_of

    base = name.rsplit("/", 1)[-1]
    m = SPLIT.match(base)
    stem = m.group("prefix") if m else re.sub(r"\.gguf$", "", base, flags=re.IGNORECASE)
    m = _LLAMA_CPP_NAME.match(stem)
    if m:
        stem = m.group("file")
    quant = quant_of(stem + ".gguf")
    if quant:
        cut = re.sub(rf"[-_.:]?{re.escape(quant)}$", "", stem, flags=re.IGNORECASE)
        stem = cut if cut.strip("-_.") else stem
    return suggest_id(stem)


def entry_for(d: Described, model_id: str, port: int, via: str,
              overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The user-catalog entry for a described model (options given by the user win)."""
    o = {k: v for k, v in (overrides or {}).items() if v is not None}
    base: dict[str, Any] = {"id": model_id, "path": str(d.path), "port": port, "via": via}
    if d.name:
        base["name"] = d.name
    if d.role == "chat":
        ctx = min(d.context or 4096, CHAT_CONTEXT)
        entry = {**base, "context": max(ctx, 256),
                 "chat_format": "gguf" if d.chat_template else "chatml"}
        for key in ("context", "chat_format", "params"):
            if key in o:
                entry[key] = o[key]
        return entry
    if d.role == "rerank":
        entry = {**base, "max_tokens": min(d.context or 512, EMBED_CONTEXT)}
        for key in ("max_tokens", "languages"):
            if key in o:
                entry[key] = o[key]
        return entry
    if not d.dims:
        raise ModelError(f"{d.path}: its metadata gives no embedding length")
    pooling = d.pooling if d.pooling in ("mean", "cls", "last") else (
        "mean" if d.architecture in ENCODERS else "last")
    entry = {**base, "dims": d.dims, "pooling": pooling,
             "max_tokens": max(min(d.context or 512, EMBED_CONTEXT), 8)}
    for key in ("dims", "pooling", "max_tokens", "kind", "query_prefix", "document_prefix",
                "languages"):
        if key in o:
            entry[key] = o[key]
    return entry
