"""The machine-wide list of indexed folders (with tags), kept in the state folder."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from hydra_rag.locks import file_lock, write_atomic
from hydra_rag.paths import dirs, stat_key, state_dir


def _load(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and isinstance(doc.get("stores"), dict):
            return doc
    except (OSError, ValueError):
        pass
    return {"version": 1, "stores": {}}


def stores() -> dict[str, dict[str, Any]]:
    """Registered folders: absolute path -> {tags, registered, last_indexed}."""
    return dict(_load(dirs().registry)["stores"])


def stamp() -> tuple[int, int, int] | None:
    """When the registry last changed (its file's inode, mtime and size: each write replaces
    the file; None: there is none yet): a long-running server or watch reads it again only
    when this moves."""
    return stat_key(dirs().registry, lambda st: (st.st_ino, st.st_mtime_ns, st.st_size))


def register(root: Path, tags: list[str] | None = None) -> dict[str, Any]:
    """Record (or refresh) a folder after it was indexed; tags are added, never dropped here."""
    path = dirs().registry
    state_dir()
    with file_lock(path.with_suffix(".lock"), wait=30):
        doc = _load(path)
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        entry = doc["stores"].get(str(root)) or {"tags": [], "registered": now}
        entry["tags"] = sorted(set(entry.get("tags", [])) | set(tags or []))
        entry["last_indexed"] = now
        doc["stores"][str(root)] = entry
        write_atomic(path, json.dumps(doc, indent=2, ensure_ascii=False))
    return entry


def _update(change: Any) -> dict[str, Any]:
    """Apply `change(stores)` to the registry under its lock; returns the new stores."""
    path = dirs().registry
    state_dir()
    with file_lock(path.with_suffix(".lock"), wait=30):
        doc = _load(path)
        change(doc["stores"])
        write_atomic(path, json.dumps(doc, indent=2, ensure_ascii=False))
        return dict(doc["stores"])


def _key(root: Path) -> str:
    from hydra_rag.errors import HydraError

    key = str(root.expanduser().resolve())
    if key not in stores():
        raise HydraError(f"{key} is not a registered folder — see `hydra-rag stores list`")
    return key


def tag(root: Path, tags: list[str], remove: bool = False) -> list[str]:
    """Add (or remove) tags of a registered folder; returns its tags."""
    key = _key(root)

    def change(s: dict[str, Any]) -> None:
        have = set(s[key].get("tags", []))
        s[key]["tags"] = sorted(have - set(tags) if remove else have | set(tags))

    return list(_update(change)[key]["tags"])


def forget(root: Path) -> str:
    """Remove a folder from the registry; returns its key."""
    key = _key(root)
    _update(lambda s: s.pop(key, None))
    return key


def health(path: str) -> str:
    """"" if the folder and its index are there, else what is wrong."""
    folder = Path(path)
    if not folder.is_dir():
        return "folder is gone"
    if not (folder / ".hydra-index" / "meta.yaml").is_file():
        return "index is gone"
    return ""


def prune() -> list[str]:
    """Forget folders (or indexes) that no longer exist; returns them."""
    gone = [p for p in stores() if health(p)]
    _update(lambda s: [s.pop(p, None) for p in gone])
    return gone


def select(all_: bool = False, tags: list[str] | None = None) -> list[str]:
    """Registered folders, all of them or those with any of `tags`, in registry order."""
    return [p for p, e in stores().items()
            if all_ or set(tags or []) & set(e.get("tags", []))]


def chosen(all_: bool, tags: list[str] | None) -> list[str]:
    """`select`, or an error naming what was asked for and how to register a folder."""
    from hydra_rag.errors import HydraError

    picked = select(all_, tags)
    if not picked:
        what = "registered folders" if all_ else f"folders tagged {', '.join(tags or [])}"
        raise HydraError(f"no {what} — index one with `hydra-rag index PATH"
                         + (f" --tag {tags[0]}`" if tags else "`"))
    return picked
