"""Word (DOCX), OpenDocument text (ODT), PowerPoint (PPTX) and RTF.

DOCX and PPTX are read with python-docx and python-pptx, which know the formats' quirks;
ODT's content.xml is plain enough to walk with lxml (odfpy, the one library for it, has not
been released since 2020). Headings are found by outline level, not by style name, so a
document written in German Word ("Überschrift 1") keeps them too. Pages: Word and LibreOffice
record where pages broke when the file was last laid out (w:lastRenderedPageBreak,
text:soft-page-break); without those, explicit page breaks count.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hydra_rag.documents import Skip
from hydra_rag.documents.heads import MAX_PARAGRAPH_HEADING, levels
from hydra_rag.documents.text import Builder, open_zip, read_member, xml_parser

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_HEADING_NAME = re.compile(r"^(?:heading|titre|überschrift|título|titolo|kop)\s*(\d)$", re.I)

# -- DOCX -----------------------------------------------------------------------------------


def _w(tag: str) -> str:
    return f"{{{_W}}}{tag}"


def _level_set(ppr: Any) -> int | None:
    """The heading level paragraph properties set (1-9; 0: body text), or None when they
    set none."""
    lvl = ppr.find(_w("outlineLvl")) if ppr is not None else None
    if lvl is None:
        return None
    v = int(lvl.get(_w("val"), "9"))
    return v + 1 if v < 9 else 0


def _outline_level(p: Any) -> int:
    """A paragraph's heading level (1-9), or 0 for body text: its own outline level, its
    style's (or a base style's), or a style named like a heading."""
    own = _level_set(p._p.pPr)
    if own is not None:
        return own
    style, depth = p.style, 0
    while style is not None and depth < 10:
        level = _level_set(style.element.pPr)
        if level is not None:
            return level
        name = style.name or ""
        if name.lower() == "title":
            return 1
        m = _HEADING_NAME.match(name)
        if m:
            return int(m.group(1))
        style, depth = style.base_style, depth + 1
    return 0


class _Docx:
    """A DOCX body in document order: paragraphs, tables and content controls (w:sdt, common in
    forms and contracts), each paragraph cut where a page begins inside it."""

    def __init__(self, doc: Any, b: Builder) -> None:
        self.doc = doc
        self.b = b
        # Headings told by type (heads.levels) when no paragraph is one by style or level.
        self.typed: dict[Any, int] = {}
        # Word records where pages broke when it last laid the file out; without that (files
        # written by programs), explicit page breaks are all there is.
        self.rendered = bool(doc.element.body.xpath(".//w:lastRenderedPageBreak"))
        self.notes = _notes(doc)  # (kind, id) → a footnote's or endnote's text
        self.marked: list[tuple[int, str]] = []  # notes marked in the text and not yet written
        self.numbered = 0  # notes numbered so far, as Word numbers them: in the order marked
        self.boxes: list[Any] = []  # text boxes met in a paragraph, written after it

    def _page_break(self, el: Any) -> bool:
        if self.rendered:
            return bool(el.tag == _w("lastRenderedPageBreak"))
        return bool(el.tag == _w("br") and el.get(_w("type")) == "page")

    def _inline(self, el: Any) -> Any:
        """The paragraph's elements in order, less what is not its own text: a text box's
        content is kept for after the paragraph (`boxes`), and the copy Word writes of it for
        older readers (mc:Fallback) is left out."""
        for child in el.iterchildren():
            if child.tag == _MC_FALLBACK:
                continue
            if child.tag == _w("txbxContent"):
                self.boxes.append(child)
                continue
            yield child
            yield from self._inline(child)

    def segments(self, p: Any) -> list[str]:
        """A paragraph's text, one piece per page it is on."""
        parts: list[list[str]] = [[]]
        for el in self._inline(p):
            tag = el.tag
            if tag == _w("t"):
                parts[-1].append(el.text or "")
            elif tag == _w("tab"):
                parts[-1].append("\t")
            elif self._page_break(el):
                parts.append([])
            elif tag in (_w("br"), _w("cr")) and el.get(_w("type")) != "page":
                parts[-1].append("\n")
            elif tag in (_w("footnoteReference"), _w("endnoteReference")):
                note = self.notes.get((tag, el.get(_w("id"))))
                if note:
                    self.numbered += 1
                    self.marked.append((self.numbered, note))
                    parts[-1].append(f"[{self.numbered}]")
        return ["".join(part) for part in parts]

    def after(self) -> None:
        """What a paragraph or table held that is written after it: the notes it marked, each
        a paragraph ("[1] Received 3 March…", a note's words beside the words they annotate),
        then its text boxes' paragraphs and tables."""
        for n, text in self.marked:
            self.b.block(f"[{n}] {text}")
        self.marked = []
        boxes, self.boxes = self.boxes, []
        for box in boxes:
            self.walk(box)

    def paragraph(self, p: Any) -> None:
        from docx.text.paragraph import Paragraph

        if not self.rendered and p.xpath("./w:pPr/w:pageBreakBefore[not(@w:val='0' or "
                                         "@w:val='false')]"):
            self.b.anchor()
        para = Paragraph(p, self.doc._body)
        level = self.typed.get(p) or _outline_level(para)
        mark = "" if level or not _listed(para) else "- "
        for i, text in enumerate(self.segments(p)):
            if i:
                self.b.anchor()
            if level:
                self.b.heading(level, text)
            else:
                self.b.block(mark + text if text.strip() else text)
                mark = ""
        self.after()

    def table(self, tbl: Any) -> None:
        rows: list[str] = []
        for tr in tbl.iterchildren(_w("tr")):
            cells: list[str] = []
            breaks = 0
            for tc in tr.iterchildren(_w("tc")):
                pieces = [self.segments(p) for p in _paragraphs(tc, boxes=False)]
                breaks = max(breaks, sum(len(x) - 1 for x in pieces))
                text = " ".join(" ".join(" ".join(x).split()) for x in pieces).strip()
                if not cells or cells[-1] != text:  # a merged cell repeats
                    cells.append(text)
            if breaks:  # the row goes over to a new page (each cell records it)
                self.b.block("\n".join(rows))
                rows = []
                for _ in range(breaks):
                    self.b.anchor()
            if any(cells):
                rows.append(" | ".join(cells))
        self.b.block("\n".join(rows))
        self.after()

    def walk(self, parent: Any) -> None:
        for el in parent.iterchildren():
            tag = el.tag
            if tag == _w("p"):
                self.paragraph(el)
            elif tag == _w("tbl"):
                self.table(el)
            elif tag == _w("sdt"):
                content = el.find(_w("sdtContent"))
                if content is not None:
                    self.walk(content)
            elif tag in (_w("customXml"), _w("smartTag")):
                self.walk(el)


def _paragraphs(el: Any, boxes: bool = True) -> list[Any]:
    """The w:p elements under `el` in order, without the copies under mc:Fallback, and
    without those of text boxes unless `boxes`."""
    out = []
    for p in el.iter(_w("p")):
        up = p.getparent()
        while up is not None and up is not el:
            if up.tag == _MC_FALLBACK or (not boxes and up.tag == _w("txbxContent")):
                break
            up = up.getparent()
        else:
            out.append(p)
    return out


def _listed(p: Any) -> bool:
    """Is the paragraph a list item: numbered or bulleted by its own properties or its
    style's (Word's "List Bullet", pandoc's lists)?"""
    style, depth = p.style, 0
    ppr = p._p.pPr
    while depth < 10:
        num = ppr.find(_w("numPr")) if ppr is not None else None
        if num is not None:
            nid = num.find(_w("numId"))
            return nid is None or nid.get(_w("val")) != "0"
        if style is None:
            return False
        if (style.name or "").lower().startswith("list"):
            return True
        ppr, style, depth = style.element.pPr, style.base_style, depth + 1
    return False


def _notes(doc: Any) -> dict[tuple[str, str | None], str]:
    """The document's footnotes and endnotes: (the tag that marks one, its id) → its text.
    python-docx does not read them; their parts are plain WordprocessingML."""
    from lxml import etree

    out: dict[tuple[str, str | None], str] = {}
    for rel in doc.part.rels.values():
        kind = rel.reltype.rsplit("/", 1)[-1]
        if kind not in ("footnotes", "endnotes") or rel.is_external:
            continue
        try:
            root = etree.fromstring(rel.target_part.blob, xml_parser())
        except etree.XMLSyntaxError:
            continue  # a broken notes part costs the notes, not the document
        mark = _w("footnoteReference" if kind == "footnotes" else "endnoteReference")
        for note in root.iterchildren(_w(kind[:-1])):
            if note.get(_w("type")) in ("separator", "continuationSeparator",
                                        "continuationNotice"):
                continue
            paras = [" ".join("".join(t.text or "" for t in p.iter(_w("t"))).split())
                     for p in note.iter(_w("p"))]
            text = " ".join(x for x in paras if x)
            if text:
                out[(mark, note.get(_w("id")))] = text
    return out


def _default_size(doc: Any) -> float:
    """The size of text that sets none: the Normal style's, else 11 pt (Word's)."""
    try:
        size = doc.styles["Normal"].font.size
    except KeyError:
        size = None
    return float(size.pt) if size is not None else 11.0


def _type(p: Any, default: float) -> tuple[float, bool, str] | None:
    """A paragraph's type as heads.levels reads it: the largest size its runs set (`default`
    where none does), whether every run with text is bold, its text. None inside a table."""
    if any(a.tag == _w("tbl") for a in p.iterancestors()):
        return None
    size, bolds, text = 0.0, [], []
    for r in p.iter(_w("r")):
        t = "".join(x.text or "" for x in r.iter(_w("t")))
        if not t.strip():
            continue
        rpr = r.find(_w("rPr"))
        sz = rpr.find(_w("sz")) if rpr is not None else None
        val = sz.get(_w("val"), "") if sz is not None else ""
        if val.isdigit():
            size = max(size, int(val) / 2)
        b = rpr.find(_w("b")) if rpr is not None else None
        bolds.append(b is not None and b.get(_w("val"), "true") not in ("0", "false"))
        text.append(t)
    return (size or default, bool(bolds) and all(bolds), "".join(text))


def docx(path: Path, b: Builder) -> None:
    open_zip(path).close()
    import docx as python_docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.text.paragraph import Paragraph

    try:
        doc = python_docx.Document(str(path))
    except (PackageNotFoundError, KeyError, ValueError) as exc:
        raise Skip("corrupt", f"not a Word document ({exc})") from None
    b.anchor()
    walker = _Docx(doc, b)
    body = doc.element.body
    paragraphs = _paragraphs(body)
    if not any(_outline_level(Paragraph(p, doc._body)) for p in paragraphs):
        default = _default_size(doc)
        found = levels([_type(p, default) for p in paragraphs], MAX_PARAGRAPH_HEADING)
        walker.typed = {p: lv for p, lv in zip(paragraphs, found, strict=True) if lv}
    walker.walk(body)
    if len(b.starts) == 1:
        b.no_anchors()  # no page breaks recorded: the pages are not known


# -- ODT ------------------------------------------------------------------------------------

_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"


def _t(tag: str) -> str:
    return f"{{{_TEXT}}}{tag}"


def _odf_segments(el: Any, pages: bool, notes: list[tuple[str, str]] | None = None) -> list[str]:
    """A paragraph's text, one piece per page it is on (cut at text:soft-page-break when the
    document records pages): spaces (text:s), tabs and line breaks spelled out; a note's mark
    as "[1]", its (mark, text) added to `notes` (dropped when None)."""
    parts: list[list[str]] = [[el.text or ""]]
    for child in el:
        tag = child.tag
        if tag == _t("soft-page-break"):
            if pages:
                parts.append([])
        elif tag == _t("s"):
            parts[-1].append(" " * int(child.get(_t("c"), "1") or 1))
        elif tag == _t("tab"):
            parts[-1].append("\t")
        elif tag == _t("line-break"):
            parts[-1].append("\n")
        elif tag == _t("note"):
            body = child.find(_t("note-body"))
            if notes is not None and body is not None:
                text = " ".join(" ".join(_odf_text(p).split())
                                for p in body.iter(_t("p"))).strip()
                if text:
                    mark = (child.findtext(_t("note-citation")) or "").strip() \
                        or str(len(notes) + 1)
                    notes.append((mark, text))
                    parts[-1].append(f"[{mark}]")
        else:
            inner = _odf_segments(child, pages, notes)
            parts[-1].append(inner[0])
            parts.extend([x] for x in inner[1:])
        parts[-1].append(child.tail or "")
    return ["".join(p) for p in parts]


def _odf_text(el: Any) -> str:
    return "".join(_odf_segments(el, False))


_ROW_GROUPS = {f"{{{_TABLE}}}{t}" for t in ("table", "table-rows", "table-header-rows",
                                              "table-row-group")}


def _odf_table(table: Any, b: Builder, pages: bool) -> None:
    row_tag, brk = f"{{{_TABLE}}}table-row", _t("soft-page-break")
    rows: list[str] = []
    for el in table.iter(row_tag, brk):
        if el.tag == brk:
            parent = el.getparent()
            if pages and parent is not None and parent.tag in _ROW_GROUPS:
                b.block("\n".join(rows))  # a break between rows (one inside a cell's paragraph
                rows = []  # is the row's, below)
                b.anchor()
            continue
        if pages and el.find(f".//{brk}") is not None:  # the row goes over to a new page
            b.block("\n".join(rows))
            rows = []
            b.anchor()
        cells = [" ".join(_odf_text(p) for p in c.iter(_t("p"))).strip()
                 for c in el.iter(f"{{{_TABLE}}}table-cell")]
        if any(cells):
            rows.append(" | ".join(cells))
    b.block("\n".join(rows))


def _odf_walk(el: Any, b: Builder, pages: bool, item: bool = False) -> None:
    """The body's paragraphs, headings, tables and lists in order; each note after the
    paragraph that marks it; a list item's first paragraph marked "- " (`item`)."""
    for child in el:
        tag = child.tag
        if tag in (_t("h"), _t("p")):
            level = int(child.get(_t("outline-level"), "1") or 1) if tag == _t("h") else 0
            notes: list[tuple[str, str]] = []
            for i, text in enumerate(_odf_segments(child, pages, notes)):
                if i:
                    b.anchor()
                if level:
                    b.heading(level, text)
                else:
                    b.block("- " + text if item and text.strip() else text)
                    item = item and not text.strip()
            for mark, note in notes:
                b.block(f"[{mark}] {note}")
        elif tag == _t("soft-page-break") and pages:
            b.anchor()
        elif tag == f"{{{_TABLE}}}table":
            _odf_table(child, b, pages)
        elif tag == _t("list-item"):
            _odf_walk(child, b, pages, item=True)
        elif tag in (_t("list"), _t("section"), _t("list-header"), _t("index-body"),
                     _t("table-of-content")):
            _odf_walk(child, b, pages)


def odt(path: Path, b: Builder) -> None:
    from lxml import etree

    with open_zip(path) as z:
        data = read_member(z, "content.xml")
    try:
        root = etree.fromstring(data, xml_parser())
    except etree.XMLSyntaxError as exc:
        raise Skip("corrupt", f"content.xml: {exc}") from None
    text = root.find(f"{{{_OFFICE}}}body/{{{_OFFICE}}}text")
    if text is None:
        raise Skip("corrupt", "no text body (not a text document)")
    pages = text.find(f".//{_t('soft-page-break')}") is not None
    b.anchor()
    _odf_walk(text, b, pages)
    if len(b.starts) == 1:
        b.no_anchors()


# -- PPTX -----------------------------------------------------------------------------------


def _shape_text(shape: Any, out: list[str]) -> None:
    if getattr(shape, "shape_type", None) == 6:  # a group
        for s in shape.shapes:
            _shape_text(s, out)
        return
    if getattr(shape, "has_table", False):
        for row in shape.table.rows:
            cells = [" ".join(c.text.split()) for c in row.cells]
            if any(cells):
                out.append(" | ".join(cells))
        return
    if getattr(shape, "has_text_frame", False):
        for para in shape.text_frame.paragraphs:
            text = "".join(r.text for r in para.runs) or para.text
            if text.strip():
                out.append(("  " * para.level) + text)


def pptx(path: Path, b: Builder) -> None:
    open_zip(path).close()
    from pptx import Presentation
    from pptx.exc import PackageNotFoundError

    try:
        prs = Presentation(str(path))
    except (PackageNotFoundError, KeyError, ValueError) as exc:
        raise Skip("corrupt", f"not a PowerPoint file ({exc})") from None
    for n, slide in enumerate(prs.slides, start=1):
        b.anchor()
        title_shape = slide.shapes.title
        title = title_shape.text if title_shape is not None and title_shape.has_text_frame else ""
        b.heading(1, title.strip() or f"Slide {n}")
        lines: list[str] = []
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            _shape_text(shape, lines)
        b.block("\n".join(lines))
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None and notes.text.strip():
                b.block("Notes: " + notes.text)


# -- RTF ------------------------------------------------------------------------------------


def rtf(path: Path, b: Builder) -> None:
    from striprtf.striprtf import rtf_to_text

    data = path.read_bytes()
    if not data.lstrip().startswith(b"{\\rtf"):
        raise Skip("corrupt", "not an RTF file")
    try:
        text = rtf_to_text(data.decode("latin-1"), errors="ignore")
    except Exception as exc:  # noqa: BLE001 - striprtf raises whatever a bad file causes
        raise Skip("corrupt", str(exc)) from None
    b.block(text)
