"""The `hydra-rag` command: parse options, call one library function, render the result.

Results go to stdout (`--json` for scripts); progress, warnings and errors go to stderr.
Heavy libraries (llama.cpp, LanceDB) are imported inside commands, never at start-up. Each
module of this package registers its commands on the apps of `base`; what a command decides
beyond its options lives in the library (`hydra_rag.api` and below).
"""

from __future__ import annotations

import os
import sys

import typer
from rich.text import Text

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
        _flush()
        # Without standalone mode, click returns the code of `typer.Exit(n)` instead of exiting.
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except HydraError as exc:
        if state["debug"]:
            raise
        # What the user typed or a file holds is never read as markup.
        err.print(Text.assemble(("error:", "red"), f" {exc}"), highlight=False)
        sys.exit(2 if isinstance(exc, UsageError) else 1)
    except BrokenPipeError:
        _closed_pipe()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except typer.Exit as exc:
        _flush()
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("interrupted")
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors: message and exit 2
        exc.show()  # type: ignore[attr-defined]
        sys.exit(exc.exit_code)


def _flush() -> None:
    """Flush stdout here, where a closed pipe is caught, not at the interpreter's exit."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _closed_pipe()


def _closed_pipe() -> None:
    """The reader went away (`| head -1`): end quietly with status 0, as ripgrep does. What is
    still buffered goes nowhere, so that closing stdout at exit raises no more."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(0)
