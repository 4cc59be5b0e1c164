"""The server the tests of `hydra-rag serve` reach (tests/serve/test_serve*.py): two indexed
folders, a bundle, `hydra-rag serve` over them in a subprocess (real sidecars, the real SmolLM2),
started once for the session, and the helpers that talk to it. Registered as a plugin by
tests/conftest.py, so the three test files share one server."""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest

from conftest import AUTH_PY, free_port, run_cli, wait_listening, write_tree

TOOLS = {"search", "get", "ask", "stores", "status", "definition", "references", "outline"}

WATER = "How often should tomatoes be watered?"
ELSEWHERE = "outside-helper"
BUNDLE = "serve-gardener"
PERSONA = """---
temperature: 0
---
You are the garden club's librarian. Answer in one short sentence.
"""
LONG = ("Write a very long and detailed guide to growing tomatoes: sun, watering, staking. "
        "Repeat every point many times.")


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int
    log: Path
    token: str | None = None  # from the login URL serve printed; None: it printed none

    @property
    def bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _start(home: Path, *args: str) -> Server:
    """`hydra-rag serve --port FREE ARGS` under `home`, once it answers HTTP."""
    port = free_port()
    log = home / f"serve-{port}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "hydra_rag", "serve", "--port", str(port),
                                 *args], stdout=out, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "HYDRA_RAG_HOME": str(home)})
    server = Server(proc, port, log)
    try:
        wait_listening(port, proc, server.output)
    except AssertionError:
        _stop(server)
        raise
    server.token = _login_token(server.output())
    return server


def _login_token(output: str) -> str | None:
    """The token of the login URL in serve's banner (`open http://…/?token=T — …`)."""
    found = re.search(r"^open (http://\S+) ", output, re.M)
    return parse_qs(urlsplit(found.group(1)).query)["token"][0] if found else None


def _stop(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()


def _request(server: Server, method: str, path: str, body: bytes | str | None = None,
             headers: dict[str, str] | None = None, timeout: float = 600, auth: bool = True
             ) -> tuple[int, bytes]:
    """(status, body) of one plain HTTP request; `headers` may set Host and Origin; with
    `auth`, the server's token too, unless `headers` send an Authorization of their own."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request(method, path, body=body,
                     headers={**(server.bearer if auth else {}), **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _json(server: Server, method: str, path: str, body: Any = None,
          headers: dict[str, str] | None = None, auth: bool = True) -> tuple[int, Any]:
    raw = None if body is None else body if isinstance(body, str) else json.dumps(body)
    status, data = _request(server, method, path, raw,
                            {"Content-Type": "application/json", **(headers or {})}, auth=auth)
    return status, json.loads(data) if data else None


def _openai(server: Server, api_key: str | None = None) -> Any:
    """The official client, with the server's token as its key (as the README configures it)."""
    from openai import OpenAI

    return OpenAI(base_url=f"{server.url}/v1", api_key=api_key or server.token or "none",
                  timeout=600, max_retries=0)


def _chat_log(home: Path) -> Path:
    return home / "state" / "sidecars" / "smollm2-135m.log"


def _mcp_tools(srv: Any, headers: dict[str, str]) -> set[str]:
    """The tool names MCP over HTTP lists, asked with these headers."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def tools() -> set[str]:
        http = create_mcp_http_client(headers=headers)
        async with http, Client(streamable_http_client(f"{srv.url}/mcp",
                                                       http_client=http)) as mcp:
            return {t.name for t in (await mcp.list_tools()).tools}

    return anyio.run(tools)


def _post_big(server: Server, path: str, size: int, chunked: bool) -> bytes:
    """POST a JSON body of about `size` bytes, whose messages are one long string (Content-Length,
    or chunked without one), and return the response head and body, read as soon as the server
    answers (it need not read the whole body first)."""
    body = b'{"messages":"' + b"a" * size + b'"}'
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=120)
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in server.bearer.items())
            + "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            + ("Transfer-Encoding: chunked\r\n\r\n" if chunked
               else f"Content-Length: {len(body)}\r\n\r\n"))
    try:
        sock.sendall(head.encode())
        try:
            for i in range(0, len(body), 1 << 16):
                part = body[i:i + (1 << 16)]
                sock.sendall(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
                if select.select([sock], [], [], 0)[0]:
                    break  # the server has answered before the end of the body
            else:
                if chunked:
                    sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # it stopped reading: its answer is waiting
        got = b""
        try:
            while b"\r\n\r\n" not in got or len(got) < got.index(b"\r\n\r\n") + 60:
                part = sock.recv(65536)
                if not part:
                    break
                got += part
        except ConnectionResetError:
            pass  # closed on a body it did not read: what it said before is all there is
        return got
    finally:
        sock.close()


# -- the folders, the bundle and the server, once for the session -----------------------------


@pytest.fixture(scope="session")
def served_home(session_home: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[Path]:
    """A HYDRA_RAG_HOME of the serve tests' own (it gets a bundle), sharing the installed models;
    its sidecars are stopped after."""
    home = tmp_path_factory.mktemp("serve-home")
    (home / "data").mkdir()
    (home / "data" / "models").symlink_to((session_home / "data" / "models").resolve())
    # Prompts carry earlier turns, as with a model whose catalog entry has them (the default
    # model's has none): what a request's history puts in the prompt is seen.
    (home / "config").mkdir()
    (home / "config" / "config.yaml").write_text("chat_turns: 4\n")
    yield home
    run_cli("sidecars", "stop", "--all", env={"HYDRA_RAG_HOME": str(home)})


@pytest.fixture(scope="session")
def folders(served_home: Path, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, Path]:
    """Two indexed folders — `garden` (tomatoes, an auth module, a .env, a link out of the
    folder) and `desert` (cacti) — and a bundle retrieving from `garden` only."""
    base = tmp_path_factory.mktemp("serve-folders")
    outside = write_tree(base / "outside", {"secret.md": "# Private\n\nOUTSIDE_SECRET_42\n"})
    garden = write_tree(base / "garden", {
        "docs/gardening.md": (
            "# Growing tomatoes\n\n"
            "Tomatoes need full sun, at least six hours a day, and deep watering twice a week.\n"
            "Stake the plants early so that the stems do not break under the weight of fruit.\n"
        ),
        "src/auth.py": AUTH_PY,
        "README.md": "# Demo garden\n\nA tiny folder used by the hydra-rag serve tests.\n",
        ".env": "SECRET_TOKEN=abc123\n",
    })
    (garden / "docs" / "leak.md").symlink_to(outside / "secret.md")
    desert = write_tree(base / "desert", {
        "docs/cactus.md": (
            "# Caring for a cactus\n\n"
            "Water a cactus only once a month in winter, and let the soil dry out completely "
            "between waterings.\n"
        ),
    })
    env = {"HYDRA_RAG_HOME": str(served_home)}
    for folder in (garden, desert, outside):
        proc = run_cli("index", str(folder), env=env)
        assert proc.returncode == 0, proc.stderr
    persona = base / "persona.md"
    persona.write_text(PERSONA)
    proc = run_cli("create", "smollm2-135m", str(persona), BUNDLE, "--rag-index", str(garden),
                   env=env)
    assert proc.returncode == 0, proc.stderr
    # A bundle over a folder the server does not serve: not the server's to offer.
    proc = run_cli("create", "smollm2-135m", str(persona), ELSEWHERE, "--rag-index",
                   str(outside), env=env)
    assert proc.returncode == 0, proc.stderr
    return {"garden": garden, "desert": desert, "outside": outside}


# The server, and the home whose sidecars it started, while the serve tests run.
_LIVE: dict[str, Any] = {}


@pytest.fixture
def server(served_home: Path, folders: dict[str, Path]) -> Server:
    """`hydra-rag serve` over garden and desert (not `outside`, though it is indexed too):
    started by the first test that asks for it and kept for the next ones, until the serve
    tests are done (pytest_runtest_teardown)."""
    srv = _LIVE.get("server")
    if srv is None or srv.proc.poll() is not None:
        srv = _start(served_home, "--path", str(folders["garden"]), "--path",
                     str(folders["desert"]))
        _LIVE.update(server=srv, home=served_home)
    return srv


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last of the serve tests, the server and the sidecars it started stop: they
    are not kept through the rest of the run."""
    if "server" in _LIVE and (nextitem is None or not nextitem.path.name.startswith("test_serve")):
        _stop(_LIVE.pop("server"))
        run_cli("sidecars", "stop", "--all", env={"HYDRA_RAG_HOME": str(_LIVE.pop("home"))})


