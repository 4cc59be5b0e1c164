"""Where hydra-rag keeps things: XDG folders, or all of them under one HYDRA_RAG_HOME."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

APP = "hydra-rag"
INDEX_DIR = ".hydra-index"


@dataclass(frozen=True)
class Dirs:
    """The four folders: config (user catalogs), data (models), state (registry, sidecars), cache."""

    config: Path
    data: Path
    state: Path
    cache: Path

    @property
    def models(self) -> Path:
        return self.data / "models"

    @property
    def sidecars(self) -> Path:
        return self.state / "sidecars"

    @property
    def registry(self) -> Path:
        return self.state / "stores.json"


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    # XDG says relative values are invalid and must be ignored.
    if value and os.path.isabs(value):
        return Path(value)
    return Path.home() / fallback


def dirs() -> Dirs:
    """Resolve the folders now (tests change HYDRA_RAG_HOME between calls)."""
    home = os.environ.get("HYDRA_RAG_HOME")
    if home:
        root = Path(home).expanduser().resolve()
        return Dirs(root / "config", root / "data", root / "state", root / "cache")
    return Dirs(
        _xdg("XDG_CONFIG_HOME", ".config") / APP,
        _xdg("XDG_DATA_HOME", ".local/share") / APP,
        _xdg("XDG_STATE_HOME", ".local/state") / APP,
        _xdg("XDG_CACHE_HOME", ".cache") / APP,
    )


def store_names(stores: Iterable[str | Path]) -> dict[str, str]:
    """One short name per indexed folder, the same in `search`, the chat's sources and JSON:
    its base name, with as many parent folders as it takes to tell two of one name apart."""
    paths = [Path(s) for s in dict.fromkeys(map(str, stores))]
    depth = dict.fromkeys(paths, 1)
    while True:
        names = {p: "/".join(p.parts[-depth[p]:]) for p in paths}
        clash = [p for p in paths
                 if list(names.values()).count(names[p]) > 1 and depth[p] < len(p.parts)]
        if not clash:
            return {str(p): names[p] for p in paths}
        for p in clash:
            depth[p] += 1
