"""What the index holds of each file (`FileEntry`), kept in `files.db` beside the tables.

An SQLite database (the standard library's), one row per file: an index run records each
stored batch in a transaction of its own files alone, so that the cost of recording a batch does
not grow with the folder (one JSON document, rewritten after every batch, made the first index
of 100,000 files spend most of its time writing it), and a search reads the chunk totals
without parsing every entry. Indexes made before it have `files.json`: it is read as it is,
and the first write moves it into `files.db`.

Rollback-journal mode (SQLite's default), so that nothing but `files.db` stays beside it: a
reader waits for a writer's commit (`BUSY_S`), never sees half of one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from hydra_rag.bulk import no_gc
from hydra_rag.errors import HydraError, IndexError_, fault_errno
from hydra_rag.locks import write_atomic
from hydra_rag.store import symbols as symtab

FILES_DB = "files.db"
LEGACY_JSON = "files.json"
FORMAT = 1  # of files.db (PRAGMA user_version)
BUSY_S = 30.0  # how long a reader or writer waits for another's transaction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    rel TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    kind TEXT,
    chunks TEXT NOT NULL,  -- chunk ids, space-separated
    n_chunks INTEGER NOT NULL,
    skip TEXT NOT NULL,
    doc TEXT,  -- a document's extraction record, JSON
    digest TEXT NOT NULL,
    error TEXT NOT NULL
) WITHOUT ROWID
"""
_COLUMNS = "rel, size, mtime_ns, kind, chunks, n_chunks, skip, doc, digest, error"


@dataclass
class FileEntry:
    """What the index knows of one file: its stat at indexing time, its kind and chunk ids."""

    size: int
    mtime_ns: int
    kind: str | None
    chunks: list[str] = field(default_factory=list)
    skip: str = ""  # a content skip (binary, not_utf8…): remembered so it is not re-read
    # A document's extraction: {"key": content key in the cache, "format", "unit", "starts"}
    # (see hydra_rag.documents); None for a text file.
    doc: dict[str, Any] | None = None
    # A hash of the content indexed (see hydra_rag.read.source.digest_of): a file whose
    # size or mtime changed but whose content did not is not read again, only re-recorded.
    digest: str = ""
    # Why a document could not be read ("password-protected"), beside its skip reason: what
    # `status --files` shows.
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"size": self.size, "mtime_ns": self.mtime_ns, "kind": self.kind,
                             "chunks": self.chunks}
        if self.skip:
            d["skip"] = self.skip
        if self.doc is not None:
            d["doc"] = self.doc
        if self.digest:
            d["digest"] = self.digest
        if self.error:
            d["error"] = self.error
        return d


class Light(NamedTuple):
    """What a walk is compared with (index/state.py: diff) of one recorded file: its entry but
    its chunk ids, which a run reads only for the files it changes (`FileList.entries`)."""

    size: int
    mtime_ns: int
    kind: str | None
    skip: str
    digest: str
    doc: bool  # a document (FileEntry.doc is not None)
    chunks: int  # how many


def light_of(e: FileEntry) -> Light:
    return Light(e.size, e.mtime_ns, e.kind, e.skip, e.digest, e.doc is not None, len(e.chunks))


def _parts(rels: list[str]) -> Iterator[tuple[list[str], str]]:
    """`rels` in parts of at most 500, each with its `?,?,…` (SQLite's limit of parameters per
    statement is 999 in older builds)."""
    for i in range(0, len(rels), 500):
        part = rels[i : i + 500]
        yield part, ",".join("?" * len(part))


def _row(rel: str, e: FileEntry) -> tuple[Any, ...]:
    return (rel, e.size, e.mtime_ns, e.kind, " ".join(e.chunks), len(e.chunks), e.skip,
            None if e.doc is None else json.dumps(e.doc, ensure_ascii=False), e.digest, e.error)


def _entry(row: tuple[Any, ...]) -> FileEntry:
    _, size, mtime_ns, kind, chunks, _n, skip, doc, digest, error = row
    return FileEntry(size, mtime_ns, kind, chunks.split() if chunks else [], skip,
                     None if doc is None else json.loads(doc), digest, error)


class FileList:
    """files.db of one generation (`folder`), and its documents.json: the documents' anchors
    apart, what a search needs to cite a page without reading every entry."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILES_DB
        self.legacy = folder / LEGACY_JSON
        self.documents = folder / "documents.json"

    # -- reading ---------------------------------------------------------------------------

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection | None]:
        """A connection to an existing files.db (None when there is none); a broken one is an
        IndexError_ naming it."""
        if not self.path.is_file():
            yield None
            return
        try:
            # Read-only: a reader must never create the file (a generation removed meanwhile
            # would come back as an empty one).
            uri = self.path.resolve().as_uri() + "?mode=ro"
            with closing(sqlite3.connect(uri, uri=True, timeout=BUSY_S)) as con:
                # Empty until the first write commits its table: nothing recorded yet.
                made = con.execute("SELECT 1 FROM sqlite_master WHERE name = 'files'").fetchone()
                yield con if made else None
        except sqlite3.OperationalError as exc:  # locked past BUSY_S, unreadable: not corrupt
            raise HydraError(f"cannot read {self.path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise IndexError_(f"{self.path} is corrupt: {exc}") from None

    def _made(self) -> bool:
        """Whether files.db holds its table (a first write may have been interrupted)."""
        with self._reading() as con:
            return con is not None

    def read(self) -> dict[str, FileEntry]:
        """Every entry, by path; {} when there is none. Raises IndexError_ if it is corrupt."""
        with self._reading() as con:
            if con is None:
                return self._read_legacy()
            try:
                with no_gc():
                    return {r[0]: _entry(r) for r in con.execute(f"SELECT {_COLUMNS} FROM files")}
            except (ValueError, TypeError) as exc:  # a doc that is not JSON
                raise IndexError_(f"{self.path} is corrupt: {exc}") from None

    def light(self) -> dict[str, Light]:
        """Every entry without its chunk ids and document record, by path (a third of the
        memory of `read()` and half of its time); {} when there is none."""
        with self._reading() as con:
            if con is None:
                return {rel: light_of(e) for rel, e in self._read_legacy().items()}
            same: dict[str, str] = {}  # one string object per kind and skip reason
            with no_gc():
                return {r[0]: Light(r[1], r[2], r[3] and same.setdefault(r[3], r[3]),
                                    same.setdefault(r[4], r[4]), r[5], bool(r[6]), r[7])
                        for r in con.execute("SELECT rel, size, mtime_ns, kind, skip, digest, "
                                             "doc IS NOT NULL, n_chunks FROM files")}

    def entries(self, rels: Iterable[str]) -> dict[str, FileEntry]:
        """The whole entries of these paths (those recorded)."""
        rels = list(rels)
        with self._reading() as con:
            if con is None:
                legacy = self._read_legacy()
                return {r: legacy[r] for r in rels if r in legacy}
            out: dict[str, FileEntry] = {}
            for part, marks in _parts(rels):
                for r in con.execute(f"SELECT {_COLUMNS} FROM files WHERE rel IN ({marks})", part):
                    out[r[0]] = _entry(r)
            return out

    def document_keys(self) -> set[str]:
        """The extraction cache keys of the documents recorded."""
        with self._reading() as con:
            if con is None:
                return {e.doc["key"] for e in self._read_legacy().values() if e.doc}
            return {json.loads(d)["key"] for (d,) in con.execute(
                "SELECT doc FROM files WHERE doc IS NOT NULL")}

    def get(self, rel: str) -> FileEntry | None:
        with self._reading() as con:
            if con is None:
                return self._read_legacy().get(rel)
            row = con.execute(f"SELECT {_COLUMNS} FROM files WHERE rel = ?", (rel,)).fetchone()
            return None if row is None else _entry(row)

    def chunk_totals(self) -> dict[str, int]:
        """Chunks recorded per table (kind)."""
        with self._reading() as con:
            if con is None:
                totals: dict[str, int] = {}
                for e in self._read_legacy().values():
                    if e.kind:
                        totals[e.kind] = totals.get(e.kind, 0) + len(e.chunks)
                return totals
            return {k: n for k, n in con.execute(
                "SELECT kind, SUM(n_chunks) FROM files WHERE kind IS NOT NULL GROUP BY kind")}

    def definitions(self, name: str) -> list[symtab.Entry]:
        """Where a name is defined (hydra_rag.store.symbols: lookup)."""
        with self._reading() as con:
            return [] if con is None else symtab.lookup(con, name, definitions=True)

    def defined_among(self, names: Sequence[str], kinds: Sequence[str]) -> list[symtab.Entry]:
        """The definitions of these kinds of any of these names (symbols.defined_among)."""
        with self._reading() as con:
            return [] if con is None else symtab.defined_among(con, names, kinds)

    def made_from(self, rel: str, first: int, last: int, kinds: Sequence[str]
                  ) -> list[symtab.Entry]:
        """The values made from the classes defined on these lines (symbols.made_from)."""
        with self._reading() as con:
            return [] if con is None else symtab.made_from(con, rel, first, last, kinds)

    def symbol_links(self) -> list[tuple[str, str, bool]]:
        """Every (file, name, is a definition) of the symbol table."""
        with self._reading() as con:
            return [] if con is None else symtab.links(con)

    def references(self, name: str) -> list[symtab.Entry]:
        """Where a name is used."""
        with self._reading() as con:
            return [] if con is None else symtab.lookup(con, name, definitions=False)

    def outline(self, rel: str) -> list[symtab.Entry]:
        """A file's definitions, in line order."""
        with self._reading() as con:
            return [] if con is None else symtab.in_file(con, rel)

    def symbol_counts(self) -> tuple[int, int]:
        """(definitions, references) recorded."""
        with self._reading() as con:
            return (0, 0) if con is None else symtab.count(con)

    def _read_legacy(self) -> dict[str, FileEntry]:
        if not self.legacy.is_file():
            return {}
        try:
            raw = json.loads(self.legacy.read_text(encoding="utf-8"))
            return {
                rel: FileEntry(int(e["size"]), int(e["mtime_ns"]), e.get("kind"),
                               list(e.get("chunks", [])), e.get("skip", ""), e.get("doc"),
                               e.get("digest", ""), e.get("error", ""))
                for rel, e in raw["files"].items()
            }
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            raise IndexError_(f"{self.legacy} is corrupt: {exc}") from None

    # -- writing ---------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        """A connection in a write transaction, the table made in it: an interrupted first
        write leaves no empty table, which would read as an empty record (and hide a
        files.json not yet moved)."""
        con = sqlite3.connect(self.path, timeout=BUSY_S, isolation_level=None)
        con.execute("BEGIN IMMEDIATE")
        con.execute(_SCHEMA)
        symtab.make(con)
        con.execute(f"PRAGMA user_version = {FORMAT}")
        return con

    def write(self, files: dict[str, FileEntry]) -> None:
        """Replace every entry with `files`, in one transaction (a broken files.db is replaced)."""
        try:
            try:
                self._replace(files)
            except sqlite3.OperationalError:
                raise  # locked, full disk: the file is sound, and kept
            except sqlite3.DatabaseError:  # not a database (any more): made again
                for p in (self.path, self.path.with_name(FILES_DB + "-journal")):
                    p.unlink(missing_ok=True)
                self._replace(files)
        except sqlite3.DatabaseError as exc:
            raise self._unwritten(exc) from None
        self.legacy.unlink(missing_ok=True)

    def _replace(self, files: dict[str, FileEntry]) -> None:
        with closing(self._open()) as con:
            try:
                con.execute("DELETE FROM files")
                con.executemany(f"INSERT INTO files ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                                (_row(rel, e) for rel, e in files.items()))
                con.execute("DELETE FROM symbols WHERE rel NOT IN (SELECT rel FROM files)")
                self._write_documents(con, force=self.documents.exists() or any(
                    e.doc is not None for e in files.values()))
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:  # SQLite ends a transaction whose commit failed itself
                    con.execute("ROLLBACK")
                raise

    def update(self, put: dict[str, FileEntry], drop: Iterable[str] = (),
               symbols: dict[str, symtab.Parsed] | None = None) -> None:
        """Record `put` (new or changed entries) and forget `drop`, in one transaction: the
        cost is theirs alone, however many files the folder has. `symbols`: the definitions
        and references of files read again, in place of the ones they had."""
        drop = list(drop)
        if not put and not drop and not symbols:
            return
        if self.legacy.is_file() and not self._made():
            current = self.read()  # the first write moves files.json into files.db
            for rel in drop:
                current.pop(rel, None)
            self.write({**current, **put})
            return
        try:
            with closing(self._open()) as con:
                try:
                    had_docs = self._had_documents(con, [*put, *drop])
                    con.executemany("DELETE FROM files WHERE rel = ?", ((r,) for r in drop))
                    symtab.drop(con, drop)
                    symtab.replace(con, symbols or {})
                    con.executemany(
                        f"INSERT OR REPLACE INTO files ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                        (_row(rel, e) for rel, e in put.items()))
                    self._write_documents(con, force=had_docs or any(
                        e.doc is not None for e in put.values()))
                    con.execute("COMMIT")
                except BaseException:
                    if con.in_transaction:  # SQLite ends a transaction whose commit failed
                        con.execute("ROLLBACK")
                    raise
        except sqlite3.OperationalError as exc:
            raise self._unwritten(exc) from None
        except sqlite3.DatabaseError as exc:
            raise IndexError_(f"{self.path} is corrupt: {exc}") from None

    def _unwritten(self, exc: sqlite3.DatabaseError) -> Exception:
        """A write that failed: the machine's doing (a full disk) as the OSError it is, for
        the index run to say in its words (errors.fault); else a HydraError naming the file."""
        code = fault_errno(exc)
        if code is not None:
            return OSError(code, str(exc), str(self.path))
        return HydraError(f"cannot write {self.path}: {exc}")

    def copy_symbols(self, source: FileList) -> None:
        """The symbol table of another generation's files.db, for the files recorded here."""
        if not source.path.is_file():
            return
        with closing(sqlite3.connect(self.path, timeout=BUSY_S, isolation_level=None)) as con:
            con.execute("ATTACH DATABASE ? AS src", (str(source.path),))  # not in a transaction
            con.execute("BEGIN IMMEDIATE")
            try:
                symtab.make(con)
                if con.execute("SELECT 1 FROM src.sqlite_master WHERE name = 'symbols'"
                               ).fetchone():
                    con.execute("DELETE FROM symbols")
                    con.execute("INSERT INTO symbols SELECT * FROM src.symbols "
                                "WHERE rel IN (SELECT rel FROM files)")
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:  # SQLite ends a transaction whose commit failed itself
                    con.execute("ROLLBACK")
                raise

    def migrate(self) -> None:
        """Move an older index's files.json into files.db (a run that changed nothing would
        otherwise leave it, and read it whole every time)."""
        if self.legacy.is_file() and not self._made():
            self.write(self._read_legacy())

    @staticmethod
    def _had_documents(con: sqlite3.Connection, rels: list[str]) -> bool:
        """Whether any of these paths is recorded as a document now (before the change)."""
        return any(con.execute(f"SELECT 1 FROM files WHERE doc IS NOT NULL AND rel IN ({marks}) "
                               "LIMIT 1", part).fetchone() for part, marks in _parts(rels))

    def _write_documents(self, con: sqlite3.Connection, force: bool) -> None:
        """documents.json from the transaction's view, written before it commits: a searcher
        re-reads it when files.db changes, so it must never be older than files.db. Only when
        a document came, changed or left (`force`): rewriting it for every batch would cost a
        folder of many documents what one files.json did."""
        if not force:
            return
        docs = {rel: json.loads(doc) for rel, doc in con.execute(
            "SELECT rel, doc FROM files WHERE doc IS NOT NULL AND kind IS NOT NULL ORDER BY rel")}
        if docs or self.documents.exists():
            write_atomic(self.documents, json.dumps(docs, ensure_ascii=False, separators=(",", ":")))

    def read_documents(self) -> dict[str, dict[str, Any]]:
        """documents.json: path → the document's extraction record; {} when there is none."""
        try:
            raw = json.loads(self.documents.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return {}
        return raw if isinstance(raw, dict) else {}
