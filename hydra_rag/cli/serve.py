"""`hydra-rag mcp` (MCP over stdio) and `hydra-rag serve` (HTTP: MCP, OpenAI API, web chat)."""

from __future__ import annotations

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
