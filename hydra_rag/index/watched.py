"""The folders a watch holds (`hydra-rag watch`, hydra_rag.index.watch): each folder's state
between runs, one watch per folder (its `watch.lock`, held while watched), and the set kept as
it should be: a folder moved or deleted is let go, and with a followed registry (`--all`,
`--tag`) a folder registered or tagged later is taken in and one forgotten or untagged let go.
What the watch does with them, and when, is hydra_rag.index.watch's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra_rag.config import Settings
from hydra_rag.errors import HydraError
from hydra_rag.index import resolve_root
from hydra_rag.locks import file_lock, lock_holder
from hydra_rag.paths import INDEX_DIR, stat_key
from hydra_rag.read.source import walker
from hydra_rag.store import registry

DECLINED_RETRY_S = 60.0  # a followed folder another watch held is tried again this often
_UNREAD = object()  # a followed registry not read yet: unlike any stamp

Warn = Callable[[str, str], None]  # (folder, message)


@dataclass
class Folder:
    root: Path
    ident: tuple[int, int]  # (st_dev, st_ino): a folder moved away and another put there differ
    dirs: set[str] = field(default_factory=set)  # folders the last walk went through
    changes: int = 0  # relevant events since the last successful run
    due: float | None = 0.0  # when to run (monotonic); None: nothing to do
    failures: int = 0
    # Ignore files outside the folder (parents' .gitignore, the repository's exclude list, git's
    # global excludes), which no event of the folder's reports: their stat, looked at each tick
    outer: dict[Path, tuple[int, int] | None] = field(default_factory=dict)
    waiting: bool = False  # for another run's lock (said once)
    initial: bool = True

    def relevant(self, rel: str) -> bool:
        """Whether an event at `rel` can change what is indexed: it is in (or is) a folder the
        walk went through, not in the index itself or in git's own files (except git's
        exclude list). A file ignored by a pattern inside such a folder passes: its run is a
        cheap no-op."""
        if not rel or rel == INDEX_DIR or rel.startswith(INDEX_DIR + "/"):
            return False
        if rel.startswith(".git/") or rel == ".git":
            return rel == ".git/info/exclude"
        parent = rel.rpartition("/")[0]
        return parent in self.dirs or not self.dirs  # no walk yet: everything counts


def stat(path: Path) -> tuple[int, int] | None:
    """A file's version (an ignore file outside the folder)."""
    return stat_key(path, lambda st: (st.st_mtime_ns, st.st_size))


def ident(root: Path) -> tuple[int, int] | None:
    """A folder's identity: another folder put at its path differs."""
    return stat_key(root, lambda st: (st.st_dev, st.st_ino))


class Watched:
    """The folders of one watch, by root. `claim` them before watching and `release` after;
    `gone` and `from_registry` say whether the set changed (the watch then listens anew)."""

    def __init__(self, roots: list[Path], settings: Settings, warn: Warn,
                 include: list[str] | None = None, exclude: list[str] | None = None,
                 follow: Callable[[], list[Path]] | None = None) -> None:
        self.settings = settings
        self.warn = warn
        # None: each folder's own selection, as its last `index` run recorded it
        self.include, self.exclude = include, exclude
        # The registry's folders (--all, --tag) as they are now: with it, a folder registered
        # or tagged later is watched too, and one forgotten or untagged is let go.
        self.follow = follow
        # A registered folder that is not there (deleted, an unmounted drive): looked for again
        # every DECLINED_RETRY_S, so that one that comes back is watched again.
        self._absent = False
        # With `follow`: no stamp yet, so that the first look reads the registry again (a
        # folder registered after the caller chose `roots` and before now is not missed).
        self._registry: Any = registry.stamp() if follow is None else _UNREAD
        self.folders: dict[Path, Folder] = {}
        for r in roots:
            try:
                root = resolve_root(r)
            except HydraError as exc:
                if follow is None:  # a folder named on the command line
                    raise
                warn(str(r), f"registered, but {exc}; not watched (`hydra-rag stores prune` "
                             "forgets the folders that are gone)")
                self._absent = True
                continue
            found = ident(root)
            assert found is not None  # resolve_root checked it is a folder
            self.folders.setdefault(root, Folder(root, found))
        self._locks: dict[Path, ExitStack] = {}  # each folder's watch.lock, held
        self._declined: set[Path] = set()  # folders left out, said once (see claim)
        self._retried = time.monotonic()  # when the declined ones were last tried again

    def claim(self, roots: list[Path]) -> None:
        """One watch per folder: a second would only repeat the first one's runs. A folder
        another watch holds is left to it, with a warning."""
        for root in roots:
            path = root / INDEX_DIR / "watch.lock"
            held = ExitStack()
            try:
                got = held.enter_context(file_lock(path))
            except OSError as exc:
                raise HydraError(f"cannot create {path.parent}: {exc.strerror}") from None
            if got:
                self._locks[root] = held
            else:
                held.close()
            said = root in self._declined  # a followed registry offers it again at each change
            self._declined.add(root)
            if not got:
                self.let_go(root)
                if not said:
                    self.warn(str(root), "already watched by another `hydra-rag watch` (pid "
                                         f"{lock_holder(path) or '?'}); left to it")
            elif self._selection_known(root):
                self._declined.discard(root)
                f = self.folders[root]
                f.outer = {p: stat(p) for p in walker(root, None, None, self.settings).outer_files}
            else:
                self.let_go(root)
                if not said:
                    self.warn(str(root), (
                        "its index does not record the --include/--exclude it was made with "
                        "(it predates that), and watching with none could take in files it "
                        f"leaves out: run `hydra-rag index {root}` once, with the same "
                        "--include/--exclude as before if any, then watch it; or pass them to "
                        "watch"))

    def let_go(self, root: Path) -> None:
        """Stop watching a folder: forget it and release its watch.lock."""
        self.folders.pop(root, None)
        held = self._locks.pop(root, None)
        if held is not None:
            held.close()

    def release(self) -> None:
        """Every watch.lock held, released (the watch ends)."""
        for held in self._locks.values():
            held.close()
        self._locks.clear()

    def _selection_known(self, root: Path) -> bool:
        """Whether the run would use a known selection: given to watch, recorded by the last
        index run, or a folder without an index yet (its first run records one)."""
        from hydra_rag.index import recorded_selection
        from hydra_rag.store.index_dir import Store

        if self.include is not None or self.exclude is not None:
            return True
        store = Store(root)
        try:
            meta = store.read_meta() if store.dir.is_dir() else {}
        except HydraError:
            return True  # a broken meta.yaml: the run reports (and repairs) it
        return not meta or recorded_selection(meta) is not None

    # -- folders that go away, and folders registered later ------------------------------------

    def gone(self) -> bool:
        """A watched folder moved or deleted: say so, and go on watching the others. Whether
        any went (raises HydraError when none is left, unless it follows the registry: then it
        waits for a folder to be registered)."""
        went = [f for f in self.folders.values() if ident(f.root) != f.ident]
        for f in went:
            self.let_go(f.root)
            self.warn(str(f.root), "the folder was moved or deleted; no longer watched (its "
                                   "index, if it still exists, is not updated)")
        if went and self.follow is not None:
            self._absent = True  # taken back by from_registry if it comes back
        if went and not self.folders and self.follow is None:
            raise HydraError("every watched folder was moved or deleted; nothing left to watch")
        return bool(went)

    def undo_recreated(self, f: Folder) -> None:
        """A folder deleted while its run went on: the run's writes made the path again, holding
        an index of files that are gone. If nothing but that index is there, remove it and its
        registration (`gone` then says the folder went away)."""
        import shutil

        try:
            names = [p.name for p in f.root.iterdir()]
        except OSError:
            return
        if names == [INDEX_DIR]:
            shutil.rmtree(f.root, ignore_errors=True)
            try:
                registry.forget(f.root)
            except HydraError:
                pass

    def from_registry(self) -> bool:
        """With `follow`: a folder registered or tagged since is watched from now on (indexed
        first, as at start), one forgotten or untagged is let go. A registered folder that is
        not there is left alone (`hydra-rag stores prune` forgets it); one that could not be
        claimed (another watch has it) is tried again every DECLINED_RETRY_S, not at each
        change (the watch's own runs change the registry). Whether the folders watched
        changed (none left is no error: the watch waits for one to be registered)."""
        if self.follow is None:
            return False
        retry = time.monotonic() - self._retried >= DECLINED_RETRY_S
        now = registry.stamp()
        if now == self._registry and not (retry and (self._declined or self._absent)):
            return False
        self._registry = now
        if retry:
            self._retried = time.monotonic()
        wanted: dict[Path, tuple[int, int]] = {}
        self._absent = False
        for p in self.follow():
            found = ident(p)
            if found is not None:
                wanted[p.resolve()] = found
            else:
                self._absent = True
        went = [r for r in self.folders if r not in wanted]
        new = [r for r in wanted if r not in self.folders and (retry or r not in self._declined)]
        for root in went:
            self.let_go(root)
            self.warn(str(root), "no longer registered with what this watch follows "
                                 "(forgotten or untagged); no longer watched")
        for root in new:
            self.folders[root] = Folder(root, wanted[root])
            try:
                self.claim([root])
            except HydraError as exc:  # its index folder cannot be made: this one only
                self.let_go(root)
                if root not in self._declined:
                    self.warn(str(root), f"not watched: {exc}")
                self._declined.add(root)
        return bool(went) or any(r in self.folders for r in new)
