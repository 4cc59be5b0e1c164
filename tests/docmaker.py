"""Documents for the document tests, made on the spot: PDFs (fpdf2, or bytes written by hand),
DOCX (python-docx), PPTX (python-pptx), ODT and EPUB (their zip and XML written by hand), HTML.
Nothing binary is checked in."""

from __future__ import annotations

import zipfile
from pathlib import Path

# -- PDF ------------------------------------------------------------------------------------

REPORT_TITLE = "Quarterly Field Report"
# A sentence of the report's second page, which searches look for
PAGE2 = "Ptarmigan nests were found unusually high on the scree above the western cirque."
# page → (outline title or None, its outline level, paragraphs printed on that page)
REPORT_PAGES: list[tuple[str | None, int, list[str]]] = [
    ("Field Season", 0, [
        "This report summarises the survey of alpine meadows carried out during the summer.",
        "# of plots surveyed: forty-two, spread over three valleys and two ridges.",
        "The team walked every transect twice, once in June and once in late August.",
    ]),
    ("Glacier Observations", 1, [
        "The glacier tongue retreated by eleven metres since the previous autumn survey.",
        "Meltwater channels carved new braids across the outwash plain below the moraine.",
        PAGE2,
    ]),
    ("Vegetation", 1, [
        "Edelweiss and gentians flowered three weeks earlier than in the long-term record.",
        "Grazing pressure from chamois was low on the southern slopes this year.",
    ]),
    (None, 0, [
        "Soil samples were dried, sieved and weighed before the nitrogen analysis began.",
        "Several samples from the ridge plots had to be discarded after the cooler failed.",
    ]),
]


def _filler(topic: str, n: int) -> list[str]:
    """n plain sentences about a topic, to give a page a chunk of its own."""
    things = ["the weather station", "the field notebooks", "the survey drone", "the base camp",
              "the supply cache", "the radio log", "the sample freezer", "the trail markers"]
    return [f"Regarding {topic.lower()}, the team checked {things[i % len(things)]} on day {i + 3} "
            f"and wrote down what had changed since the previous visit to the site." for i in range(n)]


def report_pdf(path: Path, running: bool = True) -> Path:
    """A four-page PDF with an outline (a bookmark on each of pages 1-3: "Field Season" and
    under it "Glacier Observations" and "Vegetation"), a running head
    (the report's title) and a running foot ("Page n of 4") on every page when `running`."""
    from fpdf import FPDF

    class Doc(FPDF):
        def header(self) -> None:
            if running:
                self.set_font("helvetica", size=9)
                self.cell(0, 8, REPORT_TITLE, new_x="LMARGIN", new_y="NEXT")

        def footer(self) -> None:
            if running:
                self.set_y(-15)
                self.set_font("helvetica", size=9)
                self.cell(0, 8, f"Page {self.page_no()} of 4")

    pdf = Doc()
    for title, level, paras in REPORT_PAGES:
        pdf.add_page()
        if title:
            pdf.start_section(title, level=level)
            pdf.set_font("helvetica", "B", 16)
            pdf.cell(0, 12, title, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("helvetica", size=11)
        for para in paras + _filler(title or "Methods", 8):
            pdf.multi_cell(0, 6, para, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    pdf.output(str(path))
    return path


def encrypted_pdf(path: Path) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_encryption(owner_password="owner-secret", user_password="user-secret")
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.cell(0, 10, "Confidential salaries of the whole department for the next year.")
    pdf.output(str(path))
    return path


def drawing_pdf(path: Path, pages: int = 2) -> Path:
    """Pages with a drawn rectangle and no text at all (what a scan looks like to a text
    extractor)."""
    from fpdf import FPDF

    pdf = FPDF()
    for _ in range(pages):
        pdf.add_page()
        pdf.rect(20, 20, 120, 80, style="F")
    pdf.output(str(path))
    return path


def many_pages_pdf(path: Path, pages: int) -> Path:
    """A PDF written by hand: `pages` page objects in one flat Kids array, all sharing one
    empty content stream."""
    out = bytearray(b"%PDF-1.4\n")
    offsets: list[int] = []

    def obj(num: int, body: bytes) -> None:
        offsets.append(len(out))
        out.extend(b"%d 0 obj\n" % num + body + b"\nendobj\n")

    first = 4
    obj(1, b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = b" ".join(b"%d 0 R" % (first + i) for i in range(pages))
    obj(2, b"<< /Type /Pages /Count %d /Kids [" % pages + kids + b"] >>")
    obj(3, b"<< /Length 0 >>\nstream\n\nendstream")
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R >>"
    for i in range(pages):
        obj(first + i, page)
    xref = len(out)
    out.extend(b"xref\n0 %d\n0000000000 65535 f \n" % (len(offsets) + 1))
    out.extend(b"".join(b"%010d 00000 n \n" % o for o in offsets))
    out.extend(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n"
               % (len(offsets) + 1, xref))
    path.write_bytes(bytes(out))
    return path


# -- DOCX and PPTX --------------------------------------------------------------------------

# heading → paragraphs; a page break before every section but the first when asked for
HANDBOOK: list[tuple[str, list[str]]] = [
    ("Onboarding", ["New staff receive a laptop, a badge and a desk on their first morning.",
                    "The buddy programme pairs every newcomer with a colleague for a month."]),
    ("Travel Policy", ["Train travel is preferred over flights for journeys under six hours.",
                       "Receipts must be uploaded to the expense portal within thirty days."]),
    ("Security", ["Laptops must be locked whenever they are left unattended in the office.",
                  "Suspicious emails are forwarded to the security desk, never opened."]),
]


def handbook_docx(path: Path, breaks: bool = True, sections: list[tuple[str, list[str]]] | None
                  = None, filler: int = 0) -> Path:
    """A Word document: a title, then a Heading 1 per section (and `filler` long paragraphs
    each, to make several chunks per section)."""
    import docx

    doc = docx.Document()
    doc.add_heading("Staff Handbook", level=0)
    for n, (heading, paras) in enumerate(sections or HANDBOOK):
        if breaks and n:
            doc.add_page_break()
        doc.add_heading(heading, level=1)
        for para in paras:
            doc.add_paragraph(para)
        for i in range(filler):
            doc.add_paragraph(f"{heading} clause {i}: " + " ".join(
                f"the {heading.lower()} rule number {i}.{j} applies to every employee"
                for j in range(12)) + ".")
    doc.save(str(path))
    return path


_FOOTNOTES = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:footnotes xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">
<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>
<w:footnote w:type="continuationSeparator" w:id="0">
<w:p><w:r><w:continuationSeparator/></w:r></w:p></w:footnote>
<w:footnote w:id="7"><w:p><w:r><w:footnoteRef/></w:r>
<w:r><w:t xml:space="preserve"> Herons swallow fish</w:t></w:r>
<w:r><w:t xml:space="preserve"> head first.</w:t></w:r></w:p></w:footnote>
</w:footnotes>"""


_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_WPS = "http://schemas.microsoft.com/office/word/2010/wordprocessingShape"
_VML = "urn:schemas-microsoft-com:vml"


def notes_docx(path: Path) -> Path:
    """A Word document with a footnote (its part written as Word writes it: python-docx has
    no API for notes), two list items, one bulleted and one numbered, by style, and a text
    box."""
    import docx
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from docx.oxml import OxmlElement, parse_xml
    from docx.oxml.ns import nsdecls, qn

    doc = docx.Document()
    doc.add_heading("Marsh notes", level=1)
    p = doc.add_paragraph("The heron waits in shallow water before it strikes.")
    ref = OxmlElement("w:footnoteReference")
    ref.set(qn("w:id"), "7")
    p.add_run()._r.append(ref)
    p.add_run(" Its neck folds when it flies.")
    doc.add_paragraph("Grey heron: tall and patient", style="List Bullet")
    doc.add_paragraph("Little egret", style="List Number")
    doc.add_paragraph("Reedbeds are quiet in winter.")
    # a text box, as Word writes it: DrawingML, and the same text again in VML for old readers
    box = ("<w:txbxContent><w:p><w:r><w:t>Sidebar on tides</w:t></w:r></w:p><w:p><w:r><w:t>"
           "Spring tides run highest</w:t></w:r></w:p></w:txbxContent>")
    p = doc.add_paragraph("The survey began in spring.")
    p._p.append(parse_xml(
        f'<w:r {nsdecls("w")} xmlns:mc="{_MC}" xmlns:wps="{_WPS}" xmlns:v="{_VML}">'
        '<mc:AlternateContent><mc:Choice Requires="wps">'
        f"<w:drawing><wps:txbx>{box}</wps:txbx></w:drawing></mc:Choice><mc:Fallback><w:pict>"
        f"<v:shape><v:textbox>{box}</v:textbox></v:shape></w:pict></mc:Fallback>"
        "</mc:AlternateContent></w:r>"))
    p.add_run(" It ended in June.")
    part = Part(PackURI("/word/footnotes.xml"), "application/vnd.openxmlformats-officedocument."
                "wordprocessingml.footnotes+xml", _FOOTNOTES.encode(), doc.part.package)
    doc.part.relate_to(part, "http://schemas.openxmlformats.org/officeDocument/2006/"
                             "relationships/footnotes")
    doc.save(str(path))
    return path


SLIDES = [
    ("Roadmap 2025", ["Ship the offline mode", "Rewrite the sync engine in Rust"]),
    ("Hiring Plan", ["Two backend engineers", "One designer for the mobile app"]),
    ("Budget", ["Cloud spending capped at forty thousand euros per quarter"]),
]


def deck_pptx(path: Path, filler: int = 0) -> Path:
    """A deck of three title-and-content slides, a note on the first (and `filler` sentences
    of notes on each, to give every slide a chunk of its own)."""
    from pptx import Presentation

    prs = Presentation()
    layout = prs.slide_layouts[1]  # title and content
    for title, bullets in SLIDES:
        slide = prs.slides.add_slide(layout)
        slide.shapes.title.text = title
        body = slide.placeholders[1].text_frame
        body.text = bullets[0]
        for b in bullets[1:]:
            body.add_paragraph().text = b
        if filler:
            slide.notes_slide.notes_text_frame.text = " ".join(_filler(title, filler))
    notes = prs.slides[0].notes_slide.notes_text_frame
    notes.text = "Mention the beta testers by name. " + notes.text
    prs.save(str(path))
    return path


# -- ODT and EPUB ---------------------------------------------------------------------------


def odt(path: Path) -> Path:
    content = """<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
  xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2">
 <office:body><office:text>
  <text:h text:outline-level="1">Beekeeping Basics</text:h>
  <text:p>A strong colony needs a laying queen, drawn comb and enough stores for winter.</text:p>
  <text:h text:outline-level="2">Swarm Control</text:h>
  <text:p>Inspect the brood frames<text:s text:c="2"/>every nine days for queen cells in May.</text:p>
  <text:p># hives in the apiary: twelve</text:p>
  <text:p>Smoke calms the bees<text:note text:id="ftn1" text:note-class="footnote">\
<text:note-citation>1</text:note-citation><text:note-body><text:p>Cool smoke from \
pine needles.</text:p></text:note-body></text:note> before the lid comes off.</text:p>
  <text:list><text:list-item><text:p>Veil and gloves</text:p></text:list-item></text:list>
 </office:text></office:body>
</office:document-content>
"""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.text")
        z.writestr("content.xml", content, compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("META-INF/manifest.xml", """<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">
 <manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/>
 <manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>
</manifest:manifest>
""")
    return path


CHAPTERS = [
    ("The Lighthouse Keeper", ["Every night the keeper climbed ninety-nine steps to light the lamp.",
                               "Storms rattled the lantern glass but the flame never went out."]),
    ("The Shipwreck", ["A schooner loaded with oranges ran aground on the northern reef.",
                       "The keeper rowed out at dawn and brought the sailors ashore."]),
    ("The New Lens", ["A Fresnel lens arrived from Paris packed in straw and sawdust.",
                      "Its beam reached twenty nautical miles on a clear night."]),
]


def book_epub(path: Path, filler: int = 0, bodies: list[tuple[str, str]] | None = None) -> Path:
    """An EPUB 3 book: a cover page holding only an image, then one XHTML file per chapter
    (with `filler` more paragraphs each), or one per (title, XHTML body) of `bodies`."""
    container = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
 <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>
"""
    items = ['<item id="cover" href="cover.xhtml" media-type="application/xhtml+xml"/>']
    refs = ['<itemref idref="cover"/>']
    pages = {"OEBPS/cover.xhtml": _xhtml("Cover", '<img src="cover.png" alt=""/>')}
    chapters = bodies or [(title, f"<h1>{title}</h1>" + "".join(
        f"<p>{p}</p>" for p in paras + _filler(title, filler))) for title, paras in CHAPTERS]
    for n, (title, body) in enumerate(chapters, start=1):
        items.append(f'<item id="c{n}" href="text/ch{n}.xhtml" media-type="application/xhtml+xml"/>')
        refs.append(f'<itemref idref="c{n}"/>')
        pages[f"OEBPS/text/ch{n}.xhtml"] = _xhtml(title, body)
    opf = f"""<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
 <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
  <dc:identifier id="id">urn:uuid:12345678-1234-1234-1234-123456789abc</dc:identifier>
  <dc:title>Tales of the Reef Light</dc:title><dc:language>en</dc:language>
 </metadata>
 <manifest>{''.join(items)}</manifest>
 <spine>{''.join(refs)}</spine>
</package>
"""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr("META-INF/container.xml", container, compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("OEBPS/content.opf", opf, compress_type=zipfile.ZIP_DEFLATED)
        for name, xhtml in pages.items():
            z.writestr(name, xhtml, compress_type=zipfile.ZIP_DEFLATED)
    return path


def _xhtml(title: str, body: str) -> str:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"'
            ' xmlns:epub="http://www.idpf.org/2007/ops">'
            f"<head><title>{title}</title></head><body>{body}</body></html>\n")


# -- HTML -----------------------------------------------------------------------------------

ARTICLE_PAGE = """<!DOCTYPE html>
<html lang="en"><head><title>Sourdough at Home | Bread Blog</title>
<script>var tracking = "analytics beacon payload";</script></head>
<body>
<header class="masthead"><a href="/">Bread Blog</a> Subscribe to our newsletter today</header>
<nav><ul><li><a href="/recipes">All recipes</a></li><li><a href="/about">About the baker</a></li></ul></nav>
<article>
<h1>Sourdough at Home</h1>
<p>A sourdough starter is a living culture of wild yeast and lactic acid bacteria.</p>
<h2>Feeding the Starter</h2>
<p>Discard half of the starter and feed it equal weights of rye flour and water every morning.</p>
<ul><li>Keep it at room temperature</li><li>Use a glass jar with a loose lid</li></ul>
</article>
<aside class="sidebar">Popular posts: banana bread, focaccia</aside>
<div id="cookie-banner" class="cookie-consent">We use cookies to improve your experience.
 Accept all cookies?</div>
<footer>Copyright 2024 Bread Blog. All rights reserved. Privacy policy.</footer>
</body></html>
"""

TEMPLATE = """<!DOCTYPE html>
<html>
<head><title>{% block title %}Invoices{% endblock %}</title></head>
<body>
{% block content %}
<h1>Invoices for {{ customer.name }}</h1>
{% for invoice in invoices %}<p>{{ invoice.number }}: {{ invoice.total_cents }}</p>{% endfor %}
{% endblock %}
</body>
</html>
"""


# -- Broken and hostile ---------------------------------------------------------------------


def zip_bomb_docx(path: Path, mb: int = 300) -> Path:
    """A "DOCX" whose one member inflates to `mb` MiB of zeros (a few hundred KiB on disk)."""
    zero = bytes(1 << 20)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        with z.open("word/document.xml", "w", force_zip64=True) as f:
            for _ in range(mb):
                f.write(zero)
    return path


def ole_docx(path: Path) -> Path:
    """What Word writes for a password-protected .docx: an OLE compound file."""
    path.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504) + b"EncryptedPackage" * 64)
    return path


# -- scans ----------------------------------------------------------------------------------


def scanned(pdf: Path, out: Path, dpi: int = 200, keep_text: tuple[int, ...] = ()) -> Path:
    """`pdf` as a scanner or a phone app makes it: each page a grey picture and no text layer
    (Pillow writes the PDF), except the 0-based pages in `keep_text`, copied as they were."""
    import pypdfium2 as pdfium

    src = pdfium.PdfDocument(str(pdf))
    images = [src[i].render(scale=dpi / 72, grayscale=True).to_pil() for i in range(len(src))]
    pictures = out.with_suffix(".pictures.pdf")
    images[0].save(pictures, "PDF", resolution=dpi, save_all=True, append_images=images[1:])
    if not keep_text:
        pictures.replace(out)
        return out
    scans = pdfium.PdfDocument(str(pictures))
    mixed = pdfium.PdfDocument.new()
    for i in range(len(src)):
        mixed.import_pages(src if i in keep_text else scans, [i])
    mixed.save(str(out))
    pictures.unlink()
    return out


def scanned_image(pdf: Path, out: Path, page: int = 0, dpi: int = 200) -> Path:
    """One page of `pdf` as a picture file (PNG, JPEG or TIFF by `out`'s suffix)."""
    import pypdfium2 as pdfium

    image = pdfium.PdfDocument(str(pdf))[page].render(scale=dpi / 72, grayscale=True).to_pil()
    image.save(out)
    return out


def letter_pdf(path: Path, pages: list[list[str]]) -> Path:
    """A plain PDF, one list of paragraphs per page (fpdf2, Helvetica 12 pt)."""
    from fpdf import FPDF

    doc = FPDF()
    doc.set_font("helvetica", size=12)
    for paragraphs in pages:
        doc.add_page()
        for para in paragraphs:
            doc.multi_cell(0, 7, para, new_x="LMARGIN", new_y="NEXT")
            doc.ln(4)
    doc.output(str(path))
    return path
