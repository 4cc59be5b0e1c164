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
from hydra_rag.walk import read_indexable, read_text

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
    if scope is not None and ".." in Path(target).parts:  # a client's path stays in the scope
        raise HydraError(f"{target}: `..` is not allowed here; give the path inside its folder")
    path = _locate(str(target), scope, base or Path.cwd())
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
    st = real.stat()
    changed = (st.st_size, st.st_mtime_ns) != (entry.size, entry.mtime_ns)
    text, why = read_indexable(real, included=False) if changed else read_text(real)
    if text is None:
        # Changed since indexing into something the walker would not index (a key pasted in,
        # a binary): what search could never show, get does not show either.
        raise HydraError(f"{rel} changed since it was indexed and is no longer indexable "
                         f"({why}) — `hydra-rag index {root}` updates the index")
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


def _locate(target: str, scope: list[Path] | None, base: Path) -> Path:
    """An absolute path for `target`, as `search` prints it: absolute; relative to `base` (the
    working folder); relative to the index root above `base`; or `NAME:path` with a folder's
    short name (several folders searched). With a `scope`, relative to one of its folders.
    Links are resolved by the caller, which also refuses what climbs out of a folder."""
    path = Path(target).expanduser()
    if path.is_absolute():
        return path
    roots = list(scope or [])
    if not scope:
        if os.path.lexists(base / path):
            return base / path
        try:
            from hydra_rag.retrieve import find_index_root

            roots.append(find_index_root(base))
        except HydraError:
            pass
        from hydra_rag import registry

        roots += [Path(p) for p in registry.stores()]
    for root in roots:
        if os.path.lexists(root / path):
            return root / path
    # NAME:path — NAME is the end of a folder's path (`docs`, `b/docs`), as search names it
    name, sep, rest = target.partition(":")
    if sep and rest and name:
        tail = Path(name).parts
        for root in roots:
            if root.parts[-len(tail):] == tail and os.path.lexists(root / rest):
                return root / rest
    return (roots[0] if scope else base) / path
