"""Speed of the llama.cpp build hydra-rag chooses (probed instruction sets, `-DGGML_NATIVE=OFF`)
against llama-cpp-python's default native build (`-march=native`), in the same run.

    python bench/llama_builds.py [--rounds 3] [--texts 256] [--tokens 128] [--with-avx2]

Both builds are compiled from the same llama-cpp-python source into bench/.work/llama-builds/
(reused while their flags are unchanged; about 5 minutes each on two cores), then measured in
alternating child processes with the same settings as the sidecars: embedding throughput of
the default embedder (SciFact chunks as the chunker cuts them, flash attention, batches of 16
texts) and decoding speed of the default chat model. Native is the reference; run it where the
native build works (the point of the probed build is the machines where it does not).
`--with-avx2` adds the probed build without AVX-512 (what a portable build would give up).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORK = HERE / ".work"
BUILDS = WORK / "llama-builds"
sys.path.insert(0, str(REPO))


def ensure_build(name: str, args: list[str], req: str) -> Path:
    """A llama-cpp-python built with `args` under BUILDS/name (kept while args are the same)."""
    target = BUILDS / name
    stamp = target / "bench-stamp.json"
    want = {"requirement": req, "cmake_args": args}
    if stamp.is_file() and json.loads(stamp.read_text()) == want:
        return target
    shutil.rmtree(target, ignore_errors=True)
    print(f"building {name}: {' '.join(args)}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q",
         "--no-cache-dir", "--no-binary", "llama-cpp-python", "--no-deps", "--target",
         str(target), req],
        check=True, env={**os.environ, "CMAKE_ARGS": " ".join(args), "FORCE_CMAKE": "1"},
    )
    print(f"built {name} in {time.monotonic() - t0:.0f}s", file=sys.stderr)
    stamp.write_text(json.dumps(want))
    return target


def texts(n: int) -> list[str]:
    from hydra_rag.read.chunk import chunk_text, markup_of

    corpus = REPO.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
    out: list[str] = []
    with corpus.open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out += [c.text for c in chunk_text(f"# {d['title']}\n\n{d['text']}\n",
                                               markup=markup_of("x.md"))]
            if len(out) >= n:
                break
    return out[:n]


def measure(embedder: str, chat: str, n_texts: int, n_tokens: int) -> dict[str, object]:
    """In this process (whichever llama_cpp PYTHONPATH put first): the two rates."""
    import llama_cpp

    threads = os.cpu_count() or 1
    emb = llama_cpp.Llama(embedder, embedding=True, n_ctx=512, n_batch=512, n_ubatch=512,
                          n_threads=threads, n_threads_batch=threads, flash_attn=True,
                          verbose=False)
    docs = texts(n_texts)
    tokens = sum(len(emb.tokenize(t.encode(), add_bos=True)) for t in docs)
    emb.embed(docs[:16])  # warm up
    t0 = time.perf_counter()
    for i in range(0, len(docs), 16):
        emb.embed(docs[i:i + 16])
    embed_s = time.perf_counter() - t0
    llm = llama_cpp.Llama(chat, n_ctx=1024, n_threads=threads, n_threads_batch=threads,
                          flash_attn=True, verbose=False)
    prompt = "<|im_start|>user\nWrite a long story about a lighthouse.<|im_end|>\n" \
             "<|im_start|>assistant\n"
    llm(prompt, max_tokens=8, temperature=0.0)  # warm up
    t0 = time.perf_counter()
    out = llm(prompt, max_tokens=n_tokens, temperature=0.0)
    chat_s = time.perf_counter() - t0
    made = out["usage"]["completion_tokens"]  # type: ignore[index]
    return {"file": llama_cpp.__file__, "system_info": llama_cpp.llama_print_system_info().decode(),
            "embed_tokens_per_s": tokens / embed_s, "chat_tokens_per_s": made / chat_s}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--texts", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--with-avx2", action="store_true",
                    help="also the probed build without AVX-512 and its extensions")
    ap.add_argument("--measure", nargs=2, metavar=("EMBEDDER", "CHAT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(*args.measure, args.texts, args.tokens)))
        return
    os.environ.setdefault("HYDRA_RAG_HOME", str(WORK / "home"))
    from hydra_rag.catalog import get_embedder, get_model
    from hydra_rag.llamacpp import probe
    from hydra_rag.llamacpp.build import requirement

    for cmd in (["rag", "setup"], ["models", "pull", "smollm2-135m"]):
        subprocess.run([sys.executable, "-m", "hydra_rag", *cmd], check=True,
                       stdout=subprocess.DEVNULL)
    embedder, chat = get_embedder("minilm-l6").model_path(), get_model("smollm2-135m").model_path()
    req = requirement()
    probed = probe.cmake_args(probe.chosen(probe.probe()))
    builds = {"native": ensure_build("native", ["-DGGML_NATIVE=ON"], req),
              "probed": ensure_build("probed", probed, req)}
    if args.with_avx2:
        no512 = [a.replace("=ON", "=OFF") if "AVX512" in a or "AMX" in a else a for a in probed]
        builds["avx2"] = ensure_build("avx2", no512, req)
    rates: dict[str, dict[str, list[float]]] = {n: {"embed": [], "chat": []} for n in builds}
    for r in range(args.rounds):
        order = list(builds) if r % 2 == 0 else list(reversed(builds))
        for name in order:
            env = {**os.environ, "PYTHONPATH": f"{builds[name]}{os.pathsep}{REPO}"}
            proc = subprocess.run(
                [sys.executable, __file__, "--measure", str(embedder), str(chat),
                 "--texts", str(args.texts), "--tokens", str(args.tokens)],
                capture_output=True, text=True, env=env, check=True)
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            assert str(builds[name]) in got["file"], f"{name} measured {got['file']}"
            if r == 0:
                print(f"{name}: {got['system_info']}")
            rates[name]["embed"].append(got["embed_tokens_per_s"])
            rates[name]["chat"].append(got["chat_tokens_per_s"])
    print(f"\nmedian of {args.rounds} alternating rounds; {args.texts} SciFact chunks, "
          f"{args.tokens} decoded tokens; {os.cpu_count()} threads")
    print(f"{'build':<8} {'embed tok/s':>12} {'vs native':>10} {'chat tok/s':>11} {'vs native':>10}")
    ref = {k: statistics.median(v) for k, v in rates["native"].items()}
    for name in builds:
        e, c = statistics.median(rates[name]["embed"]), statistics.median(rates[name]["chat"])
        print(f"{name:<8} {e:>12.0f} {e / ref['embed']:>9.2f}x {c:>11.1f} {c / ref['chat']:>9.2f}x")
    print("flags of probed: " + " ".join(probed))


if __name__ == "__main__":
    main()
