"""`index --dry-run`: what an index run would take and skip, without touching the index."""

from __future__ import annotations

from pathlib import Path

from hydra_rag.config import Settings
from hydra_rag.errors import HydraError
from hydra_rag.index.report import DryRunReport
from hydra_rag.read.source import (
    read_source,
    reader_for,
    recorded_secrets,
    recorded_selection,
    resolve_root,
    walker,
)
from hydra_rag.read.walk import mostly_long_lines
from hydra_rag.store.index_dir import Store


def dry_run(root: Path, include: list[str] | None = None,
            exclude: list[str] | None = None, settings: Settings | None = None,
            include_secrets: bool | None = None) -> DryRunReport:
    """Walk and read like a real run, without touching the index (documents are extracted,
    or taken from the index's cache of extracted texts, which is not written)."""
    root = resolve_root(root)
    settings = settings or Settings()
    try:
        meta = Store(root).read_meta() if Store(root).dir.is_dir() else {}
    except HydraError:
        meta = {}
    if include is None and exclude is None:
        include, exclude = recorded_selection(meta) or ([], [])
    if include_secrets is None:
        include_secrets = recorded_secrets(meta)
    walked = walker(root, include, exclude, settings, include_secrets).walk()
    files, long_lines = [], []
    problems: dict[str, str] = {}
    skipped = {k: list(v) for k, v in walked.skipped_paths.items()}
    index_dir = Store(root).dir
    reader = reader_for(settings, index_dir if index_dir.is_dir() else None, write=False)
    try:
        for cand in walked.files:
            src = read_source(root, cand, reader)
            if src.text is None:
                skipped.setdefault(src.skip, []).append(cand.rel)
                if src.detail:
                    problems[cand.rel] = f"{src.skip}: {src.detail}"
            else:
                files.append((cand.rel, src.kind))
                if mostly_long_lines(src.text):
                    long_lines.append(cand.rel)
    finally:
        reader.close()
    return DryRunReport(str(root), files, skipped, long_lines, problems)
