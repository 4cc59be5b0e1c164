"""`hydra-rag watch`: keep folders' indexes current; one line per batch it re-indexed."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from hydra_rag.cli.base import app, err, out, print_json, say
from hydra_rag.errors import UsageError


def _line(ev: Any) -> str | None:
    """The human line of an event (None: nothing worth a line)."""
    clock = ev.at[11:19]
    if ev.event == "indexed":
        r = ev.report
        parts = [f"{n} {what}" for n, what in (
            (r.files_indexed, "indexed"), (r.files_removed, "removed"),
            (r.files_touched, "touched (same content)"),
            (sum(r.files_skipped.values()) if ev.initial else 0, "skipped"))
            if n]
        if not ev.initial and not parts and not r.rebuilt and not r.repaired:
            return None  # events that changed nothing indexed (an ignored file, say)
        what = ", ".join(parts) or "up to date"
        chunks = (f"; +{r.chunks_added} -{r.chunks_removed} chunks ({r.chunks_embedded} embedded)"
                  if r.chunks_added or r.chunks_removed else "")
        lead = "indexed at start" if ev.initial else f"{ev.changes} changes"
        notes = "".join(f"\n  note: {n}" for n in r.repaired + r.notes)
        return f"{clock}  {ev.root}  {lead}: {what}{chunks} in {r.elapsed_s:.1f}s{notes}"
    if ev.event == "watching":
        return f"{clock}  watching {', '.join(ev.roots)} (Ctrl-C stops)"
    if ev.event == "error":
        return f"{clock}  {ev.root}  error: {ev.message} (retrying in {ev.retry_in_s:g}s)"
    if ev.event in ("warning", "waiting"):
        return f"{clock}  {ev.root or 'watch'}  {ev.event}: {ev.message}"
    if ev.event == "progress":
        return f"{clock}  {ev.root}  {ev.message}"
    if ev.event == "stopped":
        return f"{clock}  stopped" + (f": {ev.message}" if ev.message else "")
    return None


@contextmanager
def _stops(w: Any) -> Iterator[None]:
    """Ctrl-C or SIGTERM: stop once the batch being indexed is stored (the index is left whole,
    nothing to repair); a second one stops at once (the next run repairs). Once the watch has
    ended they are ignored: the process is exiting, and Python's shutdown would otherwise give
    them their default action back (a killed process, exit status -15, for a clean stop)."""

    def on_signal(_signum: int, _frame: Any) -> None:
        if w.stopping.is_set():
            raise KeyboardInterrupt
        w.stop()

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, on_signal)
    try:
        yield
    finally:
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)


@app.command()
def watch(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="Folders to watch (default: the current one); indexed first if they are not.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Watch every registered folder.")] = False,
    tag: Annotated[list[str] | None, typer.Option(
        "--tag", help="Watch the registered folders with this tag (repeatable).")] = None,
    include: Annotated[list[str] | None, typer.Option(
        "--include", help="As for `index` (default: what each folder's last index run used).")] = None,
    exclude: Annotated[list[str] | None, typer.Option(
        "--exclude", help="As for `index` (default: what each folder's last index run used).")] = None,
    install: Annotated[bool, typer.Option(
        "--install", help="Write a systemd user unit that runs this watch at login, and print "
        "how to enable it; does not watch.")] = False,
    as_json: Annotated[bool, typer.Option(
        "--json", help="One JSON object per line: watching, indexed, waiting, error, warning, "
        "progress, stopped.")] = False,
) -> None:
    """Keep indexes current as files change: every batch of changes is indexed incrementally
    (Ctrl-C or SIGTERM stops at a consistent point)."""
    from hydra_rag.config import load_settings
    from hydra_rag.store import registry

    if (all_ or tag) and paths:
        raise UsageError("give folders or --all/--tag, not both")
    if install:
        from hydra_rag.index.systemd import install as write_unit

        extra = [a for p in include or [] for a in ("--include", p)]
        extra += [a for p in exclude or [] for a in ("--exclude", p)]
        unit = write_unit(paths or ([] if all_ or tag else [Path.cwd()]), all_, tag or [],
                          extra + (["--json"] if as_json else []))
        say(f"{'replaced' if unit.replaced else 'wrote'} {unit.path}")
        for cmd in unit.commands():
            out.print(cmd, markup=False, highlight=False)
        return
    if all_ or tag:
        # It follows the registry: with nothing registered (or tagged) yet it waits for the
        # first folder, as it does when its last one goes (a service started before any
        # `index` run is no failure to restart every 30 s).
        roots = [Path(p) for p in registry.select(all_, tag)]
    else:
        roots = paths or [Path(".")]
    from hydra_rag.index import IndexInterrupted
    from hydra_rag.index.watch import Watch, WatchEvent

    def emit(ev: WatchEvent) -> None:
        if as_json:
            print_json(ev.to_json())
            import sys

            sys.stdout.flush()  # a pipe reader sees each line as it happens
            return
        line = _line(ev)
        if line is not None:
            (err if ev.event in ("progress", "error", "warning", "waiting", "stopped")
             else out).print(
                line, markup=False, highlight=False)

    if tag and not roots:  # a tag mistyped waits as long as one not used yet: say which exist
        known = sorted({t for e in registry.stores().values() for t in e.get("tags", [])})
        emit(WatchEvent("warning", message=f"no registered folder is tagged {', '.join(tag)} "
                        f"yet (tags in use: {', '.join(known) or 'none'})"))

    def follow() -> list[Path]:  # the registry's choice now: new folders are watched too
        return [Path(p) for p in registry.select(all_, tag)]

    w = Watch(roots, load_settings(), emit, include, exclude,
              follow=follow if all_ or tag else None,
              following="registered folder" if all_ else f"folder tagged {', '.join(tag or [])}")
    interrupted = ""
    with _stops(w):
        try:
            w.run()
        except IndexInterrupted as exc:
            interrupted = str(exc)
        except KeyboardInterrupt:
            pass
    # Stopping is how a watch ends: exit 0 (a service manager counts it a clean stop).
    emit(WatchEvent("stopped", message=interrupted and f"the run in progress was interrupted; "
                                                      f"{interrupted}"))
