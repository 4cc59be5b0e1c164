"""The text a document becomes: Markdown-like lines built block by block, with anchors."""

from __future__ import annotations

import re
import textwrap
import zipfile
from pathlib import Path

from hydra_rag.documents import Extracted, Skip
from hydra_rag.documents.ocr import Ocr

# Text a document may yield (characters). A 100 MB PDF of prose holds a few million; past
# this it is a generated monster whose chunks nobody would read.
MAX_CHARS = 32 << 20
# What the members of a zip-based document (DOCX, ODT, EPUB, PPTX) may expand to in all, and
# the ratio one large member may be compressed by: a decompression bomb fails these checks
# before anything is inflated.
MAX_UNZIPPED = 1 << 30
MAX_RATIO = 200

WRAP = 100  # columns a long line of prose is wrapped at…
WRAP_OVER = 160  # …when it is longer than this (a PDF's printed lines are left as they are)
_LOOKS_LIKE_MARKUP = re.compile(r"^(\s{0,3}(#{1,6}(\s|$)|[=-]{3,}\s*$|```|~~~))")
_SPACES = re.compile(r"[ \t\u00a0]+")


class Builder:
    """Collects a document's blocks as lines: headings become `#` lines, everything else is
    kept from being read as Markdown markup (a PDF line "# of items" is not a heading)."""

    def __init__(self, fmt: str, unit: str = "", max_chars: int = MAX_CHARS) -> None:
        self.fmt = fmt
        self.unit = unit
        self.lines: list[str] = []
        self.starts: list[int] = []
        self.chars = 0
        self.max_chars = max_chars
        # OCR of pages without text (hydra_rag.documents.ocr): the engine, or why there is none
        self.ocr: Ocr | None = None
        self.ocr_why = ""
        self.page_timeout = 60.0  # seconds OCR may take on one page
        self.unread: list[int] = []  # pages without text left unread, for want of OCR

    def _add(self, line: str) -> None:
        self.chars += len(line) + 1
        if self.chars > self.max_chars:
            raise Skip("too_large", f"more than {self.max_chars >> 20} MiB of text")
        self.lines.append(line)

    def _gap(self) -> None:
        if self.lines and self.lines[-1]:
            self._add("")

    def anchor(self, continues: bool = False) -> None:
        """The next line begins a new page, slide or chapter; `continues`: the paragraph
        before goes on there (no blank line between them)."""
        if continues:
            while self.lines and not self.lines[-1]:
                self.lines.pop()
        else:
            self._gap()
        self.starts.append(len(self.lines) + 1)

    def no_anchors(self) -> None:
        """The document's pages are not known after all: cite it by section only."""
        self.unit, self.starts = "", []

    def heading(self, level: int, title: str) -> None:
        title = _SPACES.sub(" ", title.replace("\n", " ")).strip()
        if not title:
            return
        self._gap()
        self._add("#" * max(1, min(level, 6)) + " " + title)
        self._add("")

    def block(self, text: str, wrap: bool = True) -> None:
        """A paragraph (or any run of lines): its lines kept, blank lines squeezed, and lines
        longer than WRAP_OVER (a Word or HTML paragraph is one line) wrapped between words as a
        Markdown file would be: the chunker cuts only between lines, so a paragraph on one
        line could only be a chunk's edge as a whole (`wrap=False` for code)."""
        wrote = False
        for raw in text.splitlines():
            line = raw.rstrip()
            if not line.strip():
                if wrote and self.lines and self.lines[-1]:
                    self._add("")
                continue
            pieces = (textwrap.wrap(line, WRAP, break_long_words=False, break_on_hyphens=False)
                      if wrap and len(line) > WRAP_OVER else [line])
            for piece in pieces:
                if _LOOKS_LIKE_MARKUP.match(piece):
                    piece = "\\" + piece.lstrip()
                self._add(piece)
            wrote = True
        if wrote:
            self._gap()

    def build(self) -> Extracted:
        while self.lines and not self.lines[-1]:
            self.lines.pop()
        # Anchors of blank pages share the line of the next page that has text, and those of
        # blank pages at the end lie past the last line: no line is ever cited for them.
        text = "\n".join(self.lines) + "\n" if self.lines else ""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (a broken RTF \u escape, a PDF's text)
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return Extracted(text, self.fmt, self.unit if self.starts else "", self.starts,
                         self.unread)

    def has_text(self, at_least: int = 1) -> bool:
        return sum(len(ln.strip()) for ln in self.lines if not ln.startswith("#")) >= at_least


def open_zip(path: Path) -> zipfile.ZipFile:
    """A zip-based document, checked for what it would expand to before anything is read."""
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(b"\xd0\xcf\x11\xe0"):
        # An OOXML file saved with a password is an OLE container holding the encrypted zip.
        raise Skip("encrypted", "password-protected (an encrypted Office container)")
    try:
        z = zipfile.ZipFile(path)
        infos = z.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise Skip("corrupt", f"not a readable zip ({exc})") from None
    total = sum(i.file_size for i in infos)
    if total > MAX_UNZIPPED:
        raise Skip("too_large", f"expands to {total >> 20} MiB")
    for i in infos:
        if i.flag_bits & 0x1:
            raise Skip("encrypted", f"{i.filename} is encrypted")
        if i.file_size > (8 << 20) and i.file_size > MAX_RATIO * max(i.compress_size, 1):
            raise Skip("too_large", f"{i.filename} expands {i.file_size // max(i.compress_size, 1)}"
                                    " times (a decompression bomb)")
    return z


def read_member(z: zipfile.ZipFile, name: str) -> bytes:
    try:
        return z.read(name)
    except KeyError:
        raise Skip("corrupt", f"{name} is missing") from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise Skip("corrupt", f"{name} cannot be read ({exc})") from None


def xml_parser() -> object:
    """An lxml parser that resolves no entities and fetches nothing (entity expansion bombs
    and external entities go nowhere)."""
    from lxml import etree

    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False,
                           remove_comments=True, remove_pis=True)
