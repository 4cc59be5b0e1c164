"""One index run on one folder, as callers start it: the folder's lock (waiting for a watch's
short run), the run, and what an interruption or the machine leaves, said in one line."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from hydra_rag.config import Settings
from hydra_rag.errors import HydraError, IndexFault, IndexLocked, fault
from hydra_rag.index.report import IndexReport, Progress, ProgressFn
from hydra_rag.index.run import Run
from hydra_rag.locks import file_lock, lock_holder, lock_label
from hydra_rag.paths import state_dir
from hydra_rag.read.source import resolve_root
from hydra_rag.store import access, registry
from hydra_rag.store.index_dir import Store
from hydra_rag.store.lexical import parse_language

# How long a run waits for a watch's run on the same folder (incremental: seconds, as a rule).
WATCH_WAIT_S = 600.0


def index_folder(
    root: Path,
    settings: Settings,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    full: bool = False,
    tags: list[str] | None = None,
    wait: float = 0.0,
    progress: ProgressFn | None = None,
    repair: bool = False,
    language: str | None = None,
    contextualize: bool | None = None,
    stop: Callable[[], bool] | None = None,
    holder: str = "index",
    include_secrets: bool | None = None,
    embed_now: bool = True,
) -> IndexReport:
    """Bring `root/.hydra-index` up to date with the folder; returns what was done. `stop`
    is asked after each stored batch: True ends the run there, with a whole index. `holder`
    says who holds the folder's lock while it runs (a run finds a watch's lock and waits for
    it, up to WATCH_WAIT_S). `include_secrets` lets private keys and credentials in (None:
    as the folder's last run chose). `embed_now` False: chunks stored without their vector
    (setting vectors_later) are left for another run to embed. A full disk, a read-only
    folder or exhausted memory ends it in IndexFault: what happened, what the index kept,
    what to do."""
    t0 = time.monotonic()
    root = resolve_root(root)
    say = progress or (lambda _p: None)
    store = Store(root)
    run: Run | None = None
    try:
        access.create(store.dir)
        state_dir()  # sidecars started for this run log there: private before they do
        with ExitStack() as locks:
            _hold(locks, store, wait, holder, say)
            if language and language != "auto":
                parse_language(language)  # a typo fails here, before a rebuild drops anything
            run = Run(root, settings, say, language, contextualize)
            run.stop_requested = stop
            run.embed_now = embed_now
            try:
                report = run.index(include, exclude, full, repair, include_secrets)
            except KeyboardInterrupt:
                raise run.interrupted() from None
            finally:
                run.docs.close()
    except Exception as exc:
        if isinstance(exc, HydraError) or (found := fault(exc, store.dir)) is None:
            raise
        what, todo = found
        kept = (run.interrupted() if run is not None
                else "the index is as it was" if store.exists() else "nothing was indexed")
        raise IndexFault(f"{what}: {kept} ({todo} first)") from exc
    registry.register(root, tags)
    report.elapsed_s = round(time.monotonic() - t0, 3)
    return report


def _hold(locks: ExitStack, store: Store, wait: float, holder: str,
          say: Callable[[Progress], None]) -> None:
    """Take the folder's lock, waiting for a watch's run; IndexLocked if another run has it."""
    held = locks.enter_context(file_lock(store.lock_path, wait, holder))
    if not held and lock_label(store.lock_path) == "watch" and holder != "watch":
        # A watch's runs are short and incremental: wait for this one rather than fail.
        say(Progress("lock", message=f"waiting for `hydra-rag watch` (pid "
                                     f"{lock_holder(store.lock_path) or '?'}), which is "
                                     f"indexing {store.root}"))
        held = locks.enter_context(file_lock(store.lock_path, max(wait, WATCH_WAIT_S), holder))
    if not held:
        pid = lock_holder(store.lock_path)
        what = ("`hydra-rag watch`" if lock_label(store.lock_path) == "watch"
                else "`hydra-rag index`")
        raise IndexLocked(f"another {what} (pid {pid or '?'}) is updating {store.root}; "
                          "wait for it to finish, or pass --wait SECONDS")
