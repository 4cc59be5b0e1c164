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


def private_dir(path: Path) -> Path:
    """`path` made (with its parents) for this user alone, 0o700, and narrowed to that if it
    was made wider before: hydra-rag's state and cache hold text of indexed files, chat
    sessions and logs, and a folder's mode is the gate to everything in it."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        st = path.stat()
        if st.st_mode & 0o077 and st.st_uid == os.getuid():
            os.chmod(path, 0o700)
    except OSError:
        pass  # not ours to narrow (a shared HYDRA_RAG_HOME): left as it is
    return path


def own_dirs() -> None:
    """The state folder made private before anything writes to it (a sidecar started by any
    command logs there), and a cache folder made wider by an older version narrowed."""
    state_dir()
    if dirs().cache.is_dir():
        cache_dir()


def state_dir() -> Path:
    """The state folder (registry, sidecars and their logs, sessions), made private."""
    return private_dir(dirs().state)


def cache_dir() -> Path:
    """The cache folder (downloads), made private."""
    return private_dir(dirs().cache)


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
