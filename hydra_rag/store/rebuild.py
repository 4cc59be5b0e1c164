"""Rebuilding an index beside the one in use, so that a search never meets an empty index.

A rebuild (--full, another embedder, chunker or format version, contextualize switched; and a
re-analysis of the full-text column for a new language) writes a new generation of the index
(`.hydra-index/gen-N/`: tables, files.db, and its meta.yaml) while searches keep reading the
generation meta.yaml names. The switch is one `os.replace` of the new meta.yaml over the old,
under the index lock; the old generation is removed after it. What a crash leaves:

- before the switch: the old index, untouched and searched; the marker `rebuild.json` and a
  half-built `gen-N/`, which the next run resumes if it rebuilds the same way (the same
  embedders, chunker and analysis: its stored batches are kept, see `unfinished`), and
  otherwise removes (and says so);
- the switch itself is atomic: meta.yaml names the old generation or the new one;
- after it: the new index, searched; the old generation's files, which the next run removes.

A rebuild needs room for both generations until the switch.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from hydra_rag.locks import write_atomic
from hydra_rag.store.index_dir import Marker, Store, marker

# A test seam: set to a file's path, a run creates that file just before its switch and waits
# while it exists, so that a test can search (or kill the run) at that moment.
PAUSE_ENV = "HYDRA_RAG_TEST_PAUSE_BEFORE_SWITCH"


def notice(store: Store) -> str:
    """For a search: a warning when the index it reads is being rebuilt or a rebuild was
    interrupted ("" when neither)."""
    m = marker(store)
    if m is None or m.generation == store.generation:
        return ""
    if m.running():
        return (f"{store.root} is being rebuilt (started {m.started}: {m.reason}); results come "
                "from the previous index")
    return (f"a rebuild of {store.root} was interrupted (started {m.started}); results come from "
            f"the previous index until `hydra-rag index {store.root}` runs again")


def begin(live: Store, reason: str, fresh: bool = False) -> Store:
    """Start the next generation beside the live one: the marker first (searches say a rebuild
    is running; the next run knows what to remove or resume if this one dies), then its empty
    folder. `fresh`: built from the files alone, so that another run may resume it."""
    generation = max([live.generation, *live.generations()]) + 1
    new = Store(live.root, generation, staged=True)
    _mark(live, generation, reason, fresh)
    new.data_dir.mkdir()
    return new


def resume(live: Store, new: Store, reason: str) -> Store:
    """Go on building `new`, an unfinished generation (see `unfinished`), as this process's."""
    _mark(live, new.generation, reason, fresh=True)
    return new


def _mark(live: Store, generation: int, reason: str, fresh: bool) -> None:
    write_atomic(live.rebuild_path, json.dumps({
        "generation": generation, "pid": os.getpid(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"), "reason": reason, "fresh": fresh}))


def unfinished(store: Store) -> Store | None:
    """The generation an interrupted rebuild left half-built that a run may resume (called
    holding the lock, so its builder is gone): one made from the files alone (a re-analysis
    copies the old tables, and is not), whose meta.yaml says how it was being built."""
    m = marker(store)
    if m is None or not m.fresh or m.generation == store.generation:
        return None
    new = Store(store.root, m.generation, staged=True)
    return new if new.meta_path.is_file() else None


def drop(store: Store, new: Store) -> list[str]:
    """Remove the unfinished generation `new` (not resumed); returns the note that says so."""
    m = marker(store)
    freed = _mb(store.remove_generation(new.generation))
    store.rebuild_path.unlink(missing_ok=True)
    return [_removed(m, freed)]


def _removed(m: Marker | None, freed: str) -> str:
    what = f" ({m.reason}, started {m.started}, {freed})" if m is not None else f" ({freed})"
    return f"removed an unfinished rebuild{what}; searches had kept using the index from before it"


def switch(new: Store) -> None:
    """Make the staged generation `new` the one in use, then remove every other one."""
    _pause_for_tests()
    _fsync_tree(new.data_dir)  # on disk before meta.yaml names it, even across a power loss
    _replace_durably(new.meta_path, new.dir / "meta.yaml")
    new.staged = False
    for g in new.generations():
        if g != new.generation:
            new.remove_generation(g)
    new.rebuild_path.unlink(missing_ok=True)


def clean(store: Store) -> list[str]:
    """At the start of a run (holding the lock): remove what an interrupted rebuild left, a
    half-built generation or the previous one; returns what was removed, as notes. A half-built
    generation the run may resume (`unfinished`) is left to it: it resumes or `drop`s it."""
    on_disk = store.generations()
    m = marker(store)
    if len(on_disk) <= 1:  # the common case: one scandir and one failed open, no YAML read
        store.rebuild_path.unlink(missing_ok=True)  # torn, or left after a finished switch
        return []
    left = unfinished(store)
    notes = []
    for g in on_disk:
        if g == store.generation or (left is not None and g == left.generation):
            continue
        freed = _mb(store.remove_generation(g))
        if m is not None and g == m.generation:
            notes.append(_removed(m, freed))
        else:
            notes.append(f"removed the previous index ({freed}), left behind by a rebuild "
                         "interrupted after it had switched to the new one")
    if left is None:
        store.rebuild_path.unlink(missing_ok=True)
    return notes


def _replace_durably(src: Path, dst: Path) -> None:
    """Rename `src` over `dst` (one atomic step) and make the rename itself durable."""
    os.replace(src, dst)
    _fsync(dst.parent)


def _fsync_tree(folder: Path) -> None:
    """Flush every file and folder under `folder` to disk: meta.yaml must not name a generation
    whose files a power loss could still take back (writing them, LanceDB does not flush)."""
    for here, _dirs, files in os.walk(folder):
        for name in files:
            _fsync(Path(here, name))
        _fsync(Path(here))


def _fsync(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass  # a file system that cannot: nothing better to do


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"


def _pause_for_tests() -> None:
    flag = os.environ.get(PAUSE_ENV)
    if not flag:
        return
    with open(flag, "w") as f:
        f.write(str(os.getpid()))
    while os.path.exists(flag):
        time.sleep(0.05)
