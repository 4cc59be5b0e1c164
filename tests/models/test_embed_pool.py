"""An embedder served by several servers (`urls:`): three real llama.cpp sidecars of the default
embedder as the pool; batches spread over them, vectors identical to one server's, and an index
run that loses one server in the middle completes with nothing lost or stored twice. The
servers demand a key of their own (`--key-file`), which the entries name as any remote
endpoint's (`api_key_env`): the sidecar key goes to hydra-rag's own sidecars only."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from conftest import recorded, write_tree
from hydra_rag.catalog import get_embedder
from hydra_rag.checks.doctor import check_index
from hydra_rag.config import load_settings
from hydra_rag.index import Progress, index_folder
from hydra_rag.models.embed import connect
from hydra_rag.search.retrieve import Searcher
from hydra_rag.store.index_dir import Store


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


POOL_KEY = "pool-key-" + "k" * 40


@pytest.fixture
def key_file(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The pool's key, in a file for the servers and in $POOL_KEY for the clients."""
    path = isolated_home / "pool.key"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, POOL_KEY.encode())
    os.close(fd)
    monkeypatch.setenv("POOL_KEY", POOL_KEY)
    return path


def _serve(model: Path, alias: str, role: str, n_ctx: int, count: int,
           key_file: Path) -> list[tuple[str, subprocess.Popen[bytes]]]:
    """`count` llama.cpp servers of `model` on free loopback ports, answering once started,
    to requests that carry the key in `key_file`."""
    procs = []
    for _ in range(count):
        port = _free_port()
        procs.append((f"http://127.0.0.1:{port}/v1", subprocess.Popen(
            [sys.executable, "-m", "hydra_rag.models.sidecar_server", "--model", str(model),
             "--alias", alias, "--role", role, "--port", str(port), "--idle", "0",
             "--threads", "1", "--n-ctx", str(n_ctx), "--n-batch", "512",
             "--key-file", str(key_file)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    deadline = time.monotonic() + 120
    for url, proc in procs:
        while True:
            try:
                req = urllib.request.Request(f"{url}/models",
                                             headers={"Authorization": f"Bearer {POOL_KEY}"})
                with urllib.request.urlopen(req, timeout=2):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
    return procs


@pytest.fixture
def servers(isolated_home: Path,
            key_file: Path) -> Iterator[list[tuple[str, subprocess.Popen[bytes]]]]:
    """Three embedder servers of minilm-l6, and a catalog entry `minilm-pool` listing them."""
    model = isolated_home / "data" / "models" / "minilm-l6.q8_0.gguf"
    procs = _serve(model, "minilm-pool", "embed", 512, 3, key_file)
    (isolated_home / "config").mkdir(exist_ok=True)
    (isolated_home / "config" / "catalog.yaml").write_text(yaml.safe_dump({"embedders": [{
        "id": "minilm-pool", "dims": 384, "file": "minilm-l6.q8_0.gguf",  # its tokenizer
        "urls": [url for url, _ in procs], "api_key_env": "POOL_KEY", "languages": ["en"]}]}))
    yield procs
    for _, proc in procs:
        proc.kill()
        proc.wait()


def test_batches_spread_over_the_pool_and_vectors_match(servers: list[Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYDRA_RAG_EMBED_BATCH", "4")
    texts = [f"Note {i}: the ferry to island {i % 7} leaves at {6 + i % 12} o'clock."
             for i in range(120)]
    pooled = connect(get_embedder("minilm-pool"), load_settings())
    vecs = pooled.embed_documents(texts)
    assert pooled.pool is not None
    assert all(s.batches > 0 for s in pooled.pool.stats)  # every server took a share
    assert sum(s.batches for s in pooled.pool.stats) == 30 and not any(
        s.failures for s in pooled.pool.stats)
    monkeypatch.setenv("HYDRA_RAG_EMBEDDER_URL", servers[0][0])  # one server of the three
    monkeypatch.setenv("HYDRA_RAG_EMBEDDER_API_KEY_ENV", "POOL_KEY")
    single = connect(get_embedder("minilm-pool"), load_settings())
    assert single.pool is None
    assert np.abs(single.embed_documents(texts) - vecs).max() < 1e-5


def test_an_index_run_survives_a_server_that_dies(servers: list[Any], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYDRA_RAG_EMBED_BATCH", "4")
    root = write_tree(tmp_path / "c", {
        f"notes/n{i:02}.md": f"# Harbour note {i}\n\n" + " ".join(
            f"Crane {i}-{j} lifts container {j} onto the ship bound for port {i}."
            for j in range(60)) + "\n" for i in range(30)})
    killed: list[int] = []

    def progress(p: Progress) -> None:
        if p.stage in ("embed", "vectors") and p.chunks_done >= 20 and not killed:
            servers[2][1].kill()  # mid-run: the batches it holds or would take go elsewhere
            killed.append(p.chunks_done)

    monkeypatch.setenv("HYDRA_RAG_EMBEDDER", "minilm-pool")
    settings = load_settings()
    report = index_folder(root, settings, progress=progress)
    assert killed and servers[2][1].wait(timeout=10) is not None
    files = recorded(root)
    assert len(files) == 30 and all(e["chunks"] for e in files.values())
    ids = sorted(c for e in files.values() for c in e["chunks"])
    stored = sorted(Store(root).id_counts("prose").elements())
    assert stored == ids and len(set(ids)) == len(ids) == report.chunks_added
    assert report.chunks_embedded == report.chunks_added > 60
    assert [c for c in check_index(root) if c.status != "ok"] == []
    # Searchable through the pool (the query goes to a server that is up).
    hits = Searcher(root, settings).search("which crane lifts container 7 for port 12", 5)
    assert hits and hits[0].path == "notes/n12.md"


def test_a_chat_model_on_two_servers_survives_one(isolated_home: Path, key_file: Path) -> None:
    from hydra_rag.catalog import get_model
    from hydra_rag.errors import SidecarError
    from hydra_rag.models.chat import connect_chat, stream_chat

    model = isolated_home / "data" / "models" / "SmolLM2-135M-Instruct.Q8_0.gguf"
    procs = _serve(model, "smol-pool", "chat", 1024, 2, key_file)
    try:
        (isolated_home / "config").mkdir(exist_ok=True)
        (isolated_home / "config" / "catalog.yaml").write_text(yaml.safe_dump({"models": [{
            "id": "smol-pool", "urls": [url for url, _ in procs], "context": 1024,
            "api_key_env": "POOL_KEY"}]}))
        target = connect_chat(get_model("smol-pool"), load_settings())
        assert [t.base_url for t in target.servers()][0] != [
            t.base_url for t in target.servers()][0]  # turns take the servers in turn
        messages = [{"role": "user", "content": "Say hello."}]
        procs[0][1].kill()
        procs[0][1].wait()
        for _ in range(3):  # whichever server a turn starts with, it is answered
            text, _finish = stream_chat(target, messages, {"max_tokens": 8}, lambda _p: None)
            assert text.strip()
        procs[1][1].kill()
        procs[1][1].wait()
        with pytest.raises(SidecarError, match="every server of chat model 'smol-pool' failed"):
            stream_chat(target, messages, {"max_tokens": 8}, lambda _p: None)
    finally:
        for _, proc in procs:
            proc.kill()
            proc.wait()
