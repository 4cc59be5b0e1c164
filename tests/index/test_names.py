"""Any file name Linux allows (issue 46): names are bytes, so a name that is not UTF-8, one with
a newline or a tab, a leading dash or 255 bytes is indexed, searched, cited and shown in the one
escaped form the index stores (hydra_rag.paths.escape_name), which leads back to the same bytes
on disk, in the CLI (text and --json), over MCP and over HTTP; a file that vanishes between the
walk and its read is skipped and the run goes on. Real index runs, the real embedder sidecar,
real LanceDB; the files are made with os.fsencode-style byte names."""

from __future__ import annotations

import http.client
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest

from conftest import free_port, recorded, run_cli, wait_listening
from hydra_rag.config import load_settings
from hydra_rag.index import index_folder
from hydra_rag.index.report import Progress
from hydra_rag.paths import escape_name, unescape_name
from hydra_rag.search.retrieve import Searcher

LONG = b"\xe9" * 10 + b"l" * 242 + b".md"  # 255 bytes, the most a Linux name may hold
# name on disk → (text, a query that finds it, the name as the index stores and shows it)
FILES: dict[bytes, tuple[str, str, str]] = {
    b"caf\xe9.txt": ("The zanzibar lighthouse keeper counts the gulls every morning.\n",
                     "zanzibar lighthouse keeper", "caf\\xe9.txt"),
    b"new\nline.md": ("# Otters\n\nSea otters hold hands while they sleep on the water.\n",
                      "otters hold hands", "new\\nline.md"),
    b"tab\there.md": ("# Badgers\n\nBadgers dig deep setts under old hedgerows.\n",
                      "badgers dig setts", "tab\\there.md"),
    b"-rf.md": ("# Herons\n\nA grey heron stands still in the shallows to fish.\n",
                "grey heron fish", "-rf.md"),
    LONG: ("# Foxes\n\nThe red fox buries what it cannot eat for later.\n",
           "red fox buries", "\\xe9" * 10 + "l" * 242 + ".md"),
}


def _make(root: Path, files: dict[bytes, str]) -> Path:
    root.mkdir(parents=True)
    for name, text in files.items():
        with open(os.path.join(os.fsencode(root), name), "wb") as f:
            f.write(text.encode())
    return root


@pytest.fixture(scope="module")
def named(session_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of the names above, indexed by the real command."""
    root = _make(tmp_path_factory.mktemp("names") / "odd",
                 {name: text for name, (text, _, _) in FILES.items()})
    proc = run_cli("index", str(root))
    assert proc.returncode == 0, proc.stderr
    assert "5 indexed, 0 unchanged, 0 removed, 0 skipped" in proc.stdout, proc.stderr
    return root


def test_escape_name_round_trips_any_bytes() -> None:
    for raw in [*FILES, b"a\\b.md", b"a\\xe9.md", b"\x01\x7f", b"x\xc2\x85y", b"\xed\xb3\xa9",
                "é😀\u202e".encode(), bytes(range(1, 256)).replace(b"/", b"")]:
        shown = escape_name(os.fsdecode(raw))
        shown.encode("utf-8")  # valid UTF-8: SQLite, LanceDB, JSON take it
        assert shown.isprintable() and os.fsencode(unescape_name(shown)) == raw, raw
    assert escape_name(os.fsdecode(b"a\\xe9.md")) == "a\\\\xe9.md"  # not caf\xe9's form
    assert escape_name("plain/é.md") == "plain/é.md"  # every other name as it is


def test_include_takes_the_shown_name_and_a_folder_not_utf8_is_refused(home: Path,
                                                                      tmp_path: Path) -> None:
    from hydra_rag.read.walk import Walker

    root = _make(tmp_path / "svg", {b"logo\xe9.svg": "<svg/>\n", b"caf\xe9.log": "x\n"})
    assert Walker(root).walk().skipped_paths == {"vector_image": ["logo\\xe9.svg"]}
    # The pattern status --files suggests for it (the shown name as a glob) brings it back.
    walked = Walker(root, include=["/logo\\\\xe9.svg"], exclude=["caf\\\\xe9.log"]).walk()
    assert [c.rel for c in walked.files] == ["logo\\xe9.svg"] and walked.skipped["excluded"] == 1
    bad = _make(Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"r\xe9"))),
                {b"a.md": "# A\n\ntext\n"})
    proc = run_cli("index", str(bad))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"error: {tmp_path}/r\\xe9: the folder's path is not UTF-8")


def test_every_name_is_indexed_searched_and_shown_escaped(named: Path) -> None:
    assert set(recorded(named)) == {shown for _, _, shown in FILES.values()}
    for raw, (text, query, shown) in FILES.items():
        proc = run_cli("search", query, "--path", str(named), "-k", "1", "--json")
        assert proc.returncode == 0, proc.stderr
        hit = json.loads(proc.stdout)["results"][0]
        assert hit["path"] == shown and hit["text"] == text
        # The path of --json leads back to the same bytes on disk.
        assert os.fsencode(unescape_name(hit["path"])) == raw
        assert (named / unescape_name(hit["path"])).read_text() == text
    proc = run_cli("search", "zanzibar lighthouse keeper", "--path", str(named), "-k", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].split()[:2] == ["1.", "caf\\xe9.txt:1-1"]
    proc = run_cli("search", "otters hold hands", "--path", str(named), "-k", "1")
    assert proc.stdout.splitlines()[0].split()[1] == "new\\nline.md:1-3"
    # The shown name is read back by get and outline (as shown, or as the file system has it);
    # a citation of a 255-byte name is one line.
    got = run_cli("get", "caf\\xe9.txt:1", cwd=named)
    assert (got.returncode, got.stdout.split(None, 1)[1]) == (0, FILES[b"caf\xe9.txt"][0])
    got = run_cli("get", "--json", "--", "-rf.md:3", cwd=named)
    assert json.loads(got.stdout)["lines"] == [FILES[b"-rf.md"][0].splitlines()[2]]
    got = run_cli("outline", "new\\nline.md", "--json", cwd=named)
    assert [r["name"] for r in json.loads(got.stdout)["results"]] == ["Otters"], got.stderr
    # Nothing changed: a second run reads nothing again, and status calls the index current.
    again = run_cli("index", str(named))
    assert "0 indexed, 5 unchanged, 0 removed, 0 skipped" in again.stdout, again.stderr
    status = run_cli("status", str(named), "--files")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "indexed  tab\\there.md  prose, 1 chunk" in status.stdout


def test_mcp_and_http_show_the_same_escaped_name(named: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, env=dict(os.environ),
                                   args=["-m", "hydra_rag", "mcp", "--path", str(named)])

    async def main() -> list[Any]:
        async with Client(params, read_timeout_seconds=300) as client:
            found = await client.call_tool("search", {"query": "zanzibar lighthouse", "k": 1})
            path = json.loads(found.content[0].text)["results"][0]["path"]
            got = await client.call_tool("get", {"path": path, "line_start": 1})
            return [json.loads(r.content[0].text) for r in (found, got)]

    found, got = anyio.run(main)
    assert found["results"][0]["path"] == "caf\\xe9.txt"
    assert got["path"] == "caf\\xe9.txt" and got["text"] == FILES[b"caf\xe9.txt"][0].rstrip("\n")

    port = free_port()
    log = named.parent / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "hydra_rag", "serve", "--port", str(port),
                                 "--no-token", "--path", str(named)], stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        wait_listening(port, proc, lambda: log.read_text(errors="replace"))

        def fetch(path: str) -> Any:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                assert resp.status == 200, resp.read()
                return json.loads(resp.read())
            finally:
                conn.close()

        hit = fetch("/api/search?q=otters+hold+hands&k=1")["results"][0]
        assert hit["path"] == "new\\nline.md"
        doc = fetch(f"/api/get?path={quote(hit['path'])}&line_start=3")
        assert doc["text"].splitlines()[0] == FILES[b"new\nline.md"][0].splitlines()[2]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_file_that_vanishes_before_it_is_read_is_skipped(home: Path, tmp_path: Path) -> None:
    gone = b"gon\xe9.md"
    root = _make(tmp_path / "vanish", {
        b"keep.md": "# Walruses\n\nWalruses haul out on the ice floes.\n",
        gone: "# Puffins\n\nPuffins nest in burrows on the cliffs.\n",
        b"caf\xe9.txt": "The lighthouse keeper counts the gulls.\n"})
    first = index_folder(root, load_settings())
    assert (first.files_indexed, first.chunks_total["prose"]) == (3, 3)
    disk = os.path.join(os.fsencode(root), gone)
    with open(disk, "ab") as f:
        f.write(b"Puffins dive for sand eels.\n")  # changed: this run reads it again

    def vanish(p: Progress) -> None:
        # Reported once the walk and the diff are done, before any changed file is read.
        if p.stage == "embed" and os.path.exists(disk):
            os.remove(disk)

    rep = index_folder(root, load_settings(), progress=vanish)
    assert not os.path.exists(disk)
    assert (rep.files_indexed, rep.files_skipped) == (0, {"vanished": 1})
    assert set(recorded(root)) == {"keep.md", "caf\\xe9.txt"}  # its old rows left with it
    hits = Searcher(root, load_settings()).search("puffins nest in burrows", 5)
    assert "gon\\xe9.md" not in {h.path for h in hits} and rep.chunks_total["prose"] == 2
    again = index_folder(root, load_settings())
    assert (again.files_indexed, again.files_unchanged, again.files_removed) == (0, 2, 0)


def test_watch_goes_on_when_a_name_is_not_utf8(home: Path, tmp_path: Path) -> None:
    # watchfiles cannot decode such a name and then fails every call: watch says so once and
    # walks the folder every few seconds instead.
    root = _make(tmp_path / "watched", {b"plain.md": "# Plain\n\nA plain note.\n"})
    proc = subprocess.Popen([sys.executable, "-m", "hydra_rag", "watch", str(root), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stdout or []],
                     daemon=True).start()

    def expect(event: str) -> dict[str, Any]:
        while True:
            ev = json.loads(lines.get(timeout=120))
            if ev["event"] == event:
                return ev

    try:
        expect("watching")
        with open(os.path.join(os.fsencode(root), b"caf\xe9.txt"), "w") as f:
            f.write("The lighthouse keeper counts the gulls.\n")
        assert "file events unavailable" in expect("warning")["message"]
        ev = expect("indexed")
        assert ev["files_indexed"] == 1 and "caf\\xe9.txt" in recorded(root)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
