"""What every command shares: the Typer apps, the two consoles (results to stdout, the rest
to stderr), and the options several commands take."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from hydra_rag import __version__

app = typer.Typer(
    help="Ask your own files: index a folder, search it, chat with it — all on this machine.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish
)
rag_app = typer.Typer(help="Retrieval set-up: install the default embedder.", no_args_is_help=True)
emb_app = typer.Typer(help="Manage embedders (the catalog of embedding models).",
                      no_args_is_help=True)
side_app = typer.Typer(help="List and stop model sidecars (local llama.cpp servers).",
                       no_args_is_help=True)
models_app = typer.Typer(help="Manage chat models (list, pull, add, rm).", no_args_is_help=True)
rerankers_app = typer.Typer(help="Rerankers for `--rerank` (list, pull, add).",
                            no_args_is_help=True)
stores_app = typer.Typer(help="The registry of indexed folders (for --all and --tag).",
                         no_args_is_help=True)
app.add_typer(stores_app, name="stores")
sessions_app = typer.Typer(help="Saved chat sessions.", no_args_is_help=True)
app.add_typer(models_app, name="models")
app.add_typer(rerankers_app, name="rerankers")
app.add_typer(sessions_app, name="sessions")
app.add_typer(rag_app, name="rag")
app.add_typer(emb_app, name="embedders")
app.add_typer(side_app, name="sidecars")

def quiet_stdout() -> None:
    """Point stdout at /dev/null, so that what is still buffered for a reader that went away
    raises nothing at exit (a warm command's stdout has no descriptor: nothing to do)."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):
        return
    os.dup2(os.open(os.devnull, os.O_WRONLY), fd)


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader went away (`| head -1`): end quietly with status 0, as ripgrep does
        (rich's own ends with 1)."""
        self.quiet = True
        quiet_stdout()
        raise SystemExit(0)


# No emoji codes: `path:abc:` in a message is text, not a picture.
_OPTIONS: dict[str, Any] = {"soft_wrap": True, "emoji": False}
out = _Console(**_OPTIONS)
err = _Console(stderr=True, **_OPTIONS)
state = {"debug": False}


@contextmanager
def bind_consoles(stdout: Any, stderr: Any, width: int | None,
                  environ: dict[str, str]) -> Iterator[None]:
    """Make `out` and `err` print to these streams as they would to a caller's own terminal
    or pipe (its width and its environment: TERM, NO_COLOR, COLUMNS…), then back. For the warm
    process (hydra_rag.warm), which runs one command at a time for callers elsewhere; the same
    objects, so that every module's `out` and `err` follow."""
    for console, stream in ((out, stdout), (err, stderr)):
        Console.__init__(console, file=stream, width=width, _environ=environ, **_OPTIONS)
    try:
        yield
    finally:
        Console.__init__(out, **_OPTIONS)
        Console.__init__(err, stderr=True, **_OPTIONS)


def _version(value: bool) -> None:
    if value:
        print(f"hydra-rag {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    state["debug"] = debug
    from hydra_rag.paths import own_dirs

    own_dirs()


# Terminals known to print an OSC 8 hyperlink's escape codes as text instead of a link.
_NO_LINKS = ("dumb", "linux", "screen", "vt100", "vt220", "cons25")


def hyperlinks(console: Console, setting: str) -> bool:
    """Whether paths printed on `console` are made links (OSC 8), by the setting `hyperlinks`
    (auto, on, off); auto means a terminal whose TERM is not one known to show the codes as
    text."""
    choice = setting.strip().lower()
    if choice in ("off", "never", "no", "false", "0") or not console.is_terminal:
        return False
    if choice in ("on", "always", "yes", "true", "1"):
        return True
    term = console._environ.get("TERM", "")  # the caller's, in the warm process too
    return bool(term) and not term.startswith(_NO_LINKS)


def file_url(path: Path) -> str:
    """A file:// URL with this machine's name, as OSC 8 asks (a terminal on another machine
    then does not open a file of its own by that path)."""
    import socket
    from urllib.parse import quote

    # Quoted from the bytes the file system knows: a name that is not UTF-8 stays its own.
    return f"file://{socket.gethostname()}{quote(bytes(path.resolve()))}"


def say(msg: str) -> None:
    err.print(msg, markup=False, highlight=False)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")



RERANK = Annotated[bool | None, typer.Option(
    "--rerank/--no-rerank", help="Reorder the top fused candidates with a cross-encoder "
    "(setting `rerank`; slower: about 0.1 s per candidate on two cores).")]
RERANK_TOP = Annotated[int | None, typer.Option(
    "--rerank-top", min=1, max=100, help="Candidates the reranker reads (setting `rerank_top`, "
    "default 20); implies --rerank.")]


def rerank_flags(rerank: bool | None, rerank_top: int | None) -> dict[str, Any]:
    """`--rerank-top N` alone turns reranking on (unless `--no-rerank` says otherwise)."""
    if rerank is None and rerank_top is not None:
        rerank = True
    return {"rerank": rerank, "rerank_top": rerank_top}


def methods(mode: str) -> tuple[str, ...]:
    modes = {"hybrid": ("vector", "bm25"), "vector": ("vector",), "bm25": ("bm25",)}
    if mode not in modes:
        raise typer.BadParameter(f"--mode must be one of {', '.join(modes)}, not {mode!r}")
    return modes[mode]


# What a user types after each option that takes a value (the rest: by its type).
_METAVARS = {
    "path": "DIR", "rag": "DIR", "rag-index": "DIR", "include": "GLOB", "exclude": "GLOB",
    "tag": "TAG", "rag-tag": "TAG", "wait": "SECONDS", "embedder": "ID", "context-model": "ID",
    "answers": "MODEL", "language": "LANG", "languages": "LANG,...", "mode": "MODE",
    "queries": "FILE", "system-file": "FILE", "system": "TEXT", "session": "NAME",
    "temperature": "T", "port": "PORT", "kind": "KIND", "pooling": "POOLING",
    "chat-format": "FORMAT", "query-prefix": "TEXT", "document-prefix": "TEXT", "gpu": "BACKEND",
}
_BY_TYPE = {"int": "N", "float": "NUMBER", "Path": "PATH", "str": "TEXT"}


def humanize(command: Any) -> Any:
    """Help that shows what a user types: `--include GLOB`, `-k N`, `PATH`, and nothing after
    a flag — not Python's types (`<list[str]>`, `<bool>`) nor `{model}` — for `command` and
    every subcommand. Returns the command."""
    from typer.core import TyperArgument

    class Argument(TyperArgument):
        def _usage_display_name(self) -> str:
            name = self.display_name_raw
            return name if self.required else f"[{name}]"

        def display_type(self, ctx: Any) -> str:
            return ""

    help_option = command.get_help_option(typer.Context(command))  # made once, then cached
    for param in [*getattr(command, "params", []), *([help_option] if help_option else [])]:
        if isinstance(param, TyperArgument):
            param.__class__ = Argument
            if param.metavar is None:
                param.metavar = (param.name or "").upper() + ("..." if param.nargs != 1 else "")
        elif getattr(param, "is_flag", False) or getattr(param, "count", False):
            param.metavar = ""
        elif param.metavar is None:
            long = next((o.lstrip("-") for o in param.opts if o.startswith("--")), "")
            bare = param.bare_type().removeprefix("list[").removesuffix("]")
            param.metavar = _METAVARS.get(long) or _BY_TYPE.get(bare, "VALUE")
    for sub in getattr(command, "commands", {}).values():
        humanize(sub)
    return command
