"""`hydra-rag serve` from the outside, through the clients people use: the official `openai`
package, the MCP SDK's Client over streamable HTTP, plain HTTP to `/api` (the server:
tests/served.py). The refusals that make it safe: test_serve_safety.py; several clients at
once: test_serve_together.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import run_cli
from served import (
    BUNDLE,
    ELSEWHERE,
    LONG,
    PERSONA,
    TOOLS,
    WATER,
    Server,
    _json,
    _openai,
)

# -- OpenAI clients work unchanged ---------------------------------------------------------


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
