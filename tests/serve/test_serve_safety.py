"""`hydra-rag serve` is safe by default: a token unless turned off (the one serve keeps, read
from the login URL it prints, as a user copies it), a foreign Origin or Host, paths out of the
folders, sessions of other folders, oversize and malformed bodies are refused (the server:
tests/served.py)."""

from __future__ import annotations

import http.client
import json
import random
import re
import socket
import time
from pathlib import Path

import pytest

from conftest import free_port, run_cli
from served import (
    TOOLS,
    WATER,
    Server,
    _json,
    _mcp_tools,
    _openai,
    _post_big,
    _request,
    _start,
    _stop,
)

# -- safe by default -----------------------------------------------------------------------


def test_a_foreign_origin_is_refused(server: Server) -> None:
    evil = {"Origin": "http://evil.example"}
    chat = {"model": "smollm2-135m", "max_tokens": 2,
            "messages": [{"role": "user", "content": WATER}]}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    mcp = {"Accept": "application/json, text/event-stream"}
    for method, path, body, extra in (
            ("GET", "/api/search?q=tomatoes", None, {}),
            ("GET", "/api/get?path=docs/gardening.md", None, {}),
            ("GET", "/v1/models", None, {}),
            ("POST", "/v1/chat/completions", chat, {}),
            ("POST", "/mcp", initialize, mcp)):
        status, doc = _json(server, method, path, body, {**evil, **extra})
        assert status == 403, (path, status, doc)
        assert doc["error"]["message"] == ("requests from the web page at http://evil.example "
                                           "are refused")
        # The server's own page (same origin) and tools without a page (no Origin) get in.
        status, _ = _request(server, method, path, body and json.dumps(body), {
            "Content-Type": "application/json", **extra,
            **({"Origin": server.url} if method == "GET" else {})})
        assert status == 200, (path, status)
    # Another port of this machine is another origin too, and so is port 80, which an
    # Origin names by leaving the port out.
    for origin in ("http://127.0.0.1:1", "http://127.0.0.1", "http://localhost"):
        status, _ = _json(server, "GET", "/api/search?q=tomatoes", headers={"Origin": origin})
        assert status == 403, origin


def test_a_foreign_host_is_refused(server: Server) -> None:
    """DNS rebinding: a page of evil.example whose name now points at 127.0.0.1 sends its own
    name as Host (and no Origin, being same-origin in the browser's eyes)."""
    for method, path in (("GET", "/api/search?q=tomatoes"), ("GET", "/v1/models"),
                         ("GET", "/"), ("POST", "/mcp"), ("POST", "/v1/chat/completions")):
        status, doc = _json(server, method, path, {} if method == "POST" else None,
                            {"Host": f"evil.example:{server.port}"})
        assert status == 421, (path, status)
        assert "unknown Host 'evil.example:" in doc["error"]["message"]
    for host in (f"localhost:{server.port}", f"127.0.0.1:{server.port}"):
        status, _ = _json(server, "GET", "/v1/models", headers={"Host": host})
        assert status == 200


def test_path_escapes_through_get_are_refused(server: Server, folders: dict[str, Path]
                                              ) -> None:
    garden, outside = folders["garden"], folders["outside"]
    secret = "OUTSIDE_SECRET_42"
    for path, message in (
            ("../outside/secret.md", "`..` is not allowed here"),
            ("docs/../../outside/secret.md", "`..` is not allowed here"),
            ("%2e%2e/outside/secret.md", "`..` is not allowed here"),
            ("/etc/passwd", "/etc/passwd is not in an indexed folder"),
            (str(outside / "secret.md"), "is not in the folders searched here"),
            ("outside:secret.md", "no such file"),
            # a link out of the folder, into an indexed folder outside the scope
            ("docs/leak.md", "is not in the folders searched here"),
            (str(garden / "docs" / "leak.md"), "is not in the folders searched here"),
            (".env", ".env is not in the index of"),
            (".hydra-index/files.db", ".hydra-index/files.db is not in the index of"),
            ("garden:.env", ".env is not in the index of")):
        status, raw = _request(server, "GET", f"/api/get?path={path}")
        doc = json.loads(raw)
        assert status == 422, (path, status, doc)
        assert message in doc["error"]["message"], (path, doc)
        assert set(doc) == {"error"}
        for leaked in (secret, "abc123", "root:", "SQLite format"):
            assert leaked not in raw.decode(), (path, raw)
    # Search never shows what get refuses: the link and the .env are not indexed.
    for query, leaked in ((secret, secret), ("SECRET_TOKEN", "abc123")):
        status, doc = _json(server, "GET", f"/api/search?q={query}&k=10")
        assert status == 200 and doc["results"]
        assert leaked not in json.dumps(doc["results"])
        assert "docs/leak.md" not in {r["path"] for r in doc["results"]}


def test_oversize_bodies_are_refused(server: Server) -> None:
    for chunked in (False, True):
        answer = _post_big(server, "/v1/chat/completions", 2 << 20, chunked)
        assert answer.startswith(b"HTTP/1.1 413 "), (chunked, answer[:200])
        assert b'"the body is over 1048576 bytes"' in answer
    # MCP refuses a body announced as too long before reading it.
    assert _post_big(server, "/mcp", 2 << 20, chunked=False).startswith(b"HTTP/1.1 413 ")
    # A body just under the limit is read whole, and refused only for what it says.
    for chunked in (False, True):
        answer = _post_big(server, "/v1/chat/completions", (1 << 20) - 100, chunked)
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
        assert b"messages must be a list of 1 to 200 messages" in answer


def test_malformed_requests_get_openai_errors(server: Server) -> None:
    from openai import BadRequestError

    for body, message in (
            ("{not json", "the body is not JSON"),
            ("[]", "the body must be a JSON object"),
            ({"model": "smollm2-135m"}, "messages must be a list of 1 to 200 messages"),
            ({"messages": []}, "messages must be a list of 1 to 200 messages"),
            ({"messages": [{"role": "user", "content": "x"}] * 201}, "1 to 200 messages"),
            ({"messages": ["hello"]}, "each message needs a role"),
            ({"messages": [{"role": "tool", "content": "x"}]}, "each message needs a role"),
            ({"messages": [{"role": "user", "content": 42}]}, "content must be text"),
            ({"messages": [{"role": "user", "content": "x"},
                           {"role": "assistant", "content": "y"}]},
             "the last message must be the user's question"),
            ({"messages": [{"role": "user", "content": "  "}]}, "the last message must be"),
            ({"messages": [{"role": "user", "content": "x"}], "max_tokens": "ten"},
             "max_tokens must be a number"),
            ({"messages": [{"role": "user", "content": "x"}], "temperature": True},
             "temperature must be a number"),
            ({"messages": [{"role": "user", "content": "x"}], "rag": "garden"},
             "rag must be a list"),
            ({"messages": [{"role": "user", "content": "x"}], "model": 3},
             "model must be a string"),
            ({"messages": [{"role": "user", "content": "x"}], "session": "../etc"},
             "session must be a name")):
        status, doc = _json(server, "POST", "/v1/chat/completions", body)
        assert status == 400, (body, status, doc)
        assert doc == {"error": {"message": doc["error"]["message"],
                                 "type": "invalid_request_error"}}
        assert message in doc["error"]["message"], (body, doc)
    with pytest.raises(BadRequestError) as refused:  # as the openai client sees it
        _openai(server).chat.completions.create(
            model="smollm2-135m", messages=[{"role": "tool", "content": "x",
                                             "tool_call_id": "1"}])
    assert refused.value.status_code == 400
    assert refused.value.body == {"message": "each message needs a role: system, user or "
                                  "assistant", "type": "invalid_request_error"}


def test_token(served_home: Path, folders: dict[str, Path]) -> None:
    from openai import AuthenticationError

    srv = _start(served_home, "--path", str(folders["garden"]), "--token", "T0ken")
    try:
        chat = json.dumps({"model": "smollm2-135m", "max_tokens": 2,
                           "messages": [{"role": "user", "content": WATER}]})
        routes = [("GET", "/api/search?q=tomatoes", None), ("GET", "/api/get?path=README.md",
                                                            None),
                  ("GET", "/api/stores", None), ("GET", "/api/sessions", None),
                  ("GET", "/v1/models", None), ("POST", "/v1/chat/completions", chat),
                  ("POST", "/mcp", "{}"), ("GET", "/no/such/route", None)]
        for method, path, body in routes:
            for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "T0ken"},
                         {"Authorization": "Bearer T0ken2"}, {"Authorization": "Basic T0ken"}):
                status, raw = _request(srv, method, path, body,
                                       {"Content-Type": "application/json", **auth}, auth=False)
                assert status == 401, (path, auth, status)
                assert json.loads(raw)["error"]["message"] == (
                    "missing or wrong token: send Authorization: Bearer <token>")
        ok = {"Authorization": "Bearer T0ken"}
        for method, path, body in routes[:6]:
            status, raw = _request(srv, method, path, body,
                                   {"Content-Type": "application/json", **ok})
            assert status == 200, (path, status, raw[:300])
        # The scheme's name in any case, as HTTP says.
        for scheme in ("bearer", "BEARER"):
            assert _request(srv, "GET", "/api/stores", None,
                            {"Authorization": f"{scheme} T0ken"})[0] == 200
        # The page itself loads without the token (it asks for it); not its data.
        assert _request(srv, "GET", "/")[0] == 200
        # A token typed on the command line is in the process list: said once, at start.
        assert "in the process list" in srv.output()
        # A foreign page that somehow holds the token is still refused.
        assert _request(srv, "GET", "/v1/models", None,
                        {**ok, "Origin": "http://evil.example"})[0] == 403

        client = _openai(srv, api_key="T0ken")
        assert "smollm2-135m" in {m.id for m in client.models.list()}
        reply = client.chat.completions.create(
            model="smollm2-135m", messages=[{"role": "user", "content": WATER}], max_tokens=4)
        assert reply.model_extra["sources"][0]["path"] == "docs/gardening.md"
        with pytest.raises(AuthenticationError):
            _openai(srv, api_key="wrong").models.list()

        assert _mcp_tools(srv, ok) == TOOLS
    finally:
        _stop(srv)


def test_a_token_by_default(server: Server, served_home: Path) -> None:
    """127.0.0.1 is every local account's: without a token of its own choosing, the server
    asks for the one it keeps in the state folder, private to its owner."""
    token_file = served_home / "state" / "serve.token"
    assert server.token and server.token == token_file.read_text().strip()
    assert len(server.token) >= 40  # secrets.token_urlsafe(32)
    assert token_file.stat().st_mode & 0o777 == 0o600
    # The printed URL is the server's own, and `--print-token` gives the same token.
    assert f"open http://127.0.0.1:{server.port}/?token={server.token} — " in server.output()
    proc = run_cli("serve", "--print-token", env={"HYDRA_RAG_HOME": str(served_home)})
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, server.token + "\n", "")

    initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    mcp = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    for method, path, body, extra in (("GET", "/api/search?q=tomatoes", None, {}),
                                      ("GET", "/api/sessions", None, {}),
                                      ("GET", "/v1/models", None, {}),
                                      ("POST", "/mcp", initialize, mcp)):
        for auth in ({}, {"Authorization": "Bearer wrong"},
                     {"Authorization": f"Bearer {server.token}x"},
                     {"Cookie": f"hydra-rag-token-{server.port}=wrong"}):
            status, raw = _request(server, method, path, body, {**extra, **auth}, auth=False)
            assert status == 401, (path, auth, status)
            assert json.loads(raw)["error"]["message"] == (
                "missing or wrong token: send Authorization: Bearer <token>")
        status, raw = _request(server, method, path, body, extra)
        assert status == 200, (path, status, raw[:300])
    # The official MCP client, configured with the token as the README says.
    assert _mcp_tools(server, server.bearer) == TOOLS
    from openai import AuthenticationError

    with pytest.raises(AuthenticationError):
        _openai(server, api_key="unused").models.list()


_LOGGED = re.compile(r"^\d\d:\d\d:\d\d (GET|POST|DELETE) (\S+) (\d{3}) \d+ ms$", re.M)


def test_each_request_is_logged_in_one_line_without_the_token(server: Server) -> None:
    assert server.token
    marker = f"/api/stores-{random.randrange(10**9)}"  # this test's own requests, by path
    asked = [("GET", "/api/stores", None, True), ("GET", marker, None, True),
             ("GET", "/api/stores", None, False),  # no token: refused, and logged
             ("GET", f"/?token={server.token}", None, False),  # the login address
             ("GET", f"/api/search?q=tomatoes&token={server.token}", None, True),
             ("POST", "/v1/chat/completions", "{", True)]
    for method, path, body, auth in asked:
        _request(server, method, path, body, auth=auth)
    wanted = [("GET", "/api/stores", "200"), ("GET", marker, "404"),
              ("GET", "/api/stores", "401"), ("GET", "/", "303"), ("GET", "/api/search", "400"),
              ("POST", "/v1/chat/completions", "400")]
    deadline = time.monotonic() + 30
    while True:  # the server writes its line once the response is sent
        logged = _LOGGED.findall(server.output())
        start = next((i for i in range(len(logged)) if logged[i][1] == marker), None)
        if start is not None and len(logged) >= start + 5 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert start is not None, server.output()[-2000:]
    assert logged[start - 1 : start + 5] == wanted, logged
    lines = [ln for ln in server.output().splitlines() if _LOGGED.match(ln)]
    assert not any(server.token in ln for ln in lines)  # nor a query string or a header


def test_the_printed_url_logs_a_browser_in(server: Server) -> None:
    """`/?token=T` sets a cookie and sends the browser back to the page without the token,
    which the cookie carries from then on."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.request("GET", f"/?token={server.token}&max_tokens=40")
        resp = conn.getresponse()
        resp.read()
    finally:
        conn.close()
    assert resp.status == 303
    assert resp.getheader("Location") == "/?max_tokens=40"
    cookie = resp.getheader("Set-Cookie") or ""
    name = f"hydra-rag-token-{server.port}"
    assert cookie.startswith(f"{name}={server.token};"), cookie
    attributes = {a.strip().lower() for a in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attributes, cookie
    jar = {"Cookie": f"{name}={server.token}"}
    status, doc = _json(server, "GET", "/api/stores", headers=jar, auth=False)
    assert status == 200 and [s["name"] for s in doc["stores"]] == ["garden", "desert"]
    # The page's own requests only: another port of 127.0.0.1 is the same *site*, whose
    # requests SameSite=Strict lets the cookie ride along with.
    for site, expected in (("same-origin", 200), ("none", 200), ("same-site", 401),
                           ("cross-site", 401)):
        status, _ = _json(server, "GET", "/api/stores", headers={**jar, "Sec-Fetch-Site": site},
                          auth=False)
        assert status == expected, site
    # Beside another local app's cookies, even ones http.cookies would reject whole.
    crowded = {"Cookie": f'prefs={{"x": 1}}; theme=dark mode; {name}={server.token}'}
    assert _json(server, "GET", "/api/stores", headers=crowded, auth=False)[0] == 200
    # Another server on another port keeps its own cookie.
    assert _json(server, "GET", "/api/stores", auth=False,
                 headers={"Cookie": f"hydra-rag-token-1={server.token}"})[0] == 401
    # A wrong token in the address: no cookie, and the address is cleaned all the same.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.request("GET", "/?token=wrong")
        resp = conn.getresponse()
        resp.read()
    finally:
        conn.close()
    assert (resp.status, resp.getheader("Location"), resp.getheader("Set-Cookie")) == (
        303, "/", None)


def test_no_token_on_loopback_only(served_home: Path, folders: dict[str, Path]) -> None:
    srv = _start(served_home, "--no-token", "--path", str(folders["garden"]))
    try:
        assert srv.token is None
        assert "(no token: open to every local account)" in srv.output()
        status, doc = _json(srv, "GET", "/api/search?q=tomatoes&k=1")
        assert status == 200 and doc["results"][0]["path"] == "docs/gardening.md"
    finally:
        _stop(srv)
    env = {"HYDRA_RAG_HOME": str(served_home)}
    for host in ("0.0.0.0", "192.0.2.1", "::"):
        proc = run_cli("serve", "--host", host, "--no-token", "--port", str(free_port()),
                       "--path", str(folders["garden"]), env=env, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == (f"error: --no-token is for loopback only: --host {host} opens "
                               "the server to the network — drop --no-token\n")
        assert proc.stdout == ""
    proc = run_cli("serve", "--no-token", "--token", "T", env=env)
    assert (proc.returncode, proc.stderr) == (2, "error: give --token or --no-token, not both\n")


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    env = {"HYDRA_RAG_HOME": str(tmp_path)}
    first = run_cli("serve", "--print-token", env=env)
    assert first.returncode == 0, first.stderr
    token_file = tmp_path / "state" / "serve.token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert run_cli("serve", "--print-token", env=env).stdout == first.stdout  # kept
    token_file.chmod(0o644)
    proc = run_cli("serve", "--print-token", env=env)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (f"error: the token file {token_file} can be read by other accounts "
                           f"(mode 644) — remove it (`rm {token_file}`) and start serve again "
                           "for a new one\n")
    token_file.unlink()
    again = run_cli("serve", "--print-token", env=env)
    assert again.returncode == 0 and again.stdout != first.stdout  # a new one


def test_sessions_are_those_of_the_served_folders(server: Server, served_home: Path,
                                                  folders: dict[str, Path]) -> None:
    """A saved chat holds another project's questions and passages: a server lists and
    reads only the sessions whose folders it serves."""
    saved = served_home / "state" / "sessions"
    saved.mkdir(parents=True, exist_ok=True)
    garden, outside = str(folders["garden"]), str(folders["outside"])
    turn = {"user": "q", "answer": "a", "sources": [], "interrupted": False, "time": ""}
    for name, stores in (("mine", [garden]), ("theirs", [outside]),
                         ("mixed", [garden, outside]), ("norag", [])):
        (saved / f"{name}.json").write_text(json.dumps(
            {"name": name, "model": "smollm2-135m", "stores": stores, "turns": [turn]}))
    try:
        status, doc = _json(server, "GET", "/api/sessions")
        assert status == 200
        names = {s["name"] for s in doc["sessions"]}
        assert "mine" in names and not names & {"theirs", "mixed", "norag"}, names
        assert _json(server, "GET", "/api/sessions?name=mine")[1]["stores"] == [garden]
        for name in ("theirs", "mixed", "norag", "nonesuch"):
            status, doc = _json(server, "GET", f"/api/sessions?name={name}")
            assert status == 404, (name, doc)
            assert doc["error"]["message"] == f"no session {name!r} here"
    finally:
        for name in ("mine", "theirs", "mixed", "norag"):
            (saved / f"{name}.json").unlink()


def test_a_wildcard_host_with_a_token_answers_its_clients(served_home: Path,
                                                          folders: dict[str, Path]) -> None:
    """`serve --host 0.0.0.0 --token T` is the README's way in for Open WebUI in a container
    (http://host.docker.internal:8765/v1): every client names the machine as it reached it
    (127.0.0.1, its address, its name, host.docker.internal), never 0.0.0.0."""

    srv = _start(served_home, "--host", "0.0.0.0", "--token", "T0ken", "--path",
                 str(folders["garden"]))
    try:
        ok = {"Authorization": "Bearer T0ken"}
        lan = socket.gethostbyname(socket.gethostname())
        for host in (f"127.0.0.1:{srv.port}", f"localhost:{srv.port}", f"{lan}:{srv.port}",
                     f"{socket.gethostname()}:{srv.port}", f"host.docker.internal:{srv.port}"):
            status, raw = _request(srv, "GET", "/api/search?q=tomatoes&k=1", None,
                                   {**ok, "Host": host})
            assert status == 200, (host, status, raw[:200])
            # The page served under that name may call its own server...
            status, _ = _request(srv, "GET", "/v1/models", None,
                                 {**ok, "Host": host, "Origin": f"http://{host}"})
            assert status == 200, (host, status)
            # ...another page may not, token or no token.
            status, _ = _request(srv, "GET", "/v1/models", None,
                                 {**ok, "Host": host, "Origin": "http://evil.example"})
            assert status == 403
        # Without the token nothing is answered.
        assert _request(srv, "GET", "/v1/models", auth=False)[0] == 401
        assert "smollm2-135m" in {m.id for m in _openai(srv, api_key="T0ken").models.list()}

        assert _mcp_tools(srv, ok) == TOOLS
    finally:
        _stop(srv)


def test_a_chunked_oversize_body_to_mcp_is_413(server: Server) -> None:
    answer = _post_big(server, "/mcp", 2 << 20, chunked=True)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:300]
    assert "Traceback" not in server.output()


def test_a_sandboxed_page_is_a_foreign_origin(server: Server) -> None:
    """A page's sandboxed iframe (or a data: URL) sends `Origin: null`: a form's text/plain
    POST from it must not start a chat any more than one from the page itself."""
    body = json.dumps({"model": "smollm2-135m", "max_tokens": 2, "session": "planted",
                       "messages": [{"role": "user", "content": WATER}]})
    status, raw = _request(server, "POST", "/v1/chat/completions", body,
                           {"Origin": "null", "Content-Type": "text/plain"})
    assert status == 403, (status, raw[:300])
    assert _request(server, "GET", "/api/search?q=tomatoes", None, {"Origin": "null"})[0] == 403
