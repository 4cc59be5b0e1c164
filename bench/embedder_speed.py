"""Embedding speed on the CPU: each backend and setting on the same chunks, idle and under a
competing load, in interleaved rounds, with how far each one's vectors are from today's default.

    python bench/embedder_speed.py [--texts 96] [--rounds 3] [--set scifact]
    python bench/embedder_speed.py --embedders minilm-l6,multilingual-e5-small [--set man-de]

The first form (issue 32) runs every setting in a fresh process (OpenMP reads its settings
when llama.cpp loads) on the first chunks of a retrieval_quality.py set as the chunker cuts
them: llama.cpp (q8_0, flash attention, one sequence per decode as the sidecar runs it) with 1 and
2 threads, OpenMP threads spinning while they wait (the default; the sidecars before issue 32)
or sleeping (`OMP_WAIT_POLICY=passive`, the sidecars now), and several sequences per decode
(n_batch 2048); ONNX Runtime with the int8 model `minilm-l6-onnx` serves (threads spinning or
not) and with the float32 one `minilm-l6-onnx-f32` serves. The competing load is one process that keeps a core
busy (a test run, another indexer). Tokens are counted with the model's own tokenizer; the
cosine is against the vectors of today's default (llama.cpp q8_0). Models are made by
`rag setup` from the weights the catalog fetches.

The second form compares installed embedders (in-process llama.cpp, the sidecar's settings).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def texts_of(name: str, n: int) -> list[str]:
    import retrieval_quality as rq

    from hydra_rag.read.chunk import chunk_text, markup_of

    path = rq.SETS[name][0] / "corpus.jsonl"
    if name.startswith("man-") and not path.exists():
        rq.manpages.build(name.removeprefix("man-"))
    out: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            text = f"# {d['title']}\n\n{d['text']}\n" if d["title"] else d["text"]
            out += [c.text for c in chunk_text(text, markup=markup_of("x.md"))]
            if len(out) >= n:
                break
    return out[:n]


def compare_models(args: argparse.Namespace) -> None:
    """Installed embedders on the same texts, in-process llama.cpp (the second form)."""
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    import llama_cpp

    from hydra_rag.catalog import get_embedder
    from hydra_rag.models.embed import quiet_llama

    quiet_llama()
    texts = texts_of(args.set, args.texts)
    ref = None
    for eid in args.embedders.split(","):
        emb = get_embedder(eid)
        path = emb.model_path()
        if path is None or not path.is_file():
            raise SystemExit(f"{eid} is not installed: hydra-rag rag setup --embedder {eid}")
        llm = llama_cpp.Llama(str(path), embedding=True, n_ctx=512, n_batch=512, n_ubatch=512,
                              flash_attn=True, verbose=False)
        unigram = llm.metadata.get("tokenizer.ggml.model") == "t5"  # as embed.Tokenizer does
        batch = []
        for t in texts:
            t = emb.document_prefix + (" ".join(t.split()) if unigram else t)
            ids = llm.tokenize(t.encode(), add_bos=True, special=False)
            if len(ids) > 512:  # the chunker's token guard would have cut it for this model
                t = llm.detokenize(ids[1:500]).decode(errors="ignore")
            batch.append(t)
        tokens = sum(len(llm.tokenize(t.encode(), add_bos=True, special=False)) for t in batch)
        llm.embed(batch[:4])  # warm up
        t0 = time.perf_counter()
        for i in range(0, len(batch), 16):
            llm.embed(batch[i : i + 16])
        dt = time.perf_counter() - t0
        rate = len(batch) / dt
        ref = ref or rate
        print(f"{eid:24} {len(batch)} texts in {dt:.1f}s: {rate:.1f} texts/s, "
              f"{tokens / dt:,.0f} tokens/s ({tokens} tokens), {ref / rate:.2f}x the time of "
              f"the first", flush=True)
        del llm


WORK = HERE / ".work" / "speed"
# name: (backend, threads, environment, extra)
SETTINGS: dict[str, tuple[str, int, dict[str, str], dict[str, Any]]] = {
    "llama.cpp q8_0, 1 thread, spinning": ("llama", 1, {"OMP_WAIT_POLICY": "active"}, {}),
    "llama.cpp q8_0, 2 threads, spinning (before)": ("llama", 2, {"OMP_WAIT_POLICY": "active"}, {}),
    "llama.cpp q8_0, 1 thread, passive": ("llama", 1, {"OMP_WAIT_POLICY": "passive"}, {}),
    "llama.cpp q8_0, 2 threads, passive (now)": ("llama", 2, {"OMP_WAIT_POLICY": "passive"}, {}),
    "llama.cpp q8_0, 2 threads, passive, n_batch 2048": (
        "llama", 2, {"OMP_WAIT_POLICY": "passive"}, {"n_batch": 2048}),
    "ONNX Runtime int8, 1 thread": ("onnx", 1, {}, {}),
    "ONNX Runtime int8, 2 threads, spinning": ("onnx", 2, {}, {"spin": True}),
    "ONNX Runtime int8, 2 threads (minilm-l6-onnx)": ("onnx", 2, {}, {}),
    "ONNX Runtime float32, 2 threads (minilm-l6-onnx-f32)": ("onnx-f32", 2, {}, {}),
}
REFERENCE = "llama.cpp q8_0, 2 threads, spinning (before)"


def _models() -> dict[str, Path]:
    """The GGUF (q8_0) and the ONNX files (int8 and float32), as `rag setup` makes them from
    the weights the catalog fetches."""
    from hydra_rag.catalog import get_embedder
    from hydra_rag.models.install import install_model

    return {key: install_model(get_embedder(eid), lambda _m: None)
            for key, eid in (("llama", "minilm-l6"), ("onnx", "minilm-l6-onnx"),
                             ("onnx-f32", "minilm-l6-onnx-f32"))}


def _worker(spec: dict[str, Any]) -> None:
    """One setting in this fresh process: embed the texts once to warm up, then time them."""
    import numpy as np

    texts = json.loads(Path(spec["texts"]).read_text())
    threads, extra = spec["threads"], spec["extra"]
    if spec["backend"] == "llama":
        import llama_cpp

        from hydra_rag.models.embed import quiet_llama

        quiet_llama()
        nb = extra.get("n_batch", 512)
        llm = llama_cpp.Llama(spec["model"], embedding=True, n_ctx=nb, n_batch=nb, n_ubatch=nb,
                              n_threads=threads, n_threads_batch=threads, flash_attn=True,
                              verbose=False)

        def run(batch: list[str]) -> list[list[float]]:
            return llm.embed(batch)
    else:
        from hydra_rag.models.onnx_server import OnnxEmbedder

        model = OnnxEmbedder(spec["model"], threads, 512, spin=bool(extra.get("spin")))

        def run(batch: list[str]) -> list[list[float]]:
            return model.embed(batch)[0]
    run(texts[:8])
    t0 = time.perf_counter()
    vecs = []
    for i in range(0, len(texts), 64):  # the client's batch
        vecs += run(texts[i : i + 64])
    took = time.perf_counter() - t0
    arr = np.asarray(vecs, np.float32)
    arr /= np.linalg.norm(arr, axis=1, keepdims=True)
    np.save(spec["out"], arr)
    print(json.dumps({"seconds": took}))


def _busy() -> subprocess.Popen[bytes]:
    """The competing load: one process keeping a core busy."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def compare_backends(args: argparse.Namespace) -> None:
    import numpy as np

    WORK.mkdir(parents=True, exist_ok=True)
    models = _models()
    from hydra_rag.models.onnx_server import OnnxEmbedder

    counter = OnnxEmbedder(str(models["onnx"]), 1, 512)
    texts = []
    for t in texts_of(args.set, args.texts):  # no text past the context (the chunker's guard)
        ids = counter.ids([t])[0]
        texts.append(t if len(ids) <= 500 else counter.tokenizer.decode(ids[1:490]))
    tokens = sum(len(x) for x in counter.ids(texts))
    (WORK / "texts.json").write_text(json.dumps(texts))
    names = [n for n in SETTINGS if not args.only or any(o in n for o in args.only.split(","))]
    if REFERENCE not in names:
        names.insert(0, REFERENCE)
    print(f"{len(texts)} chunks of {args.set}, {tokens} tokens ({tokens / len(texts):.0f} a "
          f"chunk); {os.cpu_count()} cores; {args.rounds} interleaved rounds", flush=True)
    rates: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for load in ("idle", "load"):
            busy = _busy() if load == "load" else None
            try:
                for name in names:
                    backend, threads, env, extra = SETTINGS[name]
                    out = WORK / f"vec-{names.index(name)}.npy"
                    spec = {"backend": backend, "threads": threads, "extra": extra,
                            "model": str(models[backend]), "texts": str(WORK / "texts.json"),
                            "out": str(out)}
                    proc = subprocess.run(
                        [sys.executable, __file__, "--worker", json.dumps(spec)],
                        env={**os.environ, **env}, capture_output=True, text=True)
                    if proc.returncode != 0:
                        raise SystemExit(f"{name}: {proc.stderr[-2000:]}")
                    took = json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]
                    rates.setdefault((name, load), []).append(tokens / took)
                    print(f"  round {r + 1} {load:4} {name}: {tokens / took:,.0f} tokens/s",
                          flush=True)
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
    ref = np.load(WORK / f"vec-{names.index(REFERENCE)}.npy")
    base = {ld: statistics.median(rates[(REFERENCE, ld)]) for ld in ("idle", "load")}
    print(f"\n{'setting':52} {'idle tok/s':>10} {'×':>5} {'load tok/s':>10} {'×':>5} "
          f"{'cos mean':>8} {'cos min':>8}")
    for name in names:
        vec = np.load(WORK / f"vec-{names.index(name)}.npy")
        cos = (vec * ref).sum(axis=1)
        idle, load = (statistics.median(rates[(name, ld)]) for ld in ("idle", "load"))
        print(f"{name:52} {idle:10,.0f} {idle / base['idle']:5.2f} {load:10,.0f} "
              f"{load / base['load']:5.2f} {cos.mean():8.4f} {cos.min():8.4f}")
    print(f"(× is against {REFERENCE}, the same condition; p50 of {args.rounds} rounds)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--embedders", default="",
                    help="compare these installed embedders instead (the second form)")
    ap.add_argument("--set", default="")
    ap.add_argument("--texts", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="settings whose names contain one of these")
    ap.add_argument("--worker", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    if args.worker:
        _worker(json.loads(args.worker))
    elif args.embedders:
        args.set, args.texts = args.set or "man-de", args.texts or 200
        compare_models(args)
    else:
        args.set, args.texts = args.set or "scifact", args.texts or 96
        compare_backends(args)


if __name__ == "__main__":
    main()
