"""End to end with the real embedder sidecar and real LanceDB: index, search, incremental
updates, rebuilds, corruption, locking and crash recovery."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import copytree, recorded, run_cli, to_legacy, write_tree
from hydra_rag.checks.doctor import check_index
from hydra_rag.config import load_settings
from hydra_rag.errors import HydraError, IndexLocked
from hydra_rag.index import index_folder
from hydra_rag.locks import file_lock
from hydra_rag.search.retrieve import Searcher
from hydra_rag.store import registry
from hydra_rag.store.filelist import FileList
from hydra_rag.store.index_dir import Store


def _search(root: Path, q: str, k: int = 5):
    return Searcher(root, load_settings()).search(q, k)


def _ids(root: Path) -> dict[str, list[str]]:
    store = Store(root)
    return {t: sorted(store.id_counts(t).elements()) for t in ("code", "prose")}


def test_index_and_search(home: Path, corpus: Path) -> None:
    rep = index_folder(corpus, load_settings(), tags=["demo"])
    assert rep.files_indexed == 5 and rep.chunks_added == 5
    assert rep.chunks_total == {"code": 2, "prose": 3}
    idx = corpus / ".hydra-index"
    meta = yaml.safe_load((idx / "meta.yaml").read_text())
    assert meta["tables"]["code"] == {"embedder": "minilm-l6", "dims": 384}
    files = recorded(corpus)
    assert files["src/auth.py"]["kind"] == "code" and len(files["src/auth.py"]["chunks"]) == 1
    assert registry.stores()[str(corpus)]["tags"] == ["demo"]
    # Exact string: BM25 finds it.
    hits = _search(corpus, "X-Api-Key")
    assert hits[0].path == "src/auth.py" and "bm25" in hits[0].ranks
    # Meaning: no shared words with the text, the vectors find it.
    hits = _search(corpus, "how often should I water my vegetable garden")
    assert hits[0].path == "docs/gardening.md"
    assert hits[0].ranks.get("vector:minilm-l6") == 1
    assert (hits[0].line_start, hits[0].line_end) == (1, 4)
    # Every table's FTS index covers every row.
    store = Store(corpus)
    assert store.fts_unindexed("code") == 0 and store.fts_unindexed("prose") == 0
    assert all(c.status == "ok" for c in check_index(corpus))


def test_incremental_runs(home: Path, corpus: Path) -> None:
    index_folder(corpus, load_settings())
    again = index_folder(corpus, load_settings())
    assert (again.files_indexed, again.files_unchanged, again.chunks_added) == (0, 5, 0)

    (corpus / "docs/history.md").unlink()
    (corpus / "src/billing.py").write_text(
        "def monthly_invoice(customer, usage):\n    return 0  # refunds are handled in stripe\n")
    (corpus / "notes.md").write_text("# Sourdough\n\nFeed the starter with flour and water daily.\n")
    rep = index_folder(corpus, load_settings())
    assert (rep.files_indexed, rep.files_removed, rep.files_unchanged) == (2, 1, 3)
    assert rep.chunks_total == {"code": 2, "prose": 3}
    assert _search(corpus, "sourdough starter")[0].path == "notes.md"
    assert all(h.path != "docs/history.md" for h in _search(corpus, "Roman aqueducts", k=10))
    assert _search(corpus, "stripe refunds")[0].path == "src/billing.py"
    assert all(c.status == "ok" for c in check_index(corpus))


def test_same_content_with_a_new_mtime_is_not_read_again(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "c", {"a.md": "# Kites\n\nBox kites fly in strong wind.\n",
                                       "b.py": "def fly(kite):\n    return kite.lift()\n"})
    index_folder(root, load_settings())
    before = recorded(root)
    assert all(len(e["digest"]) == 32 for e in before.values())
    # A checkout that rewrites both files: one with the same bytes, one changed at equal size.
    (root / "a.md").write_text("# Kites\n\nBox kites fly in strong wind.\n")
    (root / "b.py").write_text("def fly(kite):\n    return kite.drag()\n")
    for f in ("a.md", "b.py"):
        st = (root / f).stat()
        os.utime(root / f, ns=(st.st_atime_ns, st.st_mtime_ns + 3_000_000_000))
    rep = index_folder(root, load_settings())
    assert (rep.files_touched, rep.files_indexed, rep.files_unchanged) == (1, 1, 1)
    after = recorded(root)
    assert after["a.md"]["chunks"] == before["a.md"]["chunks"]
    assert after["a.md"]["mtime_ns"] == (root / "a.md").stat().st_mtime_ns  # re-recorded
    assert after["b.py"]["digest"] != before["b.py"]["digest"]
    # Recorded: the next run is a no-op by (size, mtime) alone.
    again = index_folder(root, load_settings())
    assert (again.files_touched, again.files_indexed, again.files_unchanged) == (0, 0, 2)


def test_a_moved_folder_is_not_embedded_again(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "c", {
        f"notes/n{i}.md": f"# Note {i}\n\nThe greenhouse vent {i} opens at {20 + i} degrees.\n"
        for i in range(6)} | {"keep.py": "def vent(t):\n    return t > 24\n"})
    first = index_folder(root, load_settings())
    assert first.chunks_embedded == first.chunks_added == 7
    (root / "notes").rename(root / "archive")
    (root / "archive" / "n0.md").rename(root / "archive" / "renamed.md")
    rep = index_folder(root, load_settings())
    # Every chunk found its vector among the rows of the files that left.
    assert (rep.files_indexed, rep.files_removed, rep.chunks_embedded) == (6, 6, 0)
    assert rep.chunks_added == rep.chunks_removed == rep.chunks_reused == 6
    hits = _search(root, "greenhouse vent opens at 20 degrees")
    assert hits[0].path == "archive/renamed.md"
    assert {h.path.split("/")[0] for h in hits} <= {"archive", "keep.py"}
    assert _ids(root)["prose"] == sorted(c for e in recorded(root).values() for c in e["chunks"]
                                         if e["kind"] == "prose")


def test_unchanged_chunks_reuse_their_vectors(home: Path, tmp_path: Path) -> None:
    body = "".join(f"Paragraph {i}: the committee discussed budget item {i} at length.\n\n"
                   for i in range(120))
    root = write_tree(tmp_path / "c", {"minutes.md": body})
    first = index_folder(root, load_settings())
    assert first.chunks_added > 5
    (root / "minutes.md").write_text(body + "Closing remark appended at the end.\n")
    second = index_folder(root, load_settings())
    assert second.chunks_reused >= first.chunks_added - 2
    assert _ids(root)["prose"] == sorted(recorded(root)["minutes.md"]["chunks"])


def test_embedder_change_rebuilds(isolated_home: Path, corpus: Path) -> None:
    index_folder(corpus, load_settings())
    model = isolated_home / "data" / "models" / "minilm-l6.q8_0.gguf"
    proc = run_cli("embedders", "add", "minilm-copy", str(model), "--dims", "384")
    assert proc.returncode == 0, proc.stderr
    rep = index_folder(corpus, load_settings(embedder="minilm-copy"))
    assert rep.rebuilt and "minilm-l6" in rep.rebuild_reason and "minilm-copy" in rep.rebuild_reason
    assert rep.files_indexed == 5
    meta = yaml.safe_load((corpus / ".hydra-index/meta.yaml").read_text())
    assert meta["tables"]["prose"]["embedder"] == "minilm-copy"


def test_corrupt_files_db_is_rebuilt_without_re_embedding(home: Path, corpus: Path) -> None:
    index_folder(corpus, load_settings())
    before = _ids(corpus)
    files_db = corpus / ".hydra-index/files.db"
    files_db.write_bytes(b"\x00garbage, not an SQLite database\xff" * 64)
    rep = index_folder(corpus, load_settings())
    assert any(r.startswith(f"{files_db} is corrupt") for r in rep.repaired), rep.repaired
    assert rep.chunks_reused == 5 and rep.chunks_added == 0
    assert _ids(corpus) == before
    assert set(recorded(corpus)) == {"src/auth.py", "src/billing.py", "docs/gardening.md",
                                     "docs/history.md", "README.md"}
    assert all(c.status == "ok" for c in check_index(corpus))


def test_an_index_with_files_json_is_read_then_moved_to_files_db(home: Path,
                                                                 corpus: Path) -> None:
    """An index from before files.db: its files.json is read as it is, and the next run moves
    it into files.db, even one that changes nothing; nothing is embedded again."""
    index_folder(corpus, load_settings())
    idx = corpus / ".hydra-index"
    legacy = to_legacy(corpus)
    meta = yaml.safe_load((idx / "meta.yaml").read_text())
    (idx / "meta.yaml").write_text(yaml.safe_dump({**meta, "format_version": 3}))  # as it was
    assert (idx / "files.json").is_file() and not (idx / "files.db").exists()
    assert _search(corpus, "X-Api-Key")[0].path == "src/auth.py"
    again = index_folder(corpus, load_settings())
    assert (again.files_unchanged, again.files_indexed, again.chunks_embedded) == (5, 0, 0)
    assert again.chunks_total == {"code": 2, "prose": 3} and not again.rebuilt
    assert (idx / "files.db").is_file() and not (idx / "files.json").exists()
    assert yaml.safe_load((idx / "meta.yaml").read_text())["format_version"] == 4
    assert recorded(corpus) == legacy
    # A file rewritten with the same bytes is re-recorded, not read.
    st = (corpus / "README.md").stat()
    os.utime(corpus / "README.md", ns=(st.st_atime_ns, st.st_mtime_ns + 3_000_000_000))
    rep = index_folder(corpus, load_settings())
    assert (rep.files_touched, rep.files_indexed, rep.chunks_embedded) == (1, 0, 0)
    assert (idx / "files.db").is_file() and not (idx / "files.json").exists()
    assert not (idx / "files.db-journal").exists()
    now = recorded(corpus)
    assert now["README.md"]["mtime_ns"] == (corpus / "README.md").stat().st_mtime_ns
    assert {rel: e for rel, e in now.items() if rel != "README.md"} == {
        rel: e for rel, e in legacy.items() if rel != "README.md"}
    assert all(c.status == "ok" for c in check_index(corpus))


def test_corrupt_meta_yaml_is_recovered_from_the_tables(home: Path, corpus: Path) -> None:
    index_folder(corpus, load_settings())
    (corpus / ".hydra-index/meta.yaml").write_text("tables: [unclosed\n")
    rep = index_folder(corpus, load_settings())
    assert not rep.rebuilt and any("meta.yaml" in r for r in rep.repaired)
    assert rep.files_unchanged == 5
    assert yaml.safe_load((corpus / ".hydra-index/meta.yaml").read_text())["tables"]


def test_second_run_while_one_holds_the_lock(home: Path, corpus: Path) -> None:
    (corpus / ".hydra-index").mkdir()
    with file_lock(corpus / ".hydra-index/lock") as held:
        assert held
        with pytest.raises(IndexLocked, match="another `hydra-rag index`"):
            index_folder(corpus, load_settings())
        proc = run_cli("index", str(corpus))
        assert proc.returncode == 1 and "another `hydra-rag index`" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_long_single_line_and_non_english_text(home: Path, tmp_path: Path) -> None:
    minified = json.dumps({f"key{i}": f"value number {i}" for i in range(6000)})
    cjk = "日本語のテキストはトークンが多くなります。" * 200 + "\n"
    root = write_tree(tmp_path / "c", {"data.json": minified + "\n", "jp.md": cjk,
                                       "cz.md": "Příliš žluťoučký kůň úpěl ďábelské ódy.\n"})
    # A one-line data dump is skipped by default (enormous_line); --include brings it in.
    rep = index_folder(root, load_settings(), include=["data.json"])
    assert rep.files_indexed == 3 and rep.chunks_total["code"] > 10
    assert rep.long_lines == ["data.json"]
    from hydra_rag.catalog import get_embedder
    from hydra_rag.models.embed import Tokenizer

    for t in ("code", "prose"):  # each table fits its own embedder (prose: not English here)
        tok = Tokenizer(str(get_embedder(rep.embedders[t]).model_path()))
        rows = Store(root).table(t).to_arrow().column("text").to_pylist()
        assert rows and max(tok.count(r) for r in rows) <= 511
    assert _search(root, "value number 4242", k=3)


def _kill_when(proc: subprocess.Popen[str], folder: Path, min_files: int,
               sig: int = signal.SIGKILL) -> None:
    """Send `sig` once the files.db in `folder` records `min_files` files."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:  # read while the run writes it
            n = len(FileList(folder).read())
        except HydraError:
            n = 0
        if n >= min_files:
            break
        time.sleep(0.05)
    proc.send_signal(sig)
    proc.wait()


def test_kill_9_mid_run_is_repaired(home: Path, tmp_path: Path) -> None:
    files = {f"doc{i:03}.md": f"# Note {i}\n\n" + "".join(
        f"Line {j} of note {i} talks about topic {i * 7 + j}.\n" for j in range(30))
        for i in range(80)}
    root = write_tree(tmp_path / "c", files)
    reference = copytree(root, tmp_path / "ref")
    env = {**os.environ, "HYDRA_RAG_INDEX_BATCH": "16"}
    for min_files in (8, 30):
        proc = subprocess.Popen([sys.executable, "-m", "hydra_rag", "index", str(root)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                text=True)
        _kill_when(proc, root / ".hydra-index", min_files)
        assert proc.returncode == -signal.SIGKILL
        assert (root / ".hydra-index/journal").exists()
        # Edit a file between the crashes, as a user might.
        (root / "doc001.md").write_text("# Note 1\n\nRewritten after the crash.\n")
        (reference / "doc001.md").write_text("# Note 1\n\nRewritten after the crash.\n")
    rep = index_folder(root, load_settings())
    assert not (root / ".hydra-index/journal").exists()
    assert all(c.status == "ok" for c in check_index(root)), check_index(root)
    index_folder(reference, load_settings())
    assert _ids(root) == _ids(reference)
    assert rep.chunks_total == {"code": 0, "prose": len(_ids(reference)["prose"])}


def test_ctrl_c_says_what_was_kept_and_the_next_run_what_it_resumed(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # One phase, batches embedded as they are stored (a stop in phase two:
    # test_two_phase.py).
    monkeypatch.setenv("HYDRA_RAG_VECTORS_LATER", "0")
    files = {f"doc{i:03}.md": f"# Note {i}\n\n" + "".join(
        f"Line {j} of note {i} talks about topic {i * 7 + j}.\n" for j in range(30))
        for i in range(120)}
    root = write_tree(tmp_path / "c", files)
    kept = before = 0
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        # SIGINT as a terminal sends it: a test run started in the background by a script
        # inherits SIGINT ignored (POSIX shells do that to background jobs), and so would the
        # command, which would then rightly not stop.
        proc = subprocess.Popen([sys.executable, "-m", "hydra_rag", "index", str(root)],
                                env={**os.environ, "HYDRA_RAG_INDEX_BATCH": "16"},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        _kill_when(proc, root / ".hydra-index", kept + 8, sig)
        stderr = proc.stderr.read() if proc.stderr else ""
        assert proc.returncode == code, stderr
        n = len(recorded(root))
        assert kept + 8 <= n < 120
        assert stderr.splitlines()[-1] == (
            f"interrupted: {n - kept} of {120 - kept} files indexed and kept; "
            "the next `hydra-rag index` picks up the rest")
        assert "Traceback" not in stderr
        before, kept = kept, n
    rep = index_folder(root, load_settings())
    (note,) = rep.repaired  # the last one: stopped between batches, nothing to repair
    assert note.startswith("resumed the run interrupted at ") and note.endswith(
        f": it had indexed and kept {kept - before} of {120 - before} files, this run indexes "
        "the rest")
    assert (rep.files_unchanged, rep.files_indexed) == (kept, 120 - kept)
    assert not (root / ".hydra-index/journal").exists()
    assert all(c.status == "ok" for c in check_index(root)), check_index(root)


def test_interrupted_rows_without_a_files_entry_are_orphans(home: Path, corpus: Path) -> None:
    """Rows written by a run that died before recording them are removed by the next run."""
    index_folder(corpus, load_settings())
    store = Store(corpus)
    row = store.table("prose").search().limit(1).to_list()[0]
    row = {k: v for k, v in row.items() if not k.startswith("_")}
    store.add("prose", [{**row, "id": "orphan-id"}, row])  # an orphan and a duplicate
    (corpus / ".hydra-index/journal").touch()
    rep = index_folder(corpus, load_settings())
    assert any("1 orphan and 1 duplicate" in r for r in rep.repaired)
    assert all(c.status == "ok" for c in check_index(corpus))
    assert rep.chunks_total["prose"] == 3


def _handbook(heading: str) -> str:
    intro = "".join(f"Welcome paragraph {i}: the office opens at nine and closes at five.\n"
                    for i in range(20))
    body = "".join(f"Rule {i}: keep every receipt and file it within thirty days of travel.\n"
                   for i in range(60))
    return f"# Staff handbook\n\n{intro}\n## {heading}\n\n{body}"


def test_sections_reach_the_embedder_and_the_full_text_index(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "h", {"handbook.md": _handbook("Expense claims")})
    first = index_folder(root, load_settings())
    assert first.chunks_added >= 4
    settings = load_settings()
    # The words of the heading are in no chunk's text but the first of its section, yet
    # full-text search finds the later ones too: their section is indexed with them.
    hits = Searcher(root, settings).search("expense claims", 10, methods=("bm25",))
    deep = [h for h in hits if "Expense claims" not in h.text]
    assert deep and all(h.section == "Staff handbook › Expense claims" for h in deep)
    assert {h.section for h in Searcher(root, settings).search("office opens", 3)} >= {""}
    # Renaming the heading changes what those chunks are embedded with: they are embedded
    # again, while the chunks above the heading keep their vectors.
    (root / "handbook.md").write_text(_handbook("Travel refunds"))
    second = index_folder(root, load_settings())
    assert 0 < second.chunks_reused < first.chunks_added
    hits = Searcher(root, settings).search("travel refunds", 10, methods=("bm25",))
    assert any(h.section == "Staff handbook › Travel refunds" and "Travel refunds" not in h.text
               for h in hits)


def test_an_index_from_before_sections_is_searched_then_rebuilt(home: Path, corpus: Path) -> None:
    index_folder(corpus, load_settings())
    store = Store(corpus)
    # Make it look like a format-2 index: no `section` column, older versions in meta.yaml.
    for t in ("code", "prose"):
        tbl = store.table(t)
        data = tbl.to_arrow().drop_columns(["section"])
        store.db.create_table(t, data=data, mode="overwrite")
    meta = yaml.safe_load((corpus / ".hydra-index/meta.yaml").read_text())
    meta.update(format_version=2, chunker_version=1)
    (corpus / ".hydra-index/meta.yaml").write_text(yaml.safe_dump(meta))
    hits = _search(corpus, "X-Api-Key")
    assert hits[0].path == "src/auth.py" and hits[0].section == ""
    (old,) = [c for c in check_index(corpus) if c.status == "warn"]
    assert "chunker version 1" in old.detail and old.fix == f"hydra-rag index {corpus}"
    rep = index_folder(corpus, load_settings())
    assert rep.rebuilt and "index format 2" in rep.rebuild_reason and rep.files_indexed == 5
    assert _search(corpus, "X-Api-Key")[0].path == "src/auth.py"


def test_equal_pieces_of_one_long_line_get_distinct_ids(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "d", {"dump.md": "# Dump\n\n" + "same words again " * 1500 + "\n"})
    rep = index_folder(root, load_settings())
    entry = recorded(root)["dump.md"]
    assert rep.chunks_added == len(entry["chunks"]) == len(set(entry["chunks"])) > 3
    assert _ids(root)["prose"] == sorted(entry["chunks"])
    assert all(c.status == "ok" for c in check_index(root))
