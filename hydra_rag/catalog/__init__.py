"""The catalog: embedders, chat models, rerankers and bundles, shipped YAML merged with the
user's, validated into typed records whose errors name the file, the entry and the field.

This module loads and merges the shipped and user catalogs, looks entries up and edits the user's
catalog; the records are in records.py, their validation in parse.py, the key checks in keys.py.
Every name callers import from `hydra_rag.catalog` is re-exported here."""

from __future__ import annotations

import difflib
import functools
import stat
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml

from hydra_rag.catalog.keys import ENV_NAME, NO_KEYS, looks_like_secret
from hydra_rag.catalog.parse import (
    _PARSERS,
    PARAMS,
    parse_bundle,
    parse_catalog,
    parse_embedder,
    parse_model,
    parse_reranker,
)
from hydra_rag.catalog.parse import _check as _check  # persona.py checks its params with it
from hydra_rag.catalog.records import (
    CHAT_FORMATS,
    CHAT_PORTS,
    CONVERTS,
    EMBED_PORTS,
    KINDS,
    POOLINGS,
    RERANK_PORTS,
    Bundle,
    Catalog,
    ChatModel,
    Embedder,
    Reranker,
    Source,
)
from hydra_rag.errors import ConfigError, ModelError
from hydra_rag.paths import dirs

__all__ = ["CHAT_FORMATS", "CHAT_PORTS", "CONVERTS", "EMBED_PORTS", "ENV_NAME", "KINDS", "NO_KEYS",
           "PARAMS", "POOLINGS", "RERANK_PORTS", "Bundle", "Catalog", "ChatModel", "Embedder",
           "Reranker", "Source", "add_user_embedder", "add_user_entry", "foreign_for",
           "get_embedder", "get_model", "get_reranker", "load_bundles", "load_catalog",
           "load_embedders", "load_models", "load_rerankers", "looks_like_secret", "parse_bundle",
           "parse_catalog", "parse_embedder", "parse_model", "parse_reranker", "remove_user_entry",
           "table_embedder", "user_catalog_path", "user_entry"]

_E = TypeVar("_E")


def user_catalog_path() -> Path:
    return dirs().config / "catalog.yaml"


@functools.cache
def _shipped() -> Catalog:
    """The shipped catalog, parsed once per process (its records are frozen)."""
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
    try:
        st = user.stat()
    except OSError:
        st = None
    if st is None or not stat.S_ISREG(st.st_mode):
        return _merge(_shipped(), Catalog({}, {}, {}))
    return _merge(_shipped(), _parse_user(str(user), st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                                          st.st_size))


@functools.lru_cache(maxsize=4)
def _parse_user(path: str, mtime_ns: int, ctime_ns: int, inode: int, size: int) -> Catalog:
    """The user's catalog, parsed again only when the file changed (a run asks for it often)."""
    return parse_catalog(Path(path).read_text(encoding="utf-8"), path)


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


def user_entry(section: str, entry_id: str) -> dict[str, Any] | None:
    """The entry as written in the user's catalog (its raw fields), or None."""
    for e in _read_user_doc(user_catalog_path()).get(section) or []:
        if isinstance(e, dict) and e.get("id") == entry_id:
            return dict(e)
    return None


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
