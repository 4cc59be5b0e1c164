"""One document to text, in this process (the worker calls this; so may tests and benches)."""

from __future__ import annotations

import re
from pathlib import Path

from hydra_rag.documents import UNITS, Extracted, Skip
from hydra_rag.documents.ocr import SCANNED_HINT, Ocr
from hydra_rag.documents.text import MAX_CHARS, Builder

# An HTML file is a page to read when it says so (a doctype or <html>) and holds no template
# syntax: templates and partials in a code base stay code, searched as written.
_PAGE = re.compile(rb"<!doctype\s+html|<html[\s>]", re.I)
# Template syntax, and the elements where it is a page's content rather than its making
# (scripts, styles, code examples), scanned in one pass: linear however the tags nest or fail
# to close.
_SCAN = re.compile(rb"<(/?)(script|style|pre|code|textarea)\b|\{\{|\{%|<%|<\?php|\{#|\$\{", re.I)


def is_page(head: bytes, data: bytes) -> bool:
    if not _PAGE.search(head):
        return False
    depth = 0
    for m in _SCAN.finditer(data):
        if m.group(2):
            depth = max(0, depth - 1) if m.group(1) else depth + 1
        elif depth == 0:
            return False  # template syntax outside scripts and code: a template
    return True


def extract_file(path: Path, fmt: str, max_chars: int = MAX_CHARS, ocr_spec: str = "",
                 ocr_why: str = "", page_timeout: float = 60.0) -> Extracted:
    """The text and anchors of one document; raises Skip when it yields none. `ocr_spec`:
    how pages without text are read (hydra_rag.documents.ocr; "" for not at all, `ocr_why`
    saying why not)."""
    from hydra_rag.documents import office, pdf, web

    handlers = {"pdf": pdf.extract, "docx": office.docx, "odt": office.odt,
                "pptx": office.pptx, "rtf": office.rtf, "epub": web.epub, "html": web.html,
                "image": _image}
    b = Builder(fmt, UNITS.get(fmt, ""), max_chars)
    b.ocr = Ocr.from_spec(ocr_spec)
    b.ocr_why = ocr_why or SCANNED_HINT
    b.page_timeout = page_timeout
    try:
        handlers[fmt](path, b)
    except FileNotFoundError:
        raise Skip("vanished") from None
    except PermissionError:
        raise Skip("unreadable") from None
    if not b.has_text():
        raise Skip("empty", "no text")
    return b.build()


def _image(path: Path, b: Builder) -> None:
    """An image file the user included (PNG, JPEG, TIFF): its text by OCR, page by page,
    headings told by size as in a PDF without an outline."""
    from hydra_rag.documents import ocr
    from hydra_rag.documents.heads import find_headings
    from hydra_rag.documents.printed import blocks, rejoin

    if b.ocr is None:
        raise Skip("scanned", f"an image; {b.ocr_why}")
    try:
        pages = ocr.read_image(b.ocr, path, b.page_timeout)
    except ocr.OcrError as exc:
        raise Skip(exc.reason, str(exc)) from None
    pages = rejoin(find_headings(pages))
    for lines in pages:
        b.anchor()
        blocks(b, lines)
    if len(pages) < 2:
        b.no_anchors()  # one picture: cited by its name and lines alone
