"""A 100,000-file tree (issue 19): memory of `hydra-rag index` as the folder grows, and the time of
a no-op re-index against `git ls-files` and `git status` on the same tree.

    python bench/big_tree.py [--files 10000 30000 100000] [--repeat 5] [--json] [--keep]

The tree is generated (seeded, reproducible): pkgNN/modNN/subN/ folders of 20 files each; 70% are
`.py` files of 2–8 real Python functions from CoSQA, 30% `.md` files of 1–4 real SciFact
abstracts; plus a `.gitignore` (`build/`, `*.log`) and ignored files under it, and the whole tree
committed in its own git repository (git ls-files/status read the same files). The smaller sizes
are prefixes of the largest (the same files).

The embedder is a *stand-in*: a local OpenAI-compatible /v1/embeddings server (this file, with
--serve-embedder) returning a deterministic unit vector per text (a hash seeds it), so that the
first index of 100,000 files takes minutes, not the hours minilm-l6 would need on 2 cores. What
is measured is hydra-rag's own work and memory: walk, read, chunk (with the real tokenizer),
LanceDB writes, files.db (files.json before it), the full-text and vector indexes. Real
embeddings would add their time, not memory (a batch at a time).

For each size: the first index (wall time, peak RSS of the `hydra-rag index` process from
getrusage; and, from its RSS sampled every 0.2 s, the peak until the last file was recorded and
the peak after, while LanceDB builds the full-text and vector indexes), then --repeat no-op runs
of `hydra-rag index` (p50 wall time), and the same number of `git ls-files` and `git status
--porcelain` (p50, the references). Plus the no-op run in process (`index_folder` called again
in a warm Python: no interpreter start or imports). Peak RSS of a no-op run too. Work files in
bench/.work/big_tree/ (the tree is kept; its index is removed before each first index).
Progress on stderr; a table on stdout, or a JSON line per size.
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "big_tree"
DATA = HERE.parent.parent / "shared" / "data"
DIMS = 384
PER_DIR = 20


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the tree ------------------------------------------------------------------------------------


def _jsonl(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def make_tree(root: Path, n: int, seed: int = 19) -> None:
    """n files (and ignored extras) under root, in its own git repository with one commit.
    Files already there are kept: a bigger n adds to a smaller tree."""
    marker = root / ".files"
    have = int(marker.read_text()) if marker.is_file() else 0
    if have >= n:
        return
    code = [d["text"] for d in _jsonl(DATA / "cosqa" / "corpus.jsonl")]
    prose = [f"# {d['title']}\n\n{d['text']}\n" for d in _jsonl(DATA / "scifact" / "corpus.jsonl")]
    root.mkdir(parents=True, exist_ok=True)
    (root / ".gitignore").write_text("build/\n*.log\n")
    for i in range(have, n):
        rng = random.Random(seed * 1_000_003 + i)
        d = root / f"pkg{i // 5000:02d}" / f"mod{i // 200 % 25:02d}" / f"sub{i // PER_DIR % 10}"
        if i % PER_DIR == 0:
            d.mkdir(parents=True, exist_ok=True)
            (d / "run.log").write_text("ignored\n" * 20)  # ignored by *.log
        if rng.random() < 0.7:
            text = "\n\n".join(rng.choice(code) for _ in range(rng.randint(2, 8))) + "\n"
            (d / f"f{i}.py").write_text(text, encoding="utf-8")
        else:
            text = "\n".join(rng.choice(prose) for _ in range(rng.randint(1, 4)))
            (d / f"f{i}.md").write_text(text, encoding="utf-8")
    build = root / "build"
    build.mkdir(exist_ok=True)
    for j in range(200):
        (build / f"out{j}.py").write_text("x = 1\n")  # ignored by build/
    if not (root / ".git").is_dir():
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@local", "commit", "-qm",
                    f"{n} files"], cwd=root, check=True)
    marker.write_text(str(n))


def prefix_tree(big: Path, small: Path, n: int) -> None:
    """The first n files of the big tree, as a folder of their own (hard links: no copies)."""
    if (small / ".files").is_file() and int((small / ".files").read_text()) == n:
        return
    shutil.rmtree(small, ignore_errors=True)
    small.mkdir(parents=True)
    shutil.copy(big / ".gitignore", small / ".gitignore")
    for i in range(n):
        rel = f"pkg{i // 5000:02d}/mod{i // 200 % 25:02d}/sub{i // PER_DIR % 10}"
        src = big / rel
        dst = small / rel
        if i % PER_DIR == 0:
            dst.mkdir(parents=True, exist_ok=True)
            os.link(src / "run.log", dst / "run.log")
        name = f"f{i}.py" if (src / f"f{i}.py").exists() else f"f{i}.md"
        os.link(src / name, dst / name)
    subprocess.run(["git", "init", "-q"], cwd=small, check=True)
    subprocess.run(["git", "add", "-A"], cwd=small, check=True)
    subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@local", "commit", "-qm",
                    f"{n} files"], cwd=small, check=True)
    (small / ".files").write_text(str(n))


# -- the stand-in embedder ----------------------------------------------------------------------


def vector(text: str) -> list[float]:
    import numpy as np

    seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")
    v = np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
    return (v / np.linalg.norm(v)).round(6).tolist()


class Embeddings(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = [{"object": "embedding", "index": i, "embedding": vector(t)}
                for i, t in enumerate(body["input"])]
        out = json.dumps({"object": "list", "data": data, "model": body.get("model")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self) -> None:  # noqa: N802
        out = b'{"status":"ok"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: object) -> None:
        pass


def serve_embedder(port: int) -> None:
    http.server.ThreadingHTTPServer(("127.0.0.1", port), Embeddings).serve_forever()


# -- measuring ----------------------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
          samples: list[tuple[float, int]] | None = None) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (KiB) and stdout of one command (its own process); with
    `samples`, its RSS every 0.2 s as (seconds from start, KiB)."""
    with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out_f, stderr=err_f, text=True)
        if samples is not None:
            def sample() -> None:
                while p.returncode is None:
                    samples.append((time.perf_counter() - t0, rss_kib(p.pid)))
                    time.sleep(0.2)
            threading.Thread(target=sample, daemon=True).start()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err[-3000:]}")
    return wall, usage.ru_maxrss, out


def hydra(*args: str) -> list[str]:
    return [sys.executable, "-m", "hydra_rag", *args]


def measure(root: Path, n: int, repeat: int, env: dict[str, str]) -> dict[str, object]:
    shutil.rmtree(root / ".hydra-index", ignore_errors=True)
    log(f"[{n}] first index …")
    samples: list[tuple[float, int]] = []
    start = time.time()
    first_s, first_kib, out = timed(hydra("index", str(root), "--json"), root, env, samples)
    report = json.loads(out)
    chunks = sum(report["chunks_total"].values())
    # The files are all recorded when the record was last written: what comes after is the
    # full-text and vector indexes' build (LanceDB's).
    record = root / ".hydra-index" / "files.db"
    if not record.exists():
        record = root / ".hydra-index" / "files.json"
    files_done = record.stat().st_mtime - start
    peak_files = max((k for t, k in samples if t <= files_done), default=0)
    peak_finish = max((k for t, k in samples if t > files_done), default=0)
    log(f"[{n}] first index {first_s:.1f} s (files recorded at {files_done:.1f} s), peak "
        f"{first_kib / 1024:.0f} MiB ({peak_files / 1024:.0f} MiB before), {chunks} chunks")
    noop, noop_kib = [], 0
    for _ in range(repeat):
        s, kib, out = timed(hydra("index", str(root), "--json"), root, env)
        r = json.loads(out)
        assert r["files_indexed"] == 0 and r["files_removed"] == 0, r
        noop.append(s)
        noop_kib = max(noop_kib, kib)
    ls = [timed(["git", "ls-files"], root)[0] for _ in range(repeat)]
    st = [timed(["git", "status", "--porcelain"], root)[0] for _ in range(repeat)]
    # In process: the library call alone, the interpreter warm.
    code = ("import sys,time,json;from pathlib import Path;from hydra_rag.config import load_settings;"
            "from hydra_rag.index import index_folder;s=load_settings();r=Path(sys.argv[1]);"
            "index_folder(r,s);t=[]\n"
            f"for _ in range({repeat}):\n t0=time.perf_counter();index_folder(r,s);"
            "t.append(time.perf_counter()-t0)\nprint(json.dumps(t))")
    inproc = json.loads(timed([sys.executable, "-c", code, str(root)], root, env)[2])
    row = {
        "files": n, "chunks": chunks,
        "first_index_s": round(first_s, 1), "files_recorded_s": round(files_done, 1),
        "first_index_peak_mib": round(first_kib / 1024),
        "peak_while_files_mib": round(peak_files / 1024),
        "peak_while_indexes_mib": round(peak_finish / 1024),
        "noop_p50_s": round(statistics.median(noop), 3),
        "noop_inprocess_p50_s": round(statistics.median(inproc), 3),
        "noop_peak_mib": round(noop_kib / 1024),
        "git_ls_files_p50_s": round(statistics.median(ls), 3),
        "git_status_p50_s": round(statistics.median(st), 3),
        "record_mib": round(record.stat().st_size / 2**20, 1),
    }
    log(f"[{n}] {row}")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--port", type=int, default=18919)
    ap.add_argument("--serve-embedder", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_embedder:
        serve_embedder(args.port)
        return
    sizes = sorted(args.files)
    big = WORK / f"tree{sizes[-1]}"
    log(f"generating {sizes[-1]} files in {big} …")
    make_tree(big, sizes[-1])
    server = threading.Thread(target=serve_embedder, args=(args.port,), daemon=True)
    server.start()
    env = {**os.environ, "HYDRA_RAG_EMBEDDER_URL": f"http://127.0.0.1:{args.port}/v1"}
    rows = []
    for n in sizes:
        root = big if n == sizes[-1] else WORK / f"tree{n}"
        if root is not big:
            prefix_tree(big, root, n)
        rows.append(measure(root, n, args.repeat, env))
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    cols = list(rows[0])
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r[c]) for c in cols))


if __name__ == "__main__":
    main()
