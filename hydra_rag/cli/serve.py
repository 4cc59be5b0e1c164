"""`hydra-rag mcp` (MCP over stdio) and `hydra-rag serve` (HTTP: MCP, OpenAI API, web chat)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from hydra_rag.cli.base import app

_PATH = Annotated[list[Path] | None, typer.Option(
    "--path", help="Indexed folder to serve (repeatable; default: every registered folder).")]
_ALL = Annotated[bool, typer.Option("--all", help="Every registered folder.")]
_TAG = Annotated[list[str] | None, typer.Option(
    "--tag", help="The registered folders with this tag (repeatable).")]


@app.command()
def mcp(path: _PATH = None, all_: _ALL = False, tag: _TAG = None) -> None:
    """Serve the MCP tools search, get, ask and stores on stdin/stdout (for coding agents and
    editors)."""
    from hydra_rag.serve.mcp_tools import build
    from hydra_rag.serve.scope import Scope

    scope = Scope(path, all_, tag)
    try:
        build(scope).run("stdio")
    finally:
        scope.close()


@app.command()
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on (default loopback).")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 8765,
    token: Annotated[str | None, typer.Option(
        "--token", help="Secret every request must send as Authorization: Bearer TOKEN "
        "(default: HYDRA_RAG_SERVE_TOKEN, else one kept in the state folder).",
        envvar="HYDRA_RAG_SERVE_TOKEN")] = None,
    no_token: Annotated[bool, typer.Option(
        "--no-token", help="Ask no token (loopback only): every local account can then read "
        "the served folders.")] = False,
    print_token: Annotated[bool, typer.Option(
        "--print-token", help="Print the token serve would require, and exit.")] = False,
    path: _PATH = None,
    all_: _ALL = False,
    tag: _TAG = None,
) -> None:
    """Serve MCP at /mcp, the OpenAI API at /v1, /api/search and the web chat at / over HTTP."""
    from hydra_rag.cli.base import say, state
    from hydra_rag.serve.app import listen, run
    from hydra_rag.serve.auth import choose_token, login_url
    from hydra_rag.serve.scope import Scope

    chosen = choose_token(token, no_token, host)
    if print_token:
        if chosen is None:
            from hydra_rag.errors import UsageError

            raise UsageError("--no-token asks no token: there is none to print")
        print(chosen)
        return
    sock = listen(host, port)  # a busy port is one line, before the banner
    if token and os.environ.get("HYDRA_RAG_SERVE_TOKEN") != token:
        say("note: a --token given on the command line is in the process list, which every "
            "account can read; HYDRA_RAG_SERVE_TOKEN or the kept token is not")
    try:
        scope = Scope(path, all_, tag)
        shown = f"[{host}]" if ":" in host else host
        say(f"serving {len(scope.roots)} folder(s) on http://{shown}:{port}/ — MCP at /mcp, "
            f"OpenAI API at /v1" + ("" if chosen else " (no token: open to every local account)"))
        if chosen:
            # The login URL sets a cookie and leaves the address bar at once; scripts and
            # clients take the token from `serve --print-token`.
            say(f"open {login_url(host, port, chosen)} — clients send Authorization: Bearer "
                "$(hydra-rag serve --print-token)")
        run(scope, host, port, chosen, sock, log=say,  # a line per request, on stderr
            debug=state["debug"])
    finally:
        sock.close()
