"""Another account on the same machine against the owner's hydra-rag (issue 30).

The owner (the account running the tests: root in CI) indexes a world-readable folder that holds
one owner-only file, runs `serve` with its default token, the embedder and chat sidecars and the
warm process, all under a home and a runtime folder that other accounts may enter (as many
homes are). Then `nobody` runs tests/security/attacker.py with the system's Python: it asks
`serve` and each sidecar for the private text, walks the index and the home, reads the files
where tokens and keys are kept, the processes' command lines and environments, and knocks on
the warm process's socket. Nothing it gets may hold the private text, the serve token or the
sidecar key. The owner's own search through the same server finds the private text, so the
scene is one where there is something to find.
"""

from __future__ import annotations

import http.client
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import free_port, run_cli, wait_listening

SYSTEM_PYTHON = Path("/usr/bin/python3")
ATTACKER = Path(__file__).with_name("attacker.py")
MARKER = "the vault code is zebra-4417-quartz"
QUESTION = "what is the vault code"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not SYSTEM_PYTHON.exists(),
    reason="needs root (to act as a second account) and the system's python3")


def _owner_request(port: int, method: str, path: str, token: str,
                   body: object = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request(method, path, body=None if body is None else json.dumps(body),
                 headers={"Authorization": f"Bearer {token}",
                          "Content-Type": "application/json"})
    resp = conn.getresponse()
    text = resp.read().decode("utf-8", "replace")
    conn.close()
    return resp.status, text


def _login_token(log: Path) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"[?#]token=([A-Za-z0-9_\-]+)", log.read_text())
        if found:
            return found.group(1)
        time.sleep(0.2)
    raise AssertionError(f"serve printed no login URL:\n{log.read_text()}")


@pytest.fixture(scope="module")
def scene(session_home: Path) -> Iterator[dict[str, Any]]:
    other = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="hydra-other-account-"))
    base.chmod(0o755)  # like a home others may enter
    home = base / "owner-home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "models").symlink_to((session_home / "data" / "models").resolve())
    run = base / "run"
    run.mkdir()
    for d in (home, home / "data", run):
        d.chmod(0o755)
    folder = base / "project"
    folder.mkdir()
    folder.chmod(0o755)
    (folder / "README.md").write_text("# Garden notes\n\nTomatoes want sun and a deep pot.\n")
    (folder / "README.md").chmod(0o644)
    diary = folder / "diary.md"
    diary.write_text(f"# Diary\n\nNote to self: {MARKER}. Tell nobody.\n")
    diary.chmod(0o600)
    env = {**os.environ, "HYDRA_RAG_HOME": str(home), "XDG_RUNTIME_DIR": str(run),
           "HYDRA_RAG_WARM_MINUTES": "10"}
    serve: subprocess.Popen[str] | None = None
    try:
        proc = run_cli("index", str(folder), env=env)
        assert proc.returncode == 0, proc.stderr
        # The owner's own quick search: it starts the warm process, and finds the private text.
        proc = run_cli("search", QUESTION, "--json", env=env, cwd=folder)
        assert proc.returncode == 0, proc.stderr
        assert "zebra-4417-quartz" in proc.stdout

        port = free_port()
        log = base / "serve.log"  # it holds the login address: the owner's alone
        log.touch(mode=0o600)
        with log.open("w") as out:
            serve = subprocess.Popen(
                [sys.executable, "-m", "hydra_rag", "serve", "--port", str(port),
                 "--path", str(folder)], stdout=out, stderr=subprocess.STDOUT, text=True,
                env=env)
        wait_listening(port, serve, log.read_text)
        token = _login_token(log)
        owner_search = _owner_request(port, "GET", "/api/search?q=vault+code", token)
        owner_chat = _owner_request(port, "POST", "/v1/chat/completions", token, {
            "max_tokens": 8,
            "messages": [{"role": "user", "content": QUESTION}]})

        records = [json.loads(p.read_text())
                   for p in sorted((home / "state" / "sidecars").glob("*.json"))]
        secrets = [token] + [p.read_text().strip() for p in (home / "state").iterdir()
                             if p.is_file() and p.suffix in (".key", ".token")]
        warm = sorted((run / f"hydra-rag-{os.getuid()}").glob("*.sock"))
        scene_file = base / "scene.json"
        scene_file.write_text(json.dumps({
            "question": QUESTION,
            "serve_port": port,
            "private_name": diary.name,
            "private_file": str(diary),
            "sidecars": {r["id"]: r["port"] for r in records},
            "index": str(folder / ".hydra-index"),
            "home": str(home),
            "known_files": [str(home / "state" / n) for n in
                            ("serve.token", "sidecar.key", "stores.json", "warm.log")],
            "pids": [serve.pid, *(r["pid"] for r in records)],
            "warm_socket": str(warm[0]) if warm else "",
        }))
        scene_file.chmod(0o644)
        attack = subprocess.run(
            [str(SYSTEM_PYTHON), "-I", str(ATTACKER), str(scene_file)],
            user=other.pw_uid, group=other.pw_gid, extra_groups=[], cwd="/",
            env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
            capture_output=True, text=True, timeout=600)
        assert attack.returncode == 0, attack.stderr
        kept = {p: Path(p).is_file() for p in json.loads(scene_file.read_text())["known_files"]}
        yield {"got": json.loads(attack.stdout), "raw": attack.stdout, "secrets": secrets,
               "kept": kept,
               "records": records, "warm": warm, "owner_search": owner_search,
               "owner_chat": owner_chat, "uid": other.pw_uid}
    finally:
        if serve is not None:
            serve.terminate()
            try:
                serve.wait(timeout=20)
            except subprocess.TimeoutExpired:
                serve.kill()
        run_cli("sidecars", "stop", "--all", env=env)
        shutil.rmtree(base, ignore_errors=True)


def test_the_owner_reaches_the_private_text_through_serve(scene: dict[str, Any]) -> None:
    status, body = scene["owner_search"]
    assert status == 200 and "zebra-4417-quartz" in body
    assert scene["owner_chat"][0] == 200, scene["owner_chat"]
    assert {r["role"] for r in scene["records"]} >= {"embed", "chat"}
    assert scene["warm"], "the warm process was not running"


def test_the_attack_ran_as_another_account(scene: dict[str, Any]) -> None:
    assert scene["got"]["uid"] == scene["uid"] != os.getuid()
    assert scene["got"]["private-file"].get("denied", "").startswith("PermissionError")


def test_nothing_the_other_account_got_holds_the_private_text_or_a_secret(
        scene: dict[str, Any]) -> None:
    assert "zebra-4417-quartz" not in scene["raw"]
    for secret in scene["secrets"]:
        assert secret not in scene["raw"]


def test_serve_wants_the_token_on_every_route(scene: dict[str, Any]) -> None:
    for name, answer in scene["got"]["serve"].items():
        if name != "login-guess":  # the page itself holds no data; a wrong token logs no one in
            assert answer["status"] in (401, 403), (name, answer)
        assert "set-cookie" not in answer["headers"], name


def test_sidecars_answer_only_their_owner(scene: dict[str, Any]) -> None:
    assert scene["got"]["sidecars"], "no sidecar was running"
    for sid, answers in scene["got"]["sidecars"].items():
        for name, answer in answers.items():
            assert answer["status"] in (401, 403, 421), (sid, name, answer)
            assert "access-control-allow-origin" not in answer["headers"], (sid, name)


def test_the_index_and_the_state_cannot_be_read(scene: dict[str, Any]) -> None:
    index = scene["got"]["index"]
    assert index["refused"] and not index["files"], index
    home = scene["got"]["home"]["files"]
    state_read = [p for p, r in home.items() if "/state/" in p and "read" in r]
    cache_read = [p for p, r in home.items() if "/cache/" in p and "read" in r]
    assert not state_read and not cache_read, (state_read, cache_read)
    # The files where the token, the key and the registry are kept exist, and are shut: a
    # renamed file would be "not found", which proves nothing.
    assert all(scene["kept"].values()), scene["kept"]
    for path, answer in scene["got"]["known-files"].items():
        assert answer.get("denied", "").startswith("PermissionError"), (path, answer)


def test_process_environments_are_closed_and_command_lines_hold_no_secret(
        scene: dict[str, Any]) -> None:
    for pid, answer in scene["got"]["proc"].items():
        assert answer["environ"].get("denied", "").startswith("PermissionError"), pid
        assert "read" in answer["cmdline"], pid  # readable by all: so it must hold no secret


def test_the_warm_process_does_not_let_another_account_in(scene: dict[str, Any]) -> None:
    warm = scene["got"]["warm"]
    assert warm is not None and not warm["connected"], warm
