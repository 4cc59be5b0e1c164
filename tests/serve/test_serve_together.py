"""`hydra-rag serve` with several clients at once, and a client that goes away in the middle
of a generation (the server: tests/served.py)."""

from __future__ import annotations

import http.client
import json
import random
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from conftest import run_cli, write_tree
from served import (
    LONG,
    WATER,
    Server,
    _chat_log,
    _json,
    _openai,
    _start,
    _stop,
)

# -- several clients at once ----------------------------------------------------------------


def test_sixteen_searches_at_once(server: Server) -> None:
    queries = ["how often to water tomatoes", "invalid api key", "cactus in winter",
               "stake the plants"]

    def search(q: str) -> tuple[int, list[tuple[Any, ...]]]:
        status, doc = _json(server, "GET", "/api/search?" + urlencode({"q": q, "k": 3}))
        return status, [(r["rank"], r["path"], r["line_start"], r["line_end"])
                        for r in (doc or {}).get("results", [])]

    alone = {q: search(q) for q in queries}
    assert all(status == 200 and hits for status, hits in alone.values())
    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(search, [queries[i % 4] for i in range(16)]))
    assert together == [alone[queries[i % 4]] for i in range(16)]


def test_sixteen_searches_at_once_on_a_cold_server(served_home: Path, tmp_path: Path) -> None:
    """A server that has just started meets every word of its hits for the first time: its
    concurrent searches stem words side by side (a shared stemmer failed them with 500)."""
    rng = random.Random(5)
    endings = ("ing", "ation", "ness", "ments", "ed", "ies", "ational", "fulness", "ously")

    def word() -> str:
        return "".join(rng.choice("abcdefghijklmnoprstuvw") for _ in range(rng.randint(4, 10))) \
            + rng.choice(endings)

    files = {f"notes/n{i}.md": "\n".join(" ".join(word() for _ in range(10)) for _ in range(12))
             + "\n" for i in range(48)}
    folder = write_tree(tmp_path / "words", files)
    proc = run_cli("index", str(folder), env={"HYDRA_RAG_HOME": str(served_home)})
    assert proc.returncode == 0, proc.stderr
    srv = _start(served_home, "--path", str(folder))
    try:
        def search(text: str) -> tuple[int, str]:
            status, doc = _json(srv, "GET", "/api/search?" + urlencode(
                {"q": " ".join(text.split()[:4]), "k": 10}))
            return status, doc["results"][0]["path"] if status == 200 else ""

        with ThreadPoolExecutor(16) as pool:
            got = list(pool.map(search, files.values()))
        assert got == [(200, path) for path in files], srv.output()[-2000:]
    finally:
        _stop(srv)


def _stream_events(server: Server, body: dict[str, Any], events: list[tuple[float, str]],
                   stop_after: int | None = None) -> None:
    """POST a streaming completion and note (time, data) of each server-sent event."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps({**body, "stream": True}),
                     {"Content-Type": "application/json", **server.bearer})
        resp = conn.getresponse()
        assert resp.status == 200
        for line in resp:
            if line.startswith(b"data: "):
                events.append((time.monotonic(), line[6:].decode().strip()))
                if stop_after is not None and len(events) >= stop_after:
                    return
    finally:
        conn.close()


def _text(events: list[tuple[float, str]]) -> str:
    return "".join(json.loads(d)["choices"][0]["delta"].get("content") or ""
                   for _, d in events if d != "[DONE]")


def test_two_chats_at_once_take_turns(server: Server) -> None:
    body = {"model": "smollm2-135m", "max_tokens": 24, "temperature": 0,
            "messages": [{"role": "user", "content": WATER}]}
    first: list[tuple[float, str]] = []
    second: list[tuple[float, str]] = []
    a = threading.Thread(target=_stream_events, args=(server, body, first))
    a.start()
    while a.is_alive() and not _text(first):
        time.sleep(0.05)
    assert _text(first), "the first answer ended before its first token"
    b = threading.Thread(target=_stream_events, args=(server, body, second))
    b.start()  # arrives while the first is generating
    a.join()
    b.join()
    assert first[-1][1] == "[DONE]" and second[-1][1] == "[DONE]"
    # The second turn began (its first event) only once the model had finished the first
    # answer: after its last token, the footer of sources is all that came of it. (Its own
    # [DONE] and the second's first event leave the server back to back, too close to order
    # by the times two client threads see them.)
    tokens = [t for t, d in first if d != "[DONE]" and not json.loads(d)["choices"][0][
        "finish_reason"] and not (json.loads(d)["choices"][0]["delta"].get("content") or
                                  "").startswith("\n\nSources:")]
    assert second[0][0] > tokens[-1]
    assert "Sources:" in _text(first) and "Sources:" in _text(second)

    # Not streamed: both answered, whole.
    client = _openai(server)
    with ThreadPoolExecutor(2) as pool:
        replies = list(pool.map(lambda _i: client.chat.completions.create(
            model="smollm2-135m", messages=[{"role": "user", "content": WATER}], max_tokens=8),
            range(2)))
    for reply in replies:
        assert reply.model_extra["sources"][0]["path"] == "docs/gardening.md"
        assert reply.usage.completion_tokens > 0


def _runs(log: str) -> list[int]:
    """Tokens generated by each finished generation in a llama.cpp sidecar log."""
    return [int(n) for n in re.findall(r"^llama_perf_context_print:\s+eval time =.*/\s*(\d+) "
                                       r"runs", log, re.M)]


def _since(log: Path, offset: int) -> str:
    return log.read_bytes()[offset:].decode(errors="replace")


def test_a_disconnect_stops_the_generation(server: Server, served_home: Path) -> None:
    log = _chat_log(served_home)
    short = {"model": "smollm2-135m", "max_tokens": 4, "temperature": 0,
             "messages": [{"role": "user", "content": WATER}]}
    assert _json(server, "POST", "/v1/chat/completions", short)[0] == 200  # the sidecar is up
    seen = log.stat().st_size
    events: list[tuple[float, str]] = []
    _stream_events(server, {"model": "smollm2-135m", "max_tokens": 1500, "temperature": 0,
                            "messages": [{"role": "user", "content": LONG}]}, events,
                   stop_after=8)  # then the connection is closed
    assert len(events) == 8 and all(d != "[DONE]" for _, d in events)
    assert "Llama.generate" in _since(log, seen)  # the long answer was being generated
    # The next turn is answered after the long one stopped, not after 1,500 tokens of it: the
    # sidecar generates one answer at a time and logs each one that runs to its end.
    status, doc = _json(server, "POST", "/v1/chat/completions", short)
    assert status == 200 and doc["sources"][0]["path"] == "docs/gardening.md"
    runs = _runs(_since(log, seen))
    assert runs and max(runs) < 100, _since(log, seen)[-3000:]


def test_a_disconnect_stops_an_unstreamed_generation(server: Server, served_home: Path) -> None:
    log = _chat_log(served_home)
    short = {"model": "smollm2-135m", "max_tokens": 4, "temperature": 0,
             "messages": [{"role": "user", "content": WATER}]}
    assert _json(server, "POST", "/v1/chat/completions", short)[0] == 200
    seen = log.stat().st_size
    body = json.dumps({"model": "smollm2-135m", "max_tokens": 1500, "temperature": 0,
                       "messages": [{"role": "user", "content": LONG}]}).encode()
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                 f"Authorization: Bearer {server.token}\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                 .encode() + body)
    deadline = time.monotonic() + 120
    while "Llama.generate" not in _since(log, seen):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(1)
    sock.close()  # the client gives up, mid-generation
    status, doc = _json(server, "POST", "/v1/chat/completions", short)
    assert status == 200
    runs = _runs(_since(log, seen))
    assert runs and max(runs) < 100, runs
