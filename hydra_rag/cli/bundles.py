"""Bundles (`create`, `list`, `show`, `rm`): a model, a persona and a corpus under one alias."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hydra_rag import api
from hydra_rag.cli.base import (
    app,
    out,
    print_json,
    say,
)
from hydra_rag.errors import HydraError


@app.command()
def create(
    base: Annotated[str, typer.Argument(help="Chat model the bundle runs.")],
    persona_file: Annotated[Path, typer.Argument(
        help="Markdown persona; optional YAML front matter holds sampling parameters.")],
    alias: Annotated[str | None, typer.Argument(help="Alias (default <base>-<persona stem>).")] = None,
    rag_index: Annotated[list[Path] | None, typer.Option(
        "--rag-index", help="Folder to retrieve from on every turn (repeatable).")] = None,
    rag_tag: Annotated[list[str] | None, typer.Option(
        "--rag-tag", help="Retrieve from every indexed folder with this tag (repeatable).")] = None,
    rag_all: Annotated[bool, typer.Option("--rag-all", help="Retrieve from every indexed folder.")] = False,
    top_k: Annotated[int | None, typer.Option("--top-k", min=1, max=50, help="Passages per turn.")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite an existing alias.")] = False,
) -> None:
    """Freeze a workflow under one alias: model + persona + parameters + corpus."""
    name = api.create_bundle(base, persona_file, alias, rag_index, rag_tag, rag_all, top_k,
                             replace, warn=lambda m: say(f"warning: {m}"))
    out.print(f"created {name}: chat with `hydra-rag chat {name}`", markup=False, highlight=False)


@app.command("list")
def list_(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List chat models and bundles (with their corpus)."""
    from hydra_rag.catalog import load_catalog

    cat = load_catalog()
    rows: list[dict[str, Any]] = [
        {"id": m.id, "type": "model", "base": None, "installed": m.installed(), "corpus": None}
        for m in cat.models.values()]
    for b in cat.bundles.values():
        corpus = list(b.rag_index) + [f"tag:{t}" for t in b.rag_tags] + (["all"] if b.rag_all else [])
        rows.append({"id": b.id, "type": "bundle", "base": b.base,
                     "installed": cat.models[b.base].installed(), "corpus": corpus})
    if as_json:
        print_json(rows)
        return
    for r in rows:
        extra = f"→ {r['base']}  corpus: {', '.join(r['corpus']) or '(nearest index)'}" \
            if r["type"] == "bundle" else ("installed" if r["installed"] else "not installed")
        out.print(f"{r['id']:28} {r['type']:6}  {extra}", markup=False, highlight=False)


@app.command()
def show(alias: Annotated[str, typer.Argument(help="Model id or bundle alias.")]) -> None:
    """Show one catalog entry as YAML."""
    import yaml

    from hydra_rag.catalog import get_model, load_bundles

    bundle = load_bundles().get(alias)
    entry: Any = bundle if bundle is not None else get_model(alias)
    doc = {k: (list(v) if isinstance(v, tuple) else v) for k, v in entry.__dict__.items()
           if k != "sources" and v not in ("", None, (), {})}
    if getattr(entry, "sources", None):
        doc["sources"] = [{k: v for k, v in s.__dict__.items() if v} for s in entry.sources]
    out.print(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).rstrip(),
              markup=False, highlight=False)


@app.command()
def rm(alias: Annotated[str, typer.Argument(help="Bundle alias or user model id.")]) -> None:
    """Remove a user catalog entry (a bundle or model); shipped entries are never removed."""
    from hydra_rag.catalog import remove_user_entry

    if not (remove_user_entry("bundles", alias) or remove_user_entry("models", alias)):
        raise HydraError(f"{alias!r} is not in your catalog (shipped entries cannot be removed)")
    out.print(f"removed {alias}", markup=False, highlight=False)
