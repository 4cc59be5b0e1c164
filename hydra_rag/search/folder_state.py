"""Where a folder's index stands, as a search needs to know: the folder whose index holds a
path, whether its index changed since it was last read, and how far its vectors are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra_rag.errors import HydraError
from hydra_rag.paths import INDEX_DIR, escape_name, stat_key, typed_path
from hydra_rag.store.index_dir import TABLES, Store
from hydra_rag.store.vectors import recorded as recorded_pending


def pointer(store: Store) -> tuple[int, int]:
    """meta.yaml's identity: it changes with every index run, and with a rebuild's switch."""
    return stat_key(store.meta_path, lambda st: (st.st_ino, st.st_mtime_ns)) or (-1, -1)


def find_index_root(start: Path) -> Path:
    """The nearest folder at or above `start` that has a `.hydra-index`."""
    start = typed_path(start).resolve()
    if not start.exists():  # not the index of some folder above a typo
        raise HydraError(f"{escape_name(str(start))}: no such file or folder")
    for folder in (start, *start.parents):
        if (folder / INDEX_DIR / "meta.yaml").is_file():
            return folder
    raise HydraError(
        f"no index at or above {start} — run `hydra-rag index {start}` first"
    )


def vector_coverage(store: Store, meta: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """While an index run's second phase embeds (hydra_rag.index.vectors): per table, how many
    chunks have their vector and how many there are; {} when every chunk has one."""
    waiting = recorded_pending(meta)
    if not waiting:
        return {}
    try:
        totals = store.file_list.chunk_totals()
    except HydraError:
        return {}
    return {t: (max(0, totals.get(t, 0) - waiting.get(t, 0)), totals.get(t, 0)) for t in TABLES}


def vectors_notice(coverage: dict[str, tuple[int, int]], root: Path) -> str:
    """The line a search says while vectors arrive; "" when every chunk has one."""
    if not coverage:
        return ""
    have = sum(h for h, _ in coverage.values())
    total = sum(n for _, n in coverage.values())
    if not total:  # a first run's first batch is not stored yet
        return f"{root}: being indexed, no file stored yet; search again in a moment"
    return (f"{root}: vectors for {have:,} of {total:,} chunks; results improve as they "
            "arrive (names, exact strings and words search every chunk)")
