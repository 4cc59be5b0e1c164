"""Folders' indexes kept current from the operating system's file events (`hydra-rag watch`).

The events only say *when* to look: each batch runs the ordinary incremental `index` run (walk,
diff by stat and content hash, embed what changed), so a missed or coalesced event can never
leave the index wrong, and everything `index` guarantees (its lock, crash safety, repair) holds.
Events come from watchfiles (Rust `notify`: inotify on Linux, FSEvents on macOS), which keeps
collecting them while a run is in progress; a burst (a branch switch, an unpacked archive) is
gathered until the folder is quiet for a moment, then indexed in one run. Which folders are
watched, each with its lock, is hydra_rag.index.watched's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hydra_rag.config import Settings
from hydra_rag.errors import HydraError, IndexLocked
from hydra_rag.index import IndexReport, Progress, index_folder
from hydra_rag.index.watched import Folder, Watched, ident, stat

QUIET_S = 0.3  # a batch is indexed once no event came for this long (editors save in ms)
GATHER_MAX_S = 10.0  # … or after this long, while a burst goes on (the rest is the next batch)
TICK_S = 2.0  # how often an idle watch checks its folders still exist and retries failures
RETRY_S = (5.0, 15.0, 60.0, 300.0)  # waits after a run failed (a dead sidecar, a full disk)
LOCKED_RETRY_S = 2.0  # another run holds the folder: look again this soon
POLL_MS = 2000  # the fallback when the system's limit of file watches is reached
# The fallback when watchfiles gives up on a name that is not UTF-8 (its Rust side then fails
# every later call, events and polling alike): each folder is walked again this often (a run
# that finds nothing changed reads no file).
REWALK_S = 10.0


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@dataclass
class WatchEvent:
    """One thing a watch reports: `watching` (started), `indexed` (a run, after a batch of
    changes or at start), `waiting` (another run holds the folder; or, without a folder, a
    watch that follows the registry has none left to watch), `error` (a run failed; it
    is retried), `warning` (a folder moved or deleted, a fallback), `progress` (a message
    from an index run) or `stopped`."""

    event: str
    root: str = ""
    message: str = ""
    changes: int = 0  # file events this batch held for the folder
    initial: bool = False  # the run that brings the folder current when watching starts
    retry_in_s: float | None = None
    report: IndexReport | None = None
    roots: list[str] = field(default_factory=list)
    at: str = field(default_factory=_now)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"event": self.event, "at": self.at}
        if self.root:
            d["root"] = self.root
        if self.roots:
            d["roots"] = self.roots
        if self.message:
            d["message"] = self.message
        if self.event == "indexed":
            d["changes"] = self.changes
            d["initial"] = self.initial
        if self.retry_in_s is not None:
            d["retry_in_s"] = self.retry_in_s
        if self.report is not None:
            d |= {k: v for k, v in self.report.to_json().items() if k != "root"}
        return d


Emit = Callable[[WatchEvent], None]


class _Notifier(Protocol):
    def watch(self, debounce_ms: int, step_ms: int, timeout_ms: int,
              stop_event: Any) -> set[tuple[int, str]] | str: ...

    def close(self) -> None: ...


class Watch:
    """Watches folders and re-indexes each after its changes. `run()` returns after `stop()`
    (a run in progress first finishes the batch it is embedding, so the index is left whole,
    with no repair pending); raises KeyboardInterrupt on a signal while it runs without a
    handler that calls `stop()` (an interrupted run raises IndexInterrupted), and HydraError
    when no folder is left (one that follows the registry waits for a folder instead, also
    when it starts with none)."""

    def __init__(self, roots: list[Path], settings: Settings, emit: Emit,
                 include: list[str] | None = None, exclude: list[str] | None = None,
                 quiet_s: float = QUIET_S, force_polling: bool = False,
                 follow: Callable[[], list[Path]] | None = None, following: str = "") -> None:
        if not roots and follow is None:
            raise HydraError("no folder to watch")
        self.settings = settings
        self.emit = emit
        # None: each folder's own selection, as its last `index` run recorded it
        self.include, self.exclude = include, exclude
        self.quiet_s = quiet_s
        self.force_polling = force_polling
        self.watched = Watched(roots, settings, self._warn, include, exclude, follow)
        self.folders = self.watched.folders  # the same dict, kept by `watched`
        self._notifier: _Notifier | None = None
        self.stopping = threading.Event()
        self.indexing = False  # a run is in progress
        self._said_stopping = False
        self._said_none = False  # a following watch with no folder left said it waits
        self.following = following or "registered folder"  # what it follows, for that line
        self._blind = False  # watchfiles refused a name: folders are walked every REWALK_S
        self._walked = 0.0  # when they were last made due for that

    def stop(self) -> None:
        """End `run()` at the next consistent point (safe from a signal handler or a thread)."""
        self.stopping.set()

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> None:
        """Watch until `stop()`."""
        try:
            self.watched.claim(list(self.folders))
            if not self.folders and self.watched.follow is None:
                raise HydraError("no folder left to watch (see the warnings above)")
            self._watch()
        finally:
            self.watched.release()

    def _warn(self, root: str, message: str) -> None:
        self.emit(WatchEvent("warning", root, message))

    def _watch(self) -> None:
        self._open()
        try:
            self._run_due()  # bring every folder current first
            if self.stopping.is_set():
                return
            if self.folders:  # (with none, `waiting` says so)
                self.emit(WatchEvent("watching", roots=[str(f) for f in self.folders]))
            self._say_if_none()
            while not self.stopping.is_set():
                changes = self._wait(self._timeout_ms(), self.stopping)
                if changes is None:
                    return
                if changes:
                    self._route(changes)
                self._check_outer()
                if self.watched.gone():
                    self._reopen()
                if self.watched.from_registry():
                    self._reopen()
                    if self.folders:  # (with none left, `waiting` says so)
                        self.emit(WatchEvent("watching", roots=[str(f) for f in self.folders]))
                self._say_if_none()
                self._run_due()
        finally:
            self._close()

    def _say_if_none(self) -> None:
        """A watch that follows the registry and has no folder left (each forgotten, untagged,
        moved or deleted) waits for one to be registered: said once each time it happens."""
        if self.folders:
            self._said_none = False
            return
        if self._said_none:
            return
        self._said_none = True
        self.emit(WatchEvent("waiting", message=f"no {self.following} to watch now; waiting "
                             "for one to be indexed (or tagged) with what this watch follows"))

    def _wait(self, timeout_ms: int, stop: Any) -> set[tuple[int, str]] | None:
        """The next batch of events, gathered until the folders are quiet (empty: the timeout
        passed; None: `stop` was set)."""
        got = self._events(timeout_ms, stop)
        changes: set[tuple[int, str]] = set()
        deadline = time.monotonic() + GATHER_MAX_S
        while True:
            if got == "signal":
                raise KeyboardInterrupt
            if got == "stop":
                return None
            if got == "timeout" or not isinstance(got, set):
                return changes
            changes |= got
            if time.monotonic() >= deadline:
                return changes
            got = self._events(max(1, int(self.quiet_s * 1000)), stop)

    def _events(self, timeout_ms: int, stop: threading.Event) -> Any:
        """The notifier's answer (events, "timeout", "stop", "signal"). Once watchfiles fails on
        a name it cannot decode (bytes that are not UTF-8), every folder is made due each
        REWALK_S instead, which is said once: a name Linux allows never stops a watch."""
        if not self._blind:
            assert self._notifier is not None
            try:
                return self._notifier.watch(1600, 50, timeout_ms, stop)
            except RuntimeError as exc:  # watchfiles' WatchfilesRustInternalError
                self._blind = True
                self.emit(WatchEvent("warning", message=(
                    f"file events unavailable ({exc}); looking for changes every "
                    f"{REWALK_S:g} s instead")))
        if stop.wait(timeout_ms / 1000):
            return "stop"
        if time.monotonic() - self._walked >= REWALK_S:
            self._walked = time.monotonic()
            for f in self.folders.values():
                if f.due is None:
                    f.changes += 1
                    f.due = time.monotonic()
        return "timeout"

    def _timeout_ms(self) -> int:
        wait = TICK_S
        now = time.monotonic()
        for f in self.folders.values():
            if f.due is not None:
                wait = min(wait, max(f.due - now, 0.0))
        return max(1, int(wait * 1000))

    def _route(self, changes: set[tuple[int, str]]) -> None:
        """Count each event for the folder it is in, if it can matter to its index."""
        for _kind, raw in changes:
            path = Path(raw)
            for f in self.folders.values():
                try:
                    rel = path.relative_to(f.root).as_posix()
                except ValueError:
                    continue
                if rel != "." and f.relevant(rel):  # (a folder inside another counts for both)
                    f.changes += 1
                    if f.due is None:
                        f.due = time.monotonic()

    def _check_outer(self) -> None:
        """An ignore file outside a folder changed: that folder is due."""
        for f in self.folders.values():
            now = {p: stat(p) for p in f.outer}
            if now != f.outer:
                f.outer = now
                f.changes += 1
                if f.due is None:
                    f.due = time.monotonic()

    def _run_due(self) -> None:
        now = time.monotonic()
        for f in list(self.folders.values()):
            if self.stopping.is_set():
                return
            if f.due is not None and f.due <= now:
                self.indexing = True
                try:
                    self._index(f)
                finally:
                    self.indexing = False

    def _index(self, f: Folder) -> None:
        root = str(f.root)
        try:
            # --include/--exclude given to watch, else (None) the folder's own, as its last
            # index run recorded them
            report = index_folder(f.root, self.settings, self.include, self.exclude,
                                  progress=lambda p: self._progress(root, p),
                                  stop=self.stopping.is_set, holder="watch")
        except IndexLocked as exc:
            if not f.waiting:  # said once per wait, not every two seconds
                self.emit(WatchEvent("waiting", root, str(exc).split(";")[0]))
            f.waiting = True
            f.due = time.monotonic() + LOCKED_RETRY_S
            return
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001  (a full disk, a sidecar gone: retried)
            if ident(f.root) != f.ident:
                return  # the folder went away mid-run: `watched.gone` says so
            wait = RETRY_S[min(f.failures, len(RETRY_S) - 1)]
            f.failures += 1
            f.due = time.monotonic() + wait
            self.emit(WatchEvent("error", root, str(exc), retry_in_s=wait))
            return
        if ident(f.root) != f.ident:
            self.watched.undo_recreated(f)  # deleted during the run, which made its path again
            return
        self.emit(WatchEvent("indexed", root, changes=f.changes, initial=f.initial, report=report))
        f.dirs = report.dirs
        f.failures, f.waiting = 0, False
        if report.files_left:  # stopped before the end: the rest is for the next run
            return
        f.changes, f.due, f.initial = 0, None, False

    def _progress(self, root: str, p: Progress) -> None:
        # A sidecar starting, a rebuild, a re-analysis: said; walking and the full-text
        # refresh happen on every batch: not.
        if p.stage not in ("embed", "walk", "finish") and p.message:
            self.emit(WatchEvent("progress", root, p.message))
        if self.stopping.is_set() and not self._said_stopping:
            self._said_stopping = True
            self.emit(WatchEvent("progress", root, "stopping once the batch being indexed is "
                                 "stored (Ctrl-C again stops at once)"))

    # -- the notifier ----------------------------------------------------------------------------

    def _reopen(self) -> None:
        """A new notifier for the folders now watched. Events of the folders may have been in
        the old one: each is looked at again (a walk that finds nothing changed reads no file)."""
        self._close()
        self._open()
        for f in self.folders.values():
            if f.due is None:
                f.due = time.monotonic()

    def _open(self) -> None:
        from watchfiles._rust_notify import RustNotify

        paths = [str(r) for r in self.folders]
        if not self.force_polling:
            try:
                self._notifier = RustNotify(paths, False, False, POLL_MS, True, False)
                return
            except OSError as exc:
                # inotify's per-user limit of watched folders (fs.inotify.max_user_watches)
                self.emit(WatchEvent("warning", message=(
                    f"file events unavailable ({exc}); polling every {POLL_MS / 1000:g} s instead "
                    "(raise fs.inotify.max_user_watches to use events)")))
        self._notifier = RustNotify(paths, False, True, POLL_MS, True, False)

    def _close(self) -> None:
        if self._notifier is not None:
            self._notifier.close()
            self._notifier = None
