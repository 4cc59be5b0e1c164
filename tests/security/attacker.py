"""What another local account tries against the owner's hydra-rag; run by tests/security as
that account, with the system's Python and its standard library only (the owner's virtual
environment is not the attacker's to use).

    python3 attacker.py SCENE.json

SCENE names the ports and paths the attacker knows or could find out (ports by scanning,
paths by guessing the usual places). The script prints one JSON object: for each attempt, what
came back (an HTTP status, "denied", or the bytes it could read), so the test can say which
door opened.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import sys

READ_LIMIT = 1 << 20


def http_try(port: int, method: str, path: str, body: object = None,
             headers: dict[str, str] | None = None) -> dict[str, object]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    data = None if body is None else json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            **(headers or {})}
    try:
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        text = resp.read(READ_LIMIT).decode("utf-8", "replace")
        return {"status": resp.status, "body": text,
                "headers": {k.lower(): v for k, v in resp.getheaders()}}
    except OSError as exc:
        return {"status": None, "body": f"{type(exc).__name__}: {exc}", "headers": {}}
    finally:
        conn.close()


def read_try(path: str) -> dict[str, object]:
    try:
        with open(path, "rb") as f:
            return {"read": f.read(READ_LIMIT).decode("utf-8", "replace")}
    except OSError as exc:
        return {"denied": f"{type(exc).__name__}: {exc.strerror}"}


def walk_and_read(top: str) -> dict[str, object]:
    """Every file under `top` that this account can list and open, with its text."""
    found: dict[str, object] = {}
    refused: list[str] = []
    for dirpath, _dirs, files in os.walk(top, onerror=lambda e: refused.append(str(e))):
        for name in files:
            found[os.path.join(dirpath, name)] = read_try(os.path.join(dirpath, name))
    return {"files": found, "refused": refused}


def warm_try(path: str) -> dict[str, object]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(path)
        s.sendall(b"x" * 16)
        return {"connected": True, "answer": s.recv(4096).decode("utf-8", "replace")}
    except OSError as exc:
        return {"connected": False, "denied": f"{type(exc).__name__}: {exc.strerror}"}
    finally:
        s.close()


def main() -> None:
    with open(sys.argv[1]) as f:
        scene = json.loads(f.read())
    out: dict[str, object] = {"uid": os.getuid()}
    q = scene["question"]
    serve = scene["serve_port"]
    out["serve"] = {
        "search": http_try(serve, "GET", f"/api/search?q={q.replace(' ', '+')}"),
        "get": http_try(serve, "GET", "/api/get?path=" + scene["private_name"]),
        "sessions": http_try(serve, "GET", "/api/sessions"),
        "models": http_try(serve, "GET", "/v1/models"),
        "chat": http_try(serve, "POST", "/v1/chat/completions",
                         {"messages": [{"role": "user", "content": q}],
                          "max_tokens": 8}),
        "mcp": http_try(serve, "POST", "/mcp",
                        {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "search", "arguments": {"query": q}}}),
        "login-guess": http_try(serve, "GET", "/?token=guess"),
    }
    out["sidecars"] = {}
    for sid, port in scene["sidecars"].items():
        out["sidecars"][sid] = {
            "models": http_try(port, "GET", "/v1/models"),
            "embed": http_try(port, "POST", "/v1/embeddings", {"input": q}),
            "chat": http_try(port, "POST", "/v1/chat/completions",
                             {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}),
            "from-a-page": http_try(port, "OPTIONS", "/v1/embeddings", headers={
                "Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}),
            "rebinding": http_try(port, "GET", "/v1/models", headers={"Host": "evil.example"}),
        }
    out["index"] = walk_and_read(scene["index"])
    out["home"] = walk_and_read(scene["home"])
    out["known-files"] = {p: read_try(p) for p in scene["known_files"]}
    out["private-file"] = read_try(scene["private_file"])
    out["proc"] = {str(pid): {"cmdline": read_try(f"/proc/{pid}/cmdline"),
                              "environ": read_try(f"/proc/{pid}/environ")}
                   for pid in scene["pids"]}
    out["warm"] = warm_try(scene["warm_socket"]) if scene.get("warm_socket") else None
    print(json.dumps(out))


if __name__ == "__main__":
    main()
