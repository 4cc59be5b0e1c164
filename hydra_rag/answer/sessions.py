"""Saved chat sessions: the user's own words, the answers and their sources, per turn."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

from hydra_rag.errors import HydraError
from hydra_rag.locks import write_atomic
from hydra_rag.paths import dirs, private_dir, state_dir


def sessions_dir() -> Path:
    return dirs().state / "sessions"


def default_name(model_id: str, roots: list[Path]) -> str:
    """One session per folder set and model, e.g. `cool-app-smollm2-135m-3fa2c1`."""
    if not roots:
        return f"{_slug(model_id)}-norag"
    digest = hashlib.sha256("\0".join(sorted(map(str, roots))).encode()).hexdigest()[:6]
    label = "+".join(_slug(r.name) or "root" for r in roots)[:40]
    return f"{label}-{_slug(model_id)}-{digest}"


def _slug(text: str) -> str:
    """A name fit for a session file: runs of other characters (spaces…) become one `_`."""
    return re.sub(r"[^\w.+@-]+", "_", text).strip("_")


def _path(name: str) -> Path:
    if not re.fullmatch(r"[\w.+@-]{1,120}", name):
        raise HydraError(f"invalid session name {name!r}: use letters, digits, . _ + @ -")
    return sessions_dir() / f"{name}.json"


def load(name: str) -> dict[str, Any] | None:
    """A saved session, or None if there is none; a damaged file is a clear error."""
    path = _path(name)
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or not isinstance(doc.get("turns"), list):
            raise ValueError("no turns list")
        return doc
    except (ValueError, UnicodeDecodeError) as exc:
        raise HydraError(f"session file {path} is damaged ({exc}); start afresh with --new "
                         f"or remove it with `hydra-rag sessions rm {name}`") from None


def save(doc: dict[str, Any]) -> Path:
    path = _path(doc["name"])
    state_dir()  # a chat holds what the files said: the folder above is the gate
    private_dir(path.parent)
    doc["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    write_atomic(path, json.dumps(doc, ensure_ascii=False, indent=1))
    return path


def all_sessions() -> list[dict[str, Any]]:
    out = []
    folder = sessions_dir()
    if folder.is_dir():
        for p in sorted(folder.glob("*.json")):
            try:
                doc = json.loads(p.read_text(encoding="utf-8"))
                out.append({"name": p.stem, "model": doc.get("model"), "stores": doc.get("stores"),
                            "turns": len(doc.get("turns", [])), "updated": doc.get("updated")})
            except (ValueError, OSError):
                out.append({"name": p.stem, "model": None, "stores": None, "turns": None,
                            "updated": None, "damaged": True})
    return out


def remove(name: str) -> bool:
    path = _path(name)
    if path.is_file():
        path.unlink()
        return True
    return False
