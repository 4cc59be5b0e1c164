"""The warm process (hydra_rag.warm): the quick commands answer through it exactly as a fresh
process does, only it can reach them, and it goes when told to."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import run_cli, write_tree
from hydra_rag.warm import private_dir, socket_dir
from hydra_rag.warm.client import forward

WARM = {"HYDRA_RAG_WARM_MINUTES": "5"}


@pytest.fixture
def warm_folder(isolated_home: Path, tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = write_tree(tmp_path / "proj", {
        "net.py": "def get_adapter(url):\n    raise InvalidSchema('No connection adapters "
                  "were found for ' + url)\n",
        "notes.md": "# Notes\n\nThe adapters are mounted per URL prefix.\n",
    })
    assert run_cli("index", str(root)).returncode == 0
    monkeypatch.setenv("HYDRA_RAG_WARM_MINUTES", "5")
    proc = run_cli("search", "connection adapters", "--path", str(root), env=WARM)
    assert proc.returncode == 0, proc.stderr  # ran here, and started the warm process
    deadline = time.monotonic() + 120
    while not _warm_pid():
        assert time.monotonic() < deadline, "no warm process within 120 s"
        time.sleep(0.5)
    yield root
    run_cli("sidecars", "stop", "--all")


def _warm_pid() -> int | None:
    proc = run_cli("sidecars", "list", "--json")
    rows = json.loads(proc.stdout or "[]")
    return next((r["pid"] for r in rows if r["id"] == "warm"), None)


def test_a_warm_search_prints_what_a_fresh_process_prints(
        warm_folder: Path, capfd: pytest.CaptureFixture[str]) -> None:
    for args in (["search", "connection adapters", "--path", str(warm_folder)],
                 ["search", "connection adapters", "--path", str(warm_folder), "--json"],
                 ["get", "net.py:1-2"],
                 ["search", "x", "--no-such-option"],
                 ["get", "gone.py"]):
        fresh = run_cli(*args, cwd=warm_folder, env={"HYDRA_RAG_WARM_MINUTES": "0"})
        capfd.readouterr()
        os.chdir(warm_folder)
        rc, why = forward(args)
        got = capfd.readouterr()
        assert rc is not None, f"not answered warm: {why!r}"
        assert (rc, got.out, got.err) == (fresh.returncode, fresh.stdout, fresh.stderr), args


def test_a_closed_pipe_another_environment_and_stopping(
        warm_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One warm process for three checks (each costs its start)."""
    shell = (f"set -o pipefail; {sys.executable} -m hydra_rag search 'connection adapters' "
             f"--path {warm_folder} -k 5 | head -1")
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout.count("\n") == 1

    with monkeypatch.context() as m:
        m.setenv("HYDRA_RAG_FUSION", "rrf")  # another setting: maybe another answer
        rc, why = forward(["search", "adapters", "--path", str(warm_folder)])
        assert (rc, why) == (None, "environment")

    assert _warm_pid()
    proc = run_cli("sidecars", "stop", "warm")
    assert proc.returncode == 0, proc.stderr
    assert _warm_pid() is None
    rc, why = forward(["search", "adapters", "--path", str(warm_folder)])
    assert (rc, why) == (None, "")  # nobody there: the command runs in its own process


def test_its_folder_must_be_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    folder = socket_dir()
    assert private_dir(folder, create=True)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    folder.chmod(0o755)  # another account could reach a socket in it
    assert not private_dir(folder, create=False)


def test_a_garbled_or_removed_index_is_met_warm_as_a_fresh_process_meets_it(
        warm_folder: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The warm process had kept the Searcher it made before meta.yaml was garbled, and went
    on answering from it (exit 0) while a fresh process said the file is corrupt (exit 1)."""
    args = ["search", "connection adapters", "--path", str(warm_folder)]
    os.chdir(warm_folder)
    assert forward(args)[0] == 0  # its Searcher for this folder is kept
    meta = warm_folder / ".hydra-index/meta.yaml"
    meta.write_text("tables: [oops: {\n")
    index = warm_folder / ".hydra-index"
    for step in ("garbled", "removed"):
        if step == "removed":
            index.rename(warm_folder.parent / "gone")
        fresh = run_cli(*args, cwd=warm_folder, env={"HYDRA_RAG_WARM_MINUTES": "0"})
        assert fresh.returncode == 1 and fresh.stderr.startswith("error: "), fresh.stderr
        capfd.readouterr()
        rc, why = forward(args)
        got = capfd.readouterr()
        assert rc is not None, f"not answered warm: {why!r}"
        assert (rc, got.out, got.err) == (fresh.returncode, fresh.stdout, fresh.stderr), step
