"""What the machine does to a run, done for real: a disk filled to its last block, an index
folder made read-only, an index whose meta.yaml is garbled. Each ends in one line (what
happened, what was kept, what to do) and exit code 1, with the index still searchable and the
next run completing it. The disks are small tmpfs mounts, which take root (CI runs as root)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conftest import run_cli, write_tree
from hydra_rag.config import load_settings
from hydra_rag.errors import fault, fault_errno, unexpected
from hydra_rag.index import folder_status


def _mount(at: Path, size: str, mode: str = "755") -> None:
    at.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode={mode}", "tmpfs",
                           str(at)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"cannot mount a tmpfs: {proc.stderr.strip()}")
        pytest.skip(f"mounting a tmpfs takes root (CI runs as root): {proc.stderr.strip()}")


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB disk of its own."""
    at = tmp_path / "disk"
    _mount(at, "4m")
    yield at
    subprocess.run(["umount", "-l", str(at)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    """Fill the disk to its last block, then free `leave` bytes of it."""
    filler = disk / "filler"
    try:
        with open(filler, "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def _notes(root: Path, n: int, word: str) -> Path:
    return write_tree(root, {f"notes/{word}{i:02}.md": f"# {word.title()} {i}\n\n" + "\n\n".join(
        f"Paragraph {j} of {word} note {i}: the keeper logged storm {i * 50 + j} at dusk, "
        f"with the {word} lamp lit and the log book open on the desk." for j in range(12))
        for i in range(n)})


def _one_error(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    return errors[0]


def test_a_full_disk_ends_a_first_index_in_one_line_and_the_next_run_completes(
        home: Path, disk: Path) -> None:
    root = _notes(disk / "proj", 30, "harbour")
    filler = _fill(disk, 96 * 1024)
    proc = run_cli("index", str(root))
    assert proc.returncode == 1
    line = _one_error(proc.stderr)
    assert line.startswith(f"error: the disk is full ({root / '.hydra-index'}): "), line
    assert line.endswith("(free some space first)"), line
    filler.unlink()
    proc = run_cli("index", str(root))
    assert proc.returncode == 0, proc.stderr
    assert "private" not in proc.stderr  # nothing here is private, interrupted or not
    proc = run_cli("search", "harbour note 7 storm", "--path", str(root), "-k", "3", "--json")
    assert proc.returncode == 0 and "harbour07.md" in proc.stdout, proc.stderr


def test_a_full_disk_during_a_re_index_keeps_the_index_searchable(
        home: Path, disk: Path) -> None:
    root = _notes(disk / "proj", 4, "harbour")
    assert run_cli("index", str(root)).returncode == 0
    _notes(root, 30, "lighthouse")
    filler = _fill(disk, 64 * 1024)
    proc = run_cli("index", str(root))
    assert proc.returncode == 1
    line = _one_error(proc.stderr)
    assert line.startswith("error: the disk is full") and "first)" in line, line
    # What was there answers as before.
    proc = run_cli("search", "harbour note 2 storm", "--path", str(root), "-k", "3", "--json")
    assert proc.returncode == 0 and "harbour02.md" in proc.stdout, proc.stderr
    filler.unlink()
    proc = run_cli("index", str(root))
    assert proc.returncode == 0, proc.stderr
    status = folder_status(root, load_settings())
    assert status.state == "current" and status.files == 34, status


def test_a_read_only_index_folder_ends_in_one_line_and_searches_go_on(
        home: Path, tmp_path: Path) -> None:
    root = _notes(tmp_path / "proj", 3, "harbour")
    index = root / ".hydra-index"
    _mount(index, "8m")
    try:
        assert run_cli("index", str(root)).returncode == 0
        subprocess.run(["mount", "-o", "remount,ro", str(index)], check=True)
        _notes(root, 5, "lighthouse")
        proc = run_cli("index", str(root))
        assert proc.returncode == 1
        assert _one_error(proc.stderr) == (f"error: the file system is read-only ({index}): "
                                           "the index is as it was (make it writable first)")
        proc = run_cli("search", "harbour note 1 storm", "--path", str(root), "--json")
        assert proc.returncode == 0 and "harbour01.md" in proc.stdout, proc.stderr
        # The warm process answers as a fresh one does, on the read-only index too.
        _same_warm_and_cold(["search", "harbour note 1 storm", "--path", str(root)], root)
    finally:
        run_cli("sidecars", "stop", "warm")
        subprocess.run(["umount", "-l", str(index)], check=False)


def _same_warm_and_cold(args: list[str], cwd: Path) -> None:
    """Start the warm process (a quick command run with it on does), then check that it
    prints and exits as a fresh process does."""
    import time

    warm = {"HYDRA_RAG_WARM_MINUTES": "5"}
    assert run_cli(*args, cwd=cwd, env=warm).returncode == 0
    deadline = time.monotonic() + 120
    while '"warm"' not in run_cli("sidecars", "list", "--json").stdout:
        assert time.monotonic() < deadline, "no warm process within 120 s"
        time.sleep(0.5)
    fresh = run_cli(*args, cwd=cwd, env={"HYDRA_RAG_WARM_MINUTES": "0"})
    done = subprocess.run(
        [sys.executable, "-c", "import sys, os; from hydra_rag.warm.client import forward; "
         "rc, why = forward(sys.argv[1:]); sys.exit(200 if rc is None else rc)", *args],
        capture_output=True, text=True, cwd=cwd, env={**os.environ, **warm})
    assert done.returncode != 200, "not answered warm"
    assert (done.returncode, done.stdout, done.stderr) == (
        fresh.returncode, fresh.stdout, fresh.stderr)


def test_a_garbled_meta_yaml_is_said_once_and_repaired_from_the_tables(
        home: Path, tmp_path: Path) -> None:
    root = _notes(tmp_path / "proj", 3, "harbour")
    assert run_cli("index", str(root), "--full").returncode == 0
    meta = root / ".hydra-index/meta.yaml"
    meta.write_text("tables: [oops: {\n")
    status = folder_status(root, load_settings())
    # Not "the index has tables but no meta.yaml", nor every file "added": files.db is whole.
    assert status.rebuild is None and status.added == [] and status.changed == []
    assert status.repair is not None and status.repair.startswith(f"{meta} is corrupt (")
    assert status.repair.endswith("the next `hydra-rag index` rebuilds it from the tables, "
                                  "re-embedding nothing"), status.repair
    proc = run_cli("index", str(root))
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if "meta.yaml" in line]
    assert len(notes) == 1 and notes[0].endswith(": rebuilt it from the tables"), notes
    assert "--full" not in notes[0]  # it did not ask for the rebuild it had just done
    assert "0 indexed, 3 unchanged" in proc.stdout
    assert isinstance(yaml.safe_load(meta.read_text())["tables"], dict)


def test_a_full_disk_keeps_a_chat_answer_and_the_turns_saved_before(
        isolated_home: Path, tmp_path: Path) -> None:
    root = _notes(tmp_path / "proj", 2, "harbour")
    assert run_cli("index", str(root)).returncode == 0
    sessions = isolated_home / "state" / "sessions"
    _mount(sessions, "1m", mode="700")
    try:
        chat = ["chat", "--rag", str(root), "--session", "log", "--max-tokens", "12"]
        proc = run_cli(*chat, input="Which storm did the keeper log?\n")
        assert proc.returncode == 0, proc.stderr
        saved = (sessions / "log.json").read_text()
        _fill(sessions, 0)
        proc = run_cli(*chat, input="What lamp was lit?\n")
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout.strip()  # the answer is shown
        assert "note: this turn was not saved to the session (the disk is full; free some "\
               "space); the session keeps the turns saved before" in proc.stdout, proc.stdout
        assert (sessions / "log.json").read_text() == saved
    finally:
        subprocess.run(["umount", "-l", str(sessions)], check=False)


def test_a_killed_embedder_sidecar_is_started_again_and_the_run_completes(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import signal

    from hydra_rag.index import Progress, index_folder

    monkeypatch.setenv("HYDRA_RAG_EMBED_BATCH", "4")
    root = _notes(tmp_path / "proj", 12, "harbour")
    killed: list[int] = []

    def kill_once(p: Progress) -> None:
        if p.stage in ("embed", "vectors") and p.chunks_done >= 8 and not killed:
            rows = json.loads(run_cli("sidecars", "list", "--json").stdout)
            pid = next(r["pid"] for r in rows if r["id"] == "minilm-l6")
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    rep = index_folder(root, load_settings(), progress=kill_once)
    assert killed and rep.files_indexed == 12
    assert folder_status(root, load_settings()).state == "current"
    proc = run_cli("search", "harbour note 11 storm", "--path", str(root), "-k", "3", "--json")
    assert proc.returncode == 0 and "harbour11.md" in proc.stdout, proc.stderr


# -- pure ----------------------------------------------------------------------------------


def test_faults_are_told_from_bugs() -> None:
    lance = RuntimeError("lance error: LanceError(IO): Generic LocalFileSystem error: Unable to "
                         "copy data to file: No space left on device (os error 28), /root/.cargo/"
                         "registry/src/lance-table-13.0.0/src/io/commit.rs:1663:50")
    assert fault_errno(lance) == errno.ENOSPC
    assert fault(lance, "/x/.hydra-index") == ("the disk is full (/x/.hydra-index)",
                                               "free some space")
    ro = OSError(errno.EROFS, "Read-only file system", "/x/.hydra-index/lock")
    assert fault(ro) == ("the file system is read-only (/x/.hydra-index/lock)",
                         "make it writable")
    try:
        try:
            raise MemoryError
        except MemoryError as inner:
            raise ValueError("the batch failed") from inner
    except ValueError as outer:
        assert fault(outer) == ("out of memory",
                                "close other programs or index fewer files at once")
    assert fault(KeyError("x")) is None and fault(RuntimeError("index out of range")) is None
    assert unexpected(RuntimeError("boom\n  at line 3 (os error 99)")) == (
        "unexpected RuntimeError: boom (`hydra-rag --debug …` shows the traceback)")


def test_an_unforeseen_failure_is_one_line_and_a_traceback_with_debug(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from hydra_rag import cli

    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("the walk went wrong\nsecond line of detail")

    monkeypatch.setattr("hydra_rag.paths.own_dirs", broken)
    assert cli.run(["status", "."]) == 1
    err = capsys.readouterr().err
    assert err == ("error: unexpected RuntimeError: the walk went wrong (`hydra-rag --debug …` "
                   "shows the traceback)\n")
    with pytest.raises(RuntimeError):
        cli.run(["--debug", "status", "."])


def test_serve_answers_a_fault_in_one_line() -> None:
    from hydra_rag.serve.app import _failure

    logged: list[str] = []
    resp = _failure(OSError(errno.ENOSPC, "No space left on device", "/h/state/x"), "/v1/chat",
                    logged.append, debug=False)
    assert resp.status_code == 503
    assert resp.body == (b'{"error":{"message":"the disk is full (/h/state/x); free some space",'
                         b'"type":"server_error"}}')
    assert logged == ["error: /v1/chat: the disk is full (/h/state/x); free some space"]
    resp = _failure(RuntimeError("boom"), "/api/search", logged.append, debug=False)
    assert resp.status_code == 500 and b"unexpected RuntimeError: boom" in resp.body
