"""HTML pages and EPUB books: the readable text, headings kept, navigation and boilerplate left
out. An EPUB is a zip of XHTML chapters in the order its package file's spine gives; each
chapter is an anchor (`ch. 3`) and is read like a page.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from hydra_rag.documents import Skip
from hydra_rag.documents.text import Builder, open_zip, read_member, xml_parser

_DROP = {"script", "style", "noscript", "template", "svg", "math", "nav", "footer", "aside",
         "form", "button", "select", "textarea", "iframe", "object", "embed", "canvas", "head",
         "dialog", "menu"}
_BLOCKS = {"p", "div", "section", "article", "main", "li", "dd", "dt", "blockquote", "pre",
           "tr", "figcaption", "caption", "address", "details", "summary", "table", "ul", "ol",
           "dl", "body", "header", "figure", "hr", "center", "fieldset", "legend"}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
# id and class words of navigation and boilerplate (what readability-style extractors drop)
_BOILER = re.compile(r"(?:^|[\s_-])(nav|navbar|navigation|menu|sidebar|side-bar|breadcrumbs?|crumbs|"
                     r"widgets?|"
                     r"footer|cookies?|consent|banner|share|social|related|comments?|advert|"
                     r"ads|promo|newsletter|subscribe|skip-link|toc|masthead|topbar)(?:$|[\s_-])",
                     re.I)
_SPACE = re.compile(r"\s+")
_ID_WORDS = re.compile(r"[-_\s]+")
MAX_ROLE_WORDS = 4  # "related-posts-widget-area": an id naming a role is this short


def _tag(el: Any) -> str:
    tag = el.tag
    if not isinstance(tag, str):
        return ""  # a comment or processing instruction
    return tag.rsplit("}", 1)[-1].lower()


# Where a note stands in a book: EPUB's semantics (epub:type) and ARIA's roles for notes.
_NOTES = frozenset({"footnote", "footnotes", "endnote", "endnotes", "rearnote", "rearnotes",
                    "note", "notes", "doc-footnote", "doc-endnote", "doc-endnotes"})


def _marks(el: Any, *attrs: str) -> set[str]:
    """The words of an element's epub:type (as the HTML parser keeps it, or namespaced) and
    of `attrs`."""
    names = ("epub:type", "{http://www.idpf.org/2007/ops}type", *attrs)
    return {w.lower() for name in names for w in (el.get(name) or "").split()}


def _titled(el: Any) -> bool:
    """Is the element a section that opens with a heading of its own (among its first three
    children)? Its id is then the section's anchor (pandoc, Sphinx and static site generators
    write the title's slug or a label there: `cookie-session-backend`, `related-work`), not a
    role. A <div id="related"> with a heading is still a box of the page."""
    if _tag(el) != "section" and "section" not in (el.get("class") or "").split():
        return False
    first = [c for c in el.iterchildren() if isinstance(c.tag, str)][:3]
    return any(_tag(c) in _HEADINGS or _tag(c) in ("header", "hgroup")
               and any(_tag(h) in _HEADINGS for h in c.iterchildren() if isinstance(h.tag, str))
               for c in first)


def _link_kind(a: Any) -> str:
    """"ref" for a link that marks a note, "back" for a note's link back to its mark, else ""
    (EPUB's epub:type, ARIA's roles, and the classes pandoc and Sphinx write)."""
    marks = _marks(a, "role", "class")
    if marks & {"noteref", "doc-noteref", "footnote-ref", "footnote-reference"}:
        return "ref"
    if marks & {"backlink", "doc-backlink", "footnote-back", "fn-backref"}:
        return "back"
    return ""


def _boilerplate(el: Any, book: bool = False) -> bool:
    """Is the element navigation or a page's furniture? In a book (`book`: an EPUB chapter)
    there is no page furniture: an aside is a sidebar or a note of the text, and id and class
    words say nothing; the table of contents (nav) is still left out."""
    tag = _tag(el)
    if book and (tag == "aside" or _marks(el, "role") & _NOTES):
        return False
    if tag in _DROP:
        return True
    if el.get("hidden") is not None or el.get("aria-hidden") == "true":
        return True
    role = (el.get("role") or "").lower()
    if role in ("navigation", "banner", "contentinfo", "complementary", "search", "menu"):
        return True
    if book:
        return False
    ident = el.get("id") or ""
    if tag in _HEADINGS or len(_ID_WORDS.split(ident)) > MAX_ROLE_WORDS or _titled(el):
        # A heading's id is its anchor, and a long id is a slug of the text (pandoc writes
        # "health-related-quality-of-life…"): neither says what the element is for.
        ident = ""
    marks = f"{ident} {el.get('class') or ''}"
    return tag not in ("body", "main", "article", "html") and bool(_BOILER.search(marks))


# A block this short or shorter whose text is mostly link text is navigation ("Next: Types,
# Previous: Size, Up: Index", a menu, a list of related pages), whatever its markup.
_NAV_CHARS = 600
_NAV_LINK_SHARE = 0.5
_NAV_BLOCKS = {"div", "p", "ul", "ol", "table", "header", "section", "dl", "center"}


def _link_list(el: Any) -> bool:
    if _tag(el) not in _NAV_BLOCKS or el.xpath(".//h1|.//h2|.//h3|.//h4|.//h5|.//h6"):
        return False
    text = _SPACE.sub("", el.text_content())
    if not text or len(text) > _NAV_CHARS:
        return False
    linked = sum(len(_SPACE.sub("", a.text_content())) for a in el.iter("a"))
    return linked >= _NAV_LINK_SHARE * len(text)


def _notes(root: Any) -> dict[str, Any]:
    """The notes a page or chapter marks in its text: id → the element a note's mark links to
    (`<a epub:type="noteref" href="#fn1">`), where it is on the same page."""
    refs = [href[1:] for a in root.iter("a") if (href := a.get("href") or "").startswith("#")
             and len(href) > 1 and _link_kind(a) == "ref"]
    if not refs:
        return {}
    ids = {el.get("id"): el for el in root.getroottree().iter() if el.get("id")}
    return {ref: ids[unquote(ref)] for ref in refs if unquote(ref) in ids}


# A book's headings set as styled paragraphs (`<p class="chapter-title">`, `<div
# class="h2">`), as page-layout programs export them: the class names the part.
_HEAD_CLASS = re.compile(r"(?:^|[\s_-])(?:h([1-6])|(subhead|subheading|subtitle|section[-_]?(?:title|"
                         r"head|heading))|(chapter|part|book)[-_]?(?:title|head|heading|name)?|"
                         r"(title|heading|head)([1-6])?)(?:$|[\s_-])", re.I)
_HEAD_MAX = 150  # characters: a heading, not a styled paragraph of text


def _styled_heading(el: Any) -> int:
    """The level of a book's paragraph that its class names a heading (0: not one): 1 for a
    chapter's or part's title, 2 for a section's, or the number the class gives (`h3`)."""
    if _tag(el) not in ("p", "div") or not el.get("class"):
        return 0
    m = _HEAD_CLASS.search(el.get("class"))
    if m is None or el.xpath(".//p|.//div|.//table|.//ul|.//ol"):
        return 0
    text = " ".join(el.text_content().split())
    if not text or len(text) > _HEAD_MAX:
        return 0
    digit = m.group(1) or m.group(5)
    if digit:
        return int(digit)
    return 2 if m.group(2) else 1


def _note_text(el: Any) -> str:
    """A note's words, without its way back to the mark."""
    parts = [el.text or ""]
    for child in el:
        if not (_tag(child) == "a" and _link_kind(child) == "back"):
            parts.append(_note_text(child))
        parts.append(child.tail or "")
    return " ".join("".join(parts).split())


class _Blocks:
    """Turns an element tree into Builder blocks: inline text gathered into paragraphs. Line
    ends in the markup are spaces, as a browser shows them; a line breaks at a block, a <br>
    or inside <pre>. A note marked in the text follows the paragraph that marks it, as in a
    Word file, not the end of the chapter or page where the markup keeps it."""

    def __init__(self, b: Builder, link_lists: bool = True, book: bool = False,
                 root: Any = None) -> None:
        self.b = b
        self.buf: list[str] = []
        self.link_lists = link_lists  # drop blocks that are mostly links
        self.book = book
        self.marker = ""  # a list item's "- ", put before the item's first text
        self.notes = _notes(root) if root is not None else {}
        self.marked: list[tuple[str, Any]] = []  # (mark, note) to write after this paragraph
        self.written: set[Any] = set()  # the notes written where they were marked

    def flush(self) -> None:
        text = "".join(self.buf)
        self.buf = []
        lines = [_SPACE.sub(" ", ln).strip() for ln in text.split("\n")]
        text = "\n".join(ln for ln in lines if ln)
        if text and self.marker:
            text, self.marker = self.marker + text, ""
        self.b.block(text)
        if text and self.marked:
            marked, self.marked = self.marked, []
            for mark, note in marked:
                words = _note_text(note)
                if words:
                    self.b.block(f"[{mark}] {words}")
                    self.written.add(note)

    def text(self, piece: str | None) -> None:
        if piece:
            self.buf.append(_SPACE.sub(" ", piece))

    def walk(self, el: Any, pre: bool = False) -> None:
        tag = _tag(el)
        if el in self.written:
            return
        if tag and tag != "body" and (_boilerplate(el, self.book)
                                      or (self.link_lists and _link_list(el))):
            return
        level = _HEADINGS.get(tag) or (_styled_heading(el) if self.book else 0)
        if level:
            self.flush()
            self.b.heading(level, el.text_content())
            return
        if tag == "pre":
            self.flush()
            self.b.block(el.text_content(), wrap=False)
            return
        if tag == "a":
            kind = _link_kind(el)
            if kind == "back":  # a note's way back to its mark ("↩")
                return
            if kind == "ref":  # a note's mark in the text: "strikes.[1]", not "strikes.1"
                mark = _SPACE.sub("", el.text_content())
                self.buf.append(f"[{mark}]")
                note = self.notes.get((el.get("href") or "")[1:])
                if note is not None and note not in self.written:
                    self.marked.append((mark, note))
                return
        block = tag in _BLOCKS or tag in ("td", "th")
        if block and tag not in ("td", "th", "tr"):
            self.flush()
        if tag == "li":
            self.marker = "- "
        if tag == "br":
            self.buf.append("\n")
        if tag:
            self.text(el.text)
        for child in el:
            self.walk(child, pre)
            self.text(child.tail)
        if tag in ("td", "th"):
            self.buf.append(" | ")
        elif tag == "tr":  # a row a line, the rows of a table one block
            while self.buf and self.buf[-1] in (" ", " | "):
                self.buf.pop()
            self.buf.append("\n")
        elif block:
            self.flush()


def _content_root(doc: Any) -> Any:
    """The element holding the page's own text: <main> (or role=main), else the one <article>
    or the longest, else <body>."""
    for xp in ("//main", "//*[@role='main']"):
        found = doc.xpath(xp)
        if found:
            return found[0]
    articles = doc.xpath("//article")
    if articles:
        return max(articles, key=lambda a: len(a.text_content()))
    body = doc.find(".//body")
    return body if body is not None else doc


_DECLARED = re.compile(rb"<meta[^>]+charset|<\?xml[^>]+encoding", re.I)


def _parse_html(data: bytes) -> Any:
    """An HTML document's tree. Its encoding: a BOM or a declared charset, as lxml reads
    them; else UTF-8 when the bytes are UTF-8 (lxml alone would take Latin-1), else cp1252."""
    import lxml.html
    from lxml import etree

    encoding = None
    if not data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")) and not _DECLARED.search(data[:4096]):
        try:
            data.decode("utf-8")
            encoding = "utf-8"
        except UnicodeDecodeError:
            encoding = "cp1252"
    try:
        return lxml.html.document_fromstring(data, parser=lxml.html.HTMLParser(encoding=encoding))
    except (etree.ParserError, ValueError) as exc:
        raise Skip("corrupt", f"not readable HTML ({exc})") from None


def html(path: Path, b: Builder) -> None:
    doc = _parse_html(path.read_bytes())
    title = doc.findtext(".//title") or ""
    root = _content_root(doc)
    if title.strip() and not root.xpath(".//h1"):
        b.heading(1, title)
    blocks = _Blocks(b, root=root)
    blocks.walk(root)
    blocks.flush()
    if not b.has_text():  # a page that is a list of links (a site map, a manual's index)
        blocks = _Blocks(b, link_lists=False)
        blocks.walk(root)
        blocks.flush()


# -- EPUB -----------------------------------------------------------------------------------

_CONTAINER = "urn:oasis:names:tc:opendocument:xmlns:container"
_OPF = "http://www.idpf.org/2007/opf"


def _xml(data: bytes, what: str) -> Any:
    from lxml import etree

    try:
        return etree.fromstring(data, xml_parser())
    except etree.XMLSyntaxError as exc:
        raise Skip("corrupt", f"{what}: {exc}") from None


def epub(path: Path, b: Builder) -> None:
    with open_zip(path) as z:
        names = set(z.namelist())
        container = _xml(read_member(z, "META-INF/container.xml"), "META-INF/container.xml")
        rootfile = container.find(f".//{{{_CONTAINER}}}rootfile")
        opf_path = rootfile.get("full-path") if rootfile is not None else None
        if not opf_path:
            raise Skip("corrupt", "META-INF/container.xml names no package file")
        opf = _xml(read_member(z, opf_path), opf_path)
        base = posixpath.dirname(opf_path)
        manifest = {item.get("id"): item for item in opf.iter(f"{{{_OPF}}}item")}
        spine = [ref.get("idref") for ref in opf.iter(f"{{{_OPF}}}itemref")]
        if not spine:
            raise Skip("corrupt", f"{opf_path} has an empty spine")
        for idref in spine:
            item = manifest.get(idref)
            if item is None or "html" not in (item.get("media-type") or ""):
                continue
            name = posixpath.normpath(posixpath.join(base, unquote(item.get("href") or "")))
            if name not in names:
                continue
            doc = _parse_html(read_member(z, name))
            body = doc.find(".//body")
            before = b.chars
            b.anchor()
            root = body if body is not None else doc
            blocks = _Blocks(b, book=True, root=root)
            blocks.walk(root)
            blocks.flush()
            if b.chars == before:  # an image-only chapter (a cover): no anchor of its own
                b.starts.pop()
