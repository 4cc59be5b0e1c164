"""What a walked file gives the index: its text (a document's extracted text), its kind (code or
prose), the markup its sections are read by, and a document's extraction record; or why it is
skipped. One function, for `index` and `index --dry-run` alike."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra_rag.config import Settings
from hydra_rag.documents import Skip, format_of
from hydra_rag.documents.cache import content_key
from hydra_rag.documents.reader import Reader
from hydra_rag.errors import HydraError, UsageError
from hydra_rag.paths import escape_name, on_disk
from hydra_rag.read.chunk import markup_of
from hydra_rag.read.classify import PROSE, classify
from hydra_rag.read.walk import (
    Candidate,
    Walker,
    content_skip,
    read_indexable,
    read_text,
)


@dataclass(frozen=True)
class Source:
    text: str | None  # None: skipped for `skip`
    kind: str = ""
    markup: str | None = None
    doc: dict[str, Any] | None = None  # {"key", "format", "unit", "starts"} of a document
    skip: str = ""
    detail: str = ""  # what made a document unreadable ("password-protected", "page 3: …")
    digest: str = ""  # of the content indexed (digest_of)
    unread: tuple[int, ...] = ()  # a document's pages without text, left unread for want of OCR


def reader_for(settings: Any, index_dir: Path | None, write: bool = True) -> Reader:
    from hydra_rag.documents import ocr

    engine, why = ocr.for_settings(settings)
    return Reader(settings.document_timeout, settings.document_memory_mb, index_dir, write,
                  engine, why)


def read_source(root: Path, cand: Candidate, reader: Reader | None) -> Source:
    path = on_disk(root, cand.rel)
    fmt = format_of(cand.rel)
    if fmt and reader is not None and reader.wants(path, fmt):
        try:
            ex, key = reader.read(path, fmt)
        except Skip as s:
            # A page with no text to read (an app's index.html: a root element and scripts)
            # is still its source: indexed as code, as any file of a code folder.
            if not (fmt == "html" and s.reason == "empty"):
                return Source(None, skip=s.reason, detail=s.detail)
        else:
            if why := content_skip(ex.text, cand.included, cand.secrets):
                return Source(None, skip=why)
            return Source(ex.text, PROSE, "md",
                          {"key": key, "format": ex.format, "unit": ex.unit,
                           "starts": ex.starts}, digest=key, unread=tuple(ex.unread))
    text, why = read_indexable(path, cand.included, cand.secrets)
    if text is None:
        return Source(None, skip=why)
    return Source(text, classify(cand.rel, text[:200]), markup_of(cand.rel), digest=text_digest(text))


def text_digest(text: str) -> str:
    """The hash of a text file's content as indexed (BLAKE2b from the standard library: fast
    enough next to reading the file, and no dependency)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def digest_of(root: Path, rel: str, document: bool) -> str | None:
    """The hash a file's content has now, computed as read_source computes it (None: it cannot
    be read as text now). A document's is its extraction cache key."""
    path = on_disk(root, rel)
    if document:
        try:
            return content_key(path)
        except OSError:
            return None
    text, _ = read_text(path)
    return None if text is None else text_digest(text)


def resolve_root(path: Path) -> Path:
    """The folder to index, absolute; a clear error if it is not a folder. Every command that
    takes a folder (index, status, watch, doctor) says the same words with the same exit code:
    a folder that is not there is a mistake in what was named (exit 1); a file where a folder
    is asked for is an argument of the wrong kind, a usage error (exit 2)."""
    p = path.expanduser()
    if not p.exists():
        raise HydraError(f"{path}: no such folder")
    if not p.is_dir():
        raise UsageError(f"{path}: not a folder")
    p = p.resolve()
    try:
        str(p).encode("utf-8")
    except UnicodeEncodeError:
        # Files inside may have any name (the index stores it escaped), but the tables'
        # folder is opened by LanceDB, which takes only UTF-8 paths.
        raise HydraError(f"{escape_name(str(p))}: the folder's path is not UTF-8, and LanceDB "
                         "cannot keep an index there; rename the folder (`convmv` renames "
                         "names of an old encoding)") from None
    return p


def walker(root: Path, include: list[str] | None, exclude: list[str] | None,
           settings: Settings, include_secrets: bool = False) -> Walker:
    return Walker(root, include, exclude, max_document_bytes=int(settings.max_document_mb * (1 << 20)),
                  include_secrets=include_secrets)


def recorded_selection(meta: dict[str, Any]) -> tuple[list[str], list[str]] | None:
    """The --include and --exclude patterns the folder's last index run used, which later runs
    (index, status, watch) keep unless given others; None: not recorded (an index made before
    they were)."""
    sel = meta.get("selection")
    if not isinstance(sel, dict):
        return None
    return [str(p) for p in sel.get("include") or []], [str(p) for p in sel.get("exclude") or []]


def recorded_secrets(meta: dict[str, Any]) -> bool:
    """Whether the folder's last index run was given --include-secrets (kept for later runs
    until `--no-include-secrets` or `--clear-selection`)."""
    sel = meta.get("selection")
    return isinstance(sel, dict) and sel.get("secrets") is True
