"""The warm process's side in the command line: `python -m hydra_rag.cli.warm --minutes M`
(started by hydra_rag.warm.server.start) serves the quick commands with `run`, the same code a
fresh process runs, printing to each caller's terminal or pipe (hydra_rag.warm)."""

from __future__ import annotations

import argparse
from typing import Any

from hydra_rag.cli import run
from hydra_rag.cli.base import bind_consoles
from hydra_rag.warm.server import Server


def _command(argv: list[str], out: Any, err: Any, width: int | None,
             environ: dict[str, str]) -> int:
    with bind_consoles(out, err, width, environ):
        return run(argv)


def _prepare() -> None:
    """Import what the quick commands need, once, before answering; keep searchers."""
    import hydra_rag.search.retrieve  # noqa: F401
    from hydra_rag import api
    from hydra_rag.store.lance import lancedb

    lancedb()
    api.KEEP_SEARCHERS = True


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m hydra_rag.cli.warm")
    parser.add_argument("--minutes", type=float, default=10.0)
    args = parser.parse_args()
    if args.minutes > 0:
        Server(args.minutes, _command, _prepare).serve()


if __name__ == "__main__":
    main()
