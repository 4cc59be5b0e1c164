"""The `hydra-rag` command: parse options, call one library function, render the result.

Results go to stdout (`--json` for scripts); progress, warnings and errors go to stderr.
Heavy libraries (llama.cpp, LanceDB) are imported inside commands, never at start-up. Each
module of this package registers its commands on the apps of `base`; what a command decides
beyond its options lives in the library (`hydra_rag.api` and below).
"""

from __future__ import annotations

import sys
from functools import cache
from typing import Any

import typer
from rich.text import Text

from hydra_rag.cli.base import app, err, humanize, quiet_stdout, state
from hydra_rag.errors import HydraError, UsageError, fault, unexpected

# Commands register in this order, which is the order --help lists them in.
# isort: off
from hydra_rag.cli import index, watch, search, navigate, chat, bundles, stores, serve, models, hub  # noqa: F401, E402
# isort: on

__all__ = ["app", "main", "run"]


def main() -> None:
    sys.exit(run(sys.argv[1:]))


@cache
def _command() -> Any:
    return humanize(typer.main.get_command(app))


def run(argv: list[str]) -> int:
    """Run one command line; its exit status: one red line per error (1), usage errors 2,
    Ctrl-C 130. The warm process (hydra_rag.warm) runs commands through here too."""
    try:
        rc = _command()(args=argv, prog_name="hydra-rag", standalone_mode=False)
        _flush()
        # Without standalone mode, click returns the code of `typer.Exit(n)` instead of exiting.
        return rc if isinstance(rc, int) else 0
    except HydraError as exc:
        if state["debug"]:
            raise
        # What the user typed or a file holds is never read as markup.
        err.print(Text.assemble(("error:", "red"), f" {exc}"), highlight=False)
        return 2 if isinstance(exc, UsageError) else 1
    except BrokenPipeError:
        return _closed_pipe()
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except typer.Exit as exc:
        _flush()
        return exc.exit_code
    except typer.Abort:
        err.print("interrupted")
        return 130
    except typer.TyperException as exc:  # usage errors: message and exit 2
        exc.show()  # type: ignore[attr-defined]
        return exc.exit_code
    except SystemExit as exc:  # a closed pipe seen by rich (base._Console), or sys.exit(n)
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except Exception as exc:  # the machine's doing (a full disk…), or a bug: one line still
        if state["debug"]:
            raise
        found = fault(exc)
        line = f"{found[0]}; {found[1]}" if found else unexpected(exc)
        err.print(Text.assemble(("error:", "red"), f" {line}"), highlight=False)
        return 1
    finally:
        state["debug"] = False


def _flush() -> None:
    """Flush stdout here, where a closed pipe is caught, not at the interpreter's exit."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _closed_pipe()


def _closed_pipe() -> int:
    """The reader went away (`| head -1`): end quietly with status 0, as ripgrep does. What is
    still buffered goes nowhere, so that closing stdout at exit raises no more."""
    quiet_stdout()
    return 0
