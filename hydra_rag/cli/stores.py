"""Housekeeping: `stores` (the registry of indexed folders), `sessions`, `doctor`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from hydra_rag import api
from hydra_rag.cli.base import (
    app,
    out,
    print_json,
    say,
    sessions_app,
    stores_app,
)
from hydra_rag.errors import HydraError


@stores_app.command("list")
def stores_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Registered folders: tags, chunks per table, embedders, last indexed, health."""
    rows = api.store_rows()
    if as_json:
        print_json(rows)
        return
    if not rows:
        say("no indexed folders yet — run `hydra-rag index PATH`")
    for r in rows:
        # The problem, which may be long, comes last: the columns before it stay aligned.
        state = r["problem"] or f"code {r['chunks'].get('code', 0)}, prose {r['chunks'].get('prose', 0)}"
        tags = f" [{', '.join(r['tags'])}]" if r["tags"] else ""
        out.print(f"{r['path']}{tags}  {r['last_indexed'] or '-'}  {state}",
                  markup=False, highlight=False)


@stores_app.command("tag")
def stores_tag(path: Annotated[Path, typer.Argument(help="Registered folder.")],
               tags: Annotated[list[str], typer.Argument(help="Tags to add.")]) -> None:
    """Add tags to a registered folder."""
    from hydra_rag.store import registry

    out.print(f"{path}: {', '.join(registry.tag(path, tags)) or '(no tags)'}",
              markup=False, highlight=False)


@stores_app.command("untag")
def stores_untag(path: Annotated[Path, typer.Argument(help="Registered folder.")],
                 tags: Annotated[list[str], typer.Argument(help="Tags to remove.")]) -> None:
    """Remove tags from a registered folder."""
    from hydra_rag.store import registry

    out.print(f"{path}: {', '.join(registry.tag(path, tags, remove=True)) or '(no tags)'}",
              markup=False, highlight=False)


@stores_app.command("rm")
def stores_rm(
    path: Annotated[Path, typer.Argument(help="Registered folder.")],
    delete_index: Annotated[bool, typer.Option(
        "--delete-index", help="Also delete the folder's .hydra-index.")] = False,
) -> None:
    """Forget a folder (its files and, unless --delete-index, its index stay)."""
    import shutil

    from hydra_rag.store import registry

    key = registry.forget(path)
    if delete_index:
        shutil.rmtree(Path(key) / ".hydra-index", ignore_errors=True)
    out.print(f"forgot {key}" + (" and deleted its index" if delete_index else ""),
              markup=False, highlight=False)


@stores_app.command("prune")
def stores_prune() -> None:
    """Forget folders, or indexes, that no longer exist."""
    from hydra_rag.store import registry

    gone = registry.prune()
    for p in gone:
        out.print(f"forgot {p}", markup=False, highlight=False)
    if not gone:
        say("nothing to prune")




@sessions_app.command("list")
def sessions_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List saved chat sessions."""
    from hydra_rag.answer import sessions

    rows = sessions.all_sessions()
    if as_json:
        print_json(rows)
        return
    if not rows:
        say("no saved sessions")
    for r in rows:
        out.print(f"{r['name']:40} {r['model'] or '?':16} {r['turns'] if r['turns'] is not None else '?':>4}"
                  f" turns  {r['updated'] or 'damaged'}", markup=False, highlight=False)


@sessions_app.command("show")
def sessions_show(name: Annotated[str, typer.Argument(help="Session name.")],
                  as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show a session's turns: what the user asked, the answers, their sources."""
    from hydra_rag.answer import sessions

    doc = sessions.load(name)
    if doc is None:
        raise HydraError(f"no session {name!r} — see `hydra-rag sessions list`")
    if as_json:
        print_json(doc)
        return
    from hydra_rag.documents import locate

    for t in doc["turns"]:
        out.print(f">>> {t['user']}", markup=False, highlight=False)
        out.print(t["answer"], markup=False, highlight=False)
        for s in t.get("sources", []):
            where = locate(s["path"], s["line_start"], s["line_end"], s.get("page_unit") or "",
                           s.get("page_start") or 0, s.get("page_end") or 0)
            out.print(f"  [{s['n']}] {where}", markup=False, highlight=False)


@sessions_app.command("rm")
def sessions_rm(name: Annotated[str, typer.Argument(help="Session name.")]) -> None:
    """Delete a saved session."""
    from hydra_rag.answer import sessions

    if not sessions.remove(name):
        raise HydraError(f"no session {name!r} — see `hydra-rag sessions list`")
    out.print(f"removed {name}", markup=False, highlight=False)





@app.command()
def doctor(
    path: Annotated[Path | None, typer.Argument(help="Also check the index of this folder.")] = None,
) -> None:
    """Check llama.cpp, models, sidecars and an index; print what to run for each problem."""
    from hydra_rag.checks.doctor import run_checks
    from hydra_rag.read.source import resolve_root

    root = resolve_root(path) if path else None
    if root is None:
        from hydra_rag.search.folder_state import find_index_root

        try:
            root = find_index_root(Path.cwd())
        except HydraError:
            root = None
    checks = run_checks(root)
    colors = {"ok": "green", "warn": "yellow", "fail": "red"}
    for c in checks:
        out.print(Text.assemble((f"{c.status:4}", colors[c.status]), f"  {c.name}: {c.detail}"),
                  highlight=False)
        if c.fix:
            out.print(f"      → run: {c.fix}", markup=False, highlight=False)
    if any(c.status == "fail" for c in checks):
        raise typer.Exit(1)
