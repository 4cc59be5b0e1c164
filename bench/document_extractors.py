"""Document extractors: which library turns PDF, DOCX, ODT, EPUB and HTML into text best?

    python bench/document_extractors.py [--n 200] [--json] [--only pdf,html] [--skip-probes]

Each candidate that is installed is run in this process on the same files; one that is not
installed prints "not installed" and the run goes on. Two kinds of input:

* generated, where the text is known: SciFact abstracts (../shared/data/scifact, fixed seed)
  laid out as one multi-page PDF (headless chromium `--print-to-pdf`, or fpdf2 when chromium is
  missing), one DOCX (python-docx, a Heading 1 per title), one ODT and one EPUB (written here with
  zipfile), and one HTML page per abstract inside a nav bar, breadcrumbs, a sidebar of related
  titles, a cookie banner and a footer (half of the pages in HTML5 tags, half in classed divs);
* real files on this machine: two PDF manuals in /usr/share/doc, the texinfo HTML manual of
  libffi (whose `div.header` navigation is the boilerplate), docutils' styles.odt.

Fidelity is token-level: lowercased `\\w+` tokens as multisets; recall = |extracted ∩ truth| /
|truth|, precision = |extracted ∩ truth| / |extracted|. For HTML, "leak" is the share of the
boilerplate's tokens that come through (beyond those the article itself holds), and "head" is the
share of titles that come out marked as headings (Markdown `#`, an <hN> element, a Heading style,
justext's heading flag); "-" when the output has no heading markup at all. For PDF, the speed is
pages/s and "pages" says whether the library gives the text page by page. The reference in the
same run is a stdlib-only extractor (html.parser, zipfile + ElementTree) for every format but PDF.
Wall and CPU seconds are both shown: a library that uses threads shows CPU > wall.

Then, unless --skip-probes: each PDF library, in a subprocess with a timeout, on a PDF cut at
half its bytes, on one encrypted with a user password, and on one encrypted with an owner password
only; and, per library, its licence (installed metadata), its dependency closure, installed size,
and import time in a fresh interpreter. Generated files go to bench/.work/docs/.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from html.parser import HTMLParser
from importlib import metadata
from pathlib import Path
from xml.etree import ElementTree as ET

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "docs"
SCIFACT = HERE.parent.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
REAL_PDFS = [Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf"),
             Path("/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf")]
REAL_HTML = Path("/usr/share/doc/libffi8/html")
REAL_ODT = Path("/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/docutils/writers/"
                "odf_odt/styles.odt")

# library name -> (distribution, module to import)
LIBS = {
    "pypdfium2": ("pypdfium2", "pypdfium2"),
    "pdfminer.six": ("pdfminer.six", "pdfminer.high_level"),
    "pypdf": ("pypdf", "pypdf"),
    "kreuzberg": ("kreuzberg", "kreuzberg"),
    "python-docx": ("python-docx", "docx"),
    "docx2python": ("docx2python", "docx2python"),
    "mammoth": ("mammoth", "mammoth"),
    "trafilatura": ("trafilatura", "trafilatura"),
    "readability-lxml": ("readability-lxml", "readability"),
    "justext": ("jusText", "justext"),
    "inscriptis": ("inscriptis", "inscriptis"),
    "resiliparse": ("Resiliparse", "resiliparse.extract.html2text"),
    # what hydra-rag itself does with each format (hydra_rag.documents), in this process
    "hydra-rag": ("hydra-rag", "hydra_rag.documents.extract"),
}

_TOKEN = re.compile(r"\w+")


def tokens(text: str) -> Counter[str]:
    return Counter(_TOKEN.findall(text.lower()))


def norm(s: str) -> str:
    return " ".join(_TOKEN.findall(s.lower()))


def installed(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def licence(dist: str) -> str:
    try:
        m = metadata.metadata(dist)
    except metadata.PackageNotFoundError:
        return "?"
    lic = (m.get("License-Expression") or m.get("License") or "").replace(
        ", dependency licenses", "+deps")
    if not lic or len(lic) > 40:
        cls = [c.split("::")[-1].strip() for c in m.get_all("Classifier") or []
               if c.startswith("License ::")]
        lic = ", ".join(cls) or lic[:40]
    return lic.replace("The BSD 2-Clause License", "BSD-2-Clause")


# ---------------------------------------------------------------- extraction results


@dataclass
class Out:
    text: str
    headings: list[str] | None = None  # None: the output has no heading markup
    pages: list[str] | None = None  # None: no page-by-page text


_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_HTML_HEADING = re.compile(r"<h[1-6][^>]*>(.*?)</h[1-6]>", re.S | re.I)
_TAG = re.compile(r"<[^>]+>")


def md_headings(md: str) -> list[str]:
    return [m.group(1).replace("*", "") for m in _MD_HEADING.finditer(md)]


def html_headings(html: str) -> list[str]:
    return [_TAG.sub("", m.group(1)) for m in _HTML_HEADING.finditer(html)]


class _Text(HTMLParser):
    """Stdlib reference: the text of an HTML page, headings marked, no boilerplate removal."""

    SKIP = {"script", "style", "head", "title", "noscript"}
    BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section",
             "article", "nav", "aside", "footer", "header", "main", "pre", "ul", "ol", "table"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.headings: list[str] = []
        self._skip = 0
        self._head: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in self.SKIP:
            self._skip += 1
        if tag in self.BLOCK:
            self.parts.append("\n")
        if re.fullmatch(r"h[1-6]", tag):
            self._head = []

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self._skip:
            self._skip -= 1
        if re.fullmatch(r"h[1-6]", tag) and self._head is not None:
            self.headings.append("".join(self._head).strip())
            self._head = None
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)
            if self._head is not None:
                self._head.append(data)


def stdlib_html(html: str) -> Out:
    p = _Text()
    p.feed(html)
    p.close()
    return Out("".join(p.parts), p.headings)


# ---------------------------------------------------------------- PDF extractors


def pdf_pypdfium2(path: Path) -> Out:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(path))
    try:
        pages = []
        for page in doc:
            tp = page.get_textpage()
            pages.append(tp.get_text_bounded())
            tp.close()
            page.close()
    finally:
        doc.close()
    return Out("\n".join(pages), None, pages)


def pdf_pdfminer(path: Path) -> Out:
    from pdfminer.high_level import extract_text

    text = extract_text(str(path))
    return Out(text, None, text.split("\f")[:-1] if text.endswith("\f") else text.split("\f"))


def pdf_pypdf(path: Path) -> Out:
    from pypdf import PdfReader

    pages = [p.extract_text() or "" for p in PdfReader(str(path)).pages]
    return Out("\n".join(pages), None, pages)


def _kreuzberg(path: Path | None, fmt: str, data: bytes | None = None, mime: str = "") -> Out:
    import kreuzberg as kb

    cfg = kb.ExtractionConfig(use_cache=False, disable_ocr=True, output_format=fmt,
                              pages=kb.PageConfig(extract_pages=True))
    r = (kb.extract_file_sync(str(path), config=cfg) if path is not None
         else kb.extract_bytes_sync(data, mime, config=cfg))
    pages = [p["content"] for p in r.pages] if r.pages else None
    return Out(r.content, md_headings(r.content) if fmt == "markdown" else None, pages)


def pdf_kreuzberg(path: Path) -> Out:
    return _kreuzberg(path, "plain")


def pdf_kreuzberg_md(path: Path) -> Out:
    return _kreuzberg(path, "markdown")


PDF = [("hydra-rag (pypdfium2)", "hydra-rag", lambda p: _hydra(p, "pdf")),
       ("pypdfium2", "pypdfium2", pdf_pypdfium2), ("pdfminer.six", "pdfminer.six", pdf_pdfminer),
       ("pypdf", "pypdf", pdf_pypdf), ("kreuzberg", "kreuzberg", pdf_kreuzberg),
       ("kreuzberg markdown", "kreuzberg", pdf_kreuzberg_md)]

# ---------------------------------------------------------------- DOCX extractors

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def docx_stdlib(path: Path) -> Out:
    """zipfile + ElementTree over word/document.xml: paragraphs, Heading styles as headings."""
    with zipfile.ZipFile(path) as z:
        root = ET.fromstring(z.read("word/document.xml"))
        styles = {}
        if "word/styles.xml" in z.namelist():
            for s in ET.fromstring(z.read("word/styles.xml")).iter(W + "style"):
                name = s.find(W + "name")
                styles[s.get(W + "styleId")] = name.get(W + "val") if name is not None else ""
    paras, heads = [], []
    for p in root.iter(W + "p"):
        text = "".join(t.text or "" for t in p.iter(W + "t"))
        st = p.find(f"{W}pPr/{W}pStyle")
        sid = st.get(W + "val") if st is not None else ""
        if re.match(r"(?i)heading|title", styles.get(sid, sid)):
            heads.append(text)
        paras.append(text)
    return Out("\n".join(paras), heads)


def docx_python_docx(path: Path) -> Out:
    import docx

    paras, heads = [], []
    d = docx.Document(str(path))
    for p in d.paragraphs:
        if p.style is not None and p.style.name.lower().startswith(("heading", "title")):
            heads.append(p.text)
        paras.append(p.text)
    for t in d.tables:
        for row in t.rows:
            paras.append("\t".join(c.text for c in row.cells))
    return Out("\n".join(paras), heads)


def docx_docx2python(path: Path) -> Out:
    from docx2python import docx2python

    with docx2python(str(path), html=True) as r:
        html = r.text
    return Out(_TAG.sub(" ", html), html_headings(html))


def docx_mammoth(path: Path) -> Out:
    import mammoth

    with open(path, "rb") as f:
        html = mammoth.convert_to_html(f).value
    return Out(stdlib_html(html).text, html_headings(html))


def docx_kreuzberg(path: Path) -> Out:
    return _kreuzberg(path, "markdown")


def _hydra(path: Path, fmt: str) -> Out:
    from hydra_rag.documents.extract import extract_file

    ex = extract_file(path, fmt)
    lines = ex.text.split("\n")
    pages = None
    if ex.unit == "page":
        bounds = [*[s - 1 for s in ex.starts], len(lines)]
        pages = ["\n".join(lines[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    return Out(ex.text, md_headings(ex.text), pages)


def html_hydra(html: str) -> Out:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".html", encoding="utf-8") as f:
        f.write(html)
        f.flush()
        return _hydra(Path(f.name), "html")


DOCX = [("stdlib zip+xml (ref)", None, docx_stdlib),
        ("hydra-rag (python-docx)", "hydra-rag", lambda p: _hydra(p, "docx")),
        ("python-docx", "python-docx", docx_python_docx),
        ("docx2python", "docx2python", docx_docx2python), ("mammoth", "mammoth", docx_mammoth),
        ("kreuzberg", "kreuzberg", docx_kreuzberg)]

# ---------------------------------------------------------------- ODT and EPUB extractors

TEXT_NS = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"


def odt_stdlib(path: Path) -> Out:
    with zipfile.ZipFile(path) as z:
        root = ET.fromstring(z.read("content.xml"))
    paras, heads = [], []

    def text_of(el: ET.Element) -> str:
        out = [el.text or ""]
        for ch in el:
            if ch.tag == f"{{{TEXT_NS}}}s":
                out.append(" ")
            elif ch.tag in (f"{{{TEXT_NS}}}tab", f"{{{TEXT_NS}}}line-break"):
                out.append("\n")
            elif ch.tag != f"{{{TEXT_NS}}}note":
                out.append(text_of(ch))
            out.append(ch.tail or "")
        return "".join(out)

    for el in root.iter():
        if el.tag in (f"{{{TEXT_NS}}}p", f"{{{TEXT_NS}}}h"):
            t = text_of(el)
            if el.tag.endswith("}h"):
                heads.append(t)
            paras.append(t)
    return Out("\n".join(paras), heads)


def odt_kreuzberg(path: Path) -> Out:
    return _kreuzberg(path, "markdown")


ODT = [("stdlib zip+xml (ref)", None, odt_stdlib),
       ("hydra-rag (lxml)", "hydra-rag", lambda p: _hydra(p, "odt")),
       ("kreuzberg", "kreuzberg", odt_kreuzberg)]


def epub_spine(path: Path) -> list[str]:
    """The XHTML documents of an EPUB in reading order (container.xml -> OPF -> spine)."""
    with zipfile.ZipFile(path) as z:
        cont = ET.fromstring(z.read("META-INF/container.xml"))
        opf_path = next(e.get("full-path") for e in cont.iter() if e.tag.endswith("rootfile"))
        opf = ET.fromstring(z.read(opf_path))
        base = os.path.dirname(opf_path)
        items = {e.get("id"): e.get("href") for e in opf.iter() if e.tag.endswith("}item")}
        order = [e.get("idref") for e in opf.iter() if e.tag.endswith("}itemref")]
        return [z.read(os.path.normpath(os.path.join(base, items[i]))).decode("utf-8", "replace")
                for i in order if i in items]


def epub_stdlib(path: Path) -> Out:
    outs = [stdlib_html(h) for h in epub_spine(path)]
    return Out("\n".join(o.text for o in outs), [h for o in outs for h in o.headings or []])


def epub_inscriptis(path: Path) -> Out:
    from inscriptis import get_text

    return Out("\n".join(get_text(h) for h in epub_spine(path)))


def epub_kreuzberg(path: Path) -> Out:
    return _kreuzberg(path, "markdown")


EPUB = [("stdlib zip+html.parser (ref)", None, epub_stdlib),
        ("hydra-rag (lxml)", "hydra-rag", lambda p: _hydra(p, "epub")),
        ("zip spine + inscriptis", "inscriptis", epub_inscriptis),
        ("kreuzberg", "kreuzberg", epub_kreuzberg)]

# ---------------------------------------------------------------- HTML extractors


def html_trafilatura(html: str) -> Out:
    import trafilatura

    md = trafilatura.extract(html, output_format="markdown", include_formatting=True) or ""
    return Out(md, md_headings(md))


def html_trafilatura_recall(html: str) -> Out:
    import trafilatura

    md = trafilatura.extract(html, output_format="markdown", include_formatting=True,
                             favor_recall=True) or ""
    return Out(md, md_headings(md))


def html_readability(html: str) -> Out:
    from readability import Document

    summary = Document(html).summary(html_partial=True)
    # summary() is HTML (lxml-cleaned); its text with block breaks, as mammoth's below
    return Out(stdlib_html(summary).text, html_headings(summary))


def html_justext(html: str) -> Out:
    import justext

    paras = [p for p in justext.justext(html.encode(), justext.get_stoplist("English"))
             if not p.is_boilerplate]
    return Out("\n".join(p.text for p in paras), [p.text for p in paras if p.heading])


def html_inscriptis(html: str) -> Out:
    from inscriptis import get_text

    return Out(get_text(html))


def html_resiliparse(html: str) -> Out:
    from resiliparse.extract.html2text import extract_plain_text

    return Out(extract_plain_text(html, main_content=True, preserve_formatting=True))


def html_kreuzberg(html: str) -> Out:
    return _kreuzberg(None, "markdown", html.encode(), "text/html")


HTML = [("stdlib html.parser (ref)", None, stdlib_html),
        ("hydra-rag (lxml, landmarks)", "hydra-rag", html_hydra),
        ("trafilatura", "trafilatura", html_trafilatura),
        ("trafilatura favor_recall", "trafilatura", html_trafilatura_recall),
        ("readability-lxml", "readability-lxml", html_readability),
        ("justext", "justext", html_justext),
        ("inscriptis (no removal)", "inscriptis", html_inscriptis),
        ("resiliparse main_content", "resiliparse", html_resiliparse),
        ("kreuzberg", "kreuzberg", html_kreuzberg)]

# ---------------------------------------------------------------- generated documents


@dataclass
class Doc:
    title: str
    text: str


def load_abstracts(path: Path, n: int, seed: int) -> list[Doc]:
    rows = [json.loads(line) for line in path.open(encoding="utf-8")]
    rows = [r for r in rows if r.get("title") and len(r.get("text", "")) > 300]
    random.Random(seed).shuffle(rows)
    return [Doc(r["title"].strip(), r["text"].strip()) for r in rows[:n]]


def truth(docs: list[Doc]) -> Counter[str]:
    c: Counter[str] = Counter()
    for d in docs:
        c += tokens(d.title) + tokens(d.text)
    return c


def make_pdf(docs: list[Doc], out: Path) -> str | None:
    """The abstracts as one flowing A4 document; returns the generator used, or None."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") \
        or shutil.which("google-chrome")
    if chromium:
        page = WORK / "pdf-source.html"
        body = "".join(f"<h2>{escape(d.title)}</h2>\n<p>{escape(d.text)}</p>\n" for d in docs)
        page.write_text("<!doctype html><html><head><meta charset='utf-8'><style>"
                        "body{font:11pt serif;margin:0} h2{font:bold 13pt sans-serif}"
                        "@page{size:A4;margin:2cm}</style></head><body>" + body + "</body></html>",
                        encoding="utf-8")
        proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                               "--no-pdf-header-footer", f"--print-to-pdf={out}",
                               page.as_uri()], capture_output=True, timeout=120)
        if proc.returncode == 0 and out.exists():
            return "chromium --print-to-pdf"
    try:
        from fpdf import FPDF
    except ImportError:
        return None
    pdf = FPDF(format="A4")
    font = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
    uni = font.exists()
    if uni:
        pdf.add_font("dv", fname=str(font))
    pdf.add_page()
    for d in docs:
        title, text = d.title, d.text
        if not uni:
            title, text = (s.encode("latin-1", "replace").decode("latin-1") for s in (title, text))
        pdf.set_font("dv" if uni else "helvetica", size=13)
        pdf.multi_cell(0, 7, title)
        pdf.set_font("dv" if uni else "helvetica", size=10)
        pdf.multi_cell(0, 5, text)
        pdf.ln(3)
    pdf.output(str(out))
    return "fpdf2" + ("" if uni else " (latin-1 core font)")


def make_docx(docs: list[Doc], out: Path) -> str | None:
    try:
        import docx
    except ImportError:
        return None
    d = docx.Document()
    for doc in docs:
        d.add_heading(doc.title, level=1)
        d.add_paragraph(doc.text)
    d.save(str(out))
    return "python-docx"


def make_odt(docs: list[Doc], out: Path) -> str:
    ns = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
          f'xmlns:text="{TEXT_NS}" office:version="1.2"')
    body = "".join(f'<text:h text:outline-level="1">{escape(d.title)}</text:h>'
                   f"<text:p>{escape(d.text)}</text:p>" for d in docs)
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.text",
                   compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/manifest.xml",
                   '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest='
                   '"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
                   '<manifest:file-entry manifest:full-path="/" manifest:media-type='
                   '"application/vnd.oasis.opendocument.text"/><manifest:file-entry '
                   'manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
                   "</manifest:manifest>", compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("content.xml", f'<?xml version="1.0" encoding="UTF-8"?><office:document-content'
                   f" {ns}><office:body><office:text>{body}</office:text></office:body>"
                   "</office:document-content>", compress_type=zipfile.ZIP_DEFLATED)
    return "zipfile"


def make_epub(docs: list[Doc], out: Path, per_chapter: int = 10) -> str:
    chapters = [docs[i:i + per_chapter] for i in range(0, len(docs), per_chapter)]
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml",
                   '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:'
                   'opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/'
                   'content.opf" media-type="application/oebps-package+xml"/></rootfiles>'
                   "</container>", compress_type=zipfile.ZIP_DEFLATED)
        items, refs = [], []
        for i, ch in enumerate(chapters):
            body = "".join(f"<h2>{escape(d.title)}</h2><p>{escape(d.text)}</p>" for d in ch)
            z.writestr(f"OEBPS/ch{i}.xhtml", '<?xml version="1.0" encoding="utf-8"?>'
                       '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Part '
                       f"{i + 1}</title></head><body>{body}</body></html>",
                       compress_type=zipfile.ZIP_DEFLATED)
            items.append(f'<item id="c{i}" href="ch{i}.xhtml" media-type="application/xhtml+xml"/>')
            refs.append(f'<itemref idref="c{i}"/>')
        z.writestr("OEBPS/nav.xhtml", '<?xml version="1.0" encoding="utf-8"?><html xmlns='
                   '"http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">'
                   '<head><title>Contents</title></head><body><nav epub:type="toc"><ol>'
                   + "".join(f'<li><a href="ch{i}.xhtml">Part {i + 1}</a></li>'
                             for i in range(len(chapters)))
                   + "</ol></nav></body></html>", compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("OEBPS/content.opf", '<?xml version="1.0" encoding="utf-8"?><package xmlns='
                   '"http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
                   '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">'
                   "urn:uuid:00000000-0000-0000-0000-000000000000</dc:identifier><dc:title>"
                   "Abstracts</dc:title><dc:language>en</dc:language></metadata><manifest>"
                   '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" '
                   'properties="nav"/>' + "".join(items) + "</manifest><spine>" + "".join(refs)
                   + "</spine></package>", compress_type=zipfile.ZIP_DEFLATED)
    return "zipfile"


NAV = ["Home", "Journals", "Browse by subject", "Submit a manuscript", "Editorial board",
       "About us", "Contact", "Sign in", "Subscribe to alerts"]
FOOTER = ("© 2024 Open Science Press Ltd. All rights reserved. Registered in England, company "
          "number 0457123. Privacy policy · Terms of use · Cookie settings · Accessibility "
          "statement · Careers · Press office")
COOKIE = ("We use cookies to improve your experience on our website. By continuing to browse you "
          "agree to our use of cookies. Manage preferences")


def make_html_page(i: int, d: Doc, related: list[Doc]) -> tuple[str, Counter[str]]:
    """One article page and the tokens of its boilerplate (nav, breadcrumbs, sidebar, footer)."""
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z])", d.text)
    k = max(1, len(sentences) // 3)
    paras = [" ".join(sentences[j:j + k]) for j in range(0, len(sentences), k)]
    nav = "".join(f'<li><a href="/{n.lower().replace(" ", "-")}">{escape(n)}</a></li>' for n in NAV)
    crumbs = 'You are here: <a href="/">Home</a> › <a href="/j">Journals</a> › Article ' + str(i)
    side = "".join(f'<li><a href="/a/{j}">{escape(r.title)}</a></li>' for j, r in enumerate(related))
    share = "Share this article: Twitter Facebook LinkedIn Email · Cite this article · Download PDF"
    article = (f"<h1>{escape(d.title)}</h1><h2>Abstract</h2>"
               + "".join(f"<p>{escape(p)}</p>" for p in paras))
    if i % 2 == 0:  # HTML5 landmarks
        body = (f'<header><div class="logo">Open Science Press</div><nav><ul>{nav}</ul></nav>'
                f'</header><div class="cookie">{COOKIE}</div><div class="crumbs">{crumbs}</div>'
                f"<main><article>{article}<p class='share'>{share}</p></article></main>"
                f"<aside><h3>Related articles</h3><ul>{side}</ul></aside><footer><p>{FOOTER}</p>"
                "</footer>")
    else:  # div soup, as older sites are
        body = (f'<div id="top"><div class="logo">Open Science Press</div><div id="menu"><ul>{nav}'
                f'</ul></div></div><div id="cookie-bar">{COOKIE}</div><div class="breadcrumb">'
                f'{crumbs}</div><table width="100%"><tr><td class="content"><div id="content">'
                f'{article}<div class="share">{share}</div></div></td><td class="sidebar">'
                f'<div class="box"><b>Related articles</b><ul>{side}</ul></div></td></tr></table>'
                f'<div id="footer">{FOOTER}</div>')
    html = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(d.title)}'
            f" | Open Science Press</title><script>var _paq=[];</script><style>body{{margin:0}}"
            f"</style></head><body>{body}</body></html>")
    boiler = (tokens(" ".join(["Open Science Press", " ".join(NAV), COOKIE,
                               crumbs.replace("›", " ").replace('<a href="/">', "")
                               .replace('<a href="/j">', "").replace("</a>", ""),
                               share, "Related articles", FOOTER]))
              + sum((tokens(r.title) for r in related), Counter()))
    return html, boiler


# ---------------------------------------------------------------- scoring and rows


@dataclass
class Row:
    library: str
    format: str
    doc: str
    size: str  # "N pages" or "N.N MB"
    speed: float | None = None
    unit: str = ""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    words: int = 0
    recall: float | None = None
    precision: float | None = None
    headings: float | None = None
    leak: float | None = None
    pages: str = ""
    licence: str = ""
    version: str = ""
    note: str = ""
    extra: dict = field(default_factory=dict)


def prf(got: Counter[str], want: Counter[str]) -> tuple[float, float]:
    common = sum((got & want).values())
    return common / max(1, sum(want.values())), common / max(1, sum(got.values()))


def heading_recall(found: list[str] | None, titles: list[str]) -> float | None:
    if found is None:
        return None
    have = Counter(norm(h) for h in found)
    hits = 0
    for t in titles:
        if have[norm(t)] > 0:
            have[norm(t)] -= 1
            hits += 1
    return hits / max(1, len(titles))


def timed(fn: Callable[[], Out]) -> tuple[Out, float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def run_file(fmt: str, doc: str, path: Path, extractors: list, want: Counter[str] | None,
             titles: list[str] | None, n_pages: int | None, rows: list[Row], emit) -> None:
    mb = path.stat().st_size / 1e6
    for name, lib, fn in extractors:
        dist = LIBS[lib][0] if lib else None
        ver = installed(dist) if dist else "stdlib"
        row = Row(name, fmt, doc, f"{n_pages} p" if n_pages else f"{mb:.2f} MB",
                  licence=licence(dist) if dist else "PSF", version=ver or "")
        if ver is None:
            row.note = "not installed"
            emit(row)
            continue
        try:
            importlib.import_module(LIBS[lib][1]) if lib else None
            out, wall, cpu = timed(lambda fn=fn: fn(path))
            if wall < 2.0:  # cheap enough to run again warm (first-call set-up) and keep the best
                _, wall2, cpu2 = timed(lambda fn=fn: fn(path))
                if wall2 < wall:
                    wall, cpu = wall2, cpu2
        except Exception as e:  # noqa: BLE001 - a benchmark reports, it does not stop
            row.note = f"error: {type(e).__name__}: {str(e)[:80]}"
            emit(row)
            continue
        row.wall_s, row.cpu_s = wall, cpu
        row.speed, row.unit = (n_pages / wall, "pages/s") if n_pages else (mb / wall, "MB/s")
        got = tokens(out.text)
        row.words = sum(got.values())
        if want is not None:
            row.recall, row.precision = prf(got, want)
        if titles is not None:
            row.headings = heading_recall(out.headings, titles)
        if fmt == "pdf":
            row.pages = f"yes ({len(out.pages)})" if out.pages is not None else "no"
        rows.append(row)
        emit(row)


def run_html_pages(doc: str, pages: list[tuple[str, Counter[str] | None, Counter[str] | None,
                                               list[str] | None]], rows: list[Row], emit) -> None:
    """Each extractor over a set of pages: (html, truth, boilerplate, titles) per page."""
    mb = sum(len(p[0].encode()) for p in pages) / 1e6
    for name, lib, fn in HTML:
        dist = LIBS[lib][0] if lib else None
        ver = installed(dist) if dist else "stdlib"
        row = Row(name, "html", doc, f"{len(pages)} pages, {mb:.2f} MB",
                  licence=licence(dist) if dist else "PSF", version=ver or "")
        if ver is None:
            row.note = "not installed"
            emit(row)
            continue
        try:
            importlib.import_module(LIBS[lib][1]) if lib else None
            fn(pages[0][0])  # warm up: first-call loading of stoplists, models, etc.
            outs, wall, cpu = [], 0.0, 0.0
            for html, *_ in pages:
                o, w, c = timed(lambda fn=fn, html=html: fn(html))
                outs.append(o)
                wall += w
                cpu += c
        except Exception as e:  # noqa: BLE001
            row.note = f"error: {type(e).__name__}: {str(e)[:80]}"
            emit(row)
            continue
        row.wall_s, row.cpu_s, row.speed, row.unit = wall, cpu, mb / wall, "MB/s"
        common = want_n = got_n = leak_n = boiler_n = 0
        head_hits, head_n, head_marked = 0, 0, False
        empty = 0
        for o, (_, want, boiler, titles) in zip(outs, pages, strict=True):
            got = tokens(o.text)
            got_n += sum(got.values())
            empty += not got
            if want is not None:
                common += sum((got & want).values())
                want_n += sum(want.values())
            if boiler is not None and want is not None:
                leak_n += sum(((got - want) & boiler).values())
                boiler_n += sum(boiler.values())
            if titles is not None and o.headings is not None:
                head_marked = True
                head_hits += round(heading_recall(o.headings, titles) * len(titles))
            head_n += len(titles or [])
        row.words = got_n
        if want_n:
            row.recall, row.precision = common / want_n, common / max(1, got_n)
        if boiler_n:
            row.leak = leak_n / boiler_n
        if head_marked and head_n:
            row.headings = head_hits / head_n
        if empty:
            row.note = f"{empty} pages empty"
        rows.append(row)
        emit(row)


# ---------------------------------------------------------------- broken / encrypted probes


def probe(lib: str, path: str) -> dict:
    """Run in a child: open and extract, report what happened."""
    fn = dict((n, f) for n, _, f in PDF)[lib]
    try:
        out = fn(Path(path))
        return {"status": "ok", "pages": len(out.pages or []), "words": sum(tokens(out.text).values())}
    except Exception as e:  # noqa: BLE001
        return {"status": "raised", "error": f"{type(e).__module__}.{type(e).__name__}",
                "msg": str(e)[:100]}


def make_bad_pdfs(src: Path) -> dict[str, Path]:
    out = {}
    data = src.read_bytes()
    cut = WORK / "truncated.pdf"
    cut.write_bytes(data[: len(data) // 2])
    out["cut at half"] = cut
    try:
        from pypdf import PdfReader, PdfWriter
    except ImportError:
        return out
    for key, user, fname in (("encrypted, user password", "secret", "enc-user.pdf"),
                             ("encrypted, owner password only", "", "enc-owner.pdf")):
        w = PdfWriter(clone_from=PdfReader(str(src)))
        w.encrypt(user_password=user, owner_password="owner-pw", algorithm="AES-128")
        p = WORK / fname
        with open(p, "wb") as f:
            w.write(f)
        out[key] = p
    return out


def run_probes(src: Path, timeout: float, emit_line) -> list[dict]:
    results = []
    bad = make_bad_pdfs(src)
    for case, path in bad.items():
        for name, lib, _ in PDF:
            if name == "kreuzberg markdown":
                continue
            if installed(LIBS[lib][0]) is None:
                results.append({"library": name, "case": case, "status": "not installed"})
                emit_line(results[-1])
                continue
            t0 = time.perf_counter()
            try:
                proc = subprocess.run([sys.executable, __file__, "--probe", name, str(path)],
                                      capture_output=True, text=True, timeout=timeout)
                lines = proc.stdout.strip().splitlines()
                r = json.loads(lines[-1]) if lines else {
                    "status": f"crashed rc={proc.returncode}", "msg": proc.stderr[-100:]}
            except subprocess.TimeoutExpired:
                r = {"status": f"hung > {timeout:.0f}s"}
            r.update(library=name, case=case, seconds=round(time.perf_counter() - t0, 2))
            results.append(r)
            emit_line(r)
    return results


# ---------------------------------------------------------------- licences, weight, import time


def closure(dist: str) -> list[str]:
    """The distribution and everything it requires (no extras), as installed here."""
    try:
        from packaging.requirements import Requirement
    except ImportError:
        Requirement = None  # noqa: N806
    seen: dict[str, str] = {}
    todo = [dist]
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        try:
            d = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen[key] = d.metadata["Name"]
        for req in d.requires or []:
            if Requirement is not None:
                r = Requirement(req)
                if r.marker is not None and not r.marker.evaluate({"extra": ""}):
                    continue
                todo.append(r.name)
            elif "extra ==" not in req:
                todo.append(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0])
    return list(seen.values())


def installed_mb(dist: str) -> float:
    d = metadata.distribution(dist)
    total = 0
    for f in d.files or []:
        p = Path(str(d.locate_file(f)))
        if p.is_file():
            total += p.stat().st_size
    return total / 1e6


def import_seconds(module: str) -> float:
    code = f"import time;t=time.perf_counter();import {module};print(time.perf_counter()-t)"
    best = float("inf")
    for _ in range(2):  # the second run has a warm page cache
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if out.returncode == 0:
            best = min(best, float(out.stdout.strip().splitlines()[-1]))
    return best


def weights(emit_line) -> list[dict]:
    res = []
    for lib, (dist, module) in LIBS.items():
        if installed(dist) is None:
            r = {"library": lib, "status": "not installed"}
        else:
            deps = closure(dist)
            lics = {d: licence(d) for d in deps}
            r = {"library": lib, "version": installed(dist), "licence": licence(dist),
                 "packages": len(deps), "installed_mb": round(sum(installed_mb(d) for d in deps), 1),
                 "import_s": round(import_seconds(module), 3),
                 "deps": ", ".join(f"{d} ({lics[d]})" for d in deps[1:])}
        res.append(r)
        emit_line(r)
    return res


# ---------------------------------------------------------------- main


def fmt_row(r: Row) -> str:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    if r.note == "not installed" or r.note.startswith("error"):
        return f"{r.library:28} {r.format:5} {r.doc:22} {r.note}"
    speed = f"{r.speed:8.1f} {r.unit:7}" if r.speed is not None else " " * 16
    return (f"{r.library:28} {r.format:5} {r.doc:22} {r.size:>18} {speed} "
            f"{r.wall_s:6.2f} {r.cpu_s:6.2f} {r.words:7d} {pct(r.recall):>6} {pct(r.precision):>6} "
            f"{pct(r.headings):>5} {pct(r.leak):>5} {r.pages:9} {r.licence:22} {r.note}")


HEADER = (f"{'library':28} {'fmt':5} {'document':22} {'size':>18} {'speed':>16} {'wall':>6} "
          f"{'cpu':>6} {'words':>7} {'recall':>6} {'prec':>6} {'head':>5} {'leak':>5} "
          f"{'per-page':9} {'licence':22} note")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200, help="SciFact abstracts to lay out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", type=Path, default=SCIFACT, help="a BEIR corpus.jsonl")
    ap.add_argument("--only", default="pdf,docx,odt,epub,html", help="formats to run")
    ap.add_argument("--skip-probes", action="store_true", help="no broken/encrypted/import runs")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per broken-file probe")
    ap.add_argument("--json", action="store_true", help="one JSON line per row")
    ap.add_argument("--probe", nargs=2, metavar=("LIB", "PDF"), help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.probe:
        print(json.dumps(probe(*args.probe)))
        return

    only = set(args.only.split(","))
    WORK.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    t_start = time.perf_counter()

    def emit(row: Row) -> None:
        if args.json:
            d = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in vars(row).items()
                 if k != "extra"}
            print(json.dumps(d, ensure_ascii=False), flush=True)
        else:
            print(fmt_row(row), flush=True)

    def emit_line(d: dict) -> None:
        if args.json:
            print(json.dumps(d, ensure_ascii=False), flush=True)
        else:
            print("  " + "  ".join(f"{k}={v}" for k, v in d.items()), flush=True)

    docs: list[Doc] = []
    if args.data.exists():
        docs = load_abstracts(args.data, args.n, args.seed)
    elif not args.json:
        print(f"no {args.data}: generated documents skipped, only the real files are run")
    want = truth(docs)
    titles = [d.title for d in docs]
    if not args.json:
        print(f"{len(docs)} SciFact abstracts ({sum(want.values())} tokens), {os.cpu_count()} cores,"
              f" python {sys.version.split()[0]}")
        print(HEADER)

    if "pdf" in only:
        if docs:
            pdf = WORK / f"scifact-{len(docs)}-{args.seed}.pdf"
            stamp = pdf.with_suffix(".generator")
            if not pdf.exists() or not stamp.exists():
                stamp.write_text(make_pdf(docs, pdf) or "")
            gen = stamp.read_text()
            if gen and pdf.exists():
                n = _pdf_pages(pdf)
                run_file("pdf", f"scifact ({gen.split()[0]})", pdf, PDF, want, titles, n, rows, emit)
            elif not args.json:
                print("pdf: no generator (neither chromium nor fpdf2)")
        for real in REAL_PDFS:
            if real.exists():
                run_file("pdf", real.name[:22], real, PDF, None, None, _pdf_pages(real), rows, emit)

    if "docx" in only and docs:
        docx_path = WORK / f"scifact-{len(docs)}-{args.seed}.docx"
        if docx_path.exists() or make_docx(docs, docx_path):
            run_file("docx", "scifact (python-docx)", docx_path, DOCX, want, titles, None, rows,
                     emit)
        elif not args.json:
            print("docx: python-docx not installed, no generator")

    if "odt" in only:
        if docs:
            odt = WORK / f"scifact-{len(docs)}-{args.seed}.odt"
            make_odt(docs, odt)
            run_file("odt", "scifact (zipfile)", odt, ODT, want, titles, None, rows, emit)
        if REAL_ODT.exists():
            run_file("odt", "docutils styles.odt", REAL_ODT, ODT, None, None, None, rows, emit)

    if "epub" in only and docs:
        epub = WORK / f"scifact-{len(docs)}-{args.seed}.epub"
        make_epub(docs, epub)
        run_file("epub", "scifact (zipfile)", epub, EPUB, want, titles, None, rows, emit)

    if "html" in only:
        if docs:
            rng = random.Random(args.seed)
            pages = []
            for i, d in enumerate(docs):
                related = rng.sample([x for x in docs if x is not d], 6)
                html, boiler = make_html_page(i, d, related)
                pages.append((html, tokens(d.title) + tokens("Abstract") + tokens(d.text),
                              boiler, [d.title]))
            run_html_pages("scifact + nav/sidebar", pages, rows, emit)
        if REAL_HTML.is_dir():
            run_html_pages("libffi manual (texinfo)", real_html_pages(REAL_HTML), rows, emit)

    if not args.skip_probes and "pdf" in only:
        src = next((p for p in REAL_PDFS if p.exists()), None)
        if src is not None:
            if not args.json:
                print(f"\nbroken and encrypted copies of {src.name}:")
            run_probes(src, args.timeout, emit_line)
    if not args.skip_probes:
        if not args.json:
            print("\nlicence, dependency closure (packages incl. itself), installed size, import "
                  "time in a fresh interpreter:")
        weights(emit_line)
    if not args.json:
        print(f"\ntotal {time.perf_counter() - t_start:.0f}s")


def _pdf_pages(path: Path) -> int | None:
    """Page count from the PDF's own page tree, by whichever reader is installed."""
    for mod in ("pypdfium2", "pypdf"):
        try:
            if mod == "pypdfium2":
                import pypdfium2 as pdfium

                doc = pdfium.PdfDocument(str(path))
                n = len(doc)
                doc.close()
                return n
            from pypdf import PdfReader

            return len(PdfReader(str(path)).pages)
        except ImportError:
            continue
    m = re.findall(rb"/Type\s*/Page[^s]", path.read_bytes())
    return len(m) or None


def real_html_pages(folder: Path) -> list:
    """The manual's pages; truth = body text without the `div.header` navigation, which is the
    boilerplate; titles = the page's <hN> headings."""
    pages = []
    for f in sorted(folder.glob("*.html")):
        html = f.read_text(encoding="utf-8", errors="replace")
        heads = re.findall(r'<div class="(?:header|nav-panel)">.*?</div>', html, re.S)
        boiler = sum((tokens(stdlib_html(h).text) for h in heads), Counter())
        body = html
        for h in heads:
            body = body.replace(h, "")
        ref = stdlib_html(body)
        pages.append((html, tokens(ref.text), boiler, ref.headings))
    return pages


if __name__ == "__main__":
    main()
