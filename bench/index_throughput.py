"""Indexing benchmark: the whole `hydra-rag index` run against raw in-process llama.cpp on the
same chunks, a no-op re-index against `git ls-files`, and peak memory — all in one run.

    python bench/index_throughput.py [--sdist flask==3.1.2]
    python bench/index_throughput.py --scifact 1000 [--rounds 1]

The corpus is a real mixed folder: the unpacked source distribution of a Python project (code,
docs, tests), fetched with `pip download --no-binary`. Work files go to bench/.work/.

`--scifact N` (issue 32) indexes the first N SciFact abstracts (one file each; 0: all 5,183)
end to end (`index --full`, the sidecar already up) with each embedder setting — the default
as it ran before (OpenMP threads spinning), the default now (sleeping), `minilm-l6-onnx` and
`minilm-l6-onnx-f32` —
idle and beside one process that keeps a core busy, interleaved; and the best raw backend
(in-process ONNX Runtime int8, 2 threads) on the same chunks, in the same conditions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"


def sh(*cmd: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd).stdout


def fetch_sdist(spec: str) -> Path:
    dl = WORK / "dl"
    dl.mkdir(parents=True, exist_ok=True)
    name = spec.split("==")[0].lower()
    tars = sorted(dl.glob(f"{name}-*.tar.gz"))
    if not tars:
        sh(sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           "-q", "-d", str(dl), spec)
        tars = sorted(dl.glob(f"{name}-*.tar.gz"))
    out = WORK / "corpus"
    folder = out / tars[-1].name.removesuffix(".tar.gz")
    if not folder.is_dir():
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tars[-1]) as tf:
            tf.extractall(out, filter="data")
    if not (folder / ".git").exists():
        # Its own repository: otherwise this checkout's .gitignore (bench/.work/) hides it,
        # and `git ls-files` below needs one anyway.
        sh("git", "init", "-q", cwd=folder)
        sh("git", "add", "-A", cwd=folder)
    return folder


def pipeline_chunks(root: Path, model: Path) -> list[str]:
    """The exact chunk texts `index` embeds: same walk, read, classify and chunker."""
    from hydra_rag.models.embed import Tokenizer
    from hydra_rag.read.chunk import chunk_text, markup_of
    from hydra_rag.read.walk import Walker, read_text

    tok = Tokenizer(str(model))
    texts = []
    for cand in Walker(root).walk().files:
        text, _ = read_text(root / cand.rel)
        if text is not None:
            texts += [c.text for c in chunk_text(text, fits=lambda s: tok.count(s) + 1 <= 512,
                                                 markup=markup_of(cand.rel))]
    return texts


def raw_llama(model: Path, texts: list[str]) -> tuple[float, int]:
    """Seconds and tokens for in-process llama.cpp at its best CPU settings."""
    import llama_cpp

    from hydra_rag.models.embed import quiet_llama

    quiet_llama()
    llm = llama_cpp.Llama(str(model), embedding=True, n_ctx=512, n_batch=512, n_ubatch=512,
                          flash_attn=True, n_threads=os.cpu_count(),
                          n_threads_batch=os.cpu_count(), verbose=False)
    tokens = sum(len(llm.tokenize(t.encode())) for t in texts)
    llm.embed(texts[:8])  # warm up
    t0 = time.perf_counter()
    for i in range(0, len(texts), 64):
        llm.embed(texts[i : i + 64])
    return time.perf_counter() - t0, tokens


def run_index(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, dict, int]:
    """Wall seconds, the --json summary and the peak RSS (KiB) of one `hydra-rag index`."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "hydra_rag", "index", str(root), "--json", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, **(env or {})})
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise SystemExit(f"index failed ({status}): {out}")
    return wall, json.loads(out), usage.ru_maxrss


def median_time(cmd: list[str], cwd: Path, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


SCIFACT_SETTINGS = {
    "minilm-l6 (llama.cpp), threads spinning (before)": ("minilm-l6", {"OMP_WAIT_POLICY": "active"}),
    "minilm-l6 (llama.cpp), threads sleeping (now)": ("minilm-l6", {}),
    "minilm-l6-onnx (ONNX Runtime int8)": ("minilm-l6-onnx", {}),
    "minilm-l6-onnx-f32 (ONNX Runtime float32)": ("minilm-l6-onnx-f32", {}),
}


def scifact_folder(n: int) -> Path:
    folder = WORK / f"scifact-index-{n or 'all'}"
    if not (folder / ".git").exists():
        folder.mkdir(parents=True, exist_ok=True)
        corpus = HERE.parent.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
        with corpus.open() as f:
            for i, line in enumerate(f):
                if n and i >= n:
                    break
                d = json.loads(line)
                text = f"# {d['title']}\n\n{d['text']}\n" if d["title"] else d["text"] + "\n"
                (folder / f"{d['_id']}.md").write_text(text, encoding="utf-8")
        sh("git", "init", "-q", cwd=folder)
    return folder


def raw_onnx(model: Path, texts: list[str]) -> float:
    """Seconds for in-process ONNX Runtime (the int8 model, 2 threads) on `texts`."""
    from hydra_rag.models.onnx_server import OnnxEmbedder

    emb = OnnxEmbedder(str(model), os.cpu_count() or 1, 512)
    emb.embed(texts[:4])
    t0 = time.perf_counter()
    for i in range(0, len(texts), 64):
        emb.embed(texts[i : i + 64])
    return time.perf_counter() - t0


def scifact(n: int, rounds: int) -> None:
    from hydra_rag.catalog import get_embedder

    for eid in ("minilm-l6-onnx", "minilm-l6-onnx-f32"):
        sh(sys.executable, "-m", "hydra_rag", "rag", "setup", "--embedder", eid)
    root = scifact_folder(n)
    model = get_embedder("minilm-l6").model_path()
    onnx_model = get_embedder("minilm-l6-onnx").model_path()
    assert model is not None and onnx_model is not None
    texts = pipeline_chunks(root, model)
    print(f"SciFact: {sum(1 for _ in root.glob('*.md'))} abstracts, {len(texts)} chunks; "
          f"{os.cpu_count()} cores; {rounds} round(s), interleaved", flush=True)
    rates: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for load in ("idle", "load"):
            busy = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    if load == "load" else None)
            try:
                took = raw_onnx(onnx_model, texts)
                rates.setdefault(("raw ONNX Runtime int8, in-process", load), []).append(
                    len(texts) / took)
                for name, (eid, env) in SCIFACT_SETTINGS.items():
                    env = {**env, "HYDRA_RAG_EMBEDDER": eid}
                    sh(sys.executable, "-m", "hydra_rag", "sidecars", "stop", "--all")
                    sh(sys.executable, "-c", "from hydra_rag.catalog import get_embedder;"
                       "from hydra_rag.config import load_settings;"
                       "from hydra_rag.models.embed import connect;"
                       f"connect(get_embedder({eid!r}), load_settings())", env=env)
                    wall, summary, _ = run_index(root, "--full", env=env)
                    rate = summary["chunks_added"] / wall
                    rates.setdefault((name, load), []).append(rate)
                    print(f"  {load:4} {name}: {summary['chunks_added']} chunks in {wall:.1f}s "
                          f"= {rate:.1f} chunks/s", flush=True)
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
    sh(sys.executable, "-m", "hydra_rag", "sidecars", "stop", "--all")
    before = next(iter(SCIFACT_SETTINGS))
    print(f"\n{'index --full, chunks/s':52} {'idle':>7} {'×':>5} {'load':>7} {'×':>5}")
    for name in ["raw ONNX Runtime int8, in-process", *SCIFACT_SETTINGS]:
        idle, load = (statistics.median(rates[(name, ld)]) for ld in ("idle", "load"))
        b_idle, b_load = (statistics.median(rates[(before, ld)]) for ld in ("idle", "load"))
        print(f"{name:52} {idle:7.1f} {idle / b_idle:5.2f} {load:7.1f} {load / b_load:5.2f}")
    print(f"(× against {before}, the same condition)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sdist", default="flask==3.1.2")
    ap.add_argument("--scifact", type=int, default=-1, metavar="N",
                    help="index N SciFact abstracts with each embedder setting (0: all)")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    if args.scifact >= 0:
        os.environ.setdefault("HYDRA_RAG_HOME", str(WORK / "home"))
        scifact(args.scifact, args.rounds)
        return

    os.environ.setdefault("HYDRA_RAG_HOME", str(WORK / "home"))
    sh(sys.executable, "-m", "hydra_rag", "rag", "setup")
    from hydra_rag.paths import dirs

    model = dirs().models / "minilm-l6.q8_0.gguf"
    root = fetch_sdist(args.sdist)
    n_files = sum(1 for _ in root.rglob("*") if _.is_file())
    print(f"corpus: {root.name} ({n_files} files), {os.cpu_count()} cores")

    texts = pipeline_chunks(root, model)
    if not texts:
        raise SystemExit(f"no chunks in {root}")
    raw_s, tokens = raw_llama(model, texts)
    print(f"raw llama.cpp in-process: {len(texts)} chunks, {tokens} tokens in {raw_s:.1f}s = "
          f"{len(texts) / raw_s:.1f} chunks/s, {tokens / raw_s:.0f} tokens/s")

    # The sidecar is warm, as it is for every run after the first one.
    sh(sys.executable, "-m", "hydra_rag", "sidecars", "stop", "--all")
    t0 = time.perf_counter()
    sh(sys.executable, "-c", "from hydra_rag.catalog import get_embedder;"
       "from hydra_rag.config import load_settings;from hydra_rag.models.embed import connect;"
       "connect(get_embedder('minilm-l6'), load_settings())")
    print(f"sidecar cold start: {time.perf_counter() - t0:.2f}s")
    wall, summary, rss = run_index(root, "--full")
    chunks = summary["chunks_added"]
    print(f"hydra-rag index --full: {summary['files_indexed']} files, {chunks} chunks in "
          f"{wall:.1f}s = {chunks / wall:.1f} chunks/s, {tokens / wall:.0f} tokens/s "
          f"({100 * raw_s / wall:.0f}% of raw llama.cpp)")
    side = json.loads(sh(sys.executable, "-m", "hydra_rag", "sidecars", "list", "--json"))[0]
    hwm = next(ln for ln in Path(f"/proc/{side['pid']}/status").read_text().splitlines()
               if ln.startswith("VmHWM"))
    print(f"peak memory: index process {rss / 1024:.0f} MiB, embedder sidecar "
          f"{int(hwm.split()[1]) / 1024:.0f} MiB")

    noop = []
    for _ in range(5):
        w, s, _ = run_index(root)
        assert s["files_indexed"] == 0 and s["chunks_added"] == 0
        noop.append(w)
    git_s = median_time(["git", "ls-files"], root)
    noop_s = statistics.median(noop)
    print(f"no-op re-index: {noop_s * 1000:.0f} ms (median of 5, whole process); "
          f"git ls-files: {git_s * 1000:.0f} ms; ratio {noop_s / git_s:.1f}x")


if __name__ == "__main__":
    main()
