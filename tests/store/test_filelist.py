"""files.db (hydra_rag.store.filelist): entries written whole or a batch at a time, read whole, light
or by path; an older files.json read and moved; an empty, a corrupt and a locked database."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from hydra_rag.errors import HydraError, IndexError_
from hydra_rag.store import filelist
from hydra_rag.store.filelist import FileEntry, FileList, Light

DOC = {"key": "k1", "format": "pdf", "unit": "page", "starts": [1, 40]}


def _some() -> dict[str, FileEntry]:
    return {"a.py": FileEntry(10, 1, "code", ["c1", "c2"], digest="d1"),
            "b.md": FileEntry(20, 2, "prose", ["c3"]),
            "r.pdf": FileEntry(30, 3, "prose", ["c4"], doc=DOC, digest="k1"),
            "x.bin": FileEntry(5, 4, None, [], "binary"),
            "s.pdf": FileEntry(7, 5, None, [], "encrypted", error="password-protected")}


def test_written_whole_then_a_batch_at_a_time(tmp_path: Path) -> None:
    fl = FileList(tmp_path)
    assert fl.read() == {} and fl.light() == {} and fl.chunk_totals() == {}
    fl.write(_some())
    assert fl.read() == _some()
    assert fl.light()["a.py"] == Light(10, 1, "code", "", "d1", False, 2)
    assert fl.light()["r.pdf"].doc and fl.light()["x.bin"].skip == "binary"
    assert fl.chunk_totals() == {"code": 2, "prose": 2}
    assert fl.entries(["b.md", "gone.md", "s.pdf"]) == {
        "b.md": _some()["b.md"], "s.pdf": _some()["s.pdf"]}
    assert fl.document_keys() == {"k1"}
    assert json.loads(fl.documents.read_text()) == {"r.pdf": DOC}
    fl.update({"c.py": FileEntry(1, 9, "code", ["c9"]), "a.py": FileEntry(11, 2, "code", [])},
              ["r.pdf"])
    assert fl.get("a.py") == FileEntry(11, 2, "code", [])
    assert fl.get("r.pdf") is None and set(fl.read()) == {"a.py", "b.md", "c.py", "x.bin", "s.pdf"}
    assert fl.document_keys() == set() and json.loads(fl.documents.read_text()) == {}
    assert fl.chunk_totals() == {"code": 1, "prose": 1}


def test_many_paths_at_once(tmp_path: Path) -> None:
    fl = FileList(tmp_path)
    many = {f"d/f{i}.py": FileEntry(i, i, "code", [f"c{i}"]) for i in range(1_200)}
    fl.write(many)
    assert fl.entries(list(many)) == many  # past SQLite's limit of parameters per statement


def test_files_json_is_read_then_moved(tmp_path: Path) -> None:
    fl = FileList(tmp_path)
    fl.legacy.write_text(json.dumps({"version": 3, "files": {
        rel: e.to_json() for rel, e in _some().items()}}))
    assert fl.read() == _some() and fl.light()["b.md"].chunks == 1
    assert fl.entries(["a.py"]) == {"a.py": _some()["a.py"]} and fl.document_keys() == {"k1"}
    fl.update({"n.md": FileEntry(1, 1, "prose", ["c5"])}, ["b.md"])
    assert not fl.legacy.exists() and fl.path.is_file()
    assert set(fl.read()) == {"a.py", "r.pdf", "x.bin", "s.pdf", "n.md"}
    fl.path.unlink()
    fl.legacy.write_text(json.dumps({"version": 3, "files": {"a.py": _some()["a.py"].to_json()}}))
    fl.migrate()
    assert not fl.legacy.exists() and fl.read() == {"a.py": _some()["a.py"]}


def test_an_empty_database_records_nothing(tmp_path: Path) -> None:
    fl = FileList(tmp_path)
    fl.path.write_bytes(b"")  # what a reader can meet before the first write commits
    assert fl.read() == {} and fl.light() == {} and fl.chunk_totals() == {}
    fl.update({"a.py": _some()["a.py"]})
    assert fl.read() == {"a.py": _some()["a.py"]}


def test_a_corrupt_database_is_said_and_replaced_by_a_whole_write(tmp_path: Path) -> None:
    fl = FileList(tmp_path)
    fl.write(_some())
    fl.path.write_bytes(b"this is not a database" * 200)
    for read in (fl.read, fl.light, fl.chunk_totals):
        with pytest.raises(IndexError_, match="files.db is corrupt"):
            read()
    with pytest.raises(IndexError_, match="files.db is corrupt"):
        fl.update({"a.py": _some()["a.py"]})
    fl.write(_some())
    assert fl.read() == _some()


def test_a_locked_database_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fl = FileList(tmp_path)
    fl.write(_some())
    monkeypatch.setattr(filelist, "BUSY_S", 0.2)
    other = sqlite3.connect(fl.path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(HydraError, match="cannot write .*locked"):
            fl.write({})
        with pytest.raises(HydraError, match="cannot write .*locked"):
            fl.update({"n.md": FileEntry(1, 1, "prose", ["c5"])})
        with pytest.raises(HydraError, match="cannot read .*locked"):
            fl.read()
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert fl.read() == _some()  # not replaced, not emptied


def test_an_interrupted_first_write_leaves_files_json_in_use(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fl = FileList(tmp_path)
    many = {f"f{i}.py": FileEntry(i, i, "code", [f"c{i}"]) for i in range(300)}
    fl.legacy.write_text(json.dumps({"version": 3, "files": {
        rel: e.to_json() for rel, e in many.items()}}))
    calls = 0
    row = filelist._row

    def interrupted(rel: str, e: FileEntry) -> tuple[object, ...]:
        nonlocal calls
        calls += 1
        if calls == 200:
            raise KeyboardInterrupt
        return row(rel, e)

    monkeypatch.setattr(filelist, "_row", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fl.migrate()
    monkeypatch.setattr(filelist, "_row", row)
    assert fl.legacy.is_file() and fl.read() == many  # not an empty record
    fl.migrate()
    assert not fl.legacy.exists() and fl.read() == many


def test_documents_json_is_written_when_a_document_changes(tmp_path: Path) -> None:
    fl = FileList(tmp_path)
    fl.write(_some())
    before = fl.documents.stat().st_mtime_ns
    fl.update({"b.md": FileEntry(21, 3, "prose", ["c6"])})  # no document: not rewritten
    assert fl.documents.stat().st_mtime_ns == before
    fl.update({"r.pdf": FileEntry(31, 9, None, [], "encrypted")})  # a document became a skip
    assert json.loads(fl.documents.read_text()) == {}
