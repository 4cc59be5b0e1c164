"""The chat model's threads and OpenMP wait policy, idle and with one core kept busy.

    python bench/chat_threads.py [--model smollm2-135m] [--rounds 3] [--prompts 4]

Each setting runs in a fresh process (OpenMP reads its wait policy when llama.cpp loads) with
the chat sidecar's own model parameters (hydra_rag.models.chat.sidecar_spec: the model's
context, n_batch 2048, flash attention). A prompt of the size a default chat turn sends (about
750 tokens: a system prompt, five passages of this repository's code, a question), each one
different from its first token so that nothing is reused from the one before: the time to the
first token (prompt evaluation) and the decoding rate of 64 tokens. "load" is another process
keeping one core busy (a Python loop), as a test run, a build or an indexer would. Settings
and conditions are interleaved round by round; the median over rounds and prompts is printed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# (threads, OpenMP's wait: "default" is libgomp's own (spin a while, then sleep), "active"
# spins, "passive" sleeps at once, a number spins that many times then sleeps)
# Threads "1/2": one thread decodes, two evaluate the prompt (n_threads, n_threads_batch).
SETTINGS = [("1", "default"), ("2", "default"), ("2", "active"), ("2", "passive"),
            ("2", "10000"), ("2", "100000"), ("1/2", "default"), ("1/2", "passive")]


def _env(wait: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    if wait in ("active", "passive"):
        env["OMP_WAIT_POLICY"] = wait
    elif wait != "default":
        env["GOMP_SPINCOUNT"] = wait
    return env


def _prompts(count: int, tokens: int, tokenize) -> list[str]:  # type: ignore[no-untyped-def]
    """Distinct prompts of about `tokens` tokens: code of this repository, another file each."""
    files = sorted((HERE.parent / "hydra_rag").rglob("*.py"))
    out = []
    for i in range(count):
        text = f"Passage set {i}.\n"
        for f in files[i * 7:]:
            text += f.read_text(encoding="utf-8")[:1500] + "\n"
            if len(tokenize(text)) >= tokens:
                break
        out.append(text)
    return out


def child(model: str, threads: str, context: int, count: int, tokens: int) -> None:
    """Load the model as the sidecar does and print each prompt's timings as JSON."""
    import time

    import llama_cpp

    decode, _, batch = threads.partition("/")
    llm = llama_cpp.Llama(model_path=model, n_ctx=context, n_batch=2048, n_ubatch=2048,
                          n_threads=int(decode), n_threads_batch=int(batch or decode),
                          flash_attn=True,
                          verbose=False)
    llm.create_completion("Hello", max_tokens=1, temperature=0.0)  # as the self-test does
    for text in _prompts(count, tokens, lambda t: llm.tokenize(t.encode())):
        msgs = [{"role": "system", "content": "Answer from the passages."},
                {"role": "user", "content": text + "\nQuestion: what does this code do?"}]
        start = time.perf_counter()
        first = None
        n = 0
        for piece in llm.create_chat_completion(msgs, max_tokens=64, temperature=0.0,
                                                stream=True):
            delta = piece["choices"][0]["delta"]
            if delta.get("content"):
                n += 1
                if first is None:
                    first = time.perf_counter()
        end = time.perf_counter()
        assert first is not None
        print(json.dumps({"first": first - start,
                          "decode": (n - 1) / (end - first) if n > 1 else 0.0}), flush=True)


def _busy(stop) -> None:  # type: ignore[no-untyped-def]
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--settings", default="", help="e.g. 1/2:passive,2:active (default: all)")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=700)
    ap.add_argument("--child", nargs=4, metavar=("MODEL", "THREADS", "CONTEXT", "COUNT"))
    args = ap.parse_args()
    if args.child:
        m, t, c, n = args.child
        child(m, t, int(c), int(n), args.tokens)
        return
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    subprocess.run([sys.executable, "-m", "hydra_rag", "models", "pull", args.model],
                   check=True, capture_output=True)
    from hydra_rag.catalog import get_model

    model = get_model(args.model)
    path = str(model.model_path())
    settings = [tuple(x.split(":")) for x in args.settings.split(",")] if args.settings \
        else SETTINGS
    results: dict[tuple[str, str, bool], list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for busy in (False, True):
            stop = multiprocessing.Event()
            worker = multiprocessing.Process(target=_busy, args=(stop,), daemon=True)
            if busy:
                worker.start()
            try:
                for threads, wait in settings:
                    env = _env(wait)
                    proc = subprocess.run(
                        [sys.executable, __file__, "--tokens", str(args.tokens), "--child",
                         path, threads, str(model.context), str(args.prompts)],
                        env=env, capture_output=True, text=True, check=True)
                    rows = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
                    results.setdefault((threads, wait, busy), []).extend(rows)
            finally:
                stop.set()
                if busy:
                    worker.join()
    print(f"model {args.model} · prompts of ~{args.tokens} tokens · {args.rounds} rounds × "
          f"{args.prompts} prompts · {os.cpu_count()} cores")
    print("| threads | OpenMP waits | idle: first token s | idle: decode tok/s | "
          "load: first token s | load: decode tok/s |")
    print("|---|---|---|---|---|---|")
    for threads, wait in settings:
        cells = []
        for busy in (False, True):
            rows = results[(threads, wait, busy)]
            cells += [f"{statistics.median(r['first'] for r in rows):.2f}",
                      f"{statistics.median(r['decode'] for r in rows):.0f}"]
        name = {"active": "spin", "passive": "sleep at once", "default": "libgomp's default"}
        print(f"| {threads} | {name.get(wait, f'spin {wait}, then sleep')} | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
