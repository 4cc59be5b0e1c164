"""Two phases in one index (setting vectors_later), with the real embedder sidecar and real
LanceDB: every file's chunks are stored and searchable by names, exact strings and words before
any is embedded; the vectors follow a batch at a time; a kill -9 in phase two leaves an index
that searches and that the next run completes without embedding anything twice; the finished
index holds what a one-phase index of the same folder holds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import copytree, run_cli, write_tree
from hydra_rag.config import load_settings
from hydra_rag.index import Progress, folder_status, index_folder
from hydra_rag.search.retrieve import Searcher
from hydra_rag.store.index_dir import Store


def _folder(root: Path, n: int = 24) -> Path:
    files = {f"notes/n{i:02}.md": f"# Note {i}\n\n" + "\n\n".join(
        f"Paragraph {j} of note {i}: the keeper logged storm number {i * 40 + j} at dusk, "
        f"with the lamp lit and the log book open." for j in range(10)) for i in range(n)}
    files |= {f"src/beacon{i}.py": f"def beacon_{i}(lamp):\n    \"\"\"Flash the lamp {i} "
              f"times.\"\"\"\n    return lamp.flash({i})\n" for i in range(6)}
    return write_tree(root, files)


def _rows(root: Path) -> dict[str, tuple[str, list[float] | None]]:
    store = Store(root)
    out = {}
    for t in ("code", "prose"):
        data = store.scan(t, ["id", "text", "vector"]).to_pylist()
        out |= {r["id"]: (r["text"], r["vector"]) for r in data}
    return out


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYDRA_RAG_VECTORS_LATER", "1")
    monkeypatch.setenv("HYDRA_RAG_EMBED_BATCH", "8")


def test_searchable_before_any_vector_and_whole_at_the_end(
        home: Path, tmp_path: Path, later: None, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _folder(tmp_path / "two")
    reference = copytree(root, tmp_path / "one")
    with monkeypatch.context() as m:
        m.setenv("HYDRA_RAG_VECTORS_LATER", "0")
        index_folder(reference, load_settings())
    seen: dict[str, object] = {}

    def at_phase_two(p: Progress) -> None:
        if p.stage == "vectors" and p.message and not seen:
            searcher = Searcher(root, load_settings())
            seen["warnings"] = searcher.warnings
            seen["name"] = searcher.search("beacon_4", 3)[0].path
            seen["words"] = searcher.search("storm number 487 at dusk", 3)[0].path
            searcher.close()

    rep = index_folder(root, load_settings(), progress=at_phase_two)
    total = sum(len(v) for v in [_rows(root)])
    assert seen["name"] == "src/beacon4.py" and seen["words"] == "notes/n12.md", seen
    assert seen["warnings"] == [f"{root}: vectors for 0 of {total:,} chunks; results improve "
                                "as they arrive (names, exact strings and words search every "
                                "chunk)"]
    assert rep.chunks_waiting == rep.chunks_embedded == total and rep.vectors_pending == 0
    assert 0 < rep.searchable_s < rep.elapsed_s
    # The finished index is the one-phase index: the same chunks, the same vectors.
    two, one = _rows(root), _rows(reference)
    assert two.keys() == one.keys()
    for cid, (text, vec) in two.items():
        assert text == one[cid][0] and vec is not None
        assert float(np.dot(vec, one[cid][1])) >= 0.9999, cid
    assert "vectors_pending" not in yaml.safe_load((root / ".hydra-index/meta.yaml").read_text())
    assert folder_status(root, load_settings()).vectors is None
    searcher = Searcher(root, load_settings())
    assert searcher.warnings == []
    assert [h.path for h in searcher.search("when did the keeper light the lamp", 5)] == \
        [h.path for h in Searcher(reference, load_settings()).search(
            "when did the keeper light the lamp", 5)]


def test_a_kill_in_phase_two_leaves_an_index_the_next_run_completes(
        home: Path, tmp_path: Path, later: None) -> None:
    root = _folder(tmp_path / "k", n=40)
    meta = root / ".hydra-index/meta.yaml"
    proc = subprocess.Popen([sys.executable, "-m", "hydra_rag", "index", str(root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HYDRA_RAG_INDEX_BATCH": "8"})
    # Killed once phase two has stored a batch or more (meta.yaml counts what still waits).
    deadline = time.monotonic() + 300
    total = None
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            pending = (yaml.safe_load(meta.read_text()) or {}).get("vectors_pending") or {}
        except (OSError, yaml.YAMLError):
            pending = {}
        count = sum(pending.values())
        total = max(total or 0, count) or None  # phase one counts up, phase two down
        if total and 0 < count < total:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = sum((yaml.safe_load(meta.read_text())["vectors_pending"]).values())
    status = folder_status(root, load_settings())  # nobody embeds them now: the next run does
    assert status.state == "stale" and status.vectors is not None
    assert status.vectors["pending"] == left and not status.vectors["running"]
    assert status.repair == (f"{left:,} chunks are without their vector (searches use the "
                             "others): the next `hydra-rag index` embeds them")
    stored = _rows(root)
    have = [cid for cid, (_t, v) in stored.items() if v is not None]
    assert 0 < len(have) < len(stored)
    # It searches meanwhile, and says how far the vectors are.
    found = run_cli("search", "beacon_5", "--path", str(root), "--json")
    assert found.returncode == 0, found.stderr
    doc = json.loads(found.stdout)
    assert doc["results"][0]["path"] == "src/beacon5.py"
    assert any("vectors for" in w for w in doc["warnings"]), doc["warnings"]
    # The next run embeds what was left, and nothing twice.
    again = run_cli("index", str(root), "--json")
    assert again.returncode == 0, again.stderr
    rep = json.loads(again.stdout)
    assert rep["chunks_embedded"] == len(stored) - len(have) and rep["files_indexed"] == 0
    assert left >= len(stored) - len(have)
    after = _rows(root)
    assert after.keys() == stored.keys() and all(v is not None for _t, v in after.values())
    assert all(after[c][1] == stored[c][1] for c in have)  # the stored vectors kept


def test_ctrl_c_in_phase_two_says_what_is_searchable(
        home: Path, tmp_path: Path, later: None) -> None:
    from hydra_rag.index import IndexInterrupted

    root = _folder(tmp_path / "c", n=8)

    def ctrl_c(p: Progress) -> None:
        if p.stage == "vectors" and p.chunks_done >= 8:
            raise KeyboardInterrupt

    with pytest.raises(IndexInterrupted) as stopped:
        index_folder(root, load_settings(), progress=ctrl_c)
    assert str(stopped.value).startswith("every file is indexed and searchable; ")
    assert str(stopped.value).endswith(" chunks are still without their vector (searches use "
                                       "the others); the next `hydra-rag index` embeds them")
    rep = index_folder(root, load_settings())
    assert rep.vectors_pending == 0 and rep.chunks_embedded > 0 and rep.files_indexed == 0


def test_background_returns_after_phase_one_and_a_child_embeds_the_rest(
        home: Path, tmp_path: Path) -> None:
    root = _folder(tmp_path / "b", n=30)
    proc = run_cli("index", str(root), "--background", "--json")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["chunks_embedded"] == 0 and rep["vectors_pending"] == rep["chunks_waiting"] > 0
    [note] = [n for n in rep["notes"] if "in the background" in n]
    assert note.startswith(f"searchable now; {rep['vectors_pending']:,} chunks are being "
                           "embedded in the background (pid ")
    found = run_cli("search", "beacon_3", "--path", str(root), "--json")
    assert json.loads(found.stdout)["results"][0]["path"] == "src/beacon3.py"
    # `sidecars list` shows the child and what it has left
    rows = json.loads(run_cli("sidecars", "list", "--json").stdout)
    [child] = [r for r in rows if r["role"] == "index" and r["folder"] == str(root)]
    assert child["status"] == "embedding" and 0 < child["pending"] <= rep["vectors_pending"]
    assert str(child["pid"]) in note
    shown = run_cli("sidecars", "list").stdout
    assert f"index {root.name}" in shown and "chunks to go" in shown, shown
    deadline = time.monotonic() + 300
    while (status := folder_status(root, load_settings())).vectors is not None:
        assert status.state == "current" and status.vectors["running"], status
        assert time.monotonic() < deadline, "the background run did not finish"
        time.sleep(0.5)
    assert status.state == "current"
    assert all(v is not None for _t, v in _rows(root).values())
    while any(r["role"] == "index" and r["folder"] == str(root)
              for r in json.loads(run_cli("sidecars", "list", "--json").stdout)):
        assert time.monotonic() < deadline + 60, "the child did not end"
        time.sleep(0.5)


def test_the_notice_while_vectors_arrive() -> None:
    from hydra_rag.search.retrieve import vectors_notice

    assert vectors_notice({}, Path("/f")) == ""
    assert vectors_notice({"code": (0, 0), "prose": (0, 0)}, Path("/f")) == (
        "/f: being indexed, no file stored yet; search again in a moment")
    assert vectors_notice({"code": (300, 1000), "prose": (0, 234)}, Path("/f")) == (
        "/f: vectors for 300 of 1,234 chunks; results improve as they arrive (names, exact "
        "strings and words search every chunk)")
