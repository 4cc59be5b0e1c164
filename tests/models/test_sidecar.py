"""Real sidecar processes: start, reuse, port fallback, failure with a log tail, idle exit, stop,
busy sidecars kept, dead ones brought back."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from hydra_rag.catalog import get_embedder
from hydra_rag.config import load_settings
from hydra_rag.errors import ConfigError, SidecarError
from hydra_rag.models import sidecar, sidecar_key
from hydra_rag.models.embed import connect
from hydra_rag.models.endpoint import JsonEndpoint
from hydra_rag.models.sidecar_key import SidecarKey


def _spec(model: Path, sid: str, port: int, idle: float = 900.0) -> sidecar.SidecarSpec:
    return sidecar.SidecarSpec(id=sid, role="embed", model_path=str(model), port=port,
                               port_range=(19080, 19099), idle_seconds=idle)


@pytest.fixture
def model(isolated_home: Path) -> Path:
    return isolated_home / "data" / "models" / "minilm-l6.q8_0.gguf"


def test_start_reuse_stop(model: Path) -> None:
    # The preferred port when it is free (other tests' sidecars may hold some of the range).
    port = next(p for p in range(19090, 19100) if sidecar.port_free(p))
    rec = sidecar.ensure(_spec(model, "t-reuse", port))
    try:
        assert rec.port == port
        assert sidecar.health(rec.port, "t-reuse")
        again = sidecar.ensure(_spec(model, "t-reuse", port))
        assert again.pid == rec.pid
        assert sidecar.status(rec) == "ready"
        assert [r.id for r in sidecar.all_records()] == ["t-reuse"]
    finally:
        assert sidecar.stop("t-reuse")
    assert sidecar.read_record("t-reuse") is None
    assert not sidecar.pid_is_sidecar(rec.pid, "t-reuse")


def test_listens_on_loopback_only(model: Path, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # Started from a folder of Python sources whose modules shadow the standard library's (a
    # `json.py`, as the rich package has), as when `hydra-rag search` runs inside such a folder.
    (tmp_path / "json.py").write_text("raise ImportError('the folder shadowed json')\n")
    monkeypatch.chdir(tmp_path)
    rec = sidecar.ensure(_spec(model, "t-lo", 19091))
    try:
        conns = Path("/proc/net/tcp").read_text().splitlines()[1:]
        listening = [c.split()[1] for c in conns if c.split()[3] == "0A"]
        mine = [a for a in listening if int(a.split(":")[1], 16) == rec.port]
        assert mine == ["0100007F:" + format(rec.port, "04X")]  # 127.0.0.1 only
    finally:
        sidecar.stop("t-lo")


def test_port_taken_moves_to_the_next_free_one(model: Path) -> None:
    # Block a port of the range that is free now (another home's sidecar may hold any one).
    blocker = socket.socket()
    for taken in range(19099, 19079, -1):
        try:
            blocker.bind(("127.0.0.1", taken))
            break
        except OSError:
            continue
    else:
        pytest.skip("every port of 19080-19099 is in use")
    blocker.listen()
    try:
        rec = sidecar.ensure(_spec(model, "t-port", taken))
        assert rec.port != taken and 19080 <= rec.port <= 19099
        assert sidecar.health(rec.port, "t-port")
    finally:
        blocker.close()
        sidecar.stop("t-port")


def test_broken_model_fails_fast_with_log_tail(isolated_home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    t0 = time.monotonic()
    with pytest.raises(SidecarError) as exc:
        sidecar.ensure(_spec(bad, "t-bad", 19093), timeout=60)
    assert time.monotonic() - t0 < 60
    msg = str(exc.value)
    assert "exited with code" in msg and "log" in msg
    assert sidecar.read_record("t-bad") is None


def test_missing_model_file_names_the_fix(isolated_home: Path, tmp_path: Path) -> None:
    with pytest.raises(SidecarError, match="rag setup"):
        sidecar.ensure(_spec(tmp_path / "nope.gguf", "t-missing", 19094))


def test_idle_sidecar_exits_and_is_restarted_on_demand(model: Path) -> None:
    rec = sidecar.ensure(_spec(model, "t-idle", 19095, idle=2.0))
    deadline = time.monotonic() + 30
    while sidecar.pid_is_sidecar(rec.pid, "t-idle") and time.monotonic() < deadline:
        time.sleep(0.5)
        try:
            os.waitpid(rec.pid, os.WNOHANG)
        except ChildProcessError:
            pass
    assert not sidecar.pid_is_sidecar(rec.pid, "t-idle")
    assert sidecar.read_record("t-idle") is None  # it removed its own record
    rec2 = sidecar.ensure(_spec(model, "t-idle", 19095, idle=60))
    try:
        assert rec2.pid != rec.pid and sidecar.health(rec2.port, "t-idle")
    finally:
        sidecar.stop("t-idle")


def test_stale_record_is_replaced(model: Path) -> None:
    rec = sidecar.ensure(_spec(model, "t-stale", 19096))
    os.kill(rec.pid, 9)
    time.sleep(0.5)
    try:
        os.waitpid(rec.pid, 0)
    except ChildProcessError:
        pass
    assert sidecar.status(rec) == "dead"
    rec2 = sidecar.ensure(_spec(model, "t-stale", 19096))
    try:
        assert rec2.pid != rec.pid
    finally:
        sidecar.stop("t-stale")


def test_client_batches_normalises_and_guards_length(isolated_home: Path) -> None:
    settings = load_settings(embed_batch=3)
    client = connect(get_embedder("minilm-l6"), settings)
    vecs = client.embed_documents([f"document number {i}" for i in range(7)])
    assert vecs.shape == (7, 384) and vecs.dtype.name == "float32"
    assert abs(float((vecs * vecs).sum(1).min()) - 1.0) < 1e-5
    assert client.fits("short text")
    assert not client.fits("word " * 600)  # more tokens than the 512-token context


def test_url_endpoint_instead_of_a_sidecar(isolated_home: Path, monkeypatch: pytest.MonkeyPatch,
                                           model: Path) -> None:
    # Any OpenAI-compatible endpoint can stand in: here a sidecar started separately, whose
    # key the user hands over as a remote endpoint's (the sidecar key goes to sidecars only).
    rec = sidecar.ensure(_spec(model, "minilm-l6", 19097))
    try:
        monkeypatch.setenv("HYDRA_RAG_EMBEDDER_URL", f"{rec.url}/v1")
        unkeyed = connect(get_embedder("minilm-l6"), load_settings())
        with pytest.raises(ConfigError, match=r"needs a key \(HTTP 401\)"):
            unkeyed.embed_query("hello")
        monkeypatch.setenv("HYDRA_RAG_EMBEDDER_API_KEY_ENV", "MY_SIDECAR_KEY")
        monkeypatch.setenv("MY_SIDECAR_KEY", sidecar_key.key())
        client = connect(get_embedder("minilm-l6"), load_settings())
        assert client.base_url == f"{rec.url}/v1" and client.sidecar_id is None
        assert client.embed_query("hello").shape == (384,)
    finally:
        sidecar.stop("minilm-l6")


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_a_busy_sidecar_answers_its_health_check_and_is_kept(model: Path) -> None:
    # Another command finding the sidecar in the middle of a long request must neither wait
    # for the request nor take the sidecar for dead (it used to kill it, breaking an index run).
    spec = _spec(model, "t-busy", 19098)
    rec = sidecar.ensure(spec)
    try:
        endpoint = JsonEndpoint(rec.url, "t-busy", auth=SidecarKey("t-busy"))
        texts = [f"paragraph {i}: " + "a long sentence about sidecars and health " * 55
                 for i in range(64)]
        done: dict[str, object] = {}
        enough = threading.Event()

        def long_requests() -> None:
            try:  # batches until checked, so that a fast machine is still busy when it is
                for _ in range(8):
                    if enough.is_set():
                        break
                    done["raw"] = endpoint.post("embeddings", {"input": texts, "model": "t-busy"})
            except SidecarError as exc:
                done["error"] = exc

        before = _cpu_ticks(rec.pid)
        worker = threading.Thread(target=long_requests)
        worker.start()
        deadline = time.monotonic() + 60
        while _cpu_ticks(rec.pid) - before < 30 and time.monotonic() < deadline:
            time.sleep(0.05)  # until the sidecar has spent 0.3 s of CPU on the batch
        t0 = time.monotonic()
        assert sidecar.health(rec.port, "t-busy", timeout=1.0)
        assert time.monotonic() - t0 < 1.0
        assert sidecar.ensure(spec).pid == rec.pid
        assert worker.is_alive(), "the batches ended too soon to prove anything"
        enough.set()
        worker.join()
        assert "error" not in done, done.get("error")
        assert len(json.loads(done["raw"])["data"]) == 64  # type: ignore[arg-type]
    finally:
        sidecar.stop("t-busy")


def test_the_client_brings_back_a_sidecar_that_died(isolated_home: Path) -> None:
    client = connect(get_embedder("minilm-l6"), load_settings())
    first = client.embed_query("before")
    old = sidecar.read_record("minilm-l6")
    assert old is not None
    os.kill(old.pid, 9)
    try:
        os.waitpid(old.pid, 0)
    except ChildProcessError:
        pass
    again = client.embed_query("before")  # sent once more to a sidecar started again
    new = sidecar.read_record("minilm-l6")
    assert new is not None and new.pid != old.pid
    assert float(first @ again) > 0.9999


def test_other_requests_do_not_cut_a_streaming_answer_short(home: Path) -> None:
    # llama-cpp-python ends a streaming answer when another request for the model arrives,
    # unless told not to; an open chat's keep-alive and other commands send such requests.
    import urllib.request

    from hydra_rag.catalog import get_model
    from hydra_rag.models.chat import connect_chat, stream_chat

    target = connect_chat(get_model("smollm2-135m"), load_settings())
    rec = sidecar.read_record("smollm2-135m")
    assert rec is not None
    tokens = {"n": 0}
    others: list[threading.Thread] = []

    def tokenize() -> None:  # waits for the model, as any real request does
        req = urllib.request.Request(f"{rec.url}/extras/tokenize", method="POST",
                                     data=json.dumps({"input": "hello"}).encode(),
                                     headers={"Content-Type": "application/json",
                                              **sidecar_key.headers()})
        with urllib.request.urlopen(req, timeout=120) as resp:
            resp.read()

    def poke(_token: str) -> None:
        tokens["n"] += 1
        assert sidecar.health(rec.port, rec.id, timeout=5.0)  # answered at once
        if tokens["n"] == 2:
            others.append(threading.Thread(target=tokenize))
            others[0].start()

    text, finish = stream_chat(
        target, [{"role": "user", "content": "Write a long story about a lighthouse keeper."}],
        {"max_tokens": 48, "temperature": 0.0}, poke)
    for t in others:
        t.join()
    assert others and tokens["n"] > 5
    assert finish == "length", (finish, text)


def test_a_request_that_times_out_is_not_sent_again() -> None:
    # The server has it and is still working: a resend would queue a second copy behind it.
    import http.client

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[socket.socket] = []

    def accept() -> None:
        server.settimeout(3.0)
        try:
            while True:
                accepted.append(server.accept()[0])  # and never answer
        except OSError:
            pass

    acceptor = threading.Thread(target=accept)
    acceptor.start()
    restarts: list[int] = []
    port = server.getsockname()[1]
    endpoint = JsonEndpoint(f"http://127.0.0.1:{port}",
                                    restart=lambda: restarts.append(1) or "")
    endpoint.__dict__["_conn"] = http.client.HTTPConnection("127.0.0.1", port, timeout=0.5)
    try:
        with pytest.raises(SidecarError, match="did not answer within 0.5s"):
            endpoint.post("embeddings", {"input": ["x"]})
    finally:
        acceptor.join()
        server.close()
        for c in accepted:
            c.close()
    assert len(accepted) == 1 and not restarts
