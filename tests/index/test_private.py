"""An index no wider than its files, and secrets kept out of it unless said twice: real index
runs (the real embedder sidecar, real LanceDB) on a folder whose files change mode, and the
state and cache folders hydra-rag keeps under the user's home."""

from __future__ import annotations

import base64
import os
import random
from pathlib import Path

import pytest

from conftest import recorded, run_cli, write_tree
from hydra_rag.config import load_settings
from hydra_rag.errors import HydraError
from hydra_rag.index import index_folder
from hydra_rag.models import sidecar_key
from hydra_rag.paths import dirs, folders_under, own_dirs, sidecars_dir, state_dir
from hydra_rag.read.secrets import HINT
from hydra_rag.store import registry


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def _key() -> str:
    body = base64.b64encode(random.Random(7).randbytes(600)).decode()
    return ("-----BEGIN OPENSSH PRIVATE KEY-----\n"
            + "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
            + "\n-----END OPENSSH PRIVATE KEY-----\n")


@pytest.fixture
def shared_folder(tmp_path: Path) -> Path:
    root = write_tree(tmp_path / "proj", {"README.md": "# Zephyr\n\nThe launch plan.\n",
                                          "src/app.py": "def launch():\n    return 1\n"})
    for p in (root, root / "src"):
        p.chmod(0o755)
    for p in (root / "README.md", root / "src/app.py"):
        p.chmod(0o644)
    return root


def test_index_is_no_wider_than_its_files(home: Path, shared_folder: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HYDRA_RAG_INDEX_ACCESS", raising=False)
    monkeypatch.setattr("os.umask", lambda *_: pytest.fail("os.umask changes every thread's"))
    gate = shared_folder / ".hydra-index"
    index_folder(shared_folder, load_settings())
    assert _mode(gate) == 0o755  # every file is readable by others: so is the index
    # An index made wide (by this run, or by an older version) is narrowed when a private file
    # comes in: its text must not sit where others can read it.
    # Every folder in it too: an account that entered one while it was wide keeps its way in.
    inside = folders_under(gate)
    assert (gate / "lance") in inside and _mode(gate / "lance") == 0o755
    diary = write_tree(shared_folder, {"diary.md": "the launch code is 4-8-15\n"}) / "diary.md"
    diary.chmod(0o600)
    rep = index_folder(shared_folder, load_settings())
    assert rep.files_indexed == 1 and _mode(gate) == 0o700
    assert {p: _mode(p) for p in inside if p.is_dir()} == {p: 0o700 for p in inside if p.is_dir()}
    # A readable file in a folder others cannot enter is private too.
    diary.unlink()
    write_tree(shared_folder, {"inner/plan.md": "the plan\n"})
    (shared_folder / "inner").chmod(0o700)
    (shared_folder / "inner/plan.md").chmod(0o644)
    index_folder(shared_folder, load_settings())
    assert _mode(gate) == 0o700
    # Once the private files are gone it stays private: LanceDB keeps a deleted row's text in
    # its data files. It says so, and a rebuild (which writes the index whole) widens it.
    (shared_folder / "inner").chmod(0o755)
    rep = index_folder(shared_folder, load_settings())
    assert _mode(gate) == 0o700
    assert [n for n in rep.notes if "stays private" in n] == [
        f"{gate} stays private: it may still hold text of a private file that left; "
        f"`hydra-rag index {shared_folder} --full` rebuilds it, and lets it be shared"]
    rep = index_folder(shared_folder, load_settings(), full=True)
    assert _mode(gate) == 0o755 and not [n for n in rep.notes if "stays private" in n]
    assert all(_mode(p) == 0o755 for p in folders_under(gate)), folders_under(gate)
    # The setting decides otherwise, either way.
    index_folder(shared_folder, load_settings(index_access="private"))
    assert _mode(gate) == 0o700
    diary.write_text("private again\n")
    diary.chmod(0o600)
    index_folder(shared_folder, load_settings(index_access="shared"))
    assert _mode(gate) == 0o755
    # Widened throughout, as narrowing was: others can read a shared index.
    assert {p: _mode(p) for p in folders_under(gate)} == dict.fromkeys(folders_under(gate), 0o755)


def test_an_interrupted_first_index_of_shared_files_is_not_kept_private(
        home: Path, shared_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in a first index left the folder 0o700, which the next run took for an index
    that once held a private file: it stayed private, with a note to rebuild it."""
    from hydra_rag.index import IndexInterrupted, Progress

    monkeypatch.delenv("HYDRA_RAG_INDEX_ACCESS", raising=False)

    def ctrl_c(p: Progress) -> None:
        if p.stage == "embed":
            raise KeyboardInterrupt

    with pytest.raises(IndexInterrupted):
        index_folder(shared_folder, load_settings(), progress=ctrl_c)
    gate = shared_folder / ".hydra-index"
    assert _mode(gate) == 0o700  # private until a run ends
    rep = index_folder(shared_folder, load_settings())
    assert not [n for n in rep.notes if "private" in n], rep.notes
    assert _mode(gate) == 0o755


def test_a_new_index_of_a_private_file_is_never_wide(home: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_tree(tmp_path / "p", {"notes.md": "salary: 100\n"})
    (root / "notes.md").chmod(0o600)
    made: list[int] = []
    import hydra_rag.store.access as access

    real = access.narrow
    monkeypatch.setattr(access, "narrow", lambda d, m: (made.append(_mode(d)), real(d, m)))
    index_folder(root, load_settings())
    assert made == [0o700]  # as the walk found it, before any file was read
    assert _mode(root / ".hydra-index") == 0o700


def test_index_access_setting_is_checked(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYDRA_RAG_INDEX_ACCESS", "public")
    with pytest.raises(Exception, match="index_access must be one of auto, private, shared"):
        load_settings()


def test_state_and_cache_are_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYDRA_RAG_HOME", str(tmp_path / "h"))
    registry.register(tmp_path)
    assert _mode(dirs().state) == 0o700
    # Made wide by an older version: narrowed by the next command, with every folder in them
    # (an account that entered one while it was wide keeps its way in until then).
    dirs().state.chmod(0o755)
    (dirs().state / "sessions").mkdir(mode=0o755)
    (dirs().state / "sessions").chmod(0o755)
    dirs().cache.mkdir(mode=0o755)
    dirs().cache.chmod(0o755)
    own_dirs()
    assert (_mode(dirs().state), _mode(dirs().cache)) == (0o700, 0o700)
    assert _mode(dirs().state / "sessions") == 0o700


def test_library_callers_get_a_private_state_folder(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # No CLI ran: the first thing that writes there (the sidecar key, a sidecar's lock and
    # log) makes the folder, private.
    monkeypatch.setenv("HYDRA_RAG_HOME", str(tmp_path / "h"))
    sidecar_key.ensure_key()
    assert _mode(dirs().state) == 0o700
    monkeypatch.setenv("HYDRA_RAG_HOME", str(tmp_path / "h2"))
    assert sidecars_dir() == dirs().sidecars
    assert (_mode(dirs().state), _mode(dirs().sidecars)) == (0o700, 0o700)


def test_a_state_folder_of_another_account_is_refused(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYDRA_RAG_HOME", str(tmp_path / "h"))
    state_dir()
    me = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: me + 1)  # as another account sees it
    with pytest.raises(HydraError) as exc:
        own_dirs()
    assert str(exc.value) == (f"{dirs().state} belongs to another account, which can read what "
                              "hydra-rag keeps there; point HYDRA_RAG_HOME at a folder of your own")


def test_secrets_need_include_secrets(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "keys", {"README.md": "# deploy\n",
                                          "tls/server.pem": _key(),
                                          "notes.txt": "deploy key backup\n" + _key()})
    # --include names the key: not enough, and status says what is.
    index_folder(root, load_settings(), include=["*.pem", "notes.txt"])
    assert set(recorded(root)) <= {"README.md", "notes.txt"}
    assert not recorded(root).get("notes.txt", {}).get("chunks")
    proc = run_cli("status", str(root), "--files")
    assert f"tls/server.pem  secret ({HINT})" in proc.stdout, proc.stdout
    assert f"notes.txt  secret ({HINT})" in proc.stdout
    # Said twice: indexed, and kept for later runs.
    index_folder(root, load_settings(), include=["*.pem", "notes.txt"], include_secrets=True)
    index_folder(root, load_settings())
    files = recorded(root)
    assert files["tls/server.pem"]["chunks"] and files["notes.txt"]["chunks"]
    # Taken back: the key found by its content leaves too, though its file did not change.
    index_folder(root, load_settings(), include_secrets=False)
    files = recorded(root)
    assert "tls/server.pem" not in files and not files["notes.txt"]["chunks"]
