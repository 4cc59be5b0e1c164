"""The machine-wide list of indexed folders (with tags), kept in the state folder."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from hydra_rag.locks import file_lock, write_atomic
from hydra_rag.paths import dirs


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


def register(root: Path, tags: list[str] | None = None) -> dict[str, Any]:
    """Record (or refresh) a folder after it was indexed; tags are added, never dropped here."""
    path = dirs().registry
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.with_suffix(".lock"), wait=30):
        doc = _load(path)
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        entry = doc["stores"].get(str(root)) or {"tags": [], "registered": now}
        entry["tags"] = sorted(set(entry.get("tags", [])) | set(tags or []))
        entry["last_indexed"] = now
        doc["stores"][str(root)] = entry
        write_atomic(path, json.dumps(doc, indent=2, ensure_ascii=False))
    return entry
