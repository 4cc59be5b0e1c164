"""What a walked file gives the index: its text (a document's extracted text), its kind (code or
prose), the markup its sections are read by, and a document's extraction record; or why it is
skipped. One function, for `index` and `index --dry-run` alike."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra_rag.chunk import markup_of
from hydra_rag.classify import PROSE, classify
from hydra_rag.documents import Skip, format_of
from hydra_rag.documents.reader import Reader
from hydra_rag.walk import Candidate, content_skip, read_indexable


@dataclass(frozen=True)
class Source:
    text: str | None  # None: skipped for `skip`
    kind: str = ""
    markup: str | None = None
    doc: dict[str, Any] | None = None  # {"key", "format", "unit", "starts"} of a document
    skip: str = ""
    detail: str = ""  # what made a document unreadable ("password-protected", "page 3: …")


def reader_for(settings: Any, index_dir: Path | None, write: bool = True) -> Reader:
    return Reader(settings.document_timeout, settings.document_memory_mb, index_dir, write)


def read_source(root: Path, cand: Candidate, reader: Reader | None) -> Source:
    path = root / cand.rel
    fmt = format_of(cand.rel)
    if fmt and reader is not None and reader.wants(path, fmt):
        try:
            ex, key = reader.read(path, fmt)
        except Skip as s:
            return Source(None, skip=s.reason, detail=s.detail)
        if not cand.included and (why := content_skip(ex.text)):
            return Source(None, skip=why)
        return Source(ex.text, PROSE, "md",
                      {"key": key, "format": ex.format, "unit": ex.unit, "starts": ex.starts})
    text, why = read_indexable(path, cand.included)
    if text is None:
        return Source(None, skip=why)
    return Source(text, classify(cand.rel, text[:200]), markup_of(cand.rel))
