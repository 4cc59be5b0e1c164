"""Real sidecar processes: start, reuse, port fallback, failure with a log tail, idle exit, stop."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from hydra_rag import sidecar
from hydra_rag.catalog import get_embedder
from hydra_rag.config import load_settings
from hydra_rag.embed import connect
from hydra_rag.errors import SidecarError


def _spec(model: Path, sid: str, port: int, idle: float = 900.0) -> sidecar.SidecarSpec:
    return sidecar.SidecarSpec(id=sid, role="embed", model_path=str(model), port=port,
                               port_range=(19080, 19099), idle_seconds=idle)


@pytest.fixture
def model(isolated_home: Path) -> Path:
    return isolated_home / "data" / "models" / "minilm-l6.q8_0.gguf"


def test_start_reuse_stop(model: Path) -> None:
    rec = sidecar.ensure(_spec(model, "t-reuse", 19090))
    try:
        assert rec.port == 19090
        assert sidecar.health(rec.port, "t-reuse")
        again = sidecar.ensure(_spec(model, "t-reuse", 19090))
        assert again.pid == rec.pid
        assert sidecar.status(rec) == "ready"
        assert [r.id for r in sidecar.all_records()] == ["t-reuse"]
    finally:
        assert sidecar.stop("t-reuse")
    assert sidecar.read_record("t-reuse") is None
    assert not sidecar.pid_is_sidecar(rec.pid, "t-reuse")


def test_listens_on_loopback_only(model: Path) -> None:
    rec = sidecar.ensure(_spec(model, "t-lo", 19091))
    try:
        conns = Path("/proc/net/tcp").read_text().splitlines()[1:]
        listening = [c.split()[1] for c in conns if c.split()[3] == "0A"]
        mine = [a for a in listening if int(a.split(":")[1], 16) == rec.port]
        assert mine == ["0100007F:" + format(rec.port, "04X")]  # 127.0.0.1 only
    finally:
        sidecar.stop("t-lo")


def test_port_taken_moves_to_the_next_free_one(model: Path) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 19092))
    blocker.listen()
    try:
        rec = sidecar.ensure(_spec(model, "t-port", 19092))
        assert rec.port != 19092 and 19080 <= rec.port <= 19099
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
    # Any OpenAI-compatible endpoint can stand in: here a sidecar started separately.
    rec = sidecar.ensure(_spec(model, "minilm-l6", 19097))
    try:
        monkeypatch.setenv("HYDRA_RAG_EMBEDDER_URL", f"{rec.url}/v1")
        client = connect(get_embedder("minilm-l6"), load_settings())
        assert client.base_url == f"{rec.url}/v1" and client.sidecar_id is None
        assert client.embed_query("hello").shape == (384,)
    finally:
        sidecar.stop("minilm-l6")
