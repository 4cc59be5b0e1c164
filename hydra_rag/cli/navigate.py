"""`hydra-rag def`, `refs` and `outline`: code navigation over the symbol table, printed as
`path:line` lines a terminal, an editor or grep's users read at once."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hydra_rag import api
from hydra_rag.cli.base import app, print_json, say
from hydra_rag.errors import HydraError, UsageError
from hydra_rag.paths import escape_name, typed_path

PATHS = Annotated[list[Path] | None, typer.Option(
    "--path", help="Indexed folder (repeatable; default: nearest one at or above here).")]
ALL = Annotated[bool, typer.Option("--all", help="Every registered folder.")]
TAGS = Annotated[list[str] | None, typer.Option(
    "--tag", help="The registered folders with this tag (repeatable).")]
JSON = Annotated[bool, typer.Option("--json", help="Print JSON.")]
NAME = Annotated[str, typer.Argument(
    metavar="NAME", help="A name as code writes it: `send`, `Session.send`, `Session::send`.")]


def _where(row: dict[str, Any], multi: bool) -> str:
    return f"{row['store_name']}:{row['path']}" if multi else row["path"]


def _write(line: str) -> None:
    sys.stdout.write(line + "\n")


@app.command("def")
def def_(name: NAME, path: PATHS = None, all_: ALL = False, tag: TAGS = None,
         as_json: JSON = False) -> None:
    """Where a name is defined (functions, methods, classes, types, constants), best first.
    Exit 1 when it is defined nowhere."""
    from hydra_rag.search.navigate import asked, definitions

    asked(name)
    roots, _ = api.folders(path, all_, tag)
    found = definitions(roots, name)
    if as_json:
        print_json(found)
    else:
        for row in found["results"]:
            _write(f"{_where(row, len(roots) > 1)}:{row['line_start']}-{row['line_end']}  "
                   f"{row['kind']} {row['qualified']}  {row['text']}")
    if not found["results"]:
        if not as_json:
            say(f"{name}: defined nowhere in {', '.join(map(str, roots))}")
        raise typer.Exit(1)


@app.command("refs")
def refs(name: NAME, path: PATHS = None, all_: ALL = False, tag: TAGS = None,
         as_json: JSON = False) -> None:
    """Where a name is used: calls, types and classes named, implementations (as
    `path:line: text`, tests last). Exit 1 when it is used nowhere."""
    from hydra_rag.search.navigate import MAX_RESULTS, asked, references

    asked(name)
    roots, _ = api.folders(path, all_, tag)
    found = references(roots, name)
    if as_json:
        print_json(found)
    else:
        for row in found["results"]:
            _write(f"{_where(row, len(roots) > 1)}:{row['line']}: {row['text']}")
        # The total on stderr: stdout stays one `path:line: text` per use, for editors.
        total, others = found["total"], found["others"]
        said = (f"{total} use{'' if total == 1 else 's'} of {found['name']}"
                + (f"; the first {MAX_RESULTS} shown" if total > MAX_RESULTS else "")
                if total else f"{name}: used nowhere in {', '.join(map(str, roots))}")
        if others["total"]:
            said += (f" ({others['total']} through other modules not counted: "
                     + ", ".join(f"{t}.{found['name']}" for t in others["through"][:3])
                     + (", …" if len(others["through"]) > 3 else "") + ")")
        say(said)
    if not found["results"]:
        raise typer.Exit(1)


@app.command("outline")
def outline_(
    file: Annotated[str, typer.Argument(
        metavar="PATH", help="An indexed code file, or a Markdown file or document.")],
    as_json: JSON = False,
) -> None:
    """The definitions of a file, in line order, indented by nesting; a Markdown file's or a
    document's headings."""
    from hydra_rag.search.folder_state import find_index_root
    from hydra_rag.search.navigate import outline

    target = typed_path(file)
    absolute = (target if target.is_absolute() else Path.cwd() / target).resolve()
    if not absolute.exists():  # not "no index at or above" the working folder
        raise HydraError(f"{escape_name(file)}: no such file")
    if not absolute.is_file():
        raise UsageError(f"{escape_name(file)}: not a file")
    roots = [find_index_root(absolute.parent if absolute.parent.is_dir() else Path.cwd())]
    found = outline(roots, str(absolute))
    if as_json:
        print_json(found)
        return
    if not found["results"]:
        say(f"{found['path']}: no headings found" if found["markup"] else
            f"{found['path']}: no definitions found"
            + ("" if found["language"] else " (no grammar reads this kind of file)"))
        return
    width = len(str(max(r["line_end"] for r in found["results"])))
    for r in found["results"]:
        page = f"  {r['anchor']}" if r.get("anchor") else ""  # a document's page
        _write(f"{r['line_start']:>{width}}-{r['line_end']:<{width}}  "
               f"{'  ' * r['depth']}{r['kind']} {r['name']}{page}")
