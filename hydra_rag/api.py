"""What every front end calls: the folders a command works on, a chat over them, bundles, the
registry's stores. The CLI (and the servers) parse their input, call these, and render the
result; none of them decides which folders a chat searches or what a bundle holds.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra_rag.documents import page_fields
from hydra_rag.errors import HydraError, UsageError, unreadable
from hydra_rag.paths import (  # noqa: F401 (part of the API)
    INDEX_DIR,
    escape_name,
    stat_key,
    store_names,
    typed_path,
)

Warn = Callable[[str], None]


def _ignore(_: str) -> None:
    pass


def folders(paths: list[Path] | None, all_: bool = False,
            tags: list[str] | None = None) -> tuple[list[Path], bool]:
    """The indexed folders a command works on, and whether it is federated (several folders,
    a broken one skipped rather than fatal): the registered ones (`all_`, `tags`), else each
    path's nearest index, else the nearest index at or above the working folder."""
    from hydra_rag.search.folder_state import find_index_root
    from hydra_rag.store import registry

    if all_ or tags:
        if paths:
            raise UsageError("--path excludes --all and --tag")
        return [Path(p) for p in registry.chosen(all_, tags)], True
    roots = list(dict.fromkeys(find_index_root(p) for p in (paths or [Path.cwd()])))
    return roots, len(roots) > 1


# The warm process (hydra_rag.warm) keeps searchers between commands: their tables and the
# copies of small tables in memory are what makes its searches quick.
KEEP_SEARCHERS = False
_SEARCHERS: dict[tuple[Any, ...], Any] = {}
_KEPT = 8


def searcher(roots: list[Path], settings: Any, skip_broken: bool = False) -> Any:
    """A Searcher over `roots`: a new one, or in the warm process the one kept for the same
    folders, settings and user catalogs. One that skipped a broken folder is not kept, so
    that the folder is tried again once it is indexed."""
    from hydra_rag.search.retrieve import Searcher

    if not KEEP_SEARCHERS:
        return Searcher(roots, settings, skip_broken=skip_broken)
    key = (tuple(str(r) for r in roots), settings, skip_broken, _catalog_stamp(),
           _index_stamp(roots))
    found = _SEARCHERS.pop(key, None)
    for other in [k for k in _SEARCHERS if k[:4] == key[:4]]:  # its index changed since
        _SEARCHERS.pop(other).close()
    if found is None:
        found = Searcher(roots, settings, skip_broken=skip_broken)
        if found.warnings:
            return found
    _SEARCHERS[key] = found  # the most recently used last
    while len(_SEARCHERS) > _KEPT:
        _SEARCHERS.pop(next(iter(_SEARCHERS))).close()
    return found


def _index_stamp(roots: list[Path]) -> tuple[Any, ...]:
    """What each folder's index is now (its meta.yaml and its folder, as stat sees them): a
    kept Searcher answers only while they are as it found them, so that a rebuilt, garbled or
    removed index is met as a fresh process meets it."""
    out: list[Any] = []
    for root in roots:
        for path in (root / ".hydra-index", root / ".hydra-index" / "meta.yaml"):
            out.append(stat_key(path, lambda st: (st.st_ino, st.st_mtime_ns, st.st_size)))
    return tuple(out)


def _catalog_stamp() -> tuple[tuple[str, int], ...]:
    """The user's configuration files and when they changed (catalogs, config.yaml)."""
    from hydra_rag.paths import dirs

    try:
        return tuple(sorted((e.name, e.stat().st_mtime_ns) for e in os.scandir(dirs().config)))
    except OSError:
        return ()


def within(paths: list[Path] | None) -> tuple[tuple[str, str], ...]:
    """What each `--path` keeps a search to, as `PathFilter.within` takes it: (its folder, the
    file or subfolder relative to it, "" for the folder itself). A path that is neither an
    indexed folder nor an indexed file or folder inside one is an error saying which."""
    from hydra_rag.search.folder_state import find_index_root
    from hydra_rag.store.index_dir import Store

    out = []
    for path in paths or []:
        target = typed_path(path).resolve()
        root = find_index_root(target)  # "no such file or folder", "no index at or above"
        rel = escape_name(target.relative_to(root).as_posix()) if target != root else ""
        if rel:
            recorded = Store(root).file_list.light()
            if target.is_dir():
                if not any(r.startswith(rel + "/") and e.chunks for r, e in recorded.items()):
                    raise HydraError(f"{path}: no indexed file under it in {root} — see "
                                     f"`hydra-rag status {root} --files`")
            elif rel not in recorded:
                raise HydraError(f"{path}: not in the index of {root} (new since, or skipped) "
                                 f"— see `hydra-rag status {root} --files`")
            elif not recorded[rel].chunks:
                why = recorded[rel].skip or "nothing to search in it"
                raise HydraError(f"{path}: not indexed ({why}) — see `hydra-rag status {root} "
                                 "--files`")
        out.append((str(root), rel))
    return tuple(out)


def bundle_roots(bundle: Any, warn: Warn = _ignore) -> list[Path] | None:
    """The folders a bundle retrieves from; None when it names none."""
    from hydra_rag.search.folder_state import find_index_root
    from hydra_rag.store import registry

    roots: list[Path] = [find_index_root(Path(p)) for p in bundle.rag_index]
    if bundle.rag_all or bundle.rag_tags:
        for path, entry in sorted(registry.stores().items()):
            if bundle.rag_all or set(bundle.rag_tags) & set(entry.get("tags", [])):
                if (Path(path) / INDEX_DIR / "meta.yaml").is_file():
                    roots.append(Path(path))
                else:
                    warn(f"skipping {path}: its index is gone")
        if not roots:
            raise HydraError(f"bundle {bundle.id!r}: no indexed folder matches "
                             + ("--rag-all" if bundle.rag_all
                                else f"tags {', '.join(bundle.rag_tags)}"))
    return list(dict.fromkeys(roots)) or None


def model_or_default(model: str | None) -> str:
    """The model id or bundle alias to chat with: the one named, else setting `default_model`."""
    from hydra_rag.config import load_settings

    return model or load_settings().default_model


def open_chat(model: str | None = None, rag: list[Path] | None = None, no_rag: bool = False,
              top_k: int | None = None, session: str | None = None, new: bool = False,
              system: str | None = None, system_file: Path | None = None,
              temperature: float | None = None, max_tokens: int | None = None,
              save: bool = True, rag_all: bool = False, rag_tag: list[str] | None = None,
              rerank: bool | None = None, rerank_top: int | None = None,
              warn: Warn = _ignore) -> Any:
    """A Chat for a model id or a bundle alias (None: `default_model`). Precedence: argument >
    bundle > model defaults. Folders: `rag_all`/`rag_tag`, else `rag`, else the bundle's, else
    the nearest index (a bundle without a corpus and without a nearby index chats without
    retrieval). A bundle's chats are saved under the bundle's name, not its base model's."""
    from hydra_rag.answer import sessions
    from hydra_rag.answer.chat import Chat
    from hydra_rag.catalog import get_model, load_bundles
    from hydra_rag.config import load_settings
    from hydra_rag.search.folder_state import find_index_root

    if system and system_file:
        raise UsageError("--system and --system-file exclude each other")
    if system_file is not None:
        try:
            system = system_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise unreadable(system_file, exc) from None
    name = model_or_default(model)
    bundle = load_bundles().get(name)
    entry = get_model(bundle.base if bundle else name)
    params: dict[str, Any] = dict(bundle.params) if bundle else {}
    if temperature is not None:
        params["temperature"] = temperature
    if max_tokens is not None:
        params["max_tokens"] = max_tokens
    roots: list[Path] = []
    federated = False
    if not no_rag:
        if rag_all or rag_tag:
            roots, federated = folders(rag, rag_all, rag_tag)
        elif rag:
            for p in rag:
                if not p.exists() and str(p) in load_bundles():
                    raise UsageError(f"--rag {p}: that is a bundle, not a folder — name it as "
                                     f"the model instead (`{p} \"question\"`)")
            roots = [find_index_root(p) for p in rag]
        elif bundle is not None:
            named = bundle_roots(bundle, warn)
            if named is not None:
                roots, federated = named, bool(bundle.rag_all or bundle.rag_tags)
            else:
                try:
                    roots = [find_index_root(Path.cwd())]
                except HydraError:
                    roots = []  # a persona without a corpus chats without retrieval
        else:
            roots = [find_index_root(Path.cwd())]
    if system is None and bundle is not None:
        system = bundle.system_prompt or None
    k = top_k or (bundle.rag_top_k if bundle and bundle.rag_top_k else 5)
    if rerank is None and rerank_top is not None:
        rerank = True  # `--rerank-top N` alone turns reranking on
    settings = load_settings(rerank=rerank, rerank_top=rerank_top)
    session = session or sessions.default_name(bundle.id if bundle else entry.id, roots)
    return Chat(entry, roots, settings, session=session, new=new, system=system,
                params=params, top_k=k, use_rag=bool(roots), save=save,
                federated=federated or len(roots) > 1, bundle=bundle.id if bundle else None)


def create_bundle(base: str, persona_file: Path, alias: str | None = None,
                  rag_index: list[Path] | None = None, rag_tag: list[str] | None = None,
                  rag_all: bool = False, top_k: int | None = None, replace: bool = False,
                  warn: Warn = _ignore) -> str:
    """Freeze model + persona + parameters + corpus under one alias in the user catalog;
    returns the alias."""
    from hydra_rag.answer.persona import parse_persona
    from hydra_rag.catalog import add_user_entry, get_model, load_catalog

    get_model(base)
    try:
        text = persona_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable(f"persona {persona_file}", exc) from None
    system, params = parse_persona(text, str(persona_file))
    name = alias or f"{base}-{persona_file.stem}"
    if not re.fullmatch(r"[A-Za-z0-9][\w.+@-]{0,79}", name):
        raise UsageError(f"alias {name!r}: use letters, digits and . _ + @ - (no spaces), "
                         "starting with a letter or digit")
    cat = load_catalog()
    if name in cat.models:
        raise HydraError(f"{name!r} is a model id; pick another alias")
    if name in cat.bundles and not replace:
        raise HydraError(f"bundle {name!r} exists ({cat.bundles[name].origin}); pass --replace "
                         "to overwrite it")
    paths = []
    for p in rag_index or []:
        folder = p.expanduser().resolve()
        if not folder.exists():
            raise HydraError(f"--rag-index {p}: no such folder")
        if not folder.is_dir():
            raise UsageError(f"--rag-index {p}: not a folder")
        if not (folder / INDEX_DIR / "meta.yaml").is_file():
            warn(f"{folder} has no index yet — run `hydra-rag index {folder}`")
        paths.append(str(folder))
    entry: dict[str, Any] = {"id": name, "base": base, "system_prompt": system}
    if params:
        entry["params"] = params
    if paths:
        entry["rag_index"] = paths if len(paths) > 1 else paths[0]
    if rag_tag:
        entry["rag_tags"] = list(rag_tag)
    if rag_all:
        entry["rag_all"] = True
    if top_k:
        entry["rag_top_k"] = top_k
    add_user_entry("bundles", entry)
    return name


def store_rows() -> list[dict[str, Any]]:
    """Every registered folder: its tags, chunks per table, embedders, when it was last
    indexed, and the problem that keeps it from being searched ("" when none), one line."""
    from hydra_rag.store import registry
    from hydra_rag.store.index_dir import Store

    rows = []
    for path, entry in registry.stores().items():
        problem = registry.health(path)
        chunks: dict[str, int] = {}
        embedders: dict[str, str] = {}
        if not problem:
            try:
                store = Store(Path(path))
                meta = store.read_meta()
                embedders = {t: v.get("embedder") for t, v in meta.get("tables", {}).items()}
                chunks = store.file_list.chunk_totals()
            except HydraError as exc:
                problem = str(exc)
        rows.append({"path": path, "tags": entry.get("tags", []), "chunks": chunks,
                     "embedders": embedders, "last_indexed": entry.get("last_indexed"),
                     "folder_exists": Path(path).is_dir(),
                     "index_exists": (Path(path) / INDEX_DIR / "meta.yaml").is_file(),
                     "problem": problem})
    return rows


def hit_json(rank: int, h: Any, query: str, names: dict[str, str]) -> dict[str, Any]:
    """One hit as `search --json`, `/api/search` and the MCP `search` tool all show it."""
    from hydra_rag.search.evidence import matching_lines, weak

    return {"rank": rank, "path": h.path, "store": h.store, "store_name": names.get(h.store, ""),
            "kind": h.kind, "line_start": h.line_start, "line_end": h.line_end,
            **page_fields(h.page_unit, h.page_start, h.page_end),
            "section": h.section, "score": round(h.score, 6), "text": h.text, "ranks": h.ranks,
            **({"rerank": round(h.rerank, 4)} if h.rerank is not None else {}),
            # the lines shown as the reason it matched; weak: it does not bear on the query
            "matches": [m.number for m in matching_lines(h.text, h.line_start, query)],
            "weak": weak(h, query),
            **({"signals": {n: round(v, 4) for n, v in h.signals.items()}} if h.signals else {})}


def file_json(rank: int, f: Any, query: str, names: dict[str, str]) -> dict[str, Any]:
    """One file of a file-level search (`search --files --json`, `group_by: file`): its
    score and its best passages, each as `hit_json` shows a hit."""
    return {"rank": rank, "path": f.path, "store": f.store, "store_name": names.get(f.store, ""),
            "kind": f.kind, "score": round(f.score, 6),
            "passages": [hit_json(i, h, query, names) for i, h in enumerate(f.passages, 1)]}
