"""Who may read an index: no one the indexed files keep out. `.hydra-index/` holds the text of
every file it indexed, so its mode is the gate: 0o700 when a file in it is one other accounts
cannot read, wider (0o755, less the umask) only when every one is readable by them. The
setting `index_access` (auto, private, shared) decides otherwise.

The folder is made 0o700 and widened at the end of a run, never the other way round: there is
no moment when a private file's text sits in a folder others can enter. An index made wide by an
older version is narrowed as soon as a run walks a private file, before it reads one.

A private index (auto) is widened only by a run that wrote it whole: the first, or a rebuild
(`index --full`). After a private file leaves, its text is still on disk: LanceDB marks its rows
deleted and keeps them in the data files, which no later run rewrites.
"""

from __future__ import annotations

import os
from pathlib import Path

from hydra_rag.errors import HydraError
from hydra_rag.paths import folders_under, narrow_tree

PRIVATE_MODE = 0o700


def _umask() -> int:
    """The process umask, read without changing it (os.umask sets it, for a moment, for every
    thread: a file another thread made then would be world-writable)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def wanted(setting: str, private_files: int) -> int:
    """The mode the index folder gets: private when a file in it is (auto) or when said."""
    if setting == "private" or (setting == "auto" and private_files):
        return PRIVATE_MODE
    return 0o755 & ~_umask()


def create(index_dir: Path) -> None:
    """Make the index folder private; a run widens it when it may (`settle`)."""
    try:
        index_dir.mkdir(mode=PRIVATE_MODE, exist_ok=True)
    except OSError as exc:
        raise HydraError(f"cannot create {index_dir}: {exc.strerror}") from None


def narrow(index_dir: Path, mode: int) -> None:
    """Take away what `mode` does not give (before any file is read): an index made wider by
    an older version, or before a private file came into the folder. Every folder under it
    too: an account that entered one while the index was wide keeps its way in until then."""
    current = _mode(index_dir)
    if current is not None and current & ~mode:
        narrow_tree(index_dir, mode)


def settle(index_dir: Path, mode: int, widen: bool = True) -> bool:
    """Give the index folder `mode` (at the end of a run, when what it holds is what the walk
    saw), and its folders, which `narrow` took from, what it gives others. `widen` False:
    only take away. Returns whether that kept it narrower than `mode`. A folder that cannot
    be widened stays private, which is no harm."""
    current = _mode(index_dir)
    if current is None:
        return False
    target = mode if widen else current & mode
    if current != target:
        try:
            os.chmod(index_dir, target)
            if target & ~current:
                for sub in folders_under(index_dir):
                    os.chmod(sub, (sub.lstat().st_mode & 0o777) | (target & 0o055))
        except OSError:
            pass
    return target != mode


def is_private(index_dir: Path) -> bool:
    """Whether no other account may enter the index folder (as it is now)."""
    current = _mode(index_dir)
    return current is not None and not current & 0o077


def _mode(path: Path) -> int | None:
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        return None
