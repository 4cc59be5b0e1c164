"""`index --dry-run`: what an index run would take and skip, without touching the index; and
the reading both it and the first-index estimate (estimate.py) do: the folder walked and read
as an index run would walk and read it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra_rag.config import Settings
from hydra_rag.errors import HydraError
from hydra_rag.index.report import DryRunReport
from hydra_rag.read.source import (
    Source,
    read_source,
    reader_for,
    recorded_secrets,
    recorded_selection,
    resolve_root,
    walker,
)
from hydra_rag.read.walk import Candidate, WalkResult, mostly_long_lines
from hydra_rag.store.index_dir import Store


@dataclass
class Reading:
    """A folder as an index run would read it: its walk (the recorded --include/--exclude and
    secrets choice unless given) and its index's meta.yaml ({} where there is none)."""

    root: Path
    store: Store
    meta: dict[str, Any]
    walked: WalkResult

    def each(self, settings: Settings) -> Iterator[tuple[Candidate, Source]]:
        """(candidate, source) for each file walked, read as an index run reads it: documents
        extracted, or taken from the index's cache of extracted texts, which is not written."""
        index_dir = self.store.dir
        reader = reader_for(settings, index_dir if index_dir.is_dir() else None, write=False)
        try:
            for cand in self.walked.files:
                yield cand, read_source(self.root, cand, reader)
        finally:
            reader.close()


def reading(path: Path, settings: Settings, include: list[str] | None = None,
            exclude: list[str] | None = None, include_secrets: bool | None = None) -> Reading:
    root = resolve_root(path)
    store = Store(root)
    try:
        meta = store.read_meta() if store.dir.is_dir() else {}
    except HydraError:
        meta = {}
    if include is None and exclude is None:
        include, exclude = recorded_selection(meta) or ([], [])
    if include_secrets is None:
        include_secrets = recorded_secrets(meta)
    walked = walker(root, include, exclude, settings, include_secrets).walk()
    return Reading(root, store, meta, walked)


def dry_run(root: Path, include: list[str] | None = None,
            exclude: list[str] | None = None, settings: Settings | None = None,
            include_secrets: bool | None = None) -> DryRunReport:
    """Walk and read like a real run, without touching the index."""
    settings = settings or Settings()
    read = reading(root, settings, include, exclude, include_secrets)
    files, long_lines = [], []
    problems: dict[str, str] = {}
    skipped = {k: list(v) for k, v in read.walked.skipped_paths.items()}
    for cand, src in read.each(settings):
        if src.text is None:
            skipped.setdefault(src.skip, []).append(cand.rel)
            if src.detail:
                problems[cand.rel] = f"{src.skip}: {src.detail}"
        else:
            files.append((cand.rel, src.kind))
            if mostly_long_lines(src.text):
                long_lines.append(cand.rel)
    return DryRunReport(str(read.root), files, skipped, long_lines, problems)
