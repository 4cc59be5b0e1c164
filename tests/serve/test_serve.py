"""`hydra-rag serve` from the outside: the real server in a subprocess over real indexes, real
sidecars and the real SmolLM2, reached through the clients people use — the official `openai`
package, the MCP SDK's Client over streamable HTTP, plain HTTP — and the refusals that make it
safe by default: a token unless turned off (the one serve keeps, read from the login URL it
prints, as a user copies it), a foreign Origin or Host, paths out of the folders, sessions of
other folders, oversize and malformed bodies; concurrent clients; a client that goes away in
the middle of a stream."""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import pytest

from conftest import free_port, run_cli, wait_listening, write_tree

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


# -- the folders, the bundle and the server, once for the module -----------------------------


@pytest.fixture(scope="module")
def served_home(session_home: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[Path]:
    """A HYDRA_RAG_HOME of this module's own (it gets a bundle), sharing the installed models;
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


@pytest.fixture(scope="module")
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
        "src/auth.py": (
            '"""Request authentication."""\n\n'
            "API_HEADER = 'X-Api-Key'\n\n\n"
            "def check_token(request):\n"
            "    \"\"\"Reject requests whose API key header is missing or wrong.\"\"\"\n"
            "    key = request.headers.get(API_HEADER)\n"
            "    if key is None or key not in VALID_KEYS:\n"
            "        raise PermissionError('invalid api key')\n"
            "    return True\n"
        ),
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


@pytest.fixture(scope="module")
def server(served_home: Path, folders: dict[str, Path]) -> Iterator[Server]:
    """`hydra-rag serve` over garden and desert (not `outside`, though it is indexed too)."""
    srv = _start(served_home, "--path", str(folders["garden"]), "--path", str(folders["desert"]))
    yield srv
    _stop(srv)


# -- OpenAI clients work unchanged ---------------------------------------------------------



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

def test_openai_client_lists_models_and_bundles(server: Server, served_home: Path,
                                               folders: dict[str, Path]) -> None:
    # A bundle over a model that is not installed: a client picking it would fail.
    persona = served_home / "persona-uninstalled.md"
    persona.write_text(PERSONA)
    env = {"HYDRA_RAG_HOME": str(served_home)}
    proc = run_cli("create", "qwen2.5-3b-instruct", str(persona), "not-pulled", "--rag-index",
                   str(folders["garden"]), env=env)
    assert proc.returncode == 0, proc.stderr
    try:
        listed = list(_openai(server).models.list())
    finally:
        run_cli("rm", "not-pulled", env=env)
    models = {m.id: m for m in listed}
    # Only what can answer: the installed model (the default, first) and the bundle over it;
    # not the catalog's models that were never pulled, nor a bundle over one.
    assert [m.id for m in listed] == ["smollm2-135m", BUNDLE]
    assert models[BUNDLE].model_extra == {"hydra_bundle": True, "base": "smollm2-135m"}
    assert models["smollm2-135m"].object == "model"


def test_openai_client_completion_carries_sources(server: Server) -> None:
    client = _openai(server)
    reply = client.chat.completions.create(
        model="smollm2-135m", messages=[{"role": "user", "content": WATER}], max_tokens=16,
        temperature=0)
    text = reply.choices[0].message.content
    assert reply.object == "chat.completion" and reply.model == "smollm2-135m"
    assert reply.choices[0].message.role == "assistant"
    sources = reply.model_extra["sources"]
    assert sources[0]["path"] == "docs/gardening.md"
    # Clients that show only the text still see where the answer came from.
    assert "\n\nSources:\n[1] garden:docs/gardening.md:1-4" in text
    assert reply.usage is not None and reply.usage.prompt_tokens > 0
    assert 0 < reply.usage.completion_tokens <= 16
    assert reply.model_extra["verdict"] in ("ok", "problems")
    timings = reply.model_extra["timings"]
    assert 0 < timings["retrieval_s"] <= timings["first_token_s"] <= timings["total_s"]

    raw = client.chat.completions.with_raw_response.create(
        model="smollm2-135m", messages=[{"role": "user", "content": WATER}], max_tokens=4)
    assert raw.http_response.headers["content-type"] == "application/json"
    assert raw.http_response.json()["sources"][0]["path"] == "docs/gardening.md"


def test_openai_client_streams(server: Server) -> None:
    stream = _openai(server).chat.completions.create(
        model="smollm2-135m", messages=[{"role": "user", "content": WATER}], max_tokens=16,
        temperature=0, stream=True)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert {c.id for c in chunks} == {chunks[0].id} and chunks[0].id.startswith("chatcmpl-")
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    pieces = [c.choices[0].delta.content or "" for c in chunks]
    text = "".join(pieces)
    assert len([p for p in pieces if p]) >= 3  # token by token, not one block at the end
    last = chunks[-1]
    assert [c.choices[0].finish_reason for c in chunks].index(
        last.choices[0].finish_reason) == len(chunks) - 1  # the last chunk only says why
    assert last.choices[0].finish_reason in ("stop", "length")
    sources = last.model_extra["sources"]
    assert sources[0]["path"] == "docs/gardening.md"
    assert text.endswith("\n\nSources:\n" + "\n".join(
        f"[{s['n']}] {s['store_name']}:{s['path']}:{s['line_start']}-{s['line_end']}"
        for s in sources))
    assert last.usage is not None and 0 < last.usage.completion_tokens <= 16


def _sources(reply: Any) -> list[tuple[str, str]]:
    return [(Path(s["store"]).name, s["path"]) for s in reply.model_extra["sources"]]


def test_a_bundle_or_rag_chooses_the_folders(server: Server, folders: dict[str, Path]
                                             ) -> None:
    client = _openai(server)
    question = [{"role": "user", "content": "How often should I water my plants?"}]

    def ask(model: str, **extra: Any) -> Any:
        return client.chat.completions.create(model=model, messages=question, max_tokens=4,
                                              **({"extra_body": extra} if extra else {}))

    everywhere = _sources(ask("smollm2-135m"))
    assert ("garden", "docs/gardening.md") in everywhere
    assert ("desert", "docs/cactus.md") in everywhere
    # The bundle retrieves from its own folder only, as `chat ALIAS` does.
    bundle = ask(BUNDLE)
    assert bundle.model == BUNDLE
    assert _sources(bundle) == [("garden", "docs/gardening.md")]
    # A plain model with `rag` retrieves from that folder only, named by path or short name.
    assert _sources(ask("smollm2-135m", rag=[str(folders["desert"])])) == [
        ("desert", "docs/cactus.md")]
    assert _sources(ask("smollm2-135m", rag=["desert"])) == [("desert", "docs/cactus.md")]


def test_rag_cannot_widen_the_scope(server: Server, folders: dict[str, Path]) -> None:
    from openai import BadRequestError

    client = _openai(server)
    with pytest.raises(BadRequestError) as refused:
        client.chat.completions.create(
            model="smollm2-135m", messages=[{"role": "user", "content": WATER}], max_tokens=4,
            extra_body={"rag": [str(folders["outside"])]})
    assert refused.value.status_code == 400
    assert "is not a folder of this server's scope" in refused.value.body["message"]
    with pytest.raises(BadRequestError) as bundle:
        client.chat.completions.create(
            model=BUNDLE, messages=[{"role": "user", "content": WATER}], max_tokens=4,
            extra_body={"rag": ["desert"]})
    assert "is a bundle with folders of its own" in bundle.value.body["message"]


def test_a_bundle_over_folders_not_served_is_neither_listed_nor_answered(server: Server
                                                                         ) -> None:
    from openai import BadRequestError

    client = _openai(server)
    assert ELSEWHERE not in {m.id for m in client.models.list().data}
    with pytest.raises(BadRequestError) as refused:
        client.chat.completions.create(
            model=ELSEWHERE, messages=[{"role": "user", "content": WATER}], max_tokens=4)
    assert "retrieves from folders this server does not serve" in refused.value.body["message"]
    assert "OUTSIDE_SECRET_42" not in str(refused.value.body)


def test_history_comes_from_the_messages(server: Server) -> None:
    client = _openai(server)
    follow_up = {"role": "user", "content": "Why?"}

    def ask(messages: list[dict[str, str]]) -> Any:
        return client.chat.completions.create(model="smollm2-135m", messages=messages,
                                              max_tokens=4, temperature=0)

    alone = ask([follow_up])
    # Asked alone, "Why?" bears on nothing in the folders: no answer from them.
    assert alone.model_extra["no_context"] is True and alone.model_extra["sources"] == []
    short = "Twice a week, deeply [1]."
    history = [{"role": "user", "content": WATER}, {"role": "assistant", "content": short},
               follow_up]
    both = ask(history)
    # With the turn before it, the follow-up is searched with that question...
    assert both.model_extra["no_context"] is False
    assert ("garden", "docs/gardening.md") in _sources(both)
    # ...and the earlier turn is in the prompt: a longer earlier answer, a longer prompt.
    longer = ask([history[0], {"role": "assistant", "content": short + " Deep watering "
                               "reaches the roots, which grow down rather than sideways."},
                  follow_up])
    assert _sources(longer) == _sources(both)
    assert longer.usage.prompt_tokens > both.usage.prompt_tokens
    # Two user messages in a row are one question of both.
    joined = ask([{"role": "user", "content": WATER}, follow_up])
    assert joined.model_extra["no_context"] is False
    assert ("garden", "docs/gardening.md") in _sources(joined)


# -- MCP over streamable HTTP and /api ----------------------------------------------------


def test_mcp_over_http(server: Server) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def main(url: str) -> tuple[Any, Any, Any]:
        http = create_mcp_http_client(headers=server.bearer)
        async with http, Client(streamable_http_client(url, http_client=http),
                                read_timeout_seconds=300) as client:
            tools = await client.list_tools()
            found = await client.call_tool("search", {"query": "invalid api key", "k": 3})
            lines = await client.call_tool("get", {"path": "src/auth.py", "line_start": 6,
                                                   "line_end": 6})
            return tools, found, lines

    tools, found, lines = anyio.run(main, f"{server.url}/mcp")
    assert {t.name for t in tools.tools} == TOOLS
    assert not found.is_error
    top = found.structured_content["results"][0]
    assert top["path"] == "src/auth.py" and top["store_name"] == "garden"
    assert lines.structured_content["text"] == "def check_token(request):"


def test_api_search_is_search_json(server: Server, folders: dict[str, Path],
                                   served_home: Path) -> None:
    query = "how often to water tomatoes"
    status, doc = _json(server, "GET", "/api/search?q=how+often+to+water+tomatoes&k=3")
    assert status == 200
    proc = run_cli("search", query, "-k", "3", "--json", "--path", str(folders["garden"]),
                   "--path", str(folders["desert"]), env={"HYDRA_RAG_HOME": str(served_home)})
    assert proc.returncode == 0, proc.stderr
    cli = json.loads(proc.stdout)
    keys = ("rank", "path", "store", "line_start", "line_end")
    assert [tuple(r[k] for k in keys) for r in doc["results"]] == [
        tuple(r[k] for k in keys) for r in cli["results"]]
    assert doc["results"] == cli["results"]  # the very same objects, scores and all
    assert doc["results"][0]["path"] == "docs/gardening.md" and len(doc["results"]) == 3

    # files, each with its best passages, as `search --files --json` gives them
    status, files = _json(server, "GET", "/api/search?q=how+often+to+water+tomatoes&k=2"
                                         "&group_by=file")
    proc = run_cli("search", query, "-k", "2", "--files", "--json", "--path",
                   str(folders["garden"]), "--path", str(folders["desert"]),
                   env={"HYDRA_RAG_HOME": str(served_home)})
    assert status == 200 and proc.returncode == 0, (files, proc.stderr)
    assert files["results"] == json.loads(proc.stdout)["files"]
    assert files["results"][0]["path"] == "docs/gardening.md"
    assert files["results"][0]["passages"][0]["path"] == "docs/gardening.md"
    assert len({(r["store"], r["path"]) for r in files["results"]}) == len(files["results"])
    status, err = _json(server, "GET", "/api/search?q=water&group_by=folder")
    assert status == 400 and "group_by must be one of chunk, file" in err["error"]["message"]

    status, narrowed = _json(server, "GET", "/api/search?q=water&k=5&path=desert")
    assert status == 200 and {r["store_name"] for r in narrowed["results"]} == {"desert"}
    for bad, message in (("q=", "the query is empty"), ("q=x&k=0", "k must be from 1 to 50"),
                         ("q=x&k=two", "k must be a number"),
                         ("q=x&mode=magic", "mode must be one of"),
                         (f"q=x&path={folders['outside']}", "not a folder of this server")):
        status, err = _json(server, "GET", f"/api/search?{bad}")
        assert status == 400 and message in err["error"]["message"], (bad, err)
        assert err["error"]["type"] == "invalid_request_error"


def test_api_get_and_stores(server: Server, folders: dict[str, Path]) -> None:
    status, doc = _json(server, "GET", "/api/get?path=docs/gardening.md&start=3&end=3")
    assert status == 200
    assert doc["text"] == ("Tomatoes need full sun, at least six hours a day, and deep watering "
                           "twice a week.")
    assert (doc["store_name"], doc["line_start"], doc["line_end"], doc["total_lines"]) == (
        "garden", 3, 3, 4)
    # Code navigation: the same library functions as `def`, `refs` and `outline`.
    status, doc = _json(server, "GET", "/api/definition?name=check_token")
    assert status == 200 and [(r["store_name"], r["path"], r["line_start"])
                              for r in doc["results"]] == [("garden", "src/auth.py", 6)]
    status, doc = _json(server, "GET", "/api/references?name=get&path=garden")
    assert status == 200 and [r["line"] for r in doc["results"]] == [8]
    status, doc = _json(server, "GET", "/api/outline?path=garden:src/auth.py")
    assert status == 200 and [r["name"] for r in doc["results"]] == ["API_HEADER", "check_token"]
    for bad, message in (("definition?name=a+b", "is not a name"),
                         ("outline?path=", "the path is empty"),
                         ("outline?path=../../etc/passwd", "is not an indexed file")):
        status, err = _json(server, "GET", f"/api/{bad}")
        assert status == 400 and message in err["error"]["message"], (bad, err)
    status, doc = _json(server, "GET", "/api/stores")
    assert status == 200
    assert [(s["name"], s["path"]) for s in doc["stores"]] == [
        ("garden", str(folders["garden"])), ("desert", str(folders["desert"]))]
    # Whether each is current: a file added to one makes it stale, the other stays current.
    extra = folders["desert"] / "docs" / "cactus-care.md"
    extra.write_text("# Cacti\n\nWater cacti once a month in winter.\n")
    try:
        status, doc = _json(server, "GET", "/api/status")
        assert status == 200
        states = {f["name"]: (f["state"], f["added"], f["counts"]["added"]) for f in doc["folders"]}
        assert states == {"garden": ("current", [], 0),
                          "desert": ("stale", ["docs/cactus-care.md"], 1)}
        status, doc = _json(server, "GET", "/api/status?path=garden")
        assert status == 200 and [f["name"] for f in doc["folders"]] == ["garden"]
        status, doc = _json(server, "GET", "/api/status?path=/etc")
        assert status == 400 and "not a folder of this server" in doc["error"]["message"]
    finally:
        extra.unlink()


def test_api_get_takes_the_names_mcp_takes(server: Server) -> None:
    """line_start/line_end, as the MCP tool `get` and every result's JSON name them; a
    parameter /api/* does not take is a 400 naming it, not ignored."""
    status, doc = _json(server, "GET", "/api/get?path=docs/gardening.md&line_start=3&line_end=3")
    assert status == 200, doc
    assert (doc["line_start"], doc["line_end"]) == (3, 3)
    assert doc["text"].startswith("Tomatoes need full sun")
    status, doc = _json(server, "GET", "/api/search?query=tomatoes%20sun&k=1")  # MCP's name
    assert status == 200, doc
    assert doc["results"][0]["path"] == "docs/gardening.md", doc
    for bad, name in (("get?path=docs/gardening.md&lines=3", "lines"),
                      ("search?question=tomatoes", "question"), ("stores?x=1", "x")):
        status, err = _json(server, "GET", f"/api/{bad}")
        assert status == 400, (bad, err)
        message = err["error"]["message"]
        assert f"takes no parameter {name!r}" in message and "\n" not in message, message


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


# -- failing at e023cbe; pass with the fix of the report ------------------------------------


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


def test_max_completion_tokens_not_a_number_is_400(server: Server) -> None:
    for value in ("ten", 1.5, [3]):
        status, doc = _json(server, "POST", "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "x"}], "max_completion_tokens": value})
        assert status == 400, (value, status, doc)
        assert doc["error"] == {"message": "max_completion_tokens must be a number",
                                "type": "invalid_request_error"}


def test_finish_reason_says_length_when_cut(server: Server) -> None:
    client = _openai(server)
    messages = [{"role": "user", "content": LONG}]
    reply = client.chat.completions.create(model="smollm2-135m", messages=messages,
                                           max_tokens=5, temperature=0)
    assert reply.choices[0].finish_reason == "length"
    chunks = list(client.chat.completions.create(model="smollm2-135m", messages=messages,
                                                 max_tokens=5, temperature=0, stream=True))
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == [
        "length"]
    short = client.chat.completions.create(model="smollm2-135m", max_tokens=400, messages=[
        {"role": "user", "content": "Answer with one word: how many times a week should "
                                    "tomatoes be watered?"}], temperature=0)
    assert short.choices[0].finish_reason == "stop"


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

