"""Advisory file locks (flock): released by the kernel when the holder dies, even by kill -9."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def file_lock(path: Path, wait: float = 0.0, label: str = "") -> Iterator[bool]:
    """Hold an exclusive lock on `path`; yields False (not holding it) if `wait` seconds pass.
    The holder writes its pid (and `label`, what it is) into the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {label}".strip().encode())
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def lock_holder(path: Path) -> str:
    """The pid written by the current holder of a lock file, or "" if unknown."""
    return _written(path).partition(" ")[0]


def lock_label(path: Path) -> str:
    """What the current holder of a lock file said it is ("" if nothing)."""
    return _written(path).partition(" ")[2]


def _written(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def write_atomic(path: Path, data: str, mode: int | None = None) -> None:
    """Write a file so that readers see the old or the new content, never a torn one. `mode`:
    the file has it from its first byte (not the umask's, then narrowed)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if mode is None:
        f = tmp.open("w", encoding="utf-8")
    else:
        tmp.unlink(missing_ok=True)  # one a crash left may be wider: O_EXCL makes a new one
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        f = os.fdopen(fd, "w", encoding="utf-8")
    with f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
