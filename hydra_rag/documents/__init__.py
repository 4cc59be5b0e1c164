"""Documents: PDF, Word, OpenDocument, PowerPoint, EPUB, RTF and HTML pages read as text.

A document becomes Markdown-like text with its structure kept: headings as `#` lines (so the
heading-aware chunker and the section trail work as for Markdown) and anchors, the line where
each page, slide or chapter begins, so that a chunk is cited the way a reader looks it up
(`report.pdf p. 12 § Results`). Extraction runs in a worker process with a time and memory
bound (sandbox.py); its result is kept in `.hydra-index/extracted/` by content (cache.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Bumped when extraction changes what it makes of a file: cached texts of older versions are
# not used, and documents indexed by an older version are extracted again.
EXTRACTOR_VERSION = 2  # 2: headings by type (PDF, DOCX, OCR), pandoc ids, cited pages

# Suffix → format. Legacy binary Office formats (.doc, .xls, .ppt) stay skipped.
FORMATS = {
    ".pdf": "pdf",
    ".docx": "docx", ".docm": "docx",
    ".odt": "odt",
    ".pptx": "pptx",
    ".epub": "epub",
    ".rtf": "rtf",
    ".html": "html", ".htm": "html", ".xhtml": "html",
    # Read by OCR, and only when --include names them (images are left out by name otherwise)
    ".png": "image", ".jpg": "image", ".jpeg": "image", ".tif": "image", ".tiff": "image",
}
# Formats whose text may come from OCR (hydra_rag.documents.ocr): cached per OCR language.
OCR_FORMATS = ("pdf", "image")
# Anchors by format: what a page of it is called.
UNITS = {"pdf": "page", "pptx": "slide", "epub": "chapter", "docx": "page", "odt": "page",
         "image": "page"}

# Skip reasons of documents, as the index report and --dry-run count them, with what they mean.
SKIPS = {
    "encrypted": "password-protected",
    "scanned": "no text layer: a scan or pictures, and no OCR (see ocr_languages)",
    "corrupt": "broken, or not what its name says",
    "too_large": "over max_document_mb, over 32 MiB of text, or a decompression bomb",
    "timed_out": "took longer than document_timeout",
}


def skip_label(reason: str) -> str:
    """A skip reason as summaries show it: `scanned (no text layer)`; others as they are."""
    return f"{reason} (no text layer)" if reason == "scanned" else reason


def format_of(rel: str) -> str | None:
    """The document format a path's suffix names, or None for every other file."""
    dot = rel.rfind(".")
    return FORMATS.get(rel[dot:].lower()) if dot > rel.rfind("/") else None


class Skip(Exception):
    """A document that yields no text: `reason` is a key of SKIPS, `detail` says more."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass
class Extracted:
    """A document's text and anchors. `starts[i]` is the 1-based line on which anchor i+1
    (page, slide or chapter `unit`) begins; no unit, no anchors."""

    text: str
    format: str
    unit: str = ""
    starts: list[int] = field(default_factory=list)
    unread: list[int] = field(default_factory=list)  # pages without text, left unread (no OCR)

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "format": self.format, "unit": self.unit, "starts": self.starts,
                "unread": self.unread}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Extracted:
        return cls(d["text"], d["format"], d.get("unit", ""), list(d.get("starts", [])),
                   list(d.get("unread", [])))


def anchors(starts: list[int], line_start: int, line_end: int) -> tuple[int, int]:
    """The anchors (1-based page, slide or chapter numbers) lines line_start..line_end span;
    (0, 0) when the document has none."""
    if not starts:
        return 0, 0
    from bisect import bisect_right

    first = max(1, bisect_right(starts, line_start))
    last = max(first, bisect_right(starts, line_end))
    return first, last


def text_anchors(starts: list[int], line_start: int, text: str) -> tuple[int, int]:
    """`anchors` of a chunk by its text: blank lines at its ends (the gap before a new page
    belongs to the page before it) do not count."""
    lines = text.split("\n")
    filled = [i for i, ln in enumerate(lines) if ln.strip()]
    if not filled:
        return anchors(starts, line_start, line_start)
    return anchors(starts, line_start + filled[0], line_start + filled[-1])


def cite(unit: str, first: int, last: int) -> str:
    """`p. 12`, `pp. 12–13`, `slide 4`, `ch. 3`… ("" without anchors)."""
    if not unit or not first:
        return ""
    if unit == "page":
        return f"p. {first}" if first == last else f"pp. {first}–{last}"
    short = {"chapter": "ch.", "slide": "slide"}.get(unit, unit)
    plural = {"chapter": "ch.", "slide": "slides"}.get(unit, unit + "s")
    return f"{short} {first}" if first == last else f"{plural} {first}–{last}"


def page_fields(unit: str, first: int, last: int) -> dict[str, Any]:
    """The page fields of a hit, source or excerpt in JSON: all null for a file without pages."""
    return {"page_start": first or None, "page_end": last or None, "page_unit": unit or None,
            "anchor": cite(unit, first, last) or None}


def locate(path: str, line_start: int, line_end: int, unit: str = "", first: int = 0,
           last: int = 0) -> str:
    """Where a passage is, as a reader looks it up: `report.pdf p. 12` for a document with
    pages, `path:12-30` otherwise."""
    anchor = cite(unit, first, last)
    return f"{path} {anchor}" if anchor else f"{path}:{line_start}-{line_end}"
