"""An embedder on several servers (`urls:`, hydra_rag/models/pool.py): throughput with 1, 2 and 3 local
sidecars of the default embedder against one sidecar through the plain client (no pool), and a
run that loses one of three servers a third of the way in.

    python bench/embed_pool.py [--chunks 600] [--json]

On this 2-core machine the ceiling is the cores, not the servers: the point is that the pool
costs nothing over one client and that a death costs only the lost server's share. Texts are
the chunks `index` makes of this repository's Python and Markdown files.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
HOME = Path(os.environ.get("HYDRA_RAG_HOME", HERE / ".work" / "home"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(model: Path, threads: int) -> tuple[str, subprocess.Popen[bytes]]:
    from hydra_rag.models import sidecar_key

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hydra_rag.models.sidecar_server", "--model", str(model), "--alias",
         "pool", "--role", "embed", "--port", str(port), "--idle", "0", "--threads",
         str(threads), "--n-ctx", "512", "--n-batch", "512",
         "--key-file", str(sidecar_key.ensure_key())],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while True:
        try:
            req = urllib.request.Request(f"{url}/models", headers=sidecar_key.headers())
            with urllib.request.urlopen(req, timeout=2):
                return url, proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"sidecar on {port} did not start") from None
            time.sleep(0.2)


def texts(n: int, fits: object) -> list[str]:
    from hydra_rag.read.chunk import chunk_text, markup_of

    out: list[str] = []
    for path in sorted([*REPO.glob("hydra_rag/**/*.py"), *REPO.glob("*.md")]):
        text = path.read_text(encoding="utf-8")
        out += [c.text for c in chunk_text(text, fits=fits, markup=markup_of(path.name))]  # type: ignore[arg-type]
        if len(out) >= n:
            break
    return out[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=600)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ["HYDRA_RAG_HOME"] = str(HOME)

    from hydra_rag.catalog import get_embedder
    from hydra_rag.config import load_settings
    from hydra_rag.models.embed import EmbedClient, Tokenizer
    from hydra_rag.models.sidecar_key import SidecarKey

    emb = get_embedder("minilm-l6")
    model = emb.model_path()
    if model is None or not model.is_file():
        raise SystemExit(f"no {emb.id} in {HOME}: run `HYDRA_RAG_HOME={HOME} hydra-rag rag setup`")
    tok = Tokenizer(str(model))
    batch = load_settings().embed_batch
    probe = EmbedClient(emb, "http://127.0.0.1:1/v1", emb.id, batch, tok)
    docs = texts(args.chunks, probe.fits)
    cores = os.cpu_count() or 2
    results = []

    def run(label: str, servers: int, threads: int, pool: bool, kill_at: float = 0.0) -> None:
        started = [start(model, threads) for _ in range(servers)]
        urls = [u for u, _ in started]
        try:
            client = EmbedClient(emb, urls[0], emb.id, batch, tok, auth=SidecarKey("pool"),
                                 more_urls=tuple(urls[1:]) if pool else ())
            client.embed_documents(docs[:batch])  # warm every server once
            if client.pool is not None:
                client.pool.map([docs[:batch]] * servers * 2)
            killed = []

            def on_batch(done: int) -> None:
                if kill_at and not killed and done >= kill_at * len(docs):
                    started[-1][1].kill()
                    killed.append(done)

            t0 = time.perf_counter()
            vecs = client.embed_documents(docs, on_batch)
            secs = time.perf_counter() - t0
            stats = client.pool.stats if client.pool is not None else []
            row = {"label": label, "servers": servers, "threads_each": threads, "pool": pool,
                   "chunks": len(docs), "seconds": round(secs, 2),
                   "chunks_per_s": round(len(docs) / secs, 1),
                   "batches": [s.batches for s in stats], "failures": [s.failures for s in stats],
                   "killed_after": killed[0] if killed else None}
            results.append((row, vecs))
            if args.json:
                print(json.dumps(row), flush=True)
            print(f"{label:44} {row['chunks_per_s']:7.1f} chunks/s  ({secs:5.1f} s)  batches "
                  f"{row['batches'] or '-'}  failures {row['failures'] or '-'}", file=sys.stderr)
        finally:
            for _, proc in started:
                proc.kill()
                proc.wait()

    print(f"{len(docs)} chunks of this repository, batches of {batch}, {cores} cores",
          file=sys.stderr)
    run(f"reference: 1 sidecar, {cores} threads, no pool", 1, cores, pool=False)
    run("pool of 2 sidecars, 1 thread each", 2, max(1, cores // 2), pool=True)
    run("pool of 3 sidecars, 1 thread each", 3, 1, pool=True)
    run("pool of 3, one killed a third of the way", 3, 1, pool=True, kill_at=1 / 3)
    ref = results[0][1]
    for row, vecs in results[1:]:
        diff = float(np.abs(vecs - ref).max())
        print(f"{row['label']:44} max |vector - reference| = {diff:.2e}", file=sys.stderr)
        if diff > 1e-4:
            raise SystemExit(f"{row['label']}: vectors differ from the reference by {diff}")


if __name__ == "__main__":
    main()
