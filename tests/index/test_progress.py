"""Index progress a user can read: it moves while a batch of many files is embedded (files
are counted only once their batch is stored), with the rate and the time left. A real run for
the estimate; the plain lines from a recorded sequence (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import write_tree
from hydra_rag.config import load_settings
from hydra_rag.index import Progress, index_folder


def test_progress_moves_while_the_first_batch_is_embedded(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYDRA_RAG_EMBED_BATCH", "4")  # many requests in the one batch
    monkeypatch.setenv("HYDRA_RAG_VECTORS_LATER", "0")  # one phase: files embedded as stored
    root = _notes(tmp_path / "p")
    seen: list[tuple[int, int, int, int]] = []

    def record(p: Progress) -> None:
        if p.stage == "embed":
            seen.append((p.files_done, p.chunks_done, p.bytes_estimate, p.bytes_total))

    index_folder(root, load_settings(), progress=record)
    during = [s for s in seen if s[0] == 0 and s[1] > 0]
    assert during, seen  # one batch holds every file: before, 0 files and 0 bytes throughout
    estimates = [s[2] for s in seen]
    assert estimates == sorted(estimates) and any(0 < s[2] < s[3] for s in during)
    assert seen[-1][0] == 12 and seen[-1][2] == seen[-1][3]


def test_phase_two_moves_with_each_request_and_ends_whole(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYDRA_RAG_EMBED_BATCH", "4")
    root = _notes(tmp_path / "p")
    phase_one: list[tuple[int, int]] = []
    seen: list[tuple[int, int, int, int]] = []  # chunks embedded, stored, estimate, total

    def record(p: Progress) -> None:
        if p.stage == "embed":
            phase_one.append((p.files_done, p.chunks_done))
        elif p.stage == "vectors" and p.bytes_total:
            seen.append((p.chunks_done, p.bytes_done, p.bytes_estimate, p.bytes_total))

    rep = index_folder(root, load_settings(), progress=record)
    assert phase_one[-1] == (12, 0)  # every file stored, nothing embedded yet
    total = rep.chunks_embedded
    assert total == seen[0][3] and total > 8
    during = [s for s in seen if s[1] == 0 and s[0] > 0]  # before the first batch is stored
    assert len({s[0] for s in during}) >= 2, seen  # request by request, not batch by batch
    assert [s[2] for s in seen] == sorted(s[2] for s in seen)
    assert seen[-1][:2] == (total, total) and seen[-1][2] == total


def _notes(root: Path) -> Path:
    return write_tree(root, {f"n{i:02}.md": f"# Note {i}\n\n" + "\n\n".join(
        f"Paragraph {j} of note {i} about the harbour lamp and storm {j}." * 3
        for j in range(8)) for i in range(12)})


def test_plain_lines_say_how_far_how_fast_and_how_long(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from hydra_rag.cli import index as cli_index

    clock = iter([100.0, 110.0, 160.0, 200.0])
    monkeypatch.setattr(cli_index.time, "monotonic", lambda: next(clock))
    view = cli_index._ProgressView()
    view.live = False
    total = 1_000_000
    view(Progress("embed", files_total=227, bytes_total=total))
    view(Progress("embed", files_total=227, bytes_total=total, chunks_done=100,
                  bytes_estimate=100_000))
    view(Progress("embed", files_total=227, bytes_total=total, chunks_done=600,
                  bytes_estimate=400_000))
    view(Progress("embed", files_done=227, files_total=227, bytes_total=total, chunks_done=1500,
                  bytes_done=total, bytes_estimate=total))
    assert capsys.readouterr().err.splitlines() == [
        "indexed 0/227 files (0%), 0 chunks embedded",
        "indexed 0/227 files (40%), 600 chunks embedded, 10.0 chunks/s, about 2 min left",
        "indexed 227/227 files (100%), 1,500 chunks embedded, 15.0 chunks/s",
    ]
