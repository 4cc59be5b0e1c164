"""The `hydra-rag` command: parse options, call one library function, render the result.

Results go to stdout (`--json` for scripts); progress, warnings and errors go to stderr.
Heavy libraries (llama.cpp, LanceDB) are imported inside commands, never at start-up. Each
module of this package registers its commands on the apps of `base`; what a command decides
beyond its options lives in the library (`hydra_rag.api` and below).
"""

from __future__ import annotations

import sys

import typer

from hydra_rag.cli.base import app, err, humanize, state
from hydra_rag.errors import HydraError, UsageError

# Commands register in this order, which is the order --help lists them in.
# isort: off
from hydra_rag.cli import index, watch, search, navigate, chat, bundles, stores, serve, models  # noqa: F401, E402
# isort: on

__all__ = ["app", "main"]


def main() -> None:
    """Entry point: one red line per error (exit 1), usage errors exit 2, Ctrl-C exits 130."""
    try:
        rc = humanize(typer.main.get_command(app))(standalone_mode=False)
        # Without standalone mode, click returns the code of `typer.Exit(n)` instead of exiting.
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except HydraError as exc:
        if state["debug"]:
            raise
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(2 if isinstance(exc, UsageError) else 1)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("interrupted")
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors: message and exit 2
        exc.show()  # type: ignore[attr-defined]
        sys.exit(exc.exit_code)
