"""`hydra-rag watch` end to end: the real command in a subprocess, real file events, the real
embedder sidecar and LanceDB; what it prints (JSON lines) and what the index holds after."""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import recorded, run_cli, write_tree
from hydra_rag.checks.doctor import check_index
from hydra_rag.config import load_settings
from hydra_rag.locks import file_lock
from hydra_rag.models.sidecar import read_record
from hydra_rag.search.retrieve import Searcher
from hydra_rag.store.index_dir import Store

Event = dict[str, Any]


class Watching:
    """A running `hydra-rag watch`, its output lines read as they come."""

    def __init__(self, *args: str, json_lines: bool = True, argv: list[str] | None = None,
                 env: dict[str, str] | None = None) -> None:
        cmd = argv or [sys.executable, "-m", "hydra_rag", "watch", *args,
                       *(["--json"] if json_lines else [])]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, **(env or {})})
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr or []),
                         daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout or []:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, match: Callable[[str], bool], timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"timed out; saw {self.seen[-10:]}; stderr "
                                     f"{''.join(self.stderr)[-2000:]}") from None
            if line is None:
                raise AssertionError(f"watch ended (rc {self.proc.wait()}); saw {self.seen[-10:]}; "
                                     f"stderr {''.join(self.stderr)[-2000:]}")
            self.seen.append(line)
            if match(line):
                return line

    def expect(self, event: str, timeout: float = 60, **fields: Any) -> Event:
        """The next event of this kind whose fields have these values (others are passed)."""
        def ok(line: str) -> bool:
            ev = json.loads(line)
            return ev["event"] == event and all(ev.get(k) == v for k, v in fields.items())
        return json.loads(self.next_line(ok, timeout))

    def started(self, roots: int = 1) -> list[Event]:
        firsts = [self.expect("indexed", initial=True, timeout=120) for _ in range(roots)]
        self.expect("watching")
        return firsts

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=60)
        finally:
            self.proc.kill()


@pytest.fixture
def watching() -> Any:
    procs: list[Watching] = []

    def start(*args: str, **kw: Any) -> Watching:
        procs.append(Watching(*args, **kw))
        return procs[-1]

    yield start
    for p in procs:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()


def _top(root: Path, q: str) -> str:
    hits = Searcher(root, load_settings()).search(q, 3)
    return hits[0].path if hits else ""


def _files(root: Path) -> dict[str, Any]:
    return recorded(root)


def _consistent(root: Path) -> None:
    assert [c for c in check_index(root) if c.status != "ok"] == []
    store = Store(root)
    ids = {c for e in _files(root).values() for c in e["chunks"]}
    stored = [i for t in ("code", "prose") for i in store.id_counts(t).elements()]
    assert sorted(stored) == sorted(ids)


def test_watch_follows_edits_moves_deletes_and_ignores(home: Path, tmp_path: Path,
                                                      watching: Any) -> None:
    root = write_tree(tmp_path / "proj", {
        "src/pump.py": "def prime_pump(valve):\n    return valve.open()\n",
        "docs/heron.md": "# Herons\n\nThe grey heron stands still in the reeds for hours.\n",
        "docs/kite.md": "# Kites\n\nA box kite needs a steady wind of twenty knots.\n"})
    w = watching(str(root))
    first = w.started()[0]
    assert first["files_indexed"] == 3 and first["root"] == str(root)

    # A new file.
    write_tree(root, {"docs/otter.md": "# Otters\n\nSea otters hold hands while they sleep.\n"})
    ev = w.expect("indexed")
    assert (ev["files_indexed"], ev["chunks_embedded"]) == (1, 1)
    assert _top(root, "otters hold hands while sleeping") == "docs/otter.md"

    # An editor's atomic save: a temporary file renamed over the original.
    tmp = root / "src" / ".pump.py.swp~"
    tmp.write_text("def prime_pump(valve):\n    return valve.open_slowly_with_backflow_guard()\n")
    os.replace(tmp, root / "src" / "pump.py")
    ev = w.expect("indexed")
    assert (ev["files_indexed"], ev["files_removed"]) == (1, 0)
    assert "open_slowly_with_backflow_guard" in json.dumps(
        Store(root).rows_for_paths("code", ["src/pump.py"], ["text"]))
    assert not any(".swp" in p for p in _files(root))

    # A folder moved: its files leave and enter under new paths, nothing is embedded again.
    (root / "docs").rename(root / "notes")
    ev = w.expect("indexed")
    assert (ev["files_indexed"], ev["files_removed"], ev["chunks_embedded"]) == (3, 3, 0)
    assert _top(root, "grey heron standing in reeds") == "notes/heron.md"

    # A file deleted.
    (root / "notes" / "kite.md").unlink()
    ev = w.expect("indexed")
    assert (ev["files_indexed"], ev["files_removed"]) == (0, 1)
    assert "notes/kite.md" not in _files(root)

    # .gitignore: newly ignored files leave, un-ignored ones come back.
    (root / ".hydraignore").write_text("notes/\n")
    ev = w.expect("indexed")
    assert ev["files_removed"] == 2
    assert not any(p.startswith("notes/") for p in _files(root))
    (root / ".hydraignore").write_text("# nothing ignored\n")
    ev = w.expect("indexed")
    assert ev["files_indexed"] >= 2 and {"notes/heron.md", "notes/otter.md"} <= set(_files(root))

    # Events in an ignored folder do not start a run.
    write_tree(root, {"node_modules/pkg/index.js": "module.exports = 1\n"})
    write_tree(root, {"last.md": "# Last\n\nThe final note about lighthouses.\n"})
    ev = w.expect("indexed")
    assert ev["files_indexed"] == 1 and ev["changes"] <= 2  # last.md (and node_modules/ itself)

    assert w.stop() == 0
    w.expect("stopped", timeout=10)
    _consistent(root)


def test_a_burst_of_changes_is_one_run(home: Path, tmp_path: Path, watching: Any) -> None:
    root = write_tree(tmp_path / "burst", {"seed.md": "# Seed\n\nA first note.\n"})
    w = watching(str(root))
    w.started()
    for i in range(300):  # as an unpacked archive or a branch switch writes them
        write_tree(root, {f"pkg{i % 7}/note{i}.md": f"# Note {i}\n\nItem {i} of the burst.\n"})
    runs = [w.expect("indexed")]
    while sum(r["files_indexed"] for r in runs) < 300:
        runs.append(w.expect("indexed"))
    assert len(runs) <= 2, [r["changes"] for r in runs]
    assert len(_files(root)) == 301
    assert w.stop() == 0
    _consistent(root)


def test_a_file_still_being_written_is_read_once_done(home: Path, tmp_path: Path,
                                                      watching: Any) -> None:
    root = write_tree(tmp_path / "slow", {"a.md": "# A\n\nA first note.\n"})
    w = watching(str(root))
    w.started()
    with open(root / "log.md", "w") as f:  # a download or a copy: written in pieces
        for i in range(10):
            f.write(f"Part {i} of the slowly written report on estuary salinity.\n\n")
            f.flush()
            time.sleep(0.08)
    ev = w.expect("indexed")
    assert ev["files_indexed"] == 1
    texts = Store(root).rows_for_paths("prose", ["log.md"], ["text"])
    assert "Part 9 of the slowly" in " ".join(r["text"] for r in texts)
    assert w.stop() == 0


@pytest.mark.skipif(not os.access("/proc/sys/fs/inotify/max_user_watches", os.W_OK),
                    reason="changing the limit of inotify watches takes root")
def test_past_the_limit_of_file_watches_it_polls(home: Path, tmp_path: Path,
                                                 watching: Any) -> None:
    root = write_tree(tmp_path / "many", {f"d{i}/n.md": f"# N{i}\n\nNote {i}.\n" for i in range(30)})
    limit = Path("/proc/sys/fs/inotify/max_user_watches")
    before = limit.read_text()
    limit.write_text("10\n")  # fewer than the folders: inotify refuses
    try:
        w = watching(str(root))
        warning = w.expect("warning", timeout=120)
    finally:
        limit.write_text(before)
    assert "polling every 2 s" in warning["message"]
    w.started()
    write_tree(root, {"d3/new.md": "# New\n\nFound by polling, not by events.\n"})
    ev = w.expect("indexed")
    assert ev["files_indexed"] == 1 and "d3/new.md" in _files(root)
    assert w.stop() == 0


def test_a_manual_index_while_watching_waits_or_runs(home: Path, tmp_path: Path,
                                                     watching: Any) -> None:
    root = write_tree(tmp_path / "lock", {"a.md": "# A\n\nAlpha note about barley.\n"})
    w = watching(str(root))
    w.started()
    # Another run holds the folder: the watch waits for it, then indexes.
    with file_lock(root / ".hydra-index" / "lock") as held:
        assert held
        write_tree(root, {"b.md": "# B\n\nBravo note about millet and sorghum.\n"})
        w.expect("waiting")
        time.sleep(1.0)
        assert "b.md" not in _files(root)
    ev = w.expect("indexed")
    assert ev["files_indexed"] == 1 and "b.md" in _files(root)
    # A manual index while the watch is busy with the same changes: one waits, none corrupts.
    write_tree(root, {f"c{i}.md": f"# C{i}\n\nCharlie note {i} about rye.\n" for i in range(40)})
    proc = run_cli("index", str(root), "--json")  # no --wait: a watch's run is waited for
    assert proc.returncode == 0, proc.stderr
    deadline = time.monotonic() + 60
    while len(_files(root)) < 42 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(_files(root)) == 42
    assert w.stop() == 0
    _consistent(root)
    assert _top(root, "Charlie note 17 about rye") == "c17.md"


def test_index_waits_for_a_watch_run_not_for_another_index(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "held", {"a.md": "# A\n\nA note on oats.\n"})
    lock = root / ".hydra-index" / "lock"
    for label, rc in (("watch", 0), ("index", 1)):
        with file_lock(lock, label=label) as held:
            assert held
            proc = subprocess.Popen([sys.executable, "-m", "hydra_rag", "index", str(root)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(4.0)  # started, found the lock
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == rc, err
        if label == "watch":
            assert f"waiting for `hydra-rag watch` (pid {os.getpid()})" in err
        else:
            assert f"another `hydra-rag index` (pid {os.getpid()}) is updating" in err


def test_an_index_that_does_not_record_its_selection_is_not_watched(
        home: Path, tmp_path: Path, watching: Any) -> None:
    root = write_tree(tmp_path / "old", {"a.md": "# A\n\nPublic.\n",
                                         "private/diary.md": "# Diary\n\nSecret plans.\n"})
    proc = run_cli("index", str(root), "--exclude", "private/")
    assert proc.returncode == 0, proc.stderr
    meta_path = root / ".hydra-index" / "meta.yaml"
    meta = yaml.safe_load(meta_path.read_text())
    del meta["selection"]  # as an index made before runs recorded it
    meta_path.write_text(yaml.safe_dump(meta))
    w = watching(str(root))
    warning = w.expect("warning")
    assert "does not record the --include/--exclude" in warning["message"]
    assert w.proc.wait(timeout=60) == 1
    assert set(_files(root)) == {"a.md"}  # nothing was taken in
    # Given to watch, the selection is known: it watches.
    w2 = watching(str(root), "--exclude", "private/")
    w2.started()
    assert w2.stop() == 0 and set(_files(root)) == {"a.md"}


def test_an_ignore_file_above_the_folder_is_followed(home: Path, tmp_path: Path,
                                                     watching: Any) -> None:
    repo = write_tree(tmp_path / "repo", {"sub/doc.md": "# Doc\n\nA document.\n",
                                          "sub/code.py": "def f():\n    return 1\n"})
    (repo / ".git").mkdir()  # the folder watched is inside a repository
    w = watching(str(repo / "sub"))
    w.started()
    (repo / ".gitignore").write_text("*.md\n")  # outside the watched folder: no event there
    ev = w.expect("indexed", timeout=30)
    assert ev["files_removed"] == 1 and set(_files(repo / "sub")) == {"code.py"}
    assert w.stop() == 0


def test_a_folder_that_goes_away_does_not_stop_the_others(home: Path, tmp_path: Path,
                                                          watching: Any) -> None:
    one = write_tree(tmp_path / "one", {"a.md": "# One\n\nThe first folder.\n"})
    two = write_tree(tmp_path / "two", {"b.md": "# Two\n\nThe second folder.\n"})
    w = watching(str(one), str(two))
    w.started(roots=2)
    (one).rename(tmp_path / "one-moved")
    warning = w.expect("warning")
    assert warning["root"] == str(one) and "moved or deleted" in warning["message"]
    write_tree(two, {"c.md": "# Three\n\nA note added after the other folder left.\n"})
    ev = w.expect("indexed", root=str(two))
    assert ev["files_indexed"] == 1
    # The last folder gone: nothing left to watch, an error (a service manager restarts it).
    import shutil

    shutil.rmtree(two)
    w.expect("warning", root=str(two))
    assert w.proc.wait(timeout=30) == 1
    assert "nothing left to watch" in "".join(w.stderr)


def test_one_watch_per_folder(home: Path, tmp_path: Path, watching: Any) -> None:
    one = write_tree(tmp_path / "one", {"a.md": "# One\n\nThe first folder.\n"})
    two = write_tree(tmp_path / "two", {"b.md": "# Two\n\nThe second folder.\n"})
    first = watching(str(one))
    first.started()
    second = watching(str(one), str(two))
    warning = second.expect("warning")
    assert warning["root"] == str(one) and "already watched" in warning["message"]
    assert f"pid {first.proc.pid}" in warning["message"]
    assert [e["root"] for e in second.started()] == [str(two)]
    third = watching(str(one))
    assert "already watched" in third.expect("warning")["message"]
    assert third.proc.wait(timeout=60) == 1
    assert "no folder left to watch" in "".join(third.stderr)
    assert first.stop() == 0 and second.stop() == 0


def test_a_sidecar_that_dies_is_brought_back(isolated_home: Path, tmp_path: Path,
                                             watching: Any) -> None:
    root = write_tree(tmp_path / "side", {"a.md": "# A\n\nAbout tides and moons.\n"})
    w = watching(str(root))
    w.started()
    rec = read_record("minilm-l6")
    assert rec is not None
    os.kill(rec.pid, signal.SIGKILL)  # between batches
    write_tree(root, {"b.md": "# B\n\nAbout the migration of eels to the Sargasso Sea.\n"})
    w.expect("indexed")
    assert _top(root, "where do eels migrate") == "b.md"
    # Killed in the middle of a run: the run recovers (or fails and is retried); nothing is
    # lost or stored twice.
    text = " ".join(f"Sentence {j} on soil, rain and the growth of roots." for j in range(40))
    write_tree(root, {f"bulk/n{i}.md": f"# N{i}\n\n{text} Note {i}.\n" for i in range(60)})
    time.sleep(1.5)
    rec = read_record("minilm-l6")
    assert rec is not None
    os.kill(rec.pid, signal.SIGKILL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        files = _files(root)
        if sum(1 for p, e in files.items() if p.startswith("bulk/") and e["chunks"]) == 60:
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"not all indexed; saw {w.seen[-5:]}")
    assert w.proc.poll() is None
    assert w.stop() == 0
    _consistent(root)


def test_sigterm_mid_run_leaves_a_whole_index(home: Path, tmp_path: Path, watching: Any) -> None:
    root = write_tree(tmp_path / "term", {"a.md": "# A\n\nA start.\n"})
    text = " ".join(f"Line {j} about harbours, cranes and shipping containers." for j in range(40))

    def burst(name: str) -> None:
        write_tree(root, {f"{name}/m{i}.md": f"# M{i}\n\n{text} {name} {i}.\n" for i in range(150)})

    def first_batch_stored(name: str) -> None:
        deadline = time.monotonic() + 60
        while not any(p.startswith(name) for p in _files(root)):
            assert time.monotonic() < deadline
            time.sleep(0.05)

    # One phase, batches of 16 chunks: a run of several batches, each embedded before it is
    # stored (phase one alone stores them all in a moment; test_two_phase.py stops phase two).
    one = {"HYDRA_RAG_VECTORS_LATER": "0"}
    small = {"HYDRA_RAG_INDEX_BATCH": "16", **one}
    w = watching(str(root), env=small)
    w.started()
    burst("many")
    first_batch_stored("many/")
    assert w.stop() == 0
    # It stopped after a stored batch: no repair pending, the rest left for the next run.
    ev = w.expect("indexed", timeout=10)
    assert 0 < ev["files_left"] < 150 and ev["files_indexed"] + ev["files_left"] == 150
    assert "message" not in w.expect("stopped", timeout=10)
    _consistent(root)
    assert len(_files(root)) == 1 + ev["files_indexed"]

    # A second signal stops at once, inside a batch (one batch of 150 chunks here): the next
    # run repairs what was cut and finishes.
    w2 = watching(str(root), env=one)
    w2.started()
    burst("more")
    journal = Store(root).journal_path
    deadline = time.monotonic() + 60
    while not journal.exists():  # the run is changing the index
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.3)
    w2.proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    assert w2.stop() == 0
    st = w2.expect("stopped", timeout=10)
    assert "interrupted" in st.get("message", ""), w2.seen[-3:]
    assert not any(p.startswith("more/") for p in _files(root))
    proc = run_cli("index", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    assert len(_files(root)) == 301
    _consistent(root)


def test_install_writes_a_unit_that_runs(home: Path, tmp_path: Path, watching: Any) -> None:
    root = write_tree(tmp_path / "svc dir", {"a.md": "# A\n\nNotes on 100% cotton and $HOME.\n"})
    config = tmp_path / "config"
    proc = run_cli("watch", str(root), "--include", "*.pem", "--install",
                   env={"XDG_CONFIG_HOME": str(config)})
    assert proc.returncode == 0, proc.stderr
    units = list((config / "systemd" / "user").glob("hydra-rag-watch-svc-dir-*.service"))
    assert len(units) == 1
    text = units[0].read_text()
    assert "WantedBy=default.target" in text and units[0].name in proc.stdout
    assert "systemctl --user enable --now" in proc.stdout
    # ExecStart= as systemd would run it: unquoted, specifiers and variables unescaped.
    exec_line = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
    argv = [a.replace("%%", "%").replace("$$", "$") for a in shlex.split(exec_line[10:])]
    assert argv[1:] == ["-P", "-m", "hydra_rag", "watch", str(root), "--include", "*.pem"]
    env = dict(shlex.split(ln[12:])[0].split("=", 1) for ln in text.splitlines()
               if ln.startswith("Environment="))
    assert env["HYDRA_RAG_HOME"] == os.environ["HYDRA_RAG_HOME"]
    # Run it: human lines on stdout, one per batch.
    w = watching(argv=argv, env=env)
    w.next_line(lambda s: "watching" in s, timeout=120)
    write_tree(root, {"b.md": "# B\n\nA note on linen.\n"})
    line = w.next_line(lambda s: "changes" in s)
    assert re.fullmatch(r"\d\d:\d\d:\d\d  " + re.escape(str(root)) +
                        r"  \d+ changes: 1 indexed; \+1 -0 chunks \(1 embedded\) in [\d.]+s", line)
    assert w.stop() == 0
    assert Store(root).read_meta()["selection"] == {"include": ["*.pem"], "exclude": []}
    # An endpoint key is not written into the unit: the output says how to give it.
    other = write_tree(tmp_path / "remote", {"a.md": "# A\n"})
    proc = run_cli("watch", str(other), "--install", env={
        "XDG_CONFIG_HOME": str(config), "HYDRA_RAG_EMBEDDER_URL": "http://gpu:8080/v1",
        "HYDRA_RAG_EMBEDDER_API_KEY_ENV": "TEAM_KEY", "TEAM_KEY": "sk-not-to-be-written"})
    assert proc.returncode == 0, proc.stderr
    assert "systemctl --user set-environment TEAM_KEY=<the key>" in proc.stdout
    unit = next((config / "systemd" / "user").glob("hydra-rag-watch-remote-*.service"))
    assert "sk-not-to-be-written" not in unit.read_text() and "TEAM_KEY" in unit.read_text()


def test_install_keeps_secrets_out_of_a_private_unit(home: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra_rag.index.systemd import install

    root = write_tree(tmp_path / "notes", {"a.md": "# A\n"})
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("HYDRA_RAG_SERVE_TOKEN", "serve-token-not-to-be-written")
    monkeypatch.setenv("HYDRA_RAG_TEAM_API_KEY", "sk-not-to-be-written")
    monkeypatch.setenv("HYDRA_RAG_WARM_MINUTES", "7")
    # A unit of an older version, readable by every account: replaced by one that is not.
    unit_dir = tmp_path / "config/systemd/user"
    unit_dir.mkdir(parents=True)
    name = install([root]).name
    (unit_dir / name).chmod(0o644)
    unit = install([root])
    text = unit.path.read_text()
    assert "HYDRA_RAG_WARM_MINUTES=7" in text  # the watch's settings go in
    assert "not-to-be-written" not in text and "HYDRA_RAG_SERVE_TOKEN" not in text
    assert unit.path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in unit_dir.iterdir()] == [name]  # no temporary file left


def test_a_watch_of_a_tag_with_no_folder_yet_waits_for_one(home: Path, tmp_path: Path,
                                                           watching: Any) -> None:
    # A service of `watch --all` may start before any folder is indexed: it waits (exit 1
    # would have its unit restarted every 30 s) and takes in the first folder tagged.
    import uuid

    tag = f"none-yet-{uuid.uuid4().hex[:8]}"
    w = watching("--tag", tag)
    assert "tags in use:" in w.expect("warning")["message"]  # a mistyped tag shows
    assert f"no folder tagged {tag}" in w.expect("waiting")["message"]
    one = write_tree(tmp_path / "one", {"a.md": "# Tides\n\nThe moon pulls the sea.\n"})
    assert run_cli("index", str(one), "--tag", tag).returncode == 0
    assert w.expect("watching")["roots"] == [str(one)]
    w.expect("indexed", root=str(one), initial=True)
    write_tree(one, {"b.md": "# Neap\n\nA neap tide after the half moon.\n"})
    w.expect("indexed", root=str(one), initial=False, files_indexed=1)
    assert w.stop() == 0
    events = [json.loads(x) for x in w.seen]
    assert [e["roots"] for e in events if e["event"] == "watching"] == [[str(one)]]
    # named folders are not a registry to wait for: none left is still an error
    assert run_cli("watch", str(tmp_path / "missing")).returncode != 0


def test_a_watch_of_a_tag_follows_the_registry(home: Path, tmp_path: Path,
                                               watching: Any) -> None:
    # `watch --tag T` (or --all, as its systemd unit runs it) takes in a folder indexed with
    # the tag after it started, and lets go of one untagged, without a restart.
    import uuid

    tag = f"watch-{uuid.uuid4().hex[:8]}"
    one = write_tree(tmp_path / "one", {"a.md": "# Lighthouses\n\nThe keeper trims the wick.\n"})
    held = write_tree(tmp_path / "held", {"h.md": "# Held\n\nAnother watch has this one.\n"})
    lost = write_tree(tmp_path / "lost", {"l.md": "# Lost\n\nDeleted after it was indexed.\n"})
    for f in (one, held, lost):
        assert run_cli("index", str(f), "--tag", tag).returncode == 0
    import shutil

    shutil.rmtree(lost)  # still registered: the watch starts without it, and says so
    other = watching(str(held))
    other.started()
    w = watching("--tag", tag)
    assert "no such folder" in w.expect("warning", root=str(lost))["message"]
    assert "already watched" in w.expect("warning", root=str(held))["message"]
    w.started()
    two = write_tree(tmp_path / "two", {"b.md": "# Beekeeping\n\nSmoke calms the hive.\n"})
    assert run_cli("index", str(two), "--tag", tag).returncode == 0
    assert sorted(w.expect("watching")["roots"]) == sorted([str(one), str(two)])
    assert w.expect("indexed", root=str(two))["initial"] is True
    write_tree(two, {"c.md": "# Hives\n\nA frame of wax added while watched.\n"})
    assert w.expect("indexed", root=str(two), initial=False)["files_indexed"] == 1
    assert _top(two, "frame of wax") == "c.md"
    assert run_cli("stores", "untag", str(one), tag).returncode == 0
    warning = w.expect("warning", root=str(one))
    assert "no longer watched" in warning["message"]
    assert w.expect("watching")["roots"] == [str(two)]
    after = len(w.seen)
    write_tree(one, {"d.md": "# Lamps\n\nOil for the lamp, written after the untag.\n"})
    write_tree(two, {"e.md": "# Queens\n\nThe queen lays the eggs.\n"})
    # (a run of `two` with nothing new may come first: the notifier is made anew)
    w.expect("indexed", root=str(two), initial=False, files_indexed=1)
    assert "d.md" not in _files(one) and "e.md" in _files(two)
    assert not [x for x in map(json.loads, w.seen[after:]) if x.get("root") == str(one)]
    # the last folder untagged: the watch waits for one (a service is not made to fail and
    # restart), and takes in the next one tagged
    assert run_cli("stores", "untag", str(two), tag).returncode == 0
    assert "no longer watched" in w.expect("warning", root=str(two))["message"]
    assert "waiting for" in w.expect("waiting")["message"]
    assert run_cli("stores", "tag", str(one), tag).returncode == 0
    assert w.expect("watching")["roots"] == [str(one)]
    assert w.expect("indexed", root=str(one))["files_indexed"] == 1  # d.md, written meanwhile
    assert w.stop() == 0
    # the folder another watch holds is said once, and never makes the others run again and
    # again (this watch's own runs change the registry, which it follows)
    events = [json.loads(x) for x in w.seen]
    assert sum(e["event"] == "warning" and e.get("root") == str(held) for e in events) == 1
    assert sum(e["event"] == "indexed" and e.get("root") == str(one) for e in events) <= 4
    assert sum(e["event"] == "watching" for e in events) == 4  # none while there is none
    assert other.stop() == 0
