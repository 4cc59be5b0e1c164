"""`hydra-rag mcp` through the official MCP client (stdio): the tools, their schemas, answers
from the real index, sidecars and chat model, and refusals."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import run_cli, write_tree


@pytest.fixture
def served(home: Path, corpus: Path) -> Path:
    write_tree(corpus, {".env": "SECRET_TOKEN=abc123\n"})
    proc = run_cli("index", str(corpus), "--tag", "mcp-test")
    assert proc.returncode == 0, proc.stderr
    return corpus


def _call(args: list[str], calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    """Start `hydra-rag mcp ARGS`, list its tools and make the calls; (tools, results)."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "hydra_rag", "mcp", *args],
                                   env=dict(os.environ))

    async def main() -> tuple[Any, list[Any]]:
        async with Client(params, read_timeout_seconds=300) as client:
            tools = await client.list_tools()
            return tools, [await client.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(main)


def _data(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def test_tools_answer_from_the_index(served: Path) -> None:
    tools, (found, lines, stores, status, defined, used, outline, bad_path, secret,
            outside, by_file) = _call(
        ["--path", str(served)],
        [("search", {"query": "invalid api key", "k": 3}),
         ("get", {"path": "src/auth.py", "line_start": 6, "line_end": 7}),
         ("stores", {}),
         ("status", {}),
         ("definition", {"name": "check_token"}),
         ("references", {"name": "get"}),
         ("outline", {"path": "src/auth.py"}),
         ("search", {"query": "x", "paths": ["/etc"]}),
         ("get", {"path": ".env"}),
         ("get", {"path": "../../etc/hostname"}),
         ("search", {"query": "invalid api key", "k": 2, "group_by": "file"})])
    by_name = {t.name: t for t in tools.tools}
    assert set(by_name) == {"search", "get", "ask", "stores", "status", "definition",
                            "references", "outline"}
    schema = by_name["search"].input_schema
    assert schema["required"] == ["query"] and {"k", "paths", "tag", "mode"} <= set(
        schema["properties"])
    assert "path:line_start-line_end" in by_name["search"].description or \
        "line_start" in by_name["search"].description
    top = _data(found)["results"][0]
    assert top["path"] == "src/auth.py" and top["line_start"] >= 1 and not top["weak"]
    assert {"path", "line_start", "line_end", "section", "score", "text"} <= set(top)
    files = _data(by_file)["results"]
    assert files[0]["path"] == "src/auth.py" and files[0]["passages"][0]["path"] == "src/auth.py"
    assert len({f["path"] for f in files}) == len(files) and "group_by" in schema["properties"]
    got = _data(lines)
    assert got["text"].splitlines() == ["def check_token(request):",
                                        '    """Reject requests whose API key header is missing '
                                        'or wrong."""']
    assert _data(stores)["stores"][0]["path"] == str(served)
    folder = _data(status)["folders"][0]
    assert (folder["root"], folder["state"], folder["fix"]) == (str(served), "current", None)
    assert folder["counts"] == {"added": 0, "changed": 0, "removed": 0, "touched": 0}
    (row,) = _data(defined)["results"]
    assert (row["path"], row["kind"], row["line_start"], row["line_end"]) == \
        ("src/auth.py", "function", 6, 11)
    assert [(r["path"], r["line"]) for r in _data(used)["results"]] == [("src/auth.py", 8)]
    assert [(r["name"], r["kind"]) for r in _data(outline)["results"]] == [
        ("API_HEADER", "constant"), ("check_token", "function")]
    for refused, why in ((bad_path, "not a folder of this server's scope"),
                         (secret, "not in the index"), (outside, "`..` is not allowed")):
        assert refused.is_error and why in refused.content[0].text, refused.content
    assert "abc123" not in str(secret.content)


def test_ask_cites_and_checks(served: Path) -> None:
    _, (answer, nothing) = _call(
        ["--tag", "mcp-test"],
        [("ask", {"question": "How often should tomatoes be watered?", "k": 3}),
         ("ask", {"question": "What is the capital of Mongolia?"})])
    got = _data(answer)
    assert got["sources"][0]["path"] == "docs/gardening.md"
    assert got["verdict"] in ("ok", "problems") and isinstance(got["problems"], list)
    assert set(got["citations"]) == {"cited", "invalid", "quotes_not_found", "uncited"}
    assert _data(nothing)["verdict"] == "no context"


def test_ask_follow_up_with_earlier_questions(served: Path) -> None:
    write_tree(served, {"src/retry.py": (
        "def upload_with_retries(blob, attempts=5):\n"
        '    """Upload a blob, trying again up to `attempts` times."""\n'
        "    for _ in range(attempts):\n"
        "        if put(blob):\n"
        "            return True\n"
        "    return False\n")})
    assert run_cli("index", str(served)).returncode == 0
    _, (alone, followed) = _call(
        ["--path", str(served)],
        [("ask", {"question": "Where is it defined?", "k": 3}),
         ("ask", {"question": "Where is it defined?", "k": 3,
                  "earlier": ["What does upload_with_retries do?"]})])
    got = _data(followed)
    assert got["retrieval"]["query"] == "upload_with_retries Where is it defined?"
    assert got["retrieval"]["carried"] == "upload_with_retries"
    assert got["sources"][0]["path"] == "src/retry.py"
    assert _data(alone)["retrieval"]["carried"] == ""
