"""Code navigation over the symbol table: where a name is defined, where it is used, and a
file's outline. One function each, which `hydra-rag def|refs|outline`, the MCP tools
`definition`, `references`, `outline` and the `/api/*` routes all call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra_rag.errors import HydraError, UsageError
from hydra_rag.paths import escape_name, on_disk, store_names
from hydra_rag.read.chunk import markup_of
from hydra_rag.search.definitions import BARE, Wanted, aside, defined, one_of, wanted
from hydra_rag.store.index_dir import Store
from hydra_rag.store.symbols import Entry

MAX_RESULTS = 200  # uses of a common name are many: the first ones, and the total


def asked(name: str) -> Wanted:
    """A name as typed (`send`, `Session.send`, `Session::send`, `send()`); any case is
    accepted when no name has the case typed. A UsageError for what is not a name (the CLI
    asks before it looks for an index)."""
    w = wanted(name) if BARE.fullmatch((name or "").strip()) else None
    if w is None:
        raise UsageError(f"{name!r} is not a name (letters, digits, _ and $, parts joined "
                         "by . :: # or ->)")
    return Wanted(w.name, w.scope, asked=True)


class _Lines:
    """Lines of the files named, read once each (as they are now on disk)."""

    def __init__(self) -> None:
        self._files: dict[Path, list[str]] = {}

    def line(self, root: Path, rel: str, n: int) -> str:
        path = on_disk(root, rel)
        if path not in self._files:
            try:
                self._files[path] = path.read_bytes().decode("utf-8", "replace").splitlines()
            except OSError:
                self._files[path] = []
        lines = self._files[path]
        return lines[n - 1].strip() if 0 < n <= len(lines) else ""


def _row(root: Path, names: dict[str, str], e: Entry, lines: _Lines) -> dict[str, Any]:
    return {"store": str(root), "store_name": names.get(str(root), ""), **e.to_json(),
            "text": lines.line(root, e.path, e.name_line)}


def _stores(roots: list[Path]) -> list[tuple[Path, Store]]:
    out = []
    for root in roots:
        store = Store(root)
        if not store.exists():
            raise HydraError(f"{root} has no index — run `hydra-rag index {root}`")
        out.append((root, store))
    return out


def definitions(roots: list[Path], name: str) -> dict[str, Any]:
    """Where `name` is defined in these folders, best first (as search puts them first):
    `{"name", "results": [{store, path, name, qualified, kind, scope, line_start, line_end,
    line, text}], "total"}`."""
    w = asked(name)
    names, lines = store_names(roots), _Lines()
    found = defined([store for _, store in _stores(roots)], w, strict=False)
    return {"name": name.strip(), "total": len(found),
            "results": [_row(s.root, names, e, lines) for s, e in found[:MAX_RESULTS]]}


def references(roots: list[Path], name: str) -> dict[str, Any]:
    """Where `name` is used (called, named as a type or class, implemented), file by file,
    tests and examples last: `{"name", "results": [...], "total", "others"}`; at most
    MAX_RESULTS. When these folders define the name, a use through a module that is not
    theirs (`re.escape` for their own `escape` function) is another's name: counted apart in
    `others` (`{"total", "through": [what they are reached through, up to 10]}`), not among
    the uses."""
    w = asked(name)
    names, lines = store_names(roots), _Lines()
    stores = _stores(roots)
    defs = [e for _, store in stores for e in store.file_list.definitions(w.name)
            if e.name == w.name]
    found: list[tuple[Path, Entry]] = []
    others: list[tuple[Path, Entry]] = []
    for root, store in stores:
        for e in store.file_list.references(w.name):
            if e.name == w.name:
                (found if one_of(e, defs) else others).append((root, e))
    found.sort(key=lambda re_: (aside(re_[1].path), str(re_[0]), re_[1].path,
                                re_[1].name_line))
    through = sorted({e.scope for _, e in others})
    return {"name": name.strip(), "total": len(found),
            "results": [_row(r, names, e, lines) for r, e in found[:MAX_RESULTS]],
            "others": {"total": len(others), "through": through[:10]}}


def outline(roots: list[Path], path: str) -> dict[str, Any]:
    """The definitions of one indexed file, in line order, each with its depth (0 top level):
    `{"store", "path", "language", "markup", "results": [...]}`. A file no grammar reads
    (Markdown, reStructuredText, a PDF or Word document…) has its headings instead, of
    kind `heading` (`markup` says whose syntax; a document's with its page). `path` is
    relative to its folder, or absolute."""
    from hydra_rag.read.grammars import language_of

    names, lines = store_names(roots), _Lines()
    for root, rel in _candidates(roots, path):
        store = Store(root)
        entry = store.file_list.get(rel) if store.exists() else None
        if entry is None or not entry.kind:
            continue
        defs = store.file_list.outline(rel)
        results = []
        for e in defs:
            depth = sum(1 for o in defs if o is not e and o.line_start <= e.line_start
                        and e.line_end <= o.line_end and (o.line_start, o.line_end)
                        != (e.line_start, e.line_end))
            results.append({**_row(root, names, e, lines), "depth": depth})
        language = language_of(rel, "") or ""
        markup = "" if language else ("md" if entry.doc is not None else markup_of(rel) or "")
        if markup:
            results = _headings(root, rel, entry, names, markup)
        return {"store": str(root), "store_name": names.get(str(root), ""), "path": rel,
                "language": language, "markup": markup, "results": results}
    raise UsageError(f"{path!r} is not an indexed file of "
                     + ", ".join(str(r) for r in roots))


def _headings(root: Path, rel: str, entry: Any, names: dict[str, str],
              markup: str) -> list[dict[str, Any]]:
    """A document's headings as outline rows: the text the index read (a document's
    extracted text, whose lines `get` shows), as it is now."""
    from hydra_rag.documents import anchors, page_fields
    from hydra_rag.read.chunk import SECTION_SEP, headings
    from hydra_rag.read.walk import read_text
    from hydra_rag.search.excerpt import document_text

    real = on_disk(root, rel)
    try:
        st = real.stat()
    except OSError:
        return []
    doc = entry.doc
    if doc is not None:
        changed = (st.st_size, st.st_mtime_ns) != (entry.size, entry.mtime_ns)
        text, _, doc = document_text(real, root, doc, changed)
    else:
        text, _ = read_text(real)
    if text is None:
        return []
    rows = []
    lines = text.splitlines()
    for h in headings(text, markup):
        row = {"store": str(root), "store_name": names.get(str(root), ""), "path": rel,
               "name": h.title, "qualified": SECTION_SEP.join((*h.above, h.title)),
               "kind": "heading", "scope": SECTION_SEP.join(h.above),
               "line_start": h.line_start, "line_end": h.line_end, "line": h.line_start,
               "text": lines[h.line_start - 1].strip(), "depth": h.depth}
        if doc and doc.get("unit"):
            first, _ = anchors(doc.get("starts") or [], h.line_start, h.line_start)
            row.update(page_fields(doc["unit"], first, first))
        rows.append(row)
    return rows


def _candidates(roots: list[Path], path: str) -> list[tuple[Path, str]]:
    """(folder, path relative to it, as the index writes it) that `path` may name: a name
    as the file system gives it (escaped here), or as search shows it (escaped already)."""
    p = Path(path).expanduser()
    out = []
    for root in roots:
        if p.is_absolute():
            try:
                out.append((root, escape_name(p.resolve().relative_to(root.resolve()).as_posix())))
            except (ValueError, OSError):
                continue
        else:
            name, _, rest = path.partition(":")
            if rest and name in (root.name, store_names(roots).get(str(root))):
                out += [(root, escape_name(rest)), (root, rest)]
            out += [(root, escape_name(Path(path).as_posix())), (root, Path(path).as_posix())]
    return list(dict.fromkeys(out))
