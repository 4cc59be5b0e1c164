"""Serving latency: `hydra-rag serve` next to the library calls it makes, in the same run.

    python bench/serve_latency.py [--project click==8.1.7] [--queries 100] [--turns 5]
                                  [--max-tokens 64]

(a) Search: the unpacked source distribution of --project, indexed; the queries are the exact
strings bench/exact_strings.py samples from it (identifiers, messages, dotted and hyphenated
names, questions naming one; fixed seed). Each of 1, 4 and 16 clients (a thread with its own
keep-alive connection) sends every query once, starting at its own offset, to GET /api/search
(k=10); p50/p95 latency and requests/s. The reference runs the same queries in this process,
with the same number of threads, through `Scope.search` — what the route calls, with its pool
of two warm searchers — and, for one client, through a bare `Searcher.search` too.

(b) A chat turn: the same question with the same max_tokens at temperature 0, streamed through
POST /v1/chat/completions and answered in this process by `Chat.ask` on one chat kept open (as
the server opens its chats, so the prompt is the same but for the random nonce around the
context, a few tokens: prompt and answer lengths are printed for both); time to first token
and total, as the client sees them. The server opens a chat (and its searcher) per request:
that is part of what it costs. Before every turn a one-word request to the chat sidecar keeps
llama.cpp from reusing the previous turn's prompt; which of the two goes first alternates.
`hydra-rag ask` (a new process each time: start-up, imports, a searcher opened, health checks)
is timed as a third column.

Both share the machine's 2 cores with the embedder and chat sidecars (HYDRA_RAG_HOME defaults
to bench/.work/home, as the other benchmarks).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

QUESTIONS = [
    "How do I add a --verbose flag to a click command?",
    "How can an option read its value from an environment variable?",
    "What does the pass_context decorator do?",
    "How do I prompt the user for a password without echoing it?",
    "How are several values for one option collected?",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _row(name: str, latencies: list[float], wall: float) -> str:
    return (f"{name:<34} p50 {_percentile(latencies, 0.5) * 1000:7.1f} ms   p95 "
            f"{_percentile(latencies, 0.95) * 1000:7.1f} ms   {len(latencies) / wall:6.1f} req/s")


def _clients(n: int, queries: list[str], ask: Callable[[Any, str], Any],
             connect: Callable[[], Any]) -> tuple[list[float], float]:
    """n clients, each sending every query once from its own offset; latencies and wall time."""
    latencies: list[float] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        conn = connect()
        mine = []
        offset = i * len(queries) // n
        for q in queries[offset:] + queries[:offset]:
            t0 = time.perf_counter()
            ask(conn, q)
            mine.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(mine)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        list(pool.map(client, range(n)))
    return latencies, time.perf_counter() - t0


def _http_search(conn: http.client.HTTPConnection, q: str) -> None:
    conn.request("GET", "/api/search?" + urlencode({"q": q, "k": 10}))
    resp = conn.getresponse()
    body = resp.read()
    if resp.status != 200:
        raise SystemExit(f"/api/search answered {resp.status}: {body[:300]!r}")


Turn = tuple[float, float, int, int]  # time to first token, total, prompt and answer tokens


def _stream_turn(port: int, body: dict[str, Any]) -> Turn:
    """One streamed completion, timed as its client sees it."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", json.dumps({**body, "stream": True}),
                 {"Content-Type": "application/json"})
    resp = conn.getresponse()
    first = None
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    for line in resp:
        if not line.startswith(b"data: "):
            continue
        data = line[6:].strip()
        if data == b"[DONE]":
            break
        doc = json.loads(data)
        if "error" in doc:
            raise SystemExit(f"the server's stream failed: {doc['error']}")
        piece = doc["choices"][0]["delta"].get("content") or ""
        if doc["choices"][0]["finish_reason"]:
            usage = doc["usage"]
        elif piece and first is None:
            first = time.perf_counter()
    total = time.perf_counter() - t0
    conn.close()
    return ((first or t0 + total) - t0, total, usage["prompt_tokens"],
            usage["completion_tokens"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", default="click==8.1.7")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--turns", type=int, default=len(QUESTIONS))
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--model", default="smollm2-135m")
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    from exact_strings import KINDS, sample
    from index_throughput import fetch_sdist

    from hydra_rag import api
    from hydra_rag.config import load_settings
    from hydra_rag.models.chat import stream_chat
    from hydra_rag.search.retrieve import Searcher
    from hydra_rag.serve.scope import Scope
    from hydra_rag.store.index_dir import Store

    root = fetch_sdist(args.project)
    for cmd in (["rag", "setup"], ["models", "pull", args.model], ["index", str(root)]):
        subprocess.run([sys.executable, "-m", "hydra_rag", *cmd], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    files = sorted(Store(root).read_files())
    per_kind = -(-args.queries // len(KINDS))
    queries = [str(q["query"]) for q in sample(root, files, per_kind, 13)][: args.queries]
    print(f"{args.project}: {len(files)} files, {len(queries)} queries", file=sys.stderr)

    port = _free_port()
    log = HERE / ".work" / f"serve-{port}.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "-m", "hydra_rag", "serve", "--port",
                                   str(port), "--path", str(root)], stdout=out,
                                  stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"serve did not start; log {log}") from None
                time.sleep(0.2)
        search_part(args, root, queries, port, Scope, Searcher, load_settings)
        chat_part(args, root, port, api, stream_chat)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.unlink(missing_ok=True)


def search_part(args: Any, root: Path, queries: list[str], port: int, scope_cls: Any,
                searcher_cls: Any, load_settings: Any) -> None:
    scope = scope_cls([root])
    bare = searcher_cls([root], load_settings(), skip_broken=True)

    def http_conn() -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    # Warm-up on both sides: every query once by one client (tables and caches loaded, every
    # word of the hits stemmed once), then two at a time (both searchers of each pool open).
    for side in ((_http_search, http_conn), (lambda _c, q: scope.search(q, 10), lambda: None)):
        _clients(1, queries, *side)
        _clients(2, queries[:10], *side)
    for q in queries[:5]:
        bare.search(q, 10, methods=("vector", "bm25"))
    print(f"\n(a) search, {len(queries)} queries per client, k=10")
    lat, wall = _clients(1, queries, lambda _c, q: bare.search(q, 10,
                                                                methods=("vector", "bm25")),
                         lambda: None)
    print(_row("1 client  in-process Searcher", lat, wall))
    for n in (1, 4, 16):
        lat, wall = _clients(n, queries, lambda _c, q: scope.search(q, 10), lambda: None)
        print(_row(f"{n:>2} client(s) in-process Scope", lat, wall))
        lat_h, wall_h = _clients(n, queries, _http_search, http_conn)
        print(_row(f"{n:>2} client(s) GET /api/search", lat_h, wall_h)
              + f"   (+{(_percentile(lat_h, 0.5) - _percentile(lat, 0.5)) * 1000:.1f} ms p50)")
    scope.close()
    bare.close()


def chat_part(args: Any, root: Path, port: int, api: Any, stream_chat: Any) -> None:
    params = {"max_tokens": args.max_tokens, "temperature": 0.0}
    chat = api.open_chat(args.model, rag=[root], new=True, save=False)
    chat.params.update(params)
    flush = [{"role": "system", "content": "Reply with one word."},
             {"role": "user", "content": "Say ok."}]

    def forget() -> None:  # a different prompt in between: no reuse of the last one
        stream_chat(chat.sidecar, flush, {"max_tokens": 2}, lambda _p: None)

    def in_process(q: str) -> Turn:
        chat.reset()
        first: list[float] = []

        def on_token(_piece: str) -> None:
            if not first:
                first.append(time.perf_counter())

        t0 = time.perf_counter()
        result = chat.ask(q, on_token)
        total = time.perf_counter() - t0
        return ((first[0] if first else t0 + total) - t0, total, result.usage["prompt_tokens"],
                result.usage["completion_tokens"])

    def served(q: str) -> Turn:
        return _stream_turn(port, {"model": args.model, **params,
                                   "messages": [{"role": "user", "content": q}]})

    def cli(q: str) -> float:  # `ask` takes no model: it answers with default_model
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "hydra_rag", "ask", q, "--rag", str(root),
                        "--max-tokens", str(args.max_tokens), "--temperature", "0"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0

    in_process(QUESTIONS[0])  # warm-up: sidecars up, searcher open
    served(QUESTIONS[0])
    questions = (QUESTIONS * (1 + args.turns // len(QUESTIONS)))[: args.turns]
    rows = []
    print(f"\n(b) chat turns, max_tokens {args.max_tokens}, temperature 0, streamed")
    for i, q in enumerate(questions):
        # Alternate which goes first, so neither always meets a warmer machine.
        order = [("http", served), ("lib", in_process)]
        got: dict[str, Turn] = {}
        for name, run in order if i % 2 == 0 else order[::-1]:
            forget()
            got[name] = run(q)
        forget()
        whole = cli(q)
        rows.append((got["lib"], got["http"], whole))
        lib, http_ = got["lib"], got["http"]
        print(f"{q[:40]:40}  prompt {lib[2]:4}/{http_[2]:4} tok  answer {lib[3]:3}/{http_[3]:3} "
              f"tok  ttft {lib[0]:5.2f} / {http_[0]:5.2f} s  total {lib[1]:5.2f} / "
              f"{http_[1]:5.2f} s  ask {whole:5.2f} s")
    chat.close()
    med = statistics.median
    ttft_lib, ttft_http = med(r[0][0] for r in rows), med(r[1][0] for r in rows)
    tot_lib, tot_http = med(r[0][1] for r in rows), med(r[1][1] for r in rows)
    d_ttft = med(r[1][0] - r[0][0] for r in rows)
    d_tot = med(r[1][1] - r[0][1] for r in rows)
    print(f"median time to first token: Chat.ask {ttft_lib:.2f} s, /v1/chat/completions "
          f"{ttft_http:.2f} s, difference {d_ttft:+.2f} s ({d_ttft / ttft_lib:+.1%})")
    print(f"median total: Chat.ask {tot_lib:.2f} s, /v1/chat/completions {tot_http:.2f} s, "
          f"difference {d_tot:+.2f} s ({d_tot / tot_lib:+.1%}); hydra-rag ask "
          f"{med(r[2] for r in rows):.2f} s")


if __name__ == "__main__":
    main()
