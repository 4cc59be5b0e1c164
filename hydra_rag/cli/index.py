"""`hydra-rag index`: a folder into its .hydra-index, with progress on stderr; `hydra-rag status`:
whether that index is current, read-only."""

from __future__ import annotations

import shlex
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from hydra_rag.cli.base import (
    app,
    err,
    out,
    print_json,
    say,
)
from hydra_rag.documents import skip_label
from hydra_rag.errors import UsageError


class _ProgressView:
    """A rich progress bar on a terminal; plain lines when stderr is not one. Both show files,
    chunks, the embedding rate and the time left, measured by bytes (files wait for their
    batch to be stored; the bytes of a batch move as its chunks are embedded)."""

    PLAIN_EVERY_S = 30.0  # a plain line at least this often, and per 512 chunks

    def __init__(self) -> None:
        self.live = err.is_terminal
        self.bar: Any = None
        self.task: Any = None
        self._last_plain = (-1, 0.0)
        self._t0: float | None = None
        self._stage = ""

    def __call__(self, p: Any) -> None:
        if p.stage not in ("embed", "vectors") or p.message:
            if p.message:
                self.stop()
                say(p.message)
            return
        now = time.monotonic()
        if self._t0 is None or p.stage != self._stage:  # phase two has a rate of its own
            self._t0, self._stage, self._last_plain = now, p.stage, (-1, 0.0)
        elapsed = now - self._t0
        rate = f"{p.chunks_done / elapsed:.1f} chunks/s" if elapsed >= 1 else "- chunks/s"
        files = (f"{p.files_done:,}/{p.files_total:,} files" if p.stage == "embed"
                 else "every file searchable")  # phase two: the vectors of stored chunks
        if self.live:
            if self.bar is None:
                from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

                self.bar = Progress(
                    TextColumn("indexing"), BarColumn(),
                    TextColumn("{task.percentage:>3.0f}% · {task.fields[files]} · "
                               "{task.fields[chunks]} chunks · {task.fields[rate]}"),
                    TimeRemainingColumn(), console=err, transient=True,
                )
                self.bar.start()
                self.task = self.bar.add_task("index", total=max(p.bytes_total, 1), files="",
                                              chunks=0, rate="")
            if p.stored_only:  # phase one: files stored, nothing embedded yet
                rate = "storing, then embedding"
            self.bar.update(self.task, completed=p.bytes_estimate, files=files,
                            chunks=f"{p.chunks_done:,}", rate=rate)
            return
        chunks, said = self._last_plain
        end = (p.files_done == p.files_total if p.stage == "embed"
               else p.bytes_estimate >= p.bytes_total)
        if end or p.chunks_done // 512 != chunks // 512 or now - said >= self.PLAIN_EVERY_S:
            self._last_plain = (p.chunks_done, now)
            share = p.bytes_estimate / p.bytes_total if p.bytes_total else 1.0
            left = ""
            if not end and share > 0.02 and elapsed >= 5:
                from hydra_rag.index.report import duration

                left = f", {duration(elapsed * (1 - share) / share)} left"
            rated = f", {rate}" if p.chunks_done and elapsed >= 1 else ""
            if p.stage == "vectors":
                if chunks == p.chunks_done:
                    return  # said already (the last request's line and the batch's)
                say(f"embedded {p.chunks_done:,}/{p.bytes_total:,} chunks ({share:.0%})"
                    f"{rated}{left}")
                return
            if p.stored_only:  # phase one: nothing embedded yet, by design
                say(f"stored {files} ({share:.0%}){left}")
                return
            say(f"indexed {files} ({share:.0%}), {p.chunks_done:,} chunks embedded{rated}{left}")

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _label(reason: str) -> str:
    """A skip reason as summaries show it; a secret's says how to index it anyway."""
    from hydra_rag.read.secrets import HINT, SECRET

    return f"{reason} ({HINT})" if reason == SECRET else skip_label(reason)


@contextmanager
def _sigterm_interrupts() -> Iterator[list[int]]:
    """SIGTERM stops a run as Ctrl-C does (what was indexed is kept, and said); yields the
    number of the signal that stopped it."""
    stopped_by = [signal.SIGINT.value]

    def on_term(signum: int, _frame: Any) -> None:
        stopped_by[0] = signum
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, on_term)
    try:
        yield stopped_by
    finally:
        signal.signal(signal.SIGTERM, before)


@app.command()
def index(
    path: Annotated[Path, typer.Argument(help="Folder to index.")] = Path("."),
    include: Annotated[list[str] | None, typer.Option(
        "--include", help="Glob of files to index even if ignored, blacklisted or skipped for "
        "their content (SVG, certificates, enormous lines; not secrets) (repeatable). Kept for "
        "later runs; --include or --exclude replaces both kept lists.")] = None,
    exclude: Annotated[list[str] | None, typer.Option(
        "--exclude", help="Glob of files to leave out (repeatable; kept like --include).")] = None,
    include_secrets: Annotated[bool | None, typer.Option(
        "--include-secrets/--no-include-secrets", help="Index private keys and credentials "
        "(.env, id_rsa, *.key, a PEM private key in any file) instead of skipping them; kept "
        "for later runs.")] = None,
    clear_selection: Annotated[bool, typer.Option(
        "--clear-selection", help="Forget the kept --include/--exclude patterns and "
        "--include-secrets.")] = False,
    full: Annotated[bool, typer.Option("--full", help="Rebuild the index from scratch.")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List what would be indexed and, per reason, what is skipped.")] = False,
    tag: Annotated[list[str] | None, typer.Option(
        "--tag", help="Tag this folder in the registry (repeatable).")] = None,
    wait: Annotated[float, typer.Option(
        "--wait", help="Seconds to wait if another run holds this folder.")] = 0.0,
    repair: Annotated[bool, typer.Option(
        "--repair", help="Check every stored chunk against files.db and fix mismatches.")] = False,
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
    background: Annotated[bool, typer.Option(
        "--background", help="Return once every file is stored and searchable (names, exact "
        "strings, words); embed the chunks in a background process (`status` shows how far).")
    ] = False,
    engine: Annotated[str | None, typer.Option(
        "--engine", help="What reads, chunks and embeds the changed files: local (default) or "
        "ray (a Ray Data job; needs `pip install 'hydra-rag[ray]'`).")] = None,
    ray_address: Annotated[str | None, typer.Option(
        "--ray-address", help="The Ray cluster for --engine ray (ray://host:10001, or host:6379 "
        "on a node of it; default: a Ray started on this machine for the run).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Index a folder into <folder>/.hydra-index (incremental; re-runs only read what changed)."""
    from hydra_rag.config import load_settings
    from hydra_rag.index import IndexInterrupted, index_folder
    from hydra_rag.index import dry_run as do_dry_run

    if clear_selection:
        if include or exclude:
            raise UsageError("--clear-selection forgets --include/--exclude: give one or the other")
        include, exclude = [], []
        include_secrets = bool(include_secrets)
    if dry_run:
        rep = do_dry_run(path, include, exclude, load_settings(), include_secrets)
        if as_json:
            print_json({"root": rep.root, "files": [{"path": p, "kind": k} for p, k in rep.files],
                        "skipped": rep.skipped, "long_lines": rep.long_lines,
                        "document_problems": rep.document_problems})
            return
        for p, k in rep.files:
            out.print(f"{k:5}  {p}", markup=False, highlight=False)
        say(f"{len(rep.files)} files would be indexed")
        for reason, paths in sorted(rep.skipped.items(), key=lambda kv: -len(kv[1])):
            say(f"skipped {len(paths):6}  {_label(reason)}: {', '.join(paths[:5])}"
                + (" …" if len(paths) > 5 else ""))
        for rel, problem in list(rep.document_problems.items())[:10]:
            say(f"  {rel}: {problem}")
        if rep.long_lines:
            say(f"warning {len(rep.long_lines):6}  mostly minified code or data on lines over "
                f"3,000 characters: {', '.join(rep.long_lines[:5])}"
                + (" …" if len(rep.long_lines) > 5 else ""))
        return
    # An embedder named on the command line is used for every table, whatever the language.
    settings = load_settings(embedder=embedder, context_model=context_model,
                             foreign_embedder="off" if embedder else None,
                             vectors_later=True if background else None, engine=engine,
                             ray_address=ray_address)
    view = _ProgressView()
    with _sigterm_interrupts() as stopped_by:
        try:
            report = index_folder(path, settings, include, exclude, full, tag, wait, view,
                                  repair, language, contextualize,
                                  include_secrets=include_secrets, embed_now=not background)
        except IndexInterrupted as exc:
            view.stop()
            say(f"interrupted: {exc}")
            raise typer.Exit(128 + stopped_by[0]) from None
        finally:
            view.stop()
    if background and report.vectors_pending:
        from hydra_rag.index.background import embed_in_background

        pid, log = embed_in_background(Path(report.root))
        report.notes.append(f"searchable now; {report.vectors_pending:,} chunks are being "
                            f"embedded in the background (pid {pid}, log {log}): `hydra-rag "
                            f"status {shlex.quote(report.root)}` shows how far")
    if as_json:
        print_json(report.to_json())
        return
    for line in report.repaired + report.notes:
        say(f"note: {line}")
    for rel, problem in list(report.document_problems.items())[:10]:
        say(f"skipped {rel}: {problem}")
    if len(report.document_problems) > 10:
        say(f"skipped {len(report.document_problems) - 10} more documents (see --json)")
    skipped = sum(report.files_skipped.values())
    out.print(
        f"{report.root}: {report.files_indexed} indexed, {report.files_unchanged} unchanged, "
        f"{report.files_removed} removed, {skipped} skipped; +{report.chunks_added} "
        f"-{report.chunks_removed} chunks (code {report.chunks_total.get('code', 0)}, "
        f"prose {report.chunks_total.get('prose', 0)}) in {report.elapsed_s:.1f}s",
        markup=False, highlight=False,
    )


@app.command()
def status(
    path: Annotated[list[Path] | None, typer.Argument(
        help="Indexed folders (default: this one).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every registered folder.")] = False,
    tag: Annotated[list[str] | None, typer.Option(
        "--tag", help="The registered folders with this tag (repeatable).")] = None,
    include: Annotated[list[str] | None, typer.Option(
        "--include", help="Diff as `index --include` would (default: the last run's "
        "--include and --exclude) (repeatable).")] = None,
    exclude: Annotated[list[str] | None, typer.Option(
        "--exclude", help="Diff as `index --exclude` would (repeatable).")] = None,
    files: Annotated[bool, typer.Option(
        "--files", help="Every file's state: indexed, skipped (why), failed (the error), "
        "added, changed, removed.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list, a folder each.")] = False,
) -> None:
    """Whether each folder's index is current, changing nothing: exit 0 when every one is,
    1 when one is stale or not indexed (for scripts and git hooks)."""
    from hydra_rag.config import load_settings
    from hydra_rag.index import statuses

    found = statuses(path, load_settings(), all_, tag, include, exclude, files)
    if as_json:
        print_json([s.to_json() for s in found])
    else:
        for s in found:
            _show_status(s)
    if any(s.state != "current" for s in found):
        raise typer.Exit(1)


def _show_status(s: Any, shown: int = 10) -> None:
    """One header line per folder; what the next run would do, and the command that does it."""
    from rich.text import Text

    styles = {"current": "green", "stale": "yellow", "not_indexed": "red"}
    head = Text(s.root, style="bold")
    head.append(f"  {s.state.replace('_', ' ')}", style=styles[s.state])
    if s.problem:
        head.append(f"  {s.problem}")
    if s.last_indexed:
        head.append(f"  indexed {s.last_indexed}", style="dim")
        head.append(f"  {s.files} files")
        for t, n in s.chunks.items():
            how = ", ".join(x for x in (s.embedders.get(t), s.languages.get(t)) if x)
            head.append(f"  {t} {n} chunks" + (f" ({how})" if how else ""))
        if s.skipped:
            head.append(f"  {sum(s.skipped.values())} skipped", style="dim")
    out.print(head, highlight=False)

    def line(text: str, style: str = "") -> None:
        out.print(Text(f"  {text}", style=style), highlight=False)

    for label, value in (("rebuild", s.rebuild), ("repair", s.repair)):
        if value:
            line(f"{label}: {value}", "yellow")
    if s.vectors and s.vectors["running"]:
        from hydra_rag.index.report import duration

        v, total = s.vectors, sum(s.chunks.values())
        pace = (f"; {v['rate']:.1f} chunks/s, {duration(v['left_s'])} left"
                if v["left_s"] is not None else "")
        line(f"embedding: vectors for {max(0, total - v['pending']):,} of {total:,} chunks"
             f"{pace} (every file is searchable by names, exact strings and words)")
    for note in s.notes:
        line(f"note: {note}", "dim")
    for label, paths in (("added", s.added), ("changed", s.changed), ("removed", s.removed)):
        for rel in paths[:shown]:
            line(f"{label:8} {rel}")
        if len(paths) > shown:
            line(f"… {len(paths) - shown} more {label}", "dim")
    if s.touched:
        line(f"{len(s.touched)} touched (a new mtime, the same content: nothing to index)", "dim")
    for f in s.file_list or []:
        detail = {"indexed": f"{f.kind}, {f.chunks} chunk{'s' if f.chunks != 1 else ''}",
                  "skipped": _label(f.reason) + (f": {f.detail}" if f.detail else "")
                  + (f" (--include {shlex.quote(f.include)})" if f.include else ""),
                  "failed": f"{f.reason}: {f.detail}" if f.detail else f.reason}.get(f.state, "")
        line(f"{f.state:8} {f.path}" + (f"  {detail}" if detail else ""),
             "red" if f.state == "failed" else "dim" if f.state == "skipped" else "")
    if s.fix:
        line(f"run: {s.fix}")
