"""`hydra-rag status` end to end, with the real embedder sidecar and real LanceDB: the same diff
as `index` (added, changed, removed, touched, the last run's selection), the rebuild `index`
would start, every file's state, exit codes — and nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

import docmaker
from conftest import recorded, run_cli, to_legacy, write_tree
from hydra_rag.paths import dirs

KEYS = {"root", "state", "rebuild", "repair", "added", "changed", "removed", "touched",
        "embedders", "languages", "files", "chunks", "skipped", "last_indexed", "selection",
        "fix", "problem", "notes", "vector_index", "vectors"}


def _index(root: Path, *args: str) -> None:
    proc = run_cli("index", str(root), *args)
    assert proc.returncode == 0, proc.stderr


def _status(*args: str, env: dict[str, str] | None = None, rc: int = 0) -> list[dict[str, Any]]:
    proc = run_cli("status", *args, "--json", env=env)
    assert proc.returncode == rc, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert isinstance(doc, list)
    return doc


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the index and the registry: bytes and mtime (what status must not change)."""
    files = [p for p in (root / ".hydra-index").rglob("*") if p.is_file()]
    files.append(dirs().registry)
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in files}


def _tree(root: Path) -> Path:
    return write_tree(root, {
        ".gitignore": "# nothing ignored yet\n",
        "a.md": "# Kites\n\nBox kites fly best in a steady strong wind.\n",
        "b.md": "# Tea\n\nGreen tea is steeped at eighty degrees for two minutes.\n",
        "src/calc.py": "def add(a, b):\n    return a + b\n",
    })


def test_current_then_added_changed_removed_touched_and_nothing_written(
        home: Path, tmp_path: Path) -> None:
    root = _tree(tmp_path / "c")
    _index(root)
    [s] = _status(str(root))
    assert set(s) == KEYS
    assert s["root"] == str(root) and s["state"] == "current" and s["rebuild"] is None
    assert (s["added"], s["changed"], s["removed"], s["touched"]) == ([], [], [], [])
    assert s["embedders"] == {"code": "minilm-l6", "prose": "minilm-l6"}
    assert s["languages"] == {"code": "en", "prose": "en"}
    assert s["files"] == 4 and s["chunks"] == {"code": 1, "prose": 3}
    assert s["skipped"] == {}  # not .hydra-index/ itself: it is not one of the folder's files
    assert s["last_indexed"] and s["fix"] is None
    assert s["selection"] == {"include": [], "exclude": []}
    proc = run_cli("status", str(root))
    assert proc.returncode == 0
    head = proc.stdout.splitlines()[0]
    assert head.startswith(f"{root}  current  indexed ") and "4 files" in head
    assert "code 1 chunks (minilm-l6, en)" in head and "skipped" not in head

    before = _snapshot(root)
    # Touched: a new mtime, the same bytes. Current, and said.
    st = (root / "a.md").stat()
    os.utime(root / "a.md", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    [s] = _status(str(root))
    assert s["state"] == "current" and s["touched"] == ["a.md"]
    assert "1 touched" in run_cli("status", str(root)).stdout

    (root / "b.md").write_text("# Tea\n\nBlack tea takes boiling water and four minutes.\n")
    (root / "new.md").write_text("# Bread\n\nKnead the dough for ten minutes.\n")
    (root / "src/calc.py").unlink()
    [s] = _status(str(root), rc=1)
    assert s["state"] == "stale" and s["rebuild"] is None
    assert (s["added"], s["changed"], s["removed"]) == (["new.md"], ["b.md"], ["src/calc.py"])
    assert s["touched"] == ["a.md"]
    assert s["fix"] == f"hydra-rag index {root}"
    text = run_cli("status", str(root))
    assert text.returncode == 1
    assert text.stdout.splitlines()[1:] == ["  added    new.md", "  changed  b.md",
                                             "  removed  src/calc.py",
                                             "  1 touched (a new mtime, the same content: "
                                             "nothing to index)",
                                             f"  run: hydra-rag index {root}"]
    assert _snapshot(root) == before

    # What status said is what index does.
    proc = run_cli("index", str(root), "--json")
    rep = json.loads(proc.stdout)
    assert (rep["files_indexed"], rep["files_removed"], rep["files_touched"]) == (2, 1, 1)
    assert _status(str(root))[0]["state"] == "current"


def test_many_paths_are_cut_after_ten(home: Path, tmp_path: Path) -> None:
    root = _tree(tmp_path / "c")
    _index(root)
    write_tree(root, {f"notes/n{i:02}.md": f"# Note {i}\n\nAbout the number {i}.\n"
                      for i in range(13)})
    lines = run_cli("status", str(root)).stdout.splitlines()
    assert lines[1:12] == [f"  added    notes/n{i:02}.md" for i in range(10)] + ["  … 3 more added"]


def test_gitignore_edits_remove_and_add(home: Path, tmp_path: Path) -> None:
    root = _tree(tmp_path / "c")
    _index(root)
    (root / ".gitignore").write_text("b.md\n")
    [s] = _status(str(root), rc=1)
    assert (s["added"], s["changed"], s["removed"]) == ([], [".gitignore"], ["b.md"])
    assert s["skipped"]["gitignore"] == 1
    _index(root)
    assert _status(str(root))[0]["state"] == "current"
    (root / ".gitignore").write_text("# b.md is back\n")
    [s] = _status(str(root), rc=1)
    assert (s["added"], s["changed"], s["removed"]) == (["b.md"], [".gitignore"], [])


def test_the_last_runs_selection_is_used(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "c", {
        "a.md": "# Kites\n\nBox kites fly best in a steady strong wind.\n",
        "notes.pem": "Not a key at all: notes about the pem format of the old server.\n",
        "tmp/scratch.md": "# Scratch\n\nThrowaway notes.\n",
    })
    _index(root, "--include", "*.pem", "--exclude", "tmp/")
    [s] = _status(str(root))
    assert s["state"] == "current"
    assert s["selection"] == {"include": ["*.pem"], "exclude": ["tmp/"]}
    assert s["files"] == 2
    # Flags replace the recorded selection, both of them, as they would for `index`.
    [s] = _status(str(root), "--exclude", "tmp/", rc=1)
    assert (s["added"], s["changed"], s["removed"]) == ([], [], ["notes.pem"])
    assert s["fix"] == f"hydra-rag index {root} --exclude tmp/"
    [s] = _status(str(root), "--include", "*.pem", rc=1)
    assert s["added"] == ["tmp/scratch.md"]
    (root / "a.md").write_text("# Kites\n\nDelta kites too.\n")
    [s] = _status(str(root), rc=1)
    assert s["changed"] == ["a.md"]
    assert s["fix"] == f"hydra-rag index {root} --include '*.pem' --exclude tmp/"
    # `index` keeps the selection too: without flags it indexes as the last run did.
    _index(root)
    [s] = _status(str(root))
    assert s["selection"] == {"include": ["*.pem"], "exclude": ["tmp/"]} and s["files"] == 2
    _index(root, "--clear-selection")
    [s] = _status(str(root))
    assert s["selection"] == {"include": [], "exclude": []} and s["files"] == 2
    assert s["removed"] == [] and "tmp/scratch.md" in recorded(root)
    # An index from before selections were recorded: diffed with none, and said so.
    meta_path = root / ".hydra-index" / "meta.yaml"
    meta = yaml.safe_load(meta_path.read_text())
    del meta["selection"]
    meta_path.write_text(yaml.safe_dump(meta))
    [s] = _status(str(root))
    assert any("does not record the --include/--exclude" in n for n in s["notes"])


def test_a_rebuild_pending_is_stale_with_its_reason(home: Path, tmp_path: Path) -> None:
    root = _tree(tmp_path / "c")
    _index(root)
    before = _snapshot(root)
    [s] = _status(str(root), env={"HYDRA_RAG_EMBEDDER": "multilingual-e5-small"}, rc=1)
    assert s["state"] == "stale" and (s["added"], s["changed"], s["removed"]) == ([], [], [])
    assert s["rebuild"].startswith("table code was built with embedder minilm-l6 (384 dims), "
                                   "now multilingual-e5-small (384 dims)")
    proc = run_cli("status", str(root), env={"HYDRA_RAG_EMBEDDER": "multilingual-e5-small"})
    assert "  rebuild: table code was built with embedder minilm-l6" in proc.stdout
    assert _snapshot(root) == before
    meta_path = root / ".hydra-index" / "meta.yaml"
    meta = yaml.safe_load(meta_path.read_text())
    chunker = meta["chunker_version"]
    meta["chunker_version"] = 1
    meta_path.write_text(yaml.safe_dump(meta, sort_keys=False))
    [s] = _status(str(root), rc=1)
    assert s["rebuild"].split(";")[0] == f"chunker version 1 → {chunker}"


def test_files_states(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "c", {
        ".gitignore": "ignored/\n",
        "a.md": "# Kites\n\nBox kites fly best in a steady strong wind.\n",
        "src/calc.py": "def add(a, b):\n    return a + b\n",
        ".env": "TOKEN=abc\n",
        "logo.svg": "<svg xmlns='http://www.w3.org/2000/svg'><path d='M0 0L1 1'/></svg>\n",
        "data.bin2": b"\x00\x01\x02 binary",
        "empty.txt": "",
        "old/.env": "OLD_TOKEN=x\n",  # a second secret of the same name, deeper
        "ignored/x.md": "# Ignored\n",
        "node_modules/lib/index.js": "module.exports = 1;\n",
    })
    docmaker.encrypted_pdf(root / "locked.pdf")
    (root / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    _index(root)
    [s] = _status(str(root), "--files")
    assert s["state"] == "current"
    listed = {f["path"]: f for f in s["file_list"]}
    assert list(listed) == sorted(listed)
    assert listed["a.md"] == {"path": "a.md", "state": "indexed", "kind": "prose", "chunks": 1,
                              "reason": None, "detail": None, "include": None}
    assert (listed["src/calc.py"]["state"], listed["src/calc.py"]["kind"]) == ("indexed", "code")

    def brief(rel: str) -> tuple[str, str, str | None, str | None]:
        f = listed[rel]
        return f["state"], f["reason"], f["detail"], f["include"]

    # A secret: no --include brings it back (--include-secrets does), so no hint.
    assert brief(".env") == ("skipped", "secret", None, None)
    assert brief("logo.svg") == ("skipped", "vector_image", None, "/logo.svg")
    assert brief("ignored/") == ("skipped", "gitignore", None, "/ignored/**")
    assert brief("node_modules/") == ("skipped", "blacklisted", None, "/node_modules/**")
    assert ".hydra-index/" not in listed
    # --include brings none of these back: no hint.
    assert brief("data.bin2") == ("skipped", "binary", None, None)
    assert brief("empty.txt") == ("skipped", "empty", None, None)
    assert brief("locked.pdf") == ("failed", "encrypted", "password-protected", None)
    assert listed["broken.docx"]["state"] == "failed"
    assert listed["broken.docx"]["reason"] == "corrupt" and listed["broken.docx"]["detail"]

    # Each hint does what it says: with it, the diff takes the file in; without one, not even
    # an --include of that very path does.
    for rel, f in listed.items():
        if f["state"] != "skipped":
            continue
        [again] = _status(str(root), "--include", f["include"] or rel,
                          rc=1 if f["include"] else 0)
        taken = again["added"] + again["changed"]
        if f["include"]:
            assert taken and all(p == rel or p.startswith(rel) for p in taken), (rel, taken)
        else:
            assert taken == [], (rel, taken)

    proc = run_cli("status", str(root), "--files")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert "  indexed  a.md  prose, 1 chunk" in lines
    assert ("  skipped  .env  secret (looks like a private key or credentials; index it with "
            "--include-secrets)") in lines
    assert "  skipped  node_modules/  blacklisted (--include '/node_modules/**')" in lines
    assert "  failed   locked.pdf  encrypted: password-protected" in lines
    assert "  skipped  data.bin2  binary" in lines

    # A files.json from before the error was kept (and before files.db) still loads: the
    # detail is unknown.
    assert recorded(root)["locked.pdf"]["error"] == "password-protected"
    assert all("error" not in e for e in to_legacy(root, without=("error",)).values())
    [s] = _status(str(root), "--files")
    f = next(f for f in s["file_list"] if f["path"] == "locked.pdf")
    assert (f["state"], f["reason"], f["detail"]) == ("failed", "encrypted", None)


def test_not_indexed_bad_paths_and_several_folders(home: Path, tmp_path: Path) -> None:
    root = _tree(tmp_path / "c")
    plain = write_tree(tmp_path / "plain", {"x.md": "# X\n\nNothing indexed here.\n"})
    _index(root, "--tag", "status-test")
    [s] = _status(str(plain), rc=1)
    assert s["state"] == "not_indexed" and s["fix"] == f"hydra-rag index {plain}"
    assert s["files"] == 0 and s["last_indexed"] is None
    assert not (plain / ".hydra-index").exists()  # nothing was written
    proc = run_cli("status", str(plain))
    assert proc.returncode == 1 and proc.stdout.startswith(f"{plain}  not indexed")

    # A folder that is not there: exit 1; a file where a folder is asked for: usage, exit 2.
    for bad, why, rc in ((tmp_path / "nope", "no such folder", 1),
                         (root / "a.md", "not a folder", 2)):
        proc = run_cli("status", str(bad))
        assert proc.returncode == rc and why in proc.stderr and proc.stdout == ""

    both = _status(str(root), str(plain), rc=1)
    assert [(s["root"], s["state"]) for s in both] == [(str(root), "current"),
                                                     (str(plain), "not_indexed")]
    [s] = _status("--tag", "status-test")
    assert s["root"] == str(root) and s["state"] == "current"
    (root / "a.md").write_text("# Kites\n\nChanged.\n")
    [s] = _status("--tag", "status-test", rc=1)
    assert s["changed"] == ["a.md"]
    proc = run_cli("status", str(root), "--tag", "status-test")
    assert proc.returncode == 2
    # Without a path: the working folder.
    proc = run_cli("status", "--json", cwd=root)
    assert proc.returncode == 1 and json.loads(proc.stdout)[0]["root"] == str(root)


def test_status_needs_neither_lancedb_nor_a_model(home: Path, tmp_path: Path) -> None:
    root = _tree(tmp_path / "c")
    _index(root)
    (root / "a.md").write_text("# Kites\n\nChanged.\n")
    code = ("import sys\nfrom pathlib import Path\nfrom hydra_rag.config import load_settings\n"
            "from hydra_rag.index import folder_status\n"
            f"s = folder_status(Path({str(root)!r}), load_settings(), files=True)\n"
            "heavy = [m for m in ('lancedb', 'pyarrow', 'llama_cpp') if m in sys.modules]\n"
            "print(s.state, s.changed, heavy)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "stale ['a.md'] []", proc.stderr
    usage = run_cli("status", "--help").stdout
    assert "status [OPTIONS] [PATH...]" in usage
