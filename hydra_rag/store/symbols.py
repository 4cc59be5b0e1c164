"""The symbol table: each code file's definitions and references (hydra_rag.read.symbols), in
files.db beside the file entries, so that a changed file's symbols are replaced in the very
transaction that records its new chunks (hydra_rag.store.filelist: FileList.update).

One row per definition or reference; looked up by name (any case: an index on the name
without case) and by file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hydra_rag.read.symbols import Reference, Symbol

# Bumped when parsing changes what it finds: an index made before is parsed again (no
# embedding) by its next run (hydra_rag.index.run: symbols are back-filled).
# 2: Rust items in macros; `x.f = function f` once. 3: what a use is reached through.
# 4: C and C++ definitions behind decorating macros (`SPDLOG_INLINE void f()`).
# 5: a C++ member defined outside its class (`void logger::flush_()`, `pool<T>::get`) is its
#    class's. 6: no C or C++ prototype inside a body (a macro call there read as one).
# 7: C++ destructors and operators (`logger::~logger`, `operator==`). 8: a free one is a
#    function; `operator new []` is `operator new[]`. 9: C and C++ unions (inside a function too);
#    qualified names of any depth (`a::b::c::~c`); a C++ namespace's or Rust module's function
#    is a function. 10: TypeScript namespaces (`namespace a.b {…}`); C++ specialisations
#    (`template<> void A::f<int>()`, `A<T>::template f<U>`); a friend declaration defines
#    nothing; a typedef is not the scope of the struct it names. 11: C and C++ variables given
#    a value outside functions and classes (`static const std::array<…> months{…}`).
#    12, 13: JavaScript and TypeScript module constants and variables (`export const nanoid =
#    /…/`), not an alias (`var resolve = path.resolve`). 14: one made by a call given a function
#    (`debounce(() => …)`, zod's `core.$constructor("$ZodCheck", (inst, def) => {…})`) is a
#    function. 15: every declarator of `let a = 1, b = 2;` and `static int x = 1, y = 2;`;
#    values under `#ifndef`; hidden friends (`friend void g(C&) {…}`) define; a variable is
#    not the scope of the struct declared with it. 16: C and C++ values named inside nested
#    declarators (`int m[2][3]`, `char **p`, `int &r`), under `extern "C"` and `template<…>`,
#    and a static member given its value outside its class (`int S::count = 0;`).
SYMBOLS_VERSION = 16

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS symbols (
    rel TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,  -- function, class… for a definition; call, type… for a reference
    scope TEXT NOT NULL,  -- the definitions around it, dotted; for a reference what it is
                          -- reached through (`re` for re.escape), "" when used bare
    line_start INTEGER NOT NULL,
    line_end INTEGER NOT NULL,
    name_line INTEGER NOT NULL,
    def INTEGER NOT NULL  -- 1 a definition, 0 a reference
)""",
    "CREATE INDEX IF NOT EXISTS symbols_name ON symbols(name COLLATE NOCASE)",
    "CREATE INDEX IF NOT EXISTS symbols_rel ON symbols(rel)",
)
_COLUMNS = "rel, name, kind, scope, line_start, line_end, name_line, def"

Parsed = tuple[list[Symbol], list[Reference]]


@dataclass(frozen=True)
class Entry:
    """A row of the symbol table: where a name is defined or used."""

    path: str
    name: str
    kind: str
    scope: str
    line_start: int
    line_end: int
    name_line: int
    definition: bool

    @property
    def qualified(self) -> str:
        return f"{self.scope}.{self.name}" if self.scope else self.name

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.name, "qualified": self.qualified,
                "kind": self.kind, "scope": self.scope, "line_start": self.line_start,
                "line_end": self.line_end, "line": self.name_line}


def make(con: sqlite3.Connection) -> None:
    for statement in SCHEMA:
        con.execute(statement)


def replace(con: sqlite3.Connection, parsed: Mapping[str, Parsed]) -> None:
    """Put these files' symbols in place of the ones they had (inside the caller's
    transaction)."""
    con.executemany("DELETE FROM symbols WHERE rel = ?", ((r,) for r in parsed))
    con.executemany(
        f"INSERT INTO symbols ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)",
        (row for rel, (defs, refs) in parsed.items() for row in _rows(rel, defs, refs)))


def drop(con: sqlite3.Connection, rels: Iterable[str]) -> None:
    con.executemany("DELETE FROM symbols WHERE rel = ?", ((r,) for r in rels))


def _rows(rel: str, defs: list[Symbol], refs: list[Reference]) -> Iterable[tuple[Any, ...]]:
    for s in defs:
        yield rel, s.name, s.kind, s.scope, s.line_start, s.line_end, s.name_line, 1
    for r in refs:
        yield rel, r.name, r.kind, r.through, r.line, r.line, r.line, 0


def _entry(row: tuple[Any, ...]) -> Entry:
    rel, name, kind, scope, a, b, line, d = row
    return Entry(rel, name, kind, scope, a, b, line, bool(d))


def has_table(con: sqlite3.Connection) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE name = 'symbols'").fetchone() is not None


def lookup(con: sqlite3.Connection, name: str, definitions: bool, limit: int = 1000
           ) -> list[Entry]:
    """The definitions (or uses) of a name: its own case first, then any case."""
    if not has_table(con):
        return []
    rows = con.execute(f"SELECT {_COLUMNS} FROM symbols WHERE name = ? COLLATE NOCASE AND "
                       "def = ? ORDER BY rel, name_line LIMIT ?",
                       (name, int(definitions), limit)).fetchall()
    entries = [_entry(r) for r in rows]
    return sorted(entries, key=lambda e: e.name != name)


def defined_among(con: sqlite3.Connection, names: Sequence[str], kinds: Sequence[str]
                  ) -> list[Entry]:
    """The definitions of any of these names (in their own case) of these kinds, in one
    query per 500 names."""
    if not names or not has_table(con):
        return []
    out: list[Entry] = []
    marks = ",".join("?" * len(kinds))
    for i in range(0, len(names), 500):
        part = list(names[i : i + 500])
        asked = ",".join("?" * len(part))
        rows = con.execute(
            f"SELECT {_COLUMNS} FROM symbols WHERE name COLLATE NOCASE IN ({asked}) "
            f"AND def = 1 AND kind IN ({marks}) ORDER BY rel, name_line",
            (*part, *kinds)).fetchall()
        own = set(part)  # the index is NOCASE: each name in its own case here
        out += [_entry(r) for r in rows if r[1] in own]
    return out


def in_file(con: sqlite3.Connection, rel: str) -> list[Entry]:
    """A file's definitions, in the order of its lines."""
    if not has_table(con):
        return []
    rows = con.execute(f"SELECT {_COLUMNS} FROM symbols WHERE rel = ? AND def = 1 "
                       "ORDER BY line_start, name_line", (rel,)).fetchall()
    return [_entry(r) for r in rows]


def made_from(con: sqlite3.Connection, rel: str, first: int, last: int,
              kinds: Sequence[str]) -> list[Entry]:
    """The definitions of these kinds (a module's values) made by calling or constructing a
    class defined in `rel` whose name stands on lines first…last: `DEFAULT_LIMITS =
    Limits(max_connections=100, …)` for `class Limits:` (a call or `new` on the value's own
    line), in the class's own file first. A name that more than one class of the table holds
    lends only the values of the class's own file: another file's `Config(…)` may be its own
    `Config`'s. One query."""
    if not has_table(con):
        return []
    marks = ",".join("?" * len(kinds))
    v = ", ".join(f"v.{c.strip()}" for c in _COLUMNS.split(","))
    # `r.name` is matched NOCASE, so that the name index serves the join, then exactly.
    rows = con.execute(
        f"SELECT DISTINCT {v} FROM symbols AS c "
        "JOIN symbols AS r ON r.name = c.name COLLATE NOCASE AND r.def = 0 "
        "AND r.kind IN ('call', 'class') "
        f"JOIN symbols AS v ON v.rel = r.rel AND v.name_line = r.name_line AND v.def = 1 "
        f"AND v.kind IN ({marks}) "
        "WHERE c.rel = ? AND c.def = 1 AND c.kind = 'class' AND c.name_line BETWEEN ? AND ? "
        "AND r.name = c.name AND (v.rel = c.rel OR (SELECT COUNT(*) FROM symbols AS o "
        "WHERE o.name = c.name AND o.def = 1 AND o.kind = 'class') = 1) "
        "ORDER BY v.rel != c.rel, v.rel, v.name_line",
        (*kinds, rel, first, last)).fetchall()
    return [_entry(r) for r in rows]


def count(con: sqlite3.Connection) -> tuple[int, int]:
    """(definitions, references) in the table."""
    if not has_table(con):
        return 0, 0
    rows = dict(con.execute("SELECT def, COUNT(*) FROM symbols GROUP BY def").fetchall())
    return rows.get(1, 0), rows.get(0, 0)


def links(con: sqlite3.Connection) -> list[tuple[str, str, bool]]:
    """Every (file, name, is a definition) of the table, for the graph of which file uses
    names which file defines (hydra_rag.search.central)."""
    if not has_table(con):
        return []
    return [(rel, name, bool(d)) for rel, name, d in
            con.execute("SELECT DISTINCT rel, name, def FROM symbols")]
