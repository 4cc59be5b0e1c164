"""Validation of raw catalog YAML into typed records (records.py): every entry's fields, types and
ranges checked, with errors naming the file, the entry and the field."""

from __future__ import annotations

import re
from typing import Any

import yaml

from hydra_rag.catalog.keys import NO_KEYS, _check_remote, looks_like_secret
from hydra_rag.catalog.records import (
    CHAT_FORMATS,
    CHAT_PORTS,
    CONVERTS,
    EMBED_PORTS,
    KINDS,
    ONNX_CONVERTS,
    POOLINGS,
    RERANK_PORTS,
    Bundle,
    Catalog,
    ChatModel,
    Embedder,
    Reranker,
    Source,
)
from hydra_rag.errors import ConfigError, yaml_problem

_RERANKER_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str, "file": str, "path": str, "url": str, "api_key_env": str, "name": str,
    "license": str, "max_tokens": int, "port": int, "memory_mb": int, "languages": list,
    "sources": list, "via": str, "measured": bool, "size_mb": int,
}

_MODEL_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str, "file": str, "path": str, "url": str, "urls": list, "api_key_env": str, "name": str,
    "license": str, "context": int, "chat_format": str, "port": int, "params": dict,
    "sources": list, "via": str, "measured": bool, "size_mb": int, "turns": int,
}
PARAMS: dict[str, type | tuple[type, ...]] = {
    "temperature": (int, float), "top_p": (int, float), "top_k": int, "min_p": (int, float),
    "repeat_penalty": (int, float), "max_tokens": int, "seed": int,
}


_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str,
    "min_similarity": (int, float),
    "dims": int,
    "pooling": str,
    "max_tokens": int,
    "kind": str,
    "port": int,
    "file": str,
    "path": str,
    "url": str,
    "urls": list,
    "api_key_env": str,
    "name": str,
    "license": str,
    "query_prefix": str,
    "memory_mb": int,
    "layers": int,
    "gpu": bool,
    "document_prefix": str,
    "languages": list,
    "sources": list,
    "via": str,
    "measured": bool,
    "size_mb": int,
}
_SOURCE_FIELDS = {"url": str, "sha256": str, "pypi": str, "subdir": str, "convert": str,
                  "config": dict, "hf": str, "revision": str}


def _type_name(t: type | tuple[type, ...]) -> str:
    if isinstance(t, tuple):
        return "a number" if set(t) == {int, float} else " or ".join(x.__name__ for x in t)
    return {"str": "a string", "int": "an integer", "list": "a list", "dict": "a mapping",
            "bool": "true or false"}.get(t.__name__, t.__name__)


def _check(where: str, key: str, value: Any, expected: type | tuple[type, ...]) -> None:
    # bool is an int in Python; a YAML `true` where a number belongs is still a mistake.
    ok = isinstance(value, bool) if expected is bool else (
        not isinstance(value, bool) and isinstance(value, expected))
    if not ok:
        raise ConfigError(
            f"{where}: field {key!r} must be {_type_name(expected)}, got {value!r}"
        )


def _parse_source(where: str, raw: Any) -> Source:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: each source must be a mapping, got {raw!r}")
    for key, value in raw.items():
        if key not in _SOURCE_FIELDS:
            raise ConfigError(
                f"{where}: unknown field {key!r} (known: {', '.join(_SOURCE_FIELDS)})"
            )
        _check(where, key, value, _SOURCE_FIELDS[key])
    src = Source(**raw)
    if sum(bool(x) for x in (src.url, src.pypi, src.hf)) != 1:
        raise ConfigError(f"{where}: a source needs exactly one of 'url', 'pypi' or 'hf'")
    if src.hf:
        _check_hf(where, src)
    if src.url and not src.sha256:
        raise ConfigError(f"{where}: a url source needs its 'sha256' so the download is verified")
    if src.pypi and src.convert not in (None, *CONVERTS):
        raise ConfigError(f"{where}: convert must be {', '.join(CONVERTS)}")
    return src


_HF_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*/"
                      r"(?!.*\.\.)[^:@]+\.gguf", re.IGNORECASE)


def _check_hf(where: str, src: Source) -> None:
    """`hf: OWNER/REPO/PATH.gguf`: one file (a split model's first part), nothing to convert."""
    if not _HF_FILE.fullmatch(src.hf or ""):
        raise ConfigError(f"{where}: field 'hf' must be OWNER/REPO/FILE.gguf (the revision goes "
                          f"in 'revision'), got {src.hf!r}")
    if src.convert or src.subdir or src.config:
        raise ConfigError(f"{where}: an 'hf' source is a GGUF as published: no convert, subdir "
                          "or config")


def _sources(where: str, raw: dict[str, Any]) -> tuple[Source, ...]:
    return tuple(
        _parse_source(f"{where} sources[{i}]", s) for i, s in enumerate(raw.get("sources", []))
    )


def _start_entry(kind: str, origin: str, index: int, raw: Any,
                 fields: dict[str, Any], required: tuple[str, ...]) -> str:
    """Checks every kind of entry shares: a mapping, required fields present, no unknown
    fields, no key written into it. Returns how messages name the entry (by id once it has
    one)."""
    where = f"{origin}: {kind}s[{index}]"
    if not isinstance(raw, dict):
        need = " and ".join(repr(r) for r in required)
        raise ConfigError(f"{where}: expected a mapping with at least {need}")
    if isinstance(raw.get("id"), str):
        where = f"{origin}: {kind} {raw['id']!r}"
    for key in required:
        if key not in raw:
            raise ConfigError(f"{where}: missing required field {key!r}")
    for key in raw:
        if key in fields:
            continue
        if "api_key_env" in fields and looks_like_secret(str(key)):
            raise ConfigError(f"{where}: field {key!r} would hold a key; {NO_KEYS}")
        raise ConfigError(f"{where}: unknown field {key!r} (known: {', '.join(sorted(fields))})")
    if "api_key_env" in fields:
        _check_remote(where, raw)
    return where


def _check_port_and_location(where: str, entry: Embedder | ChatModel | Reranker,
                             ports: range) -> None:
    """A sidecar port inside the entry kind's range, and somewhere to get the model from."""
    if entry.port not in ports:
        raise ConfigError(f"{where}: field 'port' must be in {ports.start}-{ports.stop - 1}")
    if not (entry.file or entry.path or entry.url):
        raise ConfigError(f"{where}: needs one of 'file', 'path' or 'url'")


def _languages(where: str, langs: Any) -> tuple[str, ...]:
    if not langs or not all(isinstance(x, str) and (x == "*" or len(x) == 2) for x in langs):
        raise ConfigError(f"{where}: field 'languages' must be a list of ISO 639-1 codes "
                          f"(en, de…) or [\"*\"], got {langs!r}")
    return tuple(langs)


def parse_embedder(origin: str, index: int, raw: Any) -> Embedder:
    """Validate one catalog entry; errors name the file, the entry and the field."""
    where = _start_entry("embedder", origin, index, raw, _FIELDS, ("id", "dims"))
    for key, value in raw.items():
        if value is None and key in ("query_prefix", "document_prefix"):
            continue
        _check(where, key, value, _FIELDS[key])
    values = {k: ("" if v is None else v) for k, v in raw.items() if k != "sources"}
    if "languages" in values:
        values["languages"] = _languages(where, values["languages"])
    _urls(where, values)
    sources = _sources(where, raw)
    emb = Embedder(**values, sources=sources, origin=origin)  # type: ignore[arg-type]
    if emb.dims <= 0:
        raise ConfigError(f"{where}: field 'dims' must be positive, got {emb.dims}")
    if not 0 <= emb.min_similarity < 1:
        raise ConfigError(f"{where}: field 'min_similarity' must be a cosine from 0 to below 1, "
                          f"got {emb.min_similarity}")
    if emb.max_tokens < 8:
        raise ConfigError(f"{where}: field 'max_tokens' must be at least 8, got {emb.max_tokens}")
    if emb.kind not in KINDS:
        raise ConfigError(f"{where}: field 'kind' must be one of {', '.join(KINDS)}")
    if emb.pooling not in POOLINGS:
        raise ConfigError(f"{where}: field 'pooling' must be one of {', '.join(POOLINGS)}")
    _check_port_and_location(where, emb, EMBED_PORTS)
    _check_backend(where, emb, onnx_ok=True)
    return emb


def _check_backend(where: str, entry: Any, onnx_ok: bool) -> None:
    """An `.onnx` file is run by ONNX Runtime, for embedders only, and made by `onnx-int8` or
    `onnx-f32`; those converters write nothing else."""
    onnx = entry.backend == "onnx"
    if onnx and not onnx_ok:
        raise ConfigError(f"{where}: an ONNX file serves embedders only; give a GGUF")
    for src in entry.sources:
        if (src.convert in ONNX_CONVERTS) != onnx and src.pypi:
            raise ConfigError(f"{where}: convert 'onnx-int8' or 'onnx-f32' writes an ONNX file, "
                              "and only they do: name the file *.onnx with those converters, "
                              "*.gguf otherwise")


def _urls(where: str, values: dict[str, Any]) -> None:
    """`urls:` (several servers of one model) checked, kept as a tuple, its first as `url`."""
    if "urls" not in values:
        return
    urls = values["urls"]
    if "url" in values:
        raise ConfigError(f"{where}: give 'url' (one server) or 'urls' (several), not both")
    if not urls or not all(isinstance(u, str) and u.strip() for u in urls):
        raise ConfigError(f"{where}: field 'urls' must be a list of one or more URLs")
    if len(set(urls)) != len(urls):
        raise ConfigError(f"{where}: field 'urls' lists a URL twice")
    values["urls"] = tuple(urls)
    values["url"] = urls[0]


def parse_model(origin: str, index: int, raw: Any) -> ChatModel:
    """Validate one chat-model entry; errors name the file, the entry and the field."""
    where = _start_entry("model", origin, index, raw, _MODEL_FIELDS, ("id",))
    for key, value in raw.items():
        _check(where, key, value, _MODEL_FIELDS[key])
    params = _check_params(where, raw.get("params") or {})
    values = {k: v for k, v in raw.items() if k not in ("sources", "params")}
    _urls(where, values)
    sources = _sources(where, raw)
    model = ChatModel(**values, params=dict(params), sources=sources, origin=origin)
    if model.context < 256:
        raise ConfigError(f"{where}: field 'context' must be at least 256, got {model.context}")
    if model.turns < -1:
        raise ConfigError(f"{where}: field 'turns' must be -1 (all) or a number of turns, "
                          f"got {model.turns}")
    if model.chat_format not in CHAT_FORMATS:
        raise ConfigError(f"{where}: field 'chat_format' must be one of {', '.join(CHAT_FORMATS)}")
    _check_port_and_location(where, model, CHAT_PORTS)
    _check_backend(where, model, onnx_ok=False)
    return model


def parse_reranker(origin: str, index: int, raw: Any) -> Reranker:
    """Validate one reranker entry; errors name the file, the entry and the field."""
    where = _start_entry("reranker", origin, index, raw, _RERANKER_FIELDS, ("id",))
    for key, value in raw.items():
        _check(where, key, value, _RERANKER_FIELDS[key])
    values = {k: v for k, v in raw.items() if k != "sources"}
    if "languages" in values:
        values["languages"] = _languages(where, values["languages"])
    sources = _sources(where, raw)
    rr = Reranker(**values, sources=sources, origin=origin)
    if rr.max_tokens < 32:
        raise ConfigError(f"{where}: field 'max_tokens' must be at least 32, got {rr.max_tokens}")
    _check_port_and_location(where, rr, RERANK_PORTS)
    _check_backend(where, rr, onnx_ok=False)
    return rr

_BUNDLE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str, "base": str, "system_prompt": str, "params": dict, "rag_index": (str, list),
    "rag_tags": list, "rag_all": bool, "rag_top_k": int, "description": str,
}


def _check_params(where: str, params: Any) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise ConfigError(f"{where}: field 'params' must be a mapping, got {params!r}")
    for key, value in params.items():
        if key not in PARAMS:
            raise ConfigError(
                f"{where}: unknown parameter params.{key} (known: {', '.join(PARAMS)})"
            )
        _check(where, f"params.{key}", value, PARAMS[key])
    return dict(params)


def parse_bundle(origin: str, index: int, raw: Any) -> Bundle:
    """Validate one bundle entry; errors name the file, the entry and the field."""
    where = _start_entry("bundle", origin, index, raw, _BUNDLE_FIELDS, ("id", "base"))
    for key, value in raw.items():
        if key == "rag_top_k" and value is None:
            continue
        _check(where, key, value, _BUNDLE_FIELDS[key])
    index_raw = raw.get("rag_index") or []
    paths = [index_raw] if isinstance(index_raw, str) else index_raw
    for p in paths:
        if not isinstance(p, str) or not p:
            raise ConfigError(f"{where}: field 'rag_index' must be a path or a list of paths")
    tags = raw.get("rag_tags") or []
    if not all(isinstance(t, str) and t for t in tags):
        raise ConfigError(f"{where}: field 'rag_tags' must be a list of tag names")
    top_k = raw.get("rag_top_k")
    if top_k is not None and not 1 <= top_k <= 50:
        raise ConfigError(f"{where}: field 'rag_top_k' must be between 1 and 50, got {top_k}")
    return Bundle(
        id=raw["id"], base=raw["base"], system_prompt=raw.get("system_prompt") or "",
        params=_check_params(where, raw.get("params") or {}), rag_index=tuple(paths),
        rag_tags=tuple(tags), rag_all=bool(raw.get("rag_all", False)), rag_top_k=top_k,
        description=raw.get("description") or "", origin=origin,
    )

# Each top-level section and the parser of its entries.
_PARSERS: dict[str, Any] = {"embedders": parse_embedder, "models": parse_model,
                            "bundles": parse_bundle, "rerankers": parse_reranker}


def parse_catalog(text: str, origin: str) -> Catalog:
    """Parse and validate one catalog file."""
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{origin}: not valid YAML ({yaml_problem(exc)}) — fix or remove "
                          "that file") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{origin}: expected a mapping with 'embedders' and/or 'models' lists")
    unknown = set(doc) - set(_PARSERS)
    if unknown:
        raise ConfigError(f"{origin}: unknown top-level key(s): {', '.join(sorted(unknown))}")
    parsed: dict[str, dict[str, Any]] = {}
    for section, parse in _PARSERS.items():
        entries = doc.get(section) or []
        if not isinstance(entries, list):
            raise ConfigError(f"{origin}: '{section}' must be a list")
        by_id: dict[str, Any] = {}
        for i, raw in enumerate(entries):
            entry = parse(origin, i, raw)
            if entry.id in by_id:
                raise ConfigError(f"{origin}: {section[:-1]} {entry.id!r} is defined twice")
            by_id[entry.id] = entry
        parsed[section] = by_id
    return Catalog(parsed["embedders"], parsed["models"], parsed["bundles"], parsed["rerankers"])
