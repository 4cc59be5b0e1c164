"""The Ray engine (`index --engine ray`), for real: Ray Data tasks read and chunk, Ray actors
embed, each with the real embedder sidecar; first a Ray of this machine that the run starts
itself, then a cluster of two nodes on this machine (`ray start --head`, and a second node
with `ray start --address` and a home of its own, so its actor runs a sidecar of its own),
the embedding actors held one to a node by a custom resource, the tables in a bucket of a
local S3 server. No mocks: the same chunk ids, texts, vectors and search hits as a local
index, an edit embedded alone, and a node killed in the middle of a job."""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import BUCKET, free_port, run_cli, write_tree
from hydra_rag.checks.doctor import check_index
from hydra_rag.config import load_settings
from hydra_rag.search.retrieve import Searcher
from hydra_rag.store.index_dir import Store

QUERIES = ("X-Api-Key", "invoice total in cents", "how are requests authenticated",
           "the keeper logged a storm at the harbour", "orchard frost and the copper kettle")
_WORDS = ("harbour storm keeper lamp wind copper kettle orchard frost meadow river bridge "
         "lantern falcon granite quarry ledger invoice weaver loom spindle barley mill "
         "furnace anvil chapel bell tower ferry tide gull salt marsh heron willow cellar "
         "cider barrel cooper saddle bridle stable hay thatch chimney smoke ember ash oak "
         "acorn squirrel badger fox hound kennel shepherd flock wool fleece dye indigo "
         "madder scarlet market stall coin scale merchant caravan camel desert oasis palm "
         "date fig olive press vine grape cask cork bottle label tally clerk quill ink")
WORDS = _WORDS.split()


def _rows(root: Path) -> dict[str, dict[str, Any]]:
    store = Store(root)
    out = {}
    for t in ("code", "prose"):
        if t in store.table_names():
            for r in store.table(t).to_arrow().select(["id", "text", "vector"]).to_pylist():
                out[r["id"]] = r
    return out


def _same_index(a: Path, b: Path) -> None:
    """The same chunk ids and texts, vectors at cosine ≥ 0.9999, and the same search hits."""
    ra, rb = _rows(a), _rows(b)
    assert ra and set(ra) == set(rb)
    for i, r in ra.items():
        assert r["text"] == rb[i]["text"]
        cos = float(np.dot(np.asarray(r["vector"]), np.asarray(rb[i]["vector"])))
        assert cos >= 0.9999, (i, cos)
    for q in QUERIES:
        hits = [[(h.path, h.line_start, h.line_end) for h in Searcher(root, load_settings())
                 .search(q, 5)] for root in (a, b)]
        assert hits[0] == hits[1], q
    for root in (a, b):  # no orphan and no duplicate ids
        assert all(c.status == "ok" for c in check_index(root)), check_index(root)
        store = Store(root)
        assert all(n == 1 for t in ("code", "prose") for n in store.id_counts(t).values())


def _index(root: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = run_cli("index", str(root), "--json", *args, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _folder(root: Path, notes: int = 4) -> Path:
    """The conftest corpus's kind of folder, with `notes` notes of a few chunks each."""
    files: dict[str, str | bytes] = {
        "src/auth.py": ("API_HEADER = 'X-Api-Key'\n\n\ndef check_token(request):\n"
                        "    \"\"\"Reject requests whose API key header is missing.\"\"\"\n"
                        "    return request.headers.get(API_HEADER) in VALID_KEYS\n"),
        "src/billing.py": ("def monthly_invoice(customer, usage):\n"
                           "    \"\"\"Sum the metered usage into one invoice total in cents.\"\"\"\n"
                           "    return sum(item.cents for item in usage)\n"),
        "README.md": "# Demo project\n\nA tiny corpus for the Ray engine's tests.\n",
    }
    for i in range(notes):  # each note of its own words: no two score alike
        rnd = random.Random(i)
        lines = [" ".join(rnd.choice(WORDS) for _ in range(14)) + "." for _ in range(30)]
        files[f"notes/n{i:02}.md"] = f"# Note {i}: {WORDS[i % len(WORDS)]}\n\n" + "\n".join(lines)
    return write_tree(root, files)


def test_a_folder_indexed_through_ray_is_the_folder_indexed_here(home: Path,
                                                                 tmp_path: Path) -> None:
    local = _folder(tmp_path / "local")
    ray = _folder(tmp_path / "ray")
    _index(local)
    rep = _index(ray, "--engine", "ray")
    assert rep["files_indexed"] == 7 and rep["chunks_embedded"] == rep["chunks_added"] > 7
    _same_index(local, ray)
    # An edit: that file's new chunk alone is embedded, the others keep their vectors.
    for root in (local, ray):
        with open(root / "src/billing.py", "a", encoding="utf-8") as f:
            f.write("\n\ndef refund(invoice):\n    \"\"\"Credit an invoice back.\"\"\"\n"
                    "    return -invoice.total\n")
    _index(local)
    rep = _index(ray, "--engine", "ray")
    assert (rep["files_indexed"], rep["files_unchanged"]) == (1, 6)
    assert rep["chunks_embedded"] == rep["chunks_added"] >= 1
    assert rep["chunks_reused"] + rep["chunks_embedded"] == len(
        Store(ray).file_list.entries(["src/billing.py"])["src/billing.py"].chunks)
    _same_index(local, ray)


def test_without_ray_or_a_cluster_the_engine_says_what_to_do(home: Path, tmp_path: Path) -> None:
    root = _folder(tmp_path / "f", notes=0)
    # `ray` made unimportable for the command's process only
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "ray.py").write_text("raise ImportError('no ray here')\n")
    proc = run_cli("index", str(root), "--engine", "ray",
                   env={"PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get(
                       "PYTHONPATH", "")])})
    assert proc.returncode != 0
    assert "pip install 'hydra-rag[ray]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_cli("index", str(root), "--engine", "spark")
    assert proc.returncode != 0 and "engine must be one of local, ray" in proc.stderr
    # A cluster address where nothing listens: said at once (Ray would retry for minutes)
    start = time.monotonic()
    proc = run_cli("index", str(root), "--engine", "ray", "--ray-address",
                   f"127.0.0.1:{free_port()}")
    assert proc.returncode != 0 and time.monotonic() - start < 60
    assert "nothing answers at the Ray cluster's address 127.0.0.1:" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- a cluster of two nodes on this machine ------------------------------------------------

def _ray_cli() -> str:
    return str(Path(sys.executable).with_name("ray"))


@pytest.fixture
def cluster(home: Path, tmp_path: Path) -> Any:
    """A head node and a worker node, each with one CPU and one unit of `hydra_embed`; the
    worker's home shares only the models (its actor starts a sidecar of its own). Yields the
    head's address and the worker's process (its own session: killing the group kills the
    node)."""
    port = free_port()
    temp = Path("/tmp") / f"ray-{os.getpid()}-{port}"  # short: Ray's sockets live under it
    other = tmp_path / "home-b"
    (other / "data").mkdir(parents=True)
    (other / "data" / "models").symlink_to((home / "data" / "models").resolve())
    # Token authentication, as Ray's own clusters have it: every process of the test, the
    # command's included, holds the cluster's token.
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16))
    base = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    head = subprocess.run(
        [_ray_cli(), "start", "--head", f"--port={port}", "--num-cpus=1",
         "--resources", '{"hydra_embed": 1}', "--include-dashboard=false",
         f"--temp-dir={temp}", "--disable-usage-stats"],
        env=base, capture_output=True, text=True, timeout=120)
    assert head.returncode == 0, head.stderr
    address = f"127.0.0.1:{port}"
    worker = subprocess.Popen(
        [_ray_cli(), "start", f"--address={address}", "--num-cpus=1",
         "--resources", '{"hydra_embed": 1}', "--block"],
        env={**base, "HYDRA_RAG_HOME": str(other)}, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_nodes(address, 2)
        yield address, worker
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=60)
        subprocess.run([_ray_cli(), "stop", "--force"], env=base, capture_output=True,
                       timeout=120)
        run_cli("sidecars", "stop", "--all", env={"HYDRA_RAG_HOME": str(other)})
        for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):
            os.environ.pop(name, None)
        shutil.rmtree(temp, ignore_errors=True)


def _wait_nodes(address: str, n: int, timeout: float = 90) -> None:
    code = ("import ray, sys; ray.init(address=sys.argv[1], log_to_driver=False); "
            "print(sum(1 for x in ray.nodes() if x['Alive']))")
    end = time.monotonic() + timeout
    while True:
        proc = subprocess.run([sys.executable, "-c", code, address], capture_output=True,
                              text=True, timeout=120)
        if proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == str(n):
            return
        assert time.monotonic() < end, f"the cluster did not reach {n} nodes: {proc.stderr}"
        time.sleep(1)


def test_two_nodes_a_bucket_and_a_node_lost(home: Path, tmp_path: Path, cluster: Any,
                                            s3: Any) -> None:
    address, worker = cluster
    local = _folder(tmp_path / "local", notes=60)
    root = _folder(tmp_path / "ray", notes=60)
    _index(local)
    env = {"HYDRA_RAG_TABLES_URI": f"s3://{BUCKET}/indexes", "HYDRA_RAG_RAY_ACTORS": "2",
           "HYDRA_RAG_RAY_RESOURCE": "hydra_embed", "HYDRA_RAG_INDEX_BATCH": "32"}
    # Both nodes embed: the job completes, its tables in the bucket, the same index.
    rep = _index(root, "--engine", "ray", "--ray-address", address, env=env)
    assert rep["files_indexed"] == 63
    assert (root / ".hydra-index/tables.uri").read_text().startswith(f"s3://{BUCKET}/")
    _same_index(local, root)
    # The worker node's actor embedded too, with a sidecar of its own home's
    assert (tmp_path / "home-b/state/sidecars/minilm-l6.json").is_file()
    # Again from nothing (--full), and the worker node killed once a batch is stored.
    proc = subprocess.Popen(
        [sys.executable, "-m", "hydra_rag", "index", str(root), "--full", "--json",
         "--engine", "ray", "--ray-address", address],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_recorded(root, proc)
    os.killpg(worker.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=600)
    # Ray's own reports (a task retried, the node marked dead) are not in the JSON on stdout;
    # a node lost is one line on stderr
    assert err.count("Ray lost the node") <= 1 and "retries remaining" not in err, err
    if proc.returncode != 0:  # ended in a line; the earlier generation stays in use
        assert len([x for x in err.splitlines() if x.startswith("error")]) == 1, err
        _same_index(local, root)
        rep = _index(root, "--engine", "ray", "--ray-address", address, env=env)
    else:
        rep = json.loads(out)
    _same_index(local, root)


def _wait_recorded(root: Path, proc: subprocess.Popen[str], timeout: float = 300) -> None:
    """Until the run building a new generation has recorded files in it."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        for db in (root / ".hydra-index").glob("gen-*/files.db"):
            try:
                with sqlite3.connect(db) as con:
                    if con.execute("SELECT count(*) FROM files").fetchone()[0] > 0:
                        return
            except sqlite3.Error:
                pass
        time.sleep(0.2)
    raise AssertionError("no file was recorded")


def test_how_many_actors_and_what_each_asks_for() -> None:
    from hydra_rag.errors import HydraError
    from hydra_rag.index.ray_engine import EMBED_CPUS, actor_options

    assert actor_options(3, 0, {}) == (3, {"num_cpus": EMBED_CPUS})
    assert actor_options(2, 4, {}) == (4, {"num_cpus": EMBED_CPUS, "num_gpus": 1})
    assert actor_options(2, 0, {"HYDRA_RAG_RAY_ACTORS": "5", "HYDRA_RAG_RAY_RESOURCE": "emb"}) \
        == (5, {"num_cpus": EMBED_CPUS, "resources": {"emb": 1}})
    with pytest.raises(HydraError, match="HYDRA_RAG_RAY_ACTORS must be a whole number"):
        actor_options(1, 0, {"HYDRA_RAG_RAY_ACTORS": "two"})
