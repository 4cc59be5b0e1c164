"""Sidecars serve only their owner's hydra-rag: a real embedder sidecar refuses requests without
the user's key, from a web page (Origin, preflight) or to a rebound Host, while hydra-rag's own
client still embeds. One sidecar (the session's) serves every check."""

from __future__ import annotations

import http.client
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hydra_rag.catalog import get_embedder
from hydra_rag.config import load_settings
from hydra_rag.errors import SidecarError
from hydra_rag.models import sidecar, sidecar_key
from hydra_rag.models.embed import connect

EMBED = json.dumps({"input": ["a sentence"], "model": "minilm-l6"})


@pytest.fixture(scope="module")
def running(session_home: Path) -> Iterator[sidecar.SidecarRecord]:
    """The session's default embedder sidecar, started by the ordinary client."""
    connect(get_embedder("minilm-l6"), load_settings()).embed_query("start")
    rec = sidecar.read_record("minilm-l6")
    assert rec is not None and rec.keyed
    yield rec


def _ask(rec: sidecar.SidecarRecord, method: str, path: str,
         headers: dict[str, str]) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", rec.port, timeout=60)
    body = EMBED if method == "POST" else None
    conn.request(method, path, body=body, headers={"Content-Type": "application/json", **headers})
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp


def test_no_key_or_another_key_is_refused(running: sidecar.SidecarRecord) -> None:
    key = sidecar_key.key()
    for method, path in (("GET", "/v1/models"), ("POST", "/v1/embeddings")):
        for auth in ({}, {"Authorization": "Bearer not-the-key"}, {"Authorization": f"Basic {key}"},
                     {"Authorization": f"Bearer {key[:-1]}"}, {"Authorization": key}):
            assert _ask(running, method, path, auth).status == 401, (method, path, auth)
        # The scheme is case-insensitive, as HTTP says.
        for scheme in ("Bearer", "bearer", "BEARER"):
            got = _ask(running, method, path, {"Authorization": f"{scheme} {key}"})
            assert got.status == 200, (method, path, scheme)


def test_a_web_page_is_refused_without_cors(running: sidecar.SidecarRecord) -> None:
    key = {"Authorization": f"Bearer {sidecar_key.key()}"}
    page = {"Origin": "http://evil.example"}
    preflight = {**page, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type"}
    for method, path, headers in (("GET", "/v1/models", {**key, **page}),
                                  ("POST", "/v1/embeddings", {**key, **page}),
                                  ("OPTIONS", "/v1/embeddings", preflight),
                                  ("OPTIONS", "/v1/embeddings", {**key, **preflight}),
                                  ("OPTIONS", "/v1/models", key)):
        got = _ask(running, method, path, headers)
        assert got.status == 403, (method, path, headers)
        assert not [h for h, _ in got.getheaders() if h.lower().startswith("access-control-")]


def test_a_rebound_host_is_refused(running: sidecar.SidecarRecord) -> None:
    key = {"Authorization": f"Bearer {sidecar_key.key()}"}
    port = running.port
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.2:{port}", "0.0.0.0",
                 f"localhost:{port + 1}"):
        assert _ask(running, "GET", "/v1/models", {**key, "Host": host}).status == 421, host
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}"):
        assert _ask(running, "GET", "/v1/models", {**key, "Host": host}).status == 200, host


def test_the_key_is_private_and_off_the_command_line(running: sidecar.SidecarRecord) -> None:
    path = sidecar_key.key_path()
    st = path.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
    key = sidecar_key.key()
    cmdline = Path(f"/proc/{running.pid}/cmdline").read_bytes().split(b"\0")
    assert key.encode() not in b" ".join(cmdline)
    assert cmdline[cmdline.index(b"--key-file") + 1] == str(path).encode()
    assert key not in Path(running.log).read_text(errors="replace")


def test_the_client_still_embeds_and_checks_health(running: sidecar.SidecarRecord) -> None:
    vec = connect(get_embedder("minilm-l6"), load_settings()).embed_query("tides and moons")
    assert vec.shape == (384,) and abs(float(vec @ vec) - 1.0) < 1e-5
    assert sidecar.health(running.port, "minilm-l6")
    assert sidecar.status(running) == "ready"


def test_a_server_without_a_key_file_does_not_start(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "hydra_rag.models.sidecar_server", "--model",
                           str(tmp_path / "m.gguf"), "--alias", "m", "--role", "embed",
                           "--port", "19099"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--key-file" in proc.stderr


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HYDRA_RAG_HOME", str(tmp_path / "home"))
    return tmp_path / "home" / "state"


def test_the_key_is_made_once_with_mode_600(state: Path) -> None:
    old = os.umask(0)  # a permissive umask must not widen it
    try:
        path = sidecar_key.ensure_key()
    finally:
        os.umask(old)
    assert path == state / "sidecar.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = sidecar_key.key()
    assert len(key) >= 40 and sidecar_key.key() == key and sidecar_key.ensure_key() == path
    assert [p.name for p in state.iterdir()] == ["sidecar.key"]  # no temporary file left
    assert sidecar_key.headers() == {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o666])
def test_a_key_others_can_read_is_refused_with_the_fix(state: Path, mode: int) -> None:
    path = sidecar_key.ensure_key()
    path.chmod(mode)
    with pytest.raises(SidecarError) as exc:
        sidecar_key.key()
    msg = str(exc.value)
    assert "\n" not in msg and f"mode {mode:o}" in msg
    assert f"rm {path}" in msg and "hydra-rag sidecars stop --all" in msg


def test_a_link_or_a_broken_key_is_refused(state: Path, tmp_path: Path) -> None:
    state.mkdir(parents=True)
    target = tmp_path / "elsewhere"
    target.write_text("x" * 50)
    target.chmod(0o600)
    (state / "sidecar.key").symlink_to(target)
    with pytest.raises(SidecarError, match="cannot read the sidecar key"):
        sidecar_key.key()
    (state / "sidecar.key").unlink()
    (state / "sidecar.key").write_text("short\n")
    (state / "sidecar.key").chmod(0o600)
    with pytest.raises(SidecarError, match="does not hold a usable key"):
        sidecar_key.key()


def test_the_key_goes_to_no_other_users_listener(state: Path) -> None:
    # A sidecar listens only seconds after it starts, and leaves its port free when it stops:
    # another account listening there in time must not be sent the key.
    if os.getuid() != 0:
        pytest.skip("listening as another user needs root")
    listener = subprocess.Popen(
        [sys.executable, "-c", "import os, socket, sys\n"
         "os.setuid(65534); s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
         "print(s.getsockname()[1], flush=True)\n"
         "s.settimeout(2)\n"
         "try:\n    c, _ = s.accept(); print(c.recv(4096).decode(errors='replace'), flush=True)\n"
         "except OSError:\n    pass\n"],
        stdout=subprocess.PIPE, text=True)
    assert listener.stdout is not None
    port = int(listener.stdout.readline())
    try:
        assert not sidecar_key.listener_is_mine(port)
        assert sidecar.served(port, "minilm-l6", timeout=1.0) is None
        with pytest.raises(ConnectionRefusedError):
            sidecar_key.SidecarKey("sidecar 'x'").reach(f"http://127.0.0.1:{port}")
    finally:
        heard = listener.communicate(timeout=20)[0]
    assert sidecar_key.key() not in heard and "Authorization" not in heard
    mine = subprocess.Popen([sys.executable, "-c", "import socket, time\n"
                             "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
                             "print(s.getsockname()[1], flush=True); time.sleep(30)"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert mine.stdout is not None
        assert sidecar_key.listener_is_mine(int(mine.stdout.readline()))
    finally:
        mine.kill()
        mine.wait()


def test_a_sidecar_that_demands_no_key_is_replaced(isolated_home: Path) -> None:
    # One an older hydra-rag started answers anyone: its record, without `keyed`, says so.
    spec = sidecar.SidecarSpec(id="t-old", role="embed",
                               model_path=str(isolated_home / "data" / "models" /
                                              "minilm-l6.q8_0.gguf"),
                               port=19092, port_range=(19080, 19099))
    old = sidecar.ensure(spec)
    try:
        raw = json.loads((isolated_home / "state" / "sidecars" / "t-old.json").read_text())
        del raw["keyed"]
        (isolated_home / "state" / "sidecars" / "t-old.json").write_text(json.dumps(raw))
        new = sidecar.ensure(spec)
        assert new.pid != old.pid and new.keyed and sidecar.health(new.port, "t-old")
        assert not sidecar.pid_is_sidecar(old.pid, "t-old")
    finally:
        sidecar.stop("t-old")
