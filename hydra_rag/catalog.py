"""The catalog: embedders, chat models, rerankers and bundles, shipped YAML merged with the
user's, validated into typed records whose errors name the file, the entry and the field."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

import yaml

from hydra_rag.errors import ConfigError, ModelError, yaml_problem
from hydra_rag.paths import dirs

_E = TypeVar("_E")
KINDS = ("code", "prose", "both")
POOLINGS = ("mean", "cls", "last", "none")
EMBED_PORTS = range(19080, 19100)
CHAT_PORTS = range(18080, 18100)
RERANK_PORTS = range(19100, 19120)
CONVERTS = ("bert-q8_0", "bert-f16", "e5s1", "gguf")
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

    def describe(self) -> str:
        return self.url or f"PyPI {self.pypi}"


class _ModelFile:
    """Where an entry's GGUF lives: `path` as given, or `file` inside the models folder."""

    path: str | None
    file: str | None

    def model_path(self) -> Path | None:
        """The GGUF's path (once installed or pulled); None for url-only entries."""
        if self.path:
            return Path(self.path).expanduser()
        if self.file:
            return dirs().models / self.file
        return None

    def installed(self) -> bool:
        p = self.model_path()
        return p is not None and p.is_file()


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
    api_key_env: str | None = None  # the variable holding `url`'s bearer token (never the key)
    name: str = ""
    license: str = ""
    query_prefix: str = ""
    document_prefix: str = ""
    memory_mb: int = 0  # resident memory its sidecar needs (0: unknown/small)
    gpu: bool = False  # needs a GPU to be usable
    # Languages (ISO 639-1) its vectors are good for; "*": any. Elsewhere retrieval leans on
    # the full-text list (retrieve.dense_weight).
    languages: tuple[str, ...] = ("en",)
    # The cosine at which a passage found by meaning alone bears on a query: each model
    # spreads its similarities over a band of its own (bench/nothing_relevant.py).
    min_similarity: float = 0.2
    sources: tuple[Source, ...] = field(default_factory=tuple)
    origin: str = ""

    def knows(self, language: str) -> bool:
        return "*" in self.languages or language in self.languages


@dataclass(frozen=True)
class ChatModel(_ModelFile):
    """A chat model entry: its GGUF, context length, chat template and default sampling."""

    id: str
    file: str | None = None
    path: str | None = None
    url: str | None = None
    api_key_env: str | None = None
    name: str = ""
    license: str = ""
    context: int = 4096
    chat_format: str = "chatml"
    port: int = 18080
    params: dict[str, Any] = field(default_factory=dict)
    sources: tuple[Source, ...] = field(default_factory=tuple)
    origin: str = ""


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


_RERANKER_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str, "file": str, "path": str, "url": str, "api_key_env": str, "name": str,
    "license": str, "max_tokens": int, "port": int, "memory_mb": int, "languages": list,
    "sources": list,
}

_MODEL_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str, "file": str, "path": str, "url": str, "api_key_env": str, "name": str,
    "license": str, "context": int, "chat_format": str, "port": int, "params": dict,
    "sources": list,
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
    "api_key_env": str,
    "name": str,
    "license": str,
    "query_prefix": str,
    "memory_mb": int,
    "gpu": bool,
    "document_prefix": str,
    "languages": list,
    "sources": list,
}
_SOURCE_FIELDS = {"url": str, "sha256": str, "pypi": str, "subdir": str, "convert": str,
                  "config": dict}


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
    if bool(src.url) == bool(src.pypi):
        raise ConfigError(f"{where}: a source needs exactly one of 'url' or 'pypi'")
    if src.url and not src.sha256:
        raise ConfigError(f"{where}: a url source needs its 'sha256' so the download is verified")
    if src.pypi and src.convert not in (None, *CONVERTS):
        raise ConfigError(f"{where}: convert must be {', '.join(CONVERTS)}")
    return src


def _sources(where: str, raw: dict[str, Any]) -> tuple[Source, ...]:
    return tuple(
        _parse_source(f"{where} sources[{i}]", s) for i, s in enumerate(raw.get("sources", []))
    )


# An environment variable's name as api_key_env takes it. Capitals only: a pasted key
# (sk-…, hf_…, hex) is mixed case or has other characters, so it is refused as a name
# before it could be printed in a message as one.
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
# The last word of a name that holds a key (api_key, access-token, apiKey), or the whole name.
_SECRET_WORDS = frozenset({"key", "keys", "apikey", "token", "tokens", "accesstoken",
                           "authtoken", "secret", "secrets", "password", "passwd", "bearer",
                           "auth", "authorization", "credential", "credentials"})
NO_KEYS = ("never store a key in a catalog: put it in an environment variable and name that "
           "variable in 'api_key_env' (api_key_env: MY_ENDPOINT_KEY)")


def looks_like_secret(name: str) -> bool:
    """Does a field or parameter name say it holds a key (api_key, token, apiKey, auth…)?"""
    words = re.findall(r"[a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower())
    return bool(words) and (words[-1] in _SECRET_WORDS or "".join(words) in _SECRET_WORDS)


def _check_remote(where: str, raw: dict[str, Any]) -> None:
    """`api_key_env` names a variable and comes with `url:`; the url carries no key. No message
    quotes a value here: it may be the key itself."""
    url = raw.get("url")
    if isinstance(url, str):
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None:
            raise ConfigError(f"{where}: field 'url' carries credentials (user@ or "
                              f"user:password@); {NO_KEYS}")
        secret = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True)
                  if looks_like_secret(k)]
        if secret:
            raise ConfigError(f"{where}: field 'url' carries a key in its {secret[0]}= "
                              f"parameter; {NO_KEYS}")
    if "api_key_env" not in raw:
        return
    name = raw["api_key_env"]
    if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
        raise ConfigError(f"{where}: field 'api_key_env' must be the name of an environment "
                          "variable in capitals, digits and _ (like TEAM_EMBEDDER_KEY), "
                          "never the key itself")
    if not url:
        raise ConfigError(f"{where}: field 'api_key_env' applies only to an entry with 'url' "
                          "(a local sidecar takes no key)")


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
    return emb


def parse_model(origin: str, index: int, raw: Any) -> ChatModel:
    """Validate one chat-model entry; errors name the file, the entry and the field."""
    where = _start_entry("model", origin, index, raw, _MODEL_FIELDS, ("id",))
    for key, value in raw.items():
        _check(where, key, value, _MODEL_FIELDS[key])
    params = _check_params(where, raw.get("params") or {})
    values = {k: v for k, v in raw.items() if k not in ("sources", "params")}
    sources = _sources(where, raw)
    model = ChatModel(**values, params=dict(params), sources=sources, origin=origin)
    if model.context < 256:
        raise ConfigError(f"{where}: field 'context' must be at least 256, got {model.context}")
    if model.chat_format not in CHAT_FORMATS:
        raise ConfigError(f"{where}: field 'chat_format' must be one of {', '.join(CHAT_FORMATS)}")
    _check_port_and_location(where, model, CHAT_PORTS)
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
    return rr


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


@dataclass(frozen=True)
class Catalog:
    """Every entry by id, per section."""

    embedders: dict[str, Embedder]
    models: dict[str, ChatModel]
    bundles: dict[str, Bundle] = field(default_factory=dict)
    rerankers: dict[str, Reranker] = field(default_factory=dict)


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


def user_catalog_path() -> Path:
    return dirs().config / "catalog.yaml"


def _shipped() -> Catalog:
    text = resources.files("hydra_rag").joinpath("catalog.yaml").read_text()
    return parse_catalog(text, "shipped catalog.yaml")


def _merge(cat: Catalog, mine: Catalog) -> Catalog:
    """User entries override shipped ones by id; then bundles are checked against models."""
    cat = Catalog({**cat.embedders, **mine.embedders}, {**cat.models, **mine.models},
                  {**cat.bundles, **mine.bundles}, {**cat.rerankers, **mine.rerankers})
    for r in cat.rerankers.values():
        # A sidecar is found by its id: a reranker cannot share one with another model.
        if r.id in cat.embedders or r.id in cat.models:
            raise ConfigError(f"{r.origin}: reranker {r.id!r}: the id is already an embedder "
                              "or chat model id")
    for b in cat.bundles.values():
        if b.base not in cat.models:
            known = ", ".join(difflib.get_close_matches(b.base, list(cat.models), n=5, cutoff=0))
            raise ConfigError(f"{b.origin}: bundle {b.id!r}: field 'base' names unknown model "
                              f"{b.base!r} (known: {known or 'none'})")
        if b.id in cat.models:
            raise ConfigError(f"{b.origin}: bundle {b.id!r}: the alias is already a model id")
    return cat


def load_catalog() -> Catalog:
    """Shipped entries, overridden by the user's entries with the same id."""
    user = user_catalog_path()
    mine = Catalog({}, {}, {})
    if user.is_file():
        mine = parse_catalog(user.read_text(encoding="utf-8"), str(user))
    return _merge(_shipped(), mine)


def load_embedders() -> dict[str, Embedder]:
    return load_catalog().embedders


def load_models() -> dict[str, ChatModel]:
    return load_catalog().models


def load_bundles() -> dict[str, Bundle]:
    return load_catalog().bundles


def _lookup(what: str, key: str, entries: dict[str, _E]) -> _E:
    """The entry `key`; an unknown id lists the known ones, closest first."""
    if key in entries:
        return entries[key]
    close = difflib.get_close_matches(key, list(entries), n=len(entries), cutoff=0)
    raise ModelError(f"unknown {what} {key!r}; known: {', '.join(close) or 'none'}")


def get_embedder(embedder_id: str) -> Embedder:
    """Look an embedder up; an unknown id lists the known ones, closest first."""
    return _lookup("embedder", embedder_id, load_embedders())


def foreign_for(settings: Any, table: str, language: str | None) -> Embedder | None:
    """`foreign_embedder`, if it is the one for this table's language: prose in a language the
    chosen embedder does not know and it does (installed or not). None otherwise."""
    chosen = get_embedder(settings.embedder_for(table))
    if (table != "prose" or not language or chosen.knows(language) or not settings.foreign
            or settings.embedder_url):  # a remote endpoint serves one model, whatever the id
        return None
    foreign = get_embedder(settings.foreign)
    return foreign if foreign.knows(language) else None


def table_embedder(settings: Any, table: str, language: str | None) -> Embedder:
    """The embedder of a table: the chosen one, or `foreign_for` it if that one is installed
    (an index is never rebuilt towards a model that is not there)."""
    foreign = foreign_for(settings, table, language)
    if foreign is not None and (foreign.installed() or foreign.url):
        return foreign
    return get_embedder(settings.embedder_for(table))


def load_rerankers() -> dict[str, Reranker]:
    return load_catalog().rerankers


def get_reranker(reranker_id: str) -> Reranker:
    """Look a reranker up; an unknown id lists the known ones, closest first."""
    return _lookup("reranker", reranker_id, load_rerankers())


def get_model(model_id: str) -> ChatModel:
    """Look a chat model up; an unknown id lists the known ones, closest first."""
    return _lookup("model", model_id, load_models())


def _read_user_doc(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return loaded if isinstance(loaded, dict) else {}


def _write_user_doc(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    tmp.replace(path)


def add_user_entry(section: str, entry: dict[str, Any]) -> Any:
    """Validate one entry and write it into the user's catalog (replacing the same id)."""
    path = user_catalog_path()
    parsed = _PARSERS[section](str(path), 0, entry)
    doc = _read_user_doc(path)
    kept = [e for e in doc.get(section) or [] if not (isinstance(e, dict) and e.get("id") == parsed.id)]
    doc[section] = [*kept, entry]
    # The whole file, merged with the shipped catalog, must stay valid before it is written.
    _merge(_shipped(), parse_catalog(yaml.safe_dump(doc), str(path)))
    _write_user_doc(path, doc)
    return parsed


def add_user_embedder(entry: dict[str, Any]) -> Embedder:
    return add_user_entry("embedders", entry)


def remove_user_entry(section: str, entry_id: str) -> bool:
    """Remove an entry from the user's catalog; False if the user's catalog has none."""
    path = user_catalog_path()
    doc = _read_user_doc(path)
    entries = doc.get(section) or []
    kept = [e for e in entries if not (isinstance(e, dict) and e.get("id") == entry_id)]
    if len(kept) == len(entries):
        return False
    doc[section] = kept
    _write_user_doc(path, doc)
    return True
