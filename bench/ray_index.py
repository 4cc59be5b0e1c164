"""Indexing through Ray (issue 48): chunks per second of a local `hydra-rag index`, of
`index --engine ray` on a Ray of this machine that the run starts (one node), and on a
cluster of two nodes on this machine; and Ray's fixed cost on a small folder. One run.

    python bench/ray_index.py [--projects httpx,cobra,zod,spdlog] [--small 5] [--rounds 1]

The folder: the projects of the code-search set (bench/code_corpora.py: httpx, cobra, zod and
spdlog, fetched from PyPI, npm and Debian; about 5,000 chunks together) copied side by side
under bench/.work/ray/big; the small folder is its first `--small` files. Each measurement is
`hydra-rag index FOLDER --full --json` in a fresh process, timed whole (wall clock, Ray's
start and the full-text index included), with the embedder sidecar already up; chunks/s is
the chunks added over that time. The two-node cluster is `ray start --head` and a second
`ray start --address`, each with one CPU and one unit of a custom resource that holds one
embedding actor per node; the second node has a home of its own (its actor runs a sidecar
of its own), and both nodes' sidecars get one thread each (`threads: 1`), the machine's two
cores split between them. The chunk ids of every Ray run are checked against the local one's.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import code_corpora

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "ray"
RAY = str(Path(sys.executable).with_name("ray"))


def folder(projects: list[str]) -> Path:
    big = WORK / "big"
    if not big.is_dir():
        for p in projects:
            shutil.copytree(code_corpora.fetch(p), big / p,
                            ignore=shutil.ignore_patterns(".hydra-index", ".git"))
    return big


def small_folder(big: Path, n: int) -> Path:
    small = WORK / "small"
    if not small.is_dir():
        files = sorted(p for p in big.rglob("*") if p.is_file() and ".hydra-index" not in p.parts)
        for p in files[:n]:
            dest = small / p.relative_to(big)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dest)
    return small


def index(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hydra_rag", "index", str(root), "--full",
                           "--json", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"index {root} {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return took, json.loads(proc.stdout)


def ids(root: Path) -> set[str]:
    from hydra_rag.store.index_dir import Store

    store = Store(root)
    return {r["id"] for t in ("code", "prose") if t in store.table_names()
            for r in store.table(t).to_arrow().select(["id"]).to_pylist()}


class Cluster:
    """Two Ray nodes on this machine, one CPU and one `hydra_embed` each."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.address = f"127.0.0.1:{self.port}"
        self.temp = Path("/tmp") / f"ray-bench-{self.port}"
        models = Path(os.environ["HYDRA_RAG_HOME"]) / "data" / "models"
        self.homes = [WORK / "home-a", WORK / "home-b"]  # a node's sidecar each
        for home in self.homes:
            if not (home / "data" / "models").exists():
                (home / "data").mkdir(parents=True, exist_ok=True)
                (home / "data" / "models").symlink_to(models.resolve())
        self.env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16),
                    "RAY_USAGE_STATS_ENABLED": "0", "HYDRA_RAG_THREADS": "1"}
        base = {**os.environ, **self.env}
        subprocess.run([RAY, "start", "--head", f"--port={self.port}", "--num-cpus=1",
                        "--resources", '{"hydra_embed": 1}', "--include-dashboard=false",
                        f"--temp-dir={self.temp}", "--disable-usage-stats"],
                       env={**base, "HYDRA_RAG_HOME": str(self.homes[0])}, check=True,
                       capture_output=True)
        self.worker = subprocess.Popen(
            [RAY, "start", f"--address={self.address}", "--num-cpus=1", "--resources",
             '{"hydra_embed": 1}', "--block"], env={**base, "HYDRA_RAG_HOME": str(self.homes[1])},
            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        code = ("import ray,sys; ray.init(address=sys.argv[1], log_to_driver=False); "
                "print(sum(1 for n in ray.nodes() if n['Alive']))")
        for _ in range(90):
            out = subprocess.run([sys.executable, "-c", code, self.address], env=base,
                                 capture_output=True, text=True).stdout.strip()
            if out.endswith("2"):
                break
            time.sleep(1)
        else:
            raise SystemExit("the second Ray node did not join")

    def args(self) -> tuple[list[str], dict[str, str]]:
        return (["--engine", "ray", "--ray-address", self.address],
                {**self.env, "HYDRA_RAG_RAY_ACTORS": "2", "HYDRA_RAG_RAY_RESOURCE": "hydra_embed"})

    def stop(self) -> None:
        os.killpg(self.worker.pid, signal.SIGTERM)
        self.worker.wait(timeout=60)
        subprocess.run([RAY, "stop", "--force"], capture_output=True)
        for home in self.homes:
            subprocess.run([sys.executable, "-m", "hydra_rag", "sidecars", "stop", "--all"],
                           env={**os.environ, "HYDRA_RAG_HOME": str(home)}, capture_output=True)
        shutil.rmtree(self.temp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--projects", default="httpx,cobra,zod,spdlog")
    ap.add_argument("--small", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    big = folder(a.projects.split(","))
    small = small_folder(big, a.small)
    index(small)  # the sidecar up, Ray's wheel files read once
    cluster = Cluster()
    try:
        two, two_env = cluster.args()
        runs: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        fixed: dict[str, list[float]] = {}
        for _ in range(a.rounds):
            for name, args, env in (("local", [], None), ("ray, one node", ["--engine", "ray"], None),
                                    ("ray, two nodes", two, two_env)):
                fixed.setdefault(name, []).append(index(small, *args, env=env)[0])
                runs.setdefault(name, []).append(index(big, *args, env=env))
                if name == "local":
                    reference = ids(big)
                elif ids(big) != reference:
                    raise SystemExit(f"{name}: the chunk ids differ from the local index's")
    finally:
        cluster.stop()
    chunks = runs["local"][0][1]["chunks_added"]
    print(f"{big}: {chunks:,} chunks; small folder {a.small} files; {a.rounds} round(s)")
    print("| run | wall time | chunks/s | vs local | small folder |")
    print("|---|---|---|---|---|")
    base = min(t for t, _ in runs["local"])
    for name, rs in runs.items():
        t = min(x for x, _ in rs)
        print(f"| {name} | {t:.1f} s | {chunks / t:.1f} | {base / t:.0%} | "
              f"{min(fixed[name]):.1f} s |")
    print("chunk ids: the same in every run")


if __name__ == "__main__":
    main()
