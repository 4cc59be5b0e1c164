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
from hydra_rag.documents.heads import HEAD, LINE_END_HYPHEN, find_headings, mark, unmark
from hydra_rag.documents.printed import blocks, rejoin
from hydra_rag.documents.text import Builder

# A page with fewer letters or digits than this holds no text layer to speak of; a PDF made of
# such pages only is a scan (or pictures).
MIN_PAGE_TEXT = 16
MAX_OUTLINE = 20_000  # outline entries read (a hostile outline can be far longer)

_LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi",
                            "\ufb04": "ffl", "\ufb05": "st", "\ufb06": "st"})
_WORD = re.compile(r"\w")
_NONWORD = re.compile(r"\W+")
_DIGITS = re.compile(r"\d+")
# A gap above a line this many line pitches wide is a paragraph break: Word's default (6 pt
# after 11 pt text) is 1.45, reportlab's common 4 pt after 12 pt leading 1.33; a line's own
# pitch varies by a few hundredths.
PARA_GAP = 1.25
EDGE = 2  # lines at a page's top and bottom where running heads and page numbers are printed


_BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi", re.I)
_HYPHENS = ("\x02", "\ufffe")  # PDFium's marks for a hyphen it joined or could not map


def _page_lines(page: object) -> list[str]:
    """A page's printed lines, with a blank line where the gap above a line is wider than the
    page's usual line pitch (a paragraph break: the text layer has lines, not paragraphs)."""
    import ctypes

    import pypdfium2.raw as pdfium_raw

    tp = page.get_textpage()  # type: ignore[attr-defined]

    def top(index: int) -> float | None:
        try:
            return float(tp.get_charbox(index, loose=True)[3])
        except Exception:  # noqa: BLE001 - no box: no geometry for this character
            return None

    def style(first: int, last: int) -> str:
        """The line's type as a mark (hydra_rag.documents.heads): the size of its
        largest end and whether both ends are bold."""
        sizes = [pdfium_raw.FPDFText_GetFontSize(tp.raw, i) for i in (first, last)]
        return mark(max(sizes), all(bold(i) for i in (first, last)))

    def bold(index: int) -> bool:
        if pdfium_raw.FPDFText_GetFontWeight(tp.raw, index) >= 600:
            return True
        # The standard fonts have no weight: their name says it (Helvetica-Bold).
        name = ctypes.create_string_buffer(128)
        pdfium_raw.FPDFText_GetFontInfo(tp.raw, index, name, 128, None)
        return bool(_BOLD_NAME.search(name.value.decode("latin-1")))

    try:
        raw = tp.get_text_range()
        lines, spans = [], []  # each line, and the tops of its first and last characters
        styles: list[str] = []  # each line's type mark
        at = 0  # PDFium's text and its characters share their indices
        for line in raw.split("\r\n"):
            width = len(line)
            if line.strip():
                lead = at + len(line) - len(line.lstrip())
                spans.append((top(at), top(at + len(line.rstrip()) - 1)))
                styles.append(style(lead, at + len(line.rstrip()) - 1))
            else:
                spans.append((None, None))
                styles.append("")
            if any(h in line for h in _HYPHENS):
                # A word hyphenated where a printed line ends (PDFium has joined the two
                # lines) loses its hyphen; a hyphen inside a line stays.
                out = []
                for k, ch in enumerate(line):
                    if ch in _HYPHENS:
                        a, b = top(at + k - 1), top(at + k + 1)
                        if a is None or b is None or abs(a - b) <= 2:
                            ch = "-"
                        else:  # where a printed line ends: PDFium's soft hyphen, or either
                            ch = "" if ch == "\x02" else LINE_END_HYPHEN
                    out.append(ch)
                line = "".join(out)
            lines.append(line)
            at += width + 2
    finally:
        tp.close()
    tops = [first for first, _ in spans]
    pitches = [a - b for a, b in zip(tops, tops[1:], strict=False)
               if a is not None and b is not None and a > b]
    pitch = sorted(pitches)[len(pitches) // 2] if len(pitches) >= 4 else 0.0
    out_lines: list[str] = []
    for n, line in enumerate(lines):
        above = spans[n - 1][1] if n else None  # the line above's last character
        here = tops[n]
        if pitch and above is not None and here is not None and above - here > PARA_GAP * pitch:
            out_lines.append("")
        out_lines.append(styles[n] + line if "\r" not in line and "\n" not in line else line)
    text = "\n".join(out_lines).translate(_LIGATURES)
    return text.replace("\r", "\n").replace("\x00", "").split("\n")


_PARA_END = re.compile(r"[.!?:;)\]\"\u201d]\s*$")
_PARA_START = re.compile(r"^\s*[\w\"\u201c(\[•–-]")


def _full_width(lines: list[str]) -> int:
    """The length of a full printed line on a page (0: too few lines to tell)."""
    widths = sorted(len(ln.strip()) for ln in lines if ln.strip())
    return widths[int(len(widths) * 0.9)] if len(widths) >= 6 else 0


def _ends_paragraph(line: str, full: int) -> bool:
    """A line that ends a sentence well short of the full line width."""
    return bool(full) and len(line.strip()) < 0.75 * full and bool(_PARA_END.search(line))


def _paragraphs(lines: list[str], full: int) -> list[str]:
    """A page's printed lines with a blank line where a paragraph ends. A PDF's text layer has
    lines but no paragraphs, and the chunker prefers to end a chunk between paragraphs."""
    if not full:
        return lines
    out: list[str] = []
    for i, line in enumerate(lines):
        out.append(line)
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if nxt.strip() and line.strip() and _ends_paragraph(line, full) and _PARA_START.match(nxt):
            out.append("")
    return out


_ITEM = re.compile(r"^\s*([•▪◦‣*–-]|\(?\d{1,3}[.)]|[a-z][.)])\s")


def _reflow(lines: list[str], full: int) -> list[str]:
    """A paragraph's printed lines joined into one (the Builder wraps it again as a Markdown
    file would be): where a printer broke lines says nothing, and the chunker cuts only between
    lines. Only full lines are joined to what follows them, so lists, tables and code, whose
    lines end short, keep their lines."""
    if not full:
        return lines
    out: list[str] = []
    joinable = False  # the line before was a full line of a paragraph
    for line in lines:
        if joinable and line.strip() and not _ITEM.match(line) and not line.startswith(HEAD):
            before = out[-1].rstrip()
            # An identifier or a path broken where a printed line ends ("asn1_der_" then
            # "decoding()", "src/" then "app.py") is one word again.
            glue = "" if before.endswith(("_", "/")) and line.lstrip()[:1].isalnum() else " "
            out[-1] = before + glue + line.strip()
        else:
            out.append(line)
        joinable = (bool(line.strip()) and len(line.strip()) >= 0.85 * full
                    and not line.startswith(HEAD))
    return out


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


def _heads_over_turns(pages: list[list[str]]) -> list[list[str]]:
    """A heading told by type that a page turn (or a column's end) cuts in two: the next
    page's first line, a heading of the same level, ends the title on the page it starts."""
    for a, b in zip(pages, pages[1:], strict=False):
        end = next((i for i in range(len(a) - 1, -1, -1) if a[i].strip()), None)
        if end is None or not a[end].startswith(HEAD):
            continue
        while (start := next((i for i, ln in enumerate(b) if ln.strip()), None)) is not None \
                and b[start].startswith(a[end][:2]):  # HEAD and the same level
            a[end] = f"{a[end].rstrip()} {b[start][2:].strip()}"
            del b[start]
    return pages


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


def _has_images(page: object) -> bool:
    import pypdfium2.raw as raw

    images = page.get_objects(filter=(raw.FPDF_PAGEOBJ_IMAGE,), max_depth=3)  # type: ignore[attr-defined]
    return next(images, None) is not None


def _ocr_page(page: object, b: Builder, number: int) -> list[str]:
    """The printed lines OCR reads on a page without a text layer (rendered at ocr.DPI, grey),
    each marked with its size as the text layer's lines are (heads.mark)."""
    from hydra_rag.documents import ocr

    assert b.ocr is not None
    bitmap = page.render(scale=ocr.DPI / 72, grayscale=True)  # type: ignore[attr-defined]
    try:
        if bitmap.n_channels != 1:
            raise Skip("corrupt", "PDFium did not render a grey page")
        try:
            return ocr.read_gray(b.ocr, bitmap.width, bitmap.height, bitmap.stride,
                                 bytes(bitmap.buffer), b.page_timeout)
        except ocr.OcrError as exc:
            raise Skip(exc.reason, f"page {number}: {exc}") from None
    finally:
        bitmap.close()


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
        with_text = scanned = 0  # pages: with text, read by OCR
        texts: list[list[str]] = []
        for index in range(pages):
            try:
                page = pdf[index]
            except pdfium.PdfiumError as exc:
                raise Skip("corrupt", f"page {index + 1}: {exc}") from None
            try:
                lines = _page_lines(page)
                text = "\n".join(lines)
                if len(_WORD.findall(text, 0, 4096)) < MIN_PAGE_TEXT and _has_images(page):
                    if b.ocr is None:
                        b.unread.append(index + 1)
                    else:
                        lines = _ocr_page(page, b, index + 1) or lines
                        text = "\n".join(lines)
                        scanned += 1
            finally:
                page.close()
            if len(_WORD.findall(text, 0, 4096)) >= MIN_PAGE_TEXT:
                with_text += 1
            texts.append(lines)
            b.chars += len(text)  # the text limit holds while pages are gathered
            if b.chars > b.max_chars:
                raise Skip("too_large", f"more than {b.max_chars >> 20} MiB of text")
        b.chars = 0
        # Without an outline, headings are told by their type (size, weight); the marks go.
        texts = unmark(texts) if heads else find_headings(texts)
        texts = rejoin(texts)
        running = _running(texts)
        texts = _heads_over_turns([_strip_running(lines, running) for lines in texts])
        last = ""  # the previous page's last line of text
        for index, lines in enumerate(texts):
            full = _full_width(lines)
            # A paragraph that runs on over the page turn stays one paragraph.
            b.anchor(continues=bool(last) and bool(full) and not _ends_paragraph(last, full))
            lines = _paragraphs(lines, full)
            last = next((ln for ln in reversed(lines) if ln.strip()), "")
            lines = _reflow(lines, full)
            if index in heads:
                taken = 0
                for first, after, level, title in _place(lines, heads[index]):
                    b.block("\n".join(lines[taken:first]))
                    b.heading(level, title)
                    taken = max(taken, after)
                b.block("\n".join(lines[taken:]))
            else:
                blocks(b, lines)
        if pages and not with_text:
            if b.unread:
                raise Skip("scanned", f"{pages} pages, none with a text layer; {b.ocr_why}")
            if scanned:
                raise Skip("scanned", f"{pages} pages without a text layer; OCR read no text")
            raise Skip("scanned", f"{pages} pages, none with a text layer")
    finally:
        pdf.close()
