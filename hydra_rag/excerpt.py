"""Read around a hit: the lines of an indexed file, with the section they stand in.

Only files the index holds can be read: a path outside every indexed folder (or, for a
server, outside its scope), a file the walker leaves out (ignored, secret, binary…) or a link
out of the folder is refused. So `get` shows nothing `search` could not have shown.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from hydra_rag.errors import HydraError

DEFAULT_LINES = 40  # lines shown from START when no END is given
_SPEC = re.compile(r"^(?P<path>.+?):(?P<start>\d+)(?:-(?P<end>\d+))?$")


@dataclass(frozen=True)
class Excerpt:
    root: Path  # the indexed folder
    path: str  # relative to root, as search shows it
    line_start: int
    line_end: int
    lines: list[str]
    total: int  # lines in the file
    section: str  # the headings the first line stands under ("Guide › Install")
    changed: bool  # the file differs from what was indexed (lines may have moved)


def parse_spec(spec: str) -> tuple[str, int | None, int | None]:
    """`PATH`, `PATH:START` or `PATH:START-END` → (path, start, end). A path that exists as
    typed wins, so a file name with a colon in it still reads."""
    m = _SPEC.match(spec)
    if m is None or Path(spec).exists():
        return spec, None, None
    start = int(m.group("start"))
    end = int(m.group("end")) if m.group("end") else None
    return m.group("path"), start, end


def read_excerpt(target: str | Path, start: int | None = None, end: int | None = None,
                 scope: list[Path] | None = None, base: Path | None = None) -> Excerpt:
    """Lines START..END (1-based, inclusive) of an indexed file; START alone gives
    DEFAULT_LINES lines, neither gives the whole file. `target` is absolute, relative to
    `base` (default: the working folder), or — with a `scope` — relative to one of its
    folders. With a `scope`, only files of those folders are read."""
    from hydra_rag.chunk import section_at
    from hydra_rag.retrieve import find_index_root
    from hydra_rag.store import Store

    if start is not None and start < 1:
        raise HydraError(f"line numbers start at 1, not {start}")
    if start is not None and end is not None and end < start:
        raise HydraError(f"the range {start}-{end} ends before it starts")
    path = _locate(Path(target).expanduser(), scope, base or Path.cwd())
    real = path.resolve()
    if not real.is_file():
        raise HydraError(f"{target}: no such file")
    try:
        root = find_index_root(real.parent)
    except HydraError:
        raise HydraError(f"{target} is not in an indexed folder (`hydra-rag stores list` shows "
                         "them)") from None
    if scope is not None and root not in {r.resolve() for r in scope}:
        raise HydraError(f"{target} is not in the folders searched here")
    rel = real.relative_to(root).as_posix()
    entry = Store(root).read_files().get(rel)
    if entry is None or entry.kind is None or entry.skip:
        raise HydraError(f"{rel} is not in the index of {root}: the walker leaves it out, or it "
                         f"is new (`hydra-rag index {root} --dry-run` shows why)")
    try:
        text = real.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HydraError(f"cannot read {rel}: {exc}") from None
    st = real.stat()
    changed = (st.st_size, st.st_mtime_ns) != (entry.size, entry.mtime_ns)
    lines = text.splitlines()
    total = len(lines)
    first = start or 1
    last = end if end is not None else (first + DEFAULT_LINES - 1 if start else total)
    if first > max(total, 1):
        raise HydraError(f"{rel} has {total} lines; line {first} is past its end")
    last = min(last, total)
    from hydra_rag.chunk import markup_of

    return Excerpt(root, rel, first, last, lines[first - 1 : last], total,
                   section_at(text, markup_of(rel), first), changed)


def _locate(path: Path, scope: list[Path] | None, base: Path) -> Path:
    """An absolute path for `path`: as given, or under `base`, or under a folder of `scope`.
    Links are resolved by the caller; `..` may not climb out of a scope folder."""
    if path.is_absolute():
        return path
    if scope:
        for root in scope:
            candidate = root / path
            if os.path.lexists(candidate):
                return candidate
        return scope[0] / path
    return base / path
