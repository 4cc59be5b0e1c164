"""Rebuilds beside the index in use, with the real embedder sidecar and real LanceDB: a search
during a rebuild reads the old index and says so, a killed rebuild leaves the old index
searchable and the next run removes what it left, a finished one leaves no old generation."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import run_cli, write_tree
from hydra_rag.checks.doctor import check_index
from hydra_rag.config import load_settings
from hydra_rag.errors import HydraError
from hydra_rag.index import index_folder
from hydra_rag.search.retrieve import Searcher
from hydra_rag.store.filelist import FileList
from hydra_rag.store.index_dir import Store
from hydra_rag.store.rebuild import PAUSE_ENV

OLD = "Tomatoes need full sun, at least six hours a day"
NEW = "# Growing peppers\n\nPeppers want warm soil and little water; pick them green or red.\n"


def _listing(root: Path) -> set[str]:
    return {p.name for p in (root / ".hydra-index").iterdir()}


def _paused_rebuild(root: Path, flag: Path) -> subprocess.Popen[str]:
    """`index --full` in a process held just before its switch (the test seam)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "hydra_rag", "index", str(root), "--full"],
        env={**os.environ, PAUSE_ENV: str(flag)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not flag.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the rebuild never paused before its switch (exit {proc.returncode}):"
                        f"\n{out}\n{err}")
        time.sleep(0.05)
    return proc


def _recorded(folder: Path) -> int:
    """How many files the files.db in `folder` records (read while a run writes it)."""
    try:
        return len(FileList(folder).read())
    except HydraError:
        return 0


def _top(root: Path, query: str) -> tuple[str, str, list[str]]:
    """The first hit of a search through the CLI: path, text, and the warnings it gave."""
    proc = run_cli("search", query, "--path", str(root), "-k", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    hit = doc["results"][0]
    warned = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert warned == [f"warning: {w}" for w in doc["warnings"]]
    return hit["path"], hit["text"], doc["warnings"]


def test_a_search_during_a_rebuild_reads_the_old_index_and_says_so(
        home: Path, corpus: Path, tmp_path: Path) -> None:
    assert run_cli("index", str(corpus)).returncode == 0
    (corpus / "docs/gardening.md").write_text(NEW)
    flag = tmp_path / "paused"
    proc = _paused_rebuild(corpus, flag)
    # The new generation is built and waits beside the old one, which meta.yaml still names.
    assert {"lance", "files.db", "gen-1", "rebuild.json"} <= _listing(corpus)
    assert "generation" not in yaml.safe_load((corpus / ".hydra-index/meta.yaml").read_text())
    path, text, warnings = _top(corpus, "tomatoes full sun")
    assert path == "docs/gardening.md" and OLD in text
    (warning,) = warnings
    assert warning.startswith(f"{corpus} is being rebuilt (started ")
    assert warning.endswith(": --full); results come from the previous index")
    # Without --json: the same results, and the warning once.
    plain = run_cli("search", "tomatoes full sun", "--path", str(corpus), "-k", "1")
    assert plain.stderr.count("is being rebuilt") == 1 and "docs/gardening.md" in plain.stdout

    flag.unlink()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    path, text, warnings = _top(corpus, "peppers warm soil")
    assert (path, warnings) == ("docs/gardening.md", []) and "Peppers want warm soil" in text
    assert all(OLD not in h.text for h in Searcher(corpus, load_settings()).search("tomatoes", 10))
    # The old generation is gone; meta.yaml names the new one.
    assert _listing(corpus) == {"meta.yaml", "lock", "gen-1"}
    assert yaml.safe_load((corpus / ".hydra-index/meta.yaml").read_text())["generation"] == 1
    assert all(c.status == "ok" for c in check_index(corpus))
    # And from one generation to the next.
    rep = index_folder(corpus, load_settings(), full=True)
    assert rep.rebuilt and rep.files_indexed == 5 and rep.repaired == []
    assert _listing(corpus) == {"meta.yaml", "lock", "gen-2"}


def test_a_killed_rebuild_leaves_the_old_index_and_the_next_run_removes_it(
        home: Path, corpus: Path, tmp_path: Path) -> None:
    index_folder(corpus, load_settings())
    (corpus / "docs/gardening.md").write_text(NEW)
    flag = tmp_path / "paused"
    proc = _paused_rebuild(corpus, flag)
    proc.send_signal(signal.SIGKILL)  # at the worst moment: all built, not yet switched
    proc.communicate()
    flag.unlink()
    path, text, warnings = _top(corpus, "tomatoes full sun")
    assert path == "docs/gardening.md" and OLD in text
    (warning,) = warnings
    assert warning.startswith(f"a rebuild of {corpus} was interrupted (started ")
    assert all(c.status == "ok" for c in check_index(corpus))

    rep = index_folder(corpus, load_settings())
    (note,) = rep.repaired
    assert note.startswith("removed an unfinished rebuild (--full, started ")
    assert note.endswith("; searches had kept using the index from before it")
    assert not rep.rebuilt and (rep.files_indexed, rep.files_unchanged) == (1, 4)
    assert _listing(corpus) == {"meta.yaml", "lock", "lance", "files.db"}  # no files.db-journal
    path, text, warnings = _top(corpus, "peppers warm soil")
    assert (path, warnings) == ("docs/gardening.md", []) and "Peppers want warm soil" in text


def test_a_rebuild_killed_while_embedding_leaves_the_old_index(home: Path, tmp_path: Path) -> None:
    notes = {f"doc{i:03}.md": f"# Note {i}\n\n" + "".join(
        f"Line {j} of note {i} talks about topic {i * 7 + j}.\n" for j in range(30))
        for i in range(80)}
    root = write_tree(tmp_path / "c", notes)
    index_folder(root, load_settings())
    before = Searcher(root, load_settings()).search("topic 286", 3)
    proc = subprocess.Popen([sys.executable, "-m", "hydra_rag", "index", str(root), "--full"],
                            env={**os.environ, "HYDRA_RAG_INDEX_BATCH": "16"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:  # some files, not all of them
        if any(8 <= _recorded(f.parent) < 80
               for f in (root / ".hydra-index").glob("**/files.db")):
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    searcher = Searcher(root, load_settings())
    assert [h.id for h in searcher.search("topic 286", 3)] == [h.id for h in before]
    assert "was interrupted" in searcher.warnings[0]
    assert (root / ".hydra-index/gen-1/lance").is_dir()  # half-built

    rep = index_folder(root, load_settings())
    assert rep.repaired[0].startswith("removed an unfinished rebuild (--full, started ")
    assert rep.files_unchanged == 80 and rep.files_indexed == 0
    assert "gen-1" not in _listing(root) and "rebuild.json" not in _listing(root)


def test_a_switch_cut_short_is_finished_by_the_next_run(home: Path, corpus: Path,
                                                         tmp_path: Path) -> None:
    """A run killed after its switch, before it removed the old generation."""
    index_folder(corpus, load_settings())
    idx = corpus / ".hydra-index"
    shutil.copytree(idx / "lance", tmp_path / "lance")
    shutil.copy(idx / "files.db", tmp_path / "files.db")
    index_folder(corpus, load_settings(), full=True)
    shutil.copytree(tmp_path / "lance", idx / "lance")  # what it had not removed yet
    shutil.copy(tmp_path / "files.db", idx / "files.db")
    (idx / "rebuild.json").write_text(json.dumps(
        {"generation": 1, "pid": 2**22 + 1, "started": "2026-01-01 10:00:00", "reason": "--full"}))
    searcher = Searcher(corpus, load_settings())
    assert searcher.search("X-Api-Key", 1)[0].path == "src/auth.py"
    assert searcher.warnings == []  # the index in use is the new one: nothing to say
    rep = index_folder(corpus, load_settings())
    (note,) = rep.repaired
    assert note.startswith("removed the previous index (") and "after it had switched" in note
    assert _listing(corpus) == {"meta.yaml", "lock", "gen-1"}


def test_an_open_searcher_follows_a_switch(home: Path, corpus: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYDRA_RAG_FOREIGN_EMBEDDER", "off")
    index_folder(corpus, load_settings())
    searcher = Searcher(corpus, load_settings())
    assert OLD in searcher.search("tomatoes full sun", 1)[0].text
    (corpus / "docs/gardening.md").write_text(NEW)
    index_folder(corpus, load_settings(), full=True)
    hit = searcher.search("peppers warm soil", 1)[0]
    assert hit.path == "docs/gardening.md" and "Peppers want warm soil" in hit.text
    # A new language re-analyses the full-text column in a new generation too (the vectors
    # are kept): the searcher follows it and analyses its queries the new way.
    rep = index_folder(corpus, load_settings(), language="de")
    assert not rep.rebuilt and rep.chunks_added == 0 and rep.repaired == []
    assert any("no chunk was re-embedded" in n for n in rep.notes)
    assert _listing(corpus) == {"meta.yaml", "lock", "gen-2"}
    assert Store(corpus).generation == 2
    assert searcher.search("warm soil", 1, methods=("bm25",))[0].path == "docs/gardening.md"
    assert searcher.warnings == []
