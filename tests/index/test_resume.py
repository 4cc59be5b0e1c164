"""Interrupted runs keep what they embedded, with the real embedder sidecar and real LanceDB:
a first index stopped in the middle of a batch, and a --full rebuild stopped half-way, are
picked up by the next run, which embeds only what is missing and ends with the index a clean
run makes. The interruption is a KeyboardInterrupt raised where a Ctrl-C lands while a run
embeds: in the main thread, between two requests to the embedder (from the progress callback
that the CLI's progress bar is)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import copytree, recorded, write_tree
from hydra_rag.checks.doctor import check_index
from hydra_rag.config import load_settings
from hydra_rag.index import IndexInterrupted, Progress, index_folder
from hydra_rag.search.retrieve import Searcher
from hydra_rag.store.index_dir import Store


def _ids(root: Path) -> dict[str, list[str]]:
    store = Store(root)
    return {t: sorted(store.id_counts(t).elements()) for t in ("code", "prose")}


def _folder(root: Path) -> Path:
    """26 files of one or two chunks each (minilm's 256 tokens), prose and code."""
    files = {f"notes/n{i:02}.md": f"# Note {i}\n\n" + "".join(
        f"Line {j} of note {i}: the lighthouse keeper logged storm number {i * 40 + j} at dusk.\n"
        for j in range(6 + 14 * (i % 3))) for i in range(20)}
    files |= {f"src/m{i}.py": f"def beacon_{i}(lamp):\n    return lamp.flash({i})\n"
              for i in range(6)}
    return write_tree(root, files)


class _CtrlC:
    """A progress callback that raises KeyboardInterrupt once `after` chunks are embedded, and
    keeps the messages it hears."""

    def __init__(self, after: int | None = None) -> None:
        self.after = after
        self.messages: list[str] = []

    def __call__(self, p: Progress) -> None:
        if p.message:
            self.messages.append(p.message)
        if self.after is not None and p.stage == "embed" and p.chunks_done >= self.after:
            self.after = None
            raise KeyboardInterrupt


@pytest.fixture
def small_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYDRA_RAG_EMBED_BATCH", "4")  # many requests, so a stop falls between


def test_a_first_index_stopped_mid_batch_keeps_the_files_it_embedded(
        home: Path, tmp_path: Path, small_requests: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # One phase (each batch embedded before it is stored); a stop in phase two is
    # test_two_phase.py's.
    monkeypatch.setenv("HYDRA_RAG_VECTORS_LATER", "0")
    root = _folder(tmp_path / "c")
    reference = copytree(root, tmp_path / "ref")
    clean = index_folder(reference, load_settings())
    total = clean.chunks_embedded
    assert total == sum(len(v) for v in _ids(reference).values()) and total > 30

    # One batch holds the whole folder (index_batch 512): before, a stop lost all of it.
    with pytest.raises(IndexInterrupted) as stopped:
        index_folder(root, load_settings(), progress=_CtrlC(after=24))
    kept = recorded(root)
    assert 0 < len(kept) < 26
    assert str(stopped.value) == (f"{len(kept)} of 26 files indexed and kept; the next "
                                  "`hydra-rag index` picks up the rest")
    # Every file recorded has all its chunks stored, and no other chunk is.
    assert sorted(c for e in kept.values() for c in e["chunks"]) == sorted(
        c for ids in _ids(root).values() for c in ids)
    n_kept = sum(len(e["chunks"]) for e in kept.values())
    assert 16 <= n_kept <= 24  # the requests answered before the stop, to a file
    first = sorted(kept)[0]
    hit = Searcher(root, load_settings()).search((root / first).read_text().splitlines()[2], 3)[0]
    assert hit.path == first

    heard = _CtrlC()
    rep = index_folder(root, load_settings(), progress=heard)
    assert f"resuming: {len(kept)} files already indexed, {26 - len(kept)} to go" in heard.messages
    assert (rep.files_unchanged, rep.files_indexed) == (len(kept), 26 - len(kept))
    assert rep.chunks_embedded == total - n_kept
    assert _ids(root) == _ids(reference)
    assert recorded(root).keys() == recorded(reference).keys()
    assert not (root / ".hydra-index/journal").exists()
    assert all(c.status == "ok" for c in check_index(root)), check_index(root)


def test_an_interrupted_full_rebuild_is_resumed_by_the_next_one(
        home: Path, tmp_path: Path, small_requests: None, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _folder(tmp_path / "c")
    total = index_folder(root, load_settings()).chunks_embedded
    before = _ids(root)
    query = "lighthouse keeper logged storm number 322"
    hits = [h.id for h in Searcher(root, load_settings()).search(query, 3)]

    monkeypatch.setenv("HYDRA_RAG_INDEX_BATCH", "12")  # several batches, stopped inside one
    with pytest.raises(IndexInterrupted) as stopped:
        index_folder(root, load_settings(), full=True, progress=_CtrlC(after=30))
    staged = Store(root, 1, staged=True)
    kept = staged.read_files()
    n_kept = sum(len(e.chunks) for e in kept.values())
    assert 0 < len(kept) < 26 and n_kept < total
    assert str(stopped.value) == (
        f"the new index was not finished ({len(kept)} of 26 files kept); searches keep using the "
        "one from before, and the next `hydra-rag index --full` goes on with it (a plain "
        "`hydra-rag index` removes it)")
    # The index in use is whole and searched, and says so (a rebuild "is running": its marker
    # names this process, which is alive).
    assert Store(root).generation == 0 and _ids(root) == before
    searcher = Searcher(root, load_settings())
    assert [h.id for h in searcher.search(query, 3)] == hits
    assert searcher.warnings[0].endswith("results come from the previous index")

    heard = _CtrlC()
    rep = index_folder(root, load_settings(), full=True, progress=heard)
    assert rep.rebuilt and rep.repaired[0].startswith(
        "resumed the rebuild interrupted before (--full, started ")
    assert f"resuming: {len(kept)} files already indexed, {26 - len(kept)} to go" in heard.messages
    assert (rep.files_unchanged, rep.files_indexed) == (len(kept), 26 - len(kept))
    assert rep.chunks_embedded == total - n_kept
    assert Store(root).generation == 1
    assert {p.name for p in (root / ".hydra-index").iterdir()} == {"meta.yaml", "lock", "gen-1"}
    assert _ids(root) == before  # what a clean build made
    assert all(c.status == "ok" for c in check_index(root)), check_index(root)
    assert [h.id for h in Searcher(root, load_settings()).search(query, 3)] == hits

    # Stopped again, a plain run drops the unfinished rebuild and keeps the index in use.
    with pytest.raises(IndexInterrupted):
        index_folder(root, load_settings(), full=True, progress=_CtrlC(after=30))
    rep = index_folder(root, load_settings())
    assert rep.repaired[0].startswith("removed an unfinished rebuild (--full, started ")
    assert not rep.rebuilt and (rep.files_unchanged, rep.chunks_embedded) == (26, 0)
    assert {p.name for p in (root / ".hydra-index").iterdir()} == {"meta.yaml", "lock", "gen-1"}


def test_a_rebuild_made_another_way_is_not_resumed(
        home: Path, tmp_path: Path, small_requests: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unfinished rebuild is kept only for a run that builds the same index: here the
    prose's full-text analysis changes (another language, the same embedder)."""
    monkeypatch.setenv("HYDRA_RAG_FOREIGN_EMBEDDER", "off")
    root = _folder(tmp_path / "c")
    total = index_folder(root, load_settings()).chunks_embedded
    with pytest.raises(IndexInterrupted):
        index_folder(root, load_settings(), full=True, progress=_CtrlC(after=12))
    assert (root / ".hydra-index/gen-1/files.db").is_file()
    rep = index_folder(root, load_settings(), full=True, language="de")
    assert rep.repaired[0].startswith("removed an unfinished rebuild (--full, started ")
    assert (rep.files_indexed, rep.chunks_embedded) == (26, total)
    assert Store(root).read_meta()["lexical"]["prose"]["language"] == "de"
    assert all(c.status == "ok" for c in check_index(root)), check_index(root)
