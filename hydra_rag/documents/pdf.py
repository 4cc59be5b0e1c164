"""PDF: the text layer of each page through PDFium (pypdfium2), headings from the outline.

PDFium is the PDF engine of Chromium: fast (C++), forgiving with damaged files, and it
reports encrypted files as such. A PDF keeps no headings in its text, but most real ones
(LaTeX, Word, browsers' "save as PDF") carry an outline, the bookmarks a viewer shows: each
entry names a title, its level and a page, and becomes a heading where that title is printed.
"""

from __future__ import annotations

import re
from pathlib import Path

from hydra_rag.documents import Skip
from hydra_rag.documents.text import Builder

# A page with fewer letters or digits than this holds no text layer to speak of; a PDF made of
# such pages only is a scan (or pictures).
MIN_PAGE_TEXT = 16
MAX_OUTLINE = 20_000  # outline entries read (a hostile outline can be far longer)

_WORD = re.compile(r"\w")
_NONWORD = re.compile(r"\W+")
_DIGITS = re.compile(r"\d+")
EDGE = 2  # lines at a page's top and bottom where running heads and page numbers are printed


def _page_text(page: object) -> str:
    tp = page.get_textpage()  # type: ignore[attr-defined]
    try:
        text = tp.get_text_range()
    finally:
        tp.close()
    # PDFium marks a word hyphenated at a line's end with \x02: join the two halves.
    text = text.replace("\x02\r\n", "").replace("\x02\n", "").replace("\x02", "-")
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")


def _running(pages: list[list[str]]) -> set[str]:
    """Running heads and feet (a title, "Page 3 of 12", a bare page number): lines at the top
    or bottom of at least a tenth of the pages (and 3), digits aside. They repeat on every
    page, tell nothing and would break every paragraph that turns a page."""
    if len(pages) < 3:
        return set()
    seen: dict[str, int] = {}
    for lines in pages:
        body = [ln for ln in lines if ln.strip()]
        keys = {_edge_key(ln) for ln in body[:EDGE] + body[-EDGE:]}
        for k in keys:
            seen[k] = seen.get(k, 0) + 1
    need = max(3, len(pages) // 10)
    return {k for k, n in seen.items() if n >= need and k}


def _edge_key(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split()).casefold())


def _strip_running(lines: list[str], running: set[str]) -> list[str]:
    if not running:
        return lines
    body = [i for i, ln in enumerate(lines) if ln.strip()]
    edge = set(body[:EDGE] + body[-EDGE:])
    return [ln for i, ln in enumerate(lines) if i not in edge or _edge_key(ln) not in running]


def _outline(pdf: object, pages: int) -> dict[int, list[tuple[int, str]]]:
    """Page index → (level, title) of the outline entries that point at it, in order."""
    heads: dict[int, list[tuple[int, str]]] = {}
    try:
        for n, mark in enumerate(pdf.get_toc()):  # type: ignore[attr-defined]
            if n >= MAX_OUTLINE:
                break
            dest = mark.get_dest()
            index = dest.get_index() if dest is not None else None
            title = (mark.get_title() or "").strip()
            if index is None or not 0 <= index < pages or not title:
                continue
            heads.setdefault(index, []).append((mark.level + 1, title))
    except Exception:  # noqa: BLE001 - a broken outline costs the headings, not the text
        return {}
    return heads


MAX_TITLE_LINES = 4  # a title printed over more lines than this is not looked for
# What may stand before a printed title, spaces and dots gone: "3.2", "IV", "Chapter 3", "A.1"
_NUMBERING = re.compile(r"(?:chapter|section|part|appendix)?[a-z]?[0-9ivxlcd]*")


def _squash(s: str) -> str:
    return _NONWORD.sub("", s.casefold())


def _place(lines: list[str], heads: list[tuple[int, str]]) -> list[tuple[int, int, int, str]]:
    """Where on a page each outline title is printed: (first line, the line after it, level,
    title as printed). A title may wrap over several lines, and outlines lose the space at the
    wrap ("at this" → "atthis"), so lines are compared without spaces or punctuation. A title not
    found on the page goes after the one before it (or at the page's top)."""
    placed: list[tuple[int, int, int, str]] = []
    at = 0
    squashed = [_squash(ln) for ln in lines]
    for level, title in heads:
        want = _squash(title)
        hit = None
        for i in range(at, len(lines)) if want else ():
            if not squashed[i]:
                continue
            run = ""
            for j in range(i, min(i + MAX_TITLE_LINES, len(lines))):
                run += squashed[j]
                extra = run[: len(run) - len(want)]
                # the title alone, or after its number ("3.2 Results")
                if run.endswith(want) and _NUMBERING.fullmatch(extra):
                    hit = (i, j)
                elif j == i and len(want) > 12 and run.startswith(want):
                    hit = (i, j)  # a title run into the text after it
                if hit or len(run) > len(want) + 8:
                    break
            if hit:
                break
        if hit is None:
            placed.append((at, at, level, title))
            continue
        first, last = hit
        printed = " ".join(ln.strip() for ln in lines[first : last + 1])
        placed.append((first, last + 1, level,
                       printed if len(_squash(printed)) <= len(want) + 8 else title))
        at = last + 1
    return placed


def extract(path: Path, b: Builder) -> None:
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        msg = str(exc)
        if "password" in msg.lower():
            raise Skip("encrypted", "password-protected") from None
        raise Skip("corrupt", msg) from None
    try:
        pages = len(pdf)
        heads = _outline(pdf, pages)
        with_text = 0
        texts: list[list[str]] = []
        for index in range(pages):
            try:
                page = pdf[index]
            except pdfium.PdfiumError as exc:
                raise Skip("corrupt", f"page {index + 1}: {exc}") from None
            try:
                text = _page_text(page)
            finally:
                page.close()
            if len(_WORD.findall(text, 0, 4096)) >= MIN_PAGE_TEXT:
                with_text += 1
            texts.append(text.split("\n"))
            b.chars += len(text)  # the text limit holds while pages are gathered
            if b.chars > b.max_chars:
                raise Skip("too_large", f"more than {b.max_chars >> 20} MiB of text")
        b.chars = 0
        running = _running(texts)
        for index, page_lines in enumerate(texts):
            b.anchor()
            lines = _strip_running(page_lines, running)
            if index in heads:
                taken = 0
                for first, after, level, title in _place(lines, heads[index]):
                    b.block("\n".join(lines[taken:first]))
                    b.heading(level, title)
                    taken = max(taken, after)
                b.block("\n".join(lines[taken:]))
            else:
                b.block("\n".join(lines))
        if pages and not with_text:
            raise Skip("scanned", f"{pages} pages, none with a text layer")
    finally:
        pdf.close()
