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
from typing import Any

from hydra_rag.documents import page_fields
from hydra_rag.errors import HydraError, UsageError
from hydra_rag.paths import escape_name, unescape_name
from hydra_rag.read.walk import read_indexable, read_text

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
    # A document's pages (slides, chapters) the lines span; lines are its extracted text's
    page_start: int = 0
    page_end: int = 0
    page_unit: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"root": str(self.root), "path": self.path, "line_start": self.line_start,
                "line_end": self.line_end, "total_lines": self.total,
                **page_fields(self.page_unit, self.page_start, self.page_end),
                "section": self.section, "changed": self.changed}


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
                 scope: list[Path] | None = None, base: Path | None = None,
                 page: int | None = None) -> Excerpt:
    """Lines START..END (1-based, inclusive) of an indexed file; START alone gives
    DEFAULT_LINES lines, neither gives the whole file. `target` is absolute, relative to
    `base` (default: the working folder), or — with a `scope` — relative to one of its
    folders. With a `scope`, only files of those folders are read. A document's lines are
    those of its extracted text, and `page` gives one page (slide, chapter) of it."""
    from hydra_rag.read.chunk import section_at
    from hydra_rag.search.folder_state import find_index_root
    from hydra_rag.store.index_dir import Store

    if start is not None and start < 1:
        raise UsageError(f"line numbers start at 1, not {start}")
    if start is not None and end is not None and end < start:
        raise UsageError(f"the range {start}-{end} ends before it starts")
    if scope is not None and ".." in Path(target).parts:  # a client's path stays in the scope
        raise HydraError(f"{target}: `..` is not allowed here; give the path inside its folder")
    path = _locate(str(target), scope, base or Path.cwd())
    target = escape_name(str(target))  # as typed, for the messages: printable
    real = path.resolve()
    if real.is_dir():
        raise UsageError(f"{target}: not a file")
    if not real.is_file():
        raise HydraError(f"{target}: no such file")
    try:
        root = find_index_root(real.parent)
    except HydraError:
        raise HydraError(f"{target} is not in an indexed folder (`hydra-rag stores list` shows "
                         "them)") from None
    if scope is not None and root not in {r.resolve() for r in scope}:
        raise HydraError(f"{target} is not in the folders searched here")
    rel = escape_name(real.relative_to(root).as_posix())
    entry = Store(root).file_list.get(rel)
    if entry is None or entry.kind is None or entry.skip:
        raise HydraError(f"{rel} is not in the index of {root}: the walker leaves it out, or it "
                         f"is new (`hydra-rag index {root} --dry-run` shows why)")
    st = real.stat()
    changed = (st.st_size, st.st_mtime_ns) != (entry.size, entry.mtime_ns)
    doc = entry.doc
    if doc is not None:
        text, why, doc = document_text(real, root, doc, changed)
    else:
        text, why = read_indexable(real, included=False) if changed else read_text(real)
    if page is not None:
        if start is not None:
            raise UsageError("give lines or a page, not both")
        start, end = _page_lines(rel, doc, page, text)
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
    from hydra_rag.documents import text_anchors
    from hydra_rag.read.chunk import markup_of

    unit = doc.get("unit", "") if doc else ""
    shown = lines[first - 1 : last]
    pages = text_anchors(doc.get("starts") or [], first, "\n".join(shown)) if doc and unit else (0, 0)
    return Excerpt(root, rel, first, last, shown, total,
                   section_at(text, "md" if doc else markup_of(rel), first), changed,
                   pages[0], pages[1], unit if pages[0] else "")


def document_text(real: Path, root: Path, doc: dict[str, Any],
                  changed: bool) -> tuple[str | None, str, dict[str, Any]]:
    """A document's extracted text: the one indexed (from the cache), or, when the document
    changed since, the text it holds now (the index is behind: lines may have moved). Returns
    (text or None, why not, its extraction record)."""
    from hydra_rag.config import load_settings
    from hydra_rag.documents import Skip, format_of
    from hydra_rag.documents.cache import Cache
    from hydra_rag.read.source import reader_for
    from hydra_rag.store.index_dir import Store

    index_dir = Store(root).dir
    cached = None if changed else Cache(index_dir).get(doc.get("key", ""))
    if cached is not None:
        return cached.text, "", doc
    reader = reader_for(load_settings(), index_dir, write=False)
    try:
        ex, key = reader.read(real, format_of(real.name) or doc.get("format", ""))
    except Skip as s:
        return None, s.reason, doc
    finally:
        reader.close()
    return ex.text, "", {"key": key, "format": ex.format, "unit": ex.unit, "starts": ex.starts}


def _page_lines(rel: str, doc: dict[str, Any] | None, page: int,
                text: str | None) -> tuple[int, int]:
    """The lines of page (slide, chapter) `page` of a document."""
    starts = (doc or {}).get("starts") or []
    unit = (doc or {}).get("unit") or ""
    if not unit or not starts:
        raise HydraError(f"{rel} has no pages: give lines instead (PATH:START-END)")
    if not 1 <= page <= len(starts):
        raise HydraError(f"{rel} has {len(starts)} {unit}s; there is no {unit} {page}")
    total = len(text.splitlines()) if text else 0
    end = starts[page] - 1 if page < len(starts) else total
    if end < starts[page - 1] or starts[page - 1] > total:
        raise HydraError(f"{unit} {page} of {rel} is blank (no text on it)")
    return starts[page - 1], end


def _locate(target: str, scope: list[Path] | None, base: Path) -> Path:
    """An absolute path for `target`, as `search` prints it: absolute; relative to `base` (the
    working folder); relative to the index root above `base`; or `NAME:path` with a folder's
    short name (several folders searched). With a `scope`, relative to one of its folders.
    A name is looked for as typed, then as search shows it (escape_name's form: `caf\\xe9.txt`
    for a name that is not UTF-8). Links are resolved by the caller, which also refuses what
    climbs out of a folder."""
    roots = list(scope or [])
    if not scope and not Path(target).expanduser().is_absolute():
        try:
            from hydra_rag.search.folder_state import find_index_root

            roots.append(find_index_root(base))
        except HydraError:
            pass
        from hydra_rag.store import registry

        roots += [Path(p) for p in registry.stores()]
    typed = list(dict.fromkeys((target, unescape_name(target))))
    for name in typed:
        if (found := _find(name, roots, scope, base)) is not None:
            return found
    path = Path(target).expanduser()
    return path if path.is_absolute() else (roots[0] if scope else base) / path


def _find(target: str, roots: list[Path], scope: list[Path] | None, base: Path) -> Path | None:
    path = Path(target).expanduser()
    if path.is_absolute():
        return path if os.path.lexists(path) else None
    if not scope and os.path.lexists(base / path):
        return base / path
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
    return None
