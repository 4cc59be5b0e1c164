"""Other writers of the same reports, for bench/documents.py: documents as tools other than the
bench's own make them, with the layouts users meet. Each writer takes the report's number, its
abstracts (objects with `title` and `text`), the paragraphs function and a path.

* `pdf-reportlab`: reportlab, two columns, a running head and foot, headings set in a larger
  bold font and no outline (bookmarks), justified text;
* `pdf-fpdf`: fpdf2, one column, DejaVu fonts, headings by font size, no outline, a running
  foot, justified;
* `pdf-lo`: LibreOffice's PDF export of the python-docx report (Debian's libreoffice-writer);
* `pdf-notes`: the Markdown report with a footnote and a small table in each abstract, made a
  DOCX by pandoc and a PDF by LibreOffice (footnotes at the foot of the page, mid-paragraph
  where a paragraph turns the page; tables as cells); text the Markdown reference lacks;
* `docx-font`: python-docx with the titles as bold 14 pt runs in plain paragraphs (no heading
  style, as many hand-made Word files are);
* `docx-pandoc`, `odt-pandoc`, `epub-pandoc`, `html-pandoc`: pandoc from the Markdown report;
* `odt-lo`: LibreOffice's conversion of the python-docx report;
* `epub-ebooklib`: ebooklib, a chapter per five abstracts, with its navigation document;
* `md-notes`: the Markdown report of `pdf-notes` (a footnote and a table in each abstract),
  the reference for the same report made by pandoc as `docx-notes`, `odt-notes`,
  `epub-notes` and `html-notes` (footnotes in Word's and ODF's notes, in EPUB's and HTML's
  note sections at the end of a chapter or page, tables as tables).

The Debian tools (pandoc, libreoffice) and the Python writers (reportlab, ebooklib) are not
dependencies of hydra-rag: `make bench-documents` installs them.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path
from typing import Any

Paras = Callable[[str], list[str]]

WRITERS = ("pdf-reportlab", "pdf-fpdf", "pdf-lo", "pdf-notes", "docx-font", "docx-pandoc",
           "odt-pandoc", "odt-lo", "epub-pandoc", "epub-ebooklib", "html-pandoc", "md-notes",
           "docx-notes", "odt-notes", "epub-notes", "html-notes")
SUFFIX = {w: "." + w.split("-")[0] for w in WRITERS}
NOTES = ("md-notes", "docx-notes", "odt-notes", "epub-notes", "html-notes")
DEJAVU = Path("/usr/share/fonts/truetype/dejavu")  # Debian's fonts-dejavu-core


def missing(names: Sequence[str] = WRITERS) -> list[str]:
    """What this machine lacks to run the writers `names` (with how to get it)."""
    out = []
    needs = {"pandoc": any("pandoc" in n or n in NOTES or n == "pdf-notes" for n in names),
             "soffice": any(n.endswith("-lo") or n == "pdf-notes" for n in names)}
    for tool, pkg in (("pandoc", "pandoc"), ("soffice", "libreoffice-writer-nogui")):
        if needs[tool] and shutil.which(tool) is None:
            out.append(f"{tool} (apt-get install {pkg})")
    if "pdf-fpdf" in names and not (DEJAVU / "DejaVuSerif.ttf").exists():
        out.append("the DejaVu fonts (apt-get install fonts-dejavu-core)")
    for mod, name in (("reportlab", "pdf-reportlab"), ("ebooklib", "epub-ebooklib")):
        if name not in names:
            continue
        try:
            __import__(mod)
        except ImportError:
            out.append(f"{mod} (pip install {mod})")
    return out


def pdf_reportlab(n: int, report: Sequence[Any], paras: Paras, path: Path) -> None:
    from reportlab.lib.enums import TA_JUSTIFY
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.lib.units import cm
    from reportlab.platypus import BaseDocTemplate, Frame, PageTemplate, Paragraph, Spacer

    width, height = A4
    gap, margin = 0.8 * cm, 1.8 * cm
    col = (width - 2 * margin - gap) / 2

    def furniture(canvas: Any, doc: Any) -> None:
        canvas.saveState()
        canvas.setFont("Helvetica", 8)
        canvas.drawString(margin, height - 1.2 * cm, f"Journal of Collected Abstracts · Report {n}")
        canvas.drawRightString(width - margin, 1.1 * cm, f"Page {doc.page}")
        canvas.restoreState()

    frames = [Frame(margin, margin, col, height - 2 * margin, id="left"),
              Frame(margin + col + gap, margin, col, height - 2 * margin, id="right")]
    doc = BaseDocTemplate(str(path), pagesize=A4, title=f"Report {n}")
    doc.addPageTemplates([PageTemplate(id="two", frames=frames, onPage=furniture)])
    title = ParagraphStyle("t", fontName="Helvetica-Bold", fontSize=16, leading=20,
                           spaceAfter=10)
    head = ParagraphStyle("h", fontName="Helvetica-Bold", fontSize=11.5, leading=14,
                          spaceBefore=8, spaceAfter=4)
    body = ParagraphStyle("b", fontName="Times-Roman", fontSize=9.5, leading=12,
                          alignment=TA_JUSTIFY, spaceAfter=4)
    story: list[Any] = [Paragraph(f"Report {n}", title)]
    for a in report:
        story.append(Paragraph(escape(a.title), head))
        story += [Paragraph(escape(p), body) for p in paras(a.text)]
        story.append(Spacer(1, 4))
    doc.build(story)


def pdf_fpdf(n: int, report: Sequence[Any], paras: Paras, path: Path) -> None:
    from fpdf import FPDF

    class Doc(FPDF):
        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("sans", size=8)
            self.cell(0, 8, f"Report {n} - page {self.page_no()}", align="C")

    doc = Doc()
    # DejaVu (embedded, subset) rather than the core fonts, which are Latin-1 only: the text
    # holds Greek letters (NF-κB, IL-1β) that would come out as "?".
    doc.add_font("sans", "", str(DEJAVU / "DejaVuSans.ttf"))
    doc.add_font("sans", "B", str(DEJAVU / "DejaVuSans-Bold.ttf"))
    doc.add_font("serif", "", str(DEJAVU / "DejaVuSerif.ttf"))
    doc.set_margins(22, 20, 22)
    doc.add_page()
    doc.set_font("sans", "B", 18)
    doc.multi_cell(0, 10, f"Report {n}", new_x="LMARGIN", new_y="NEXT")
    for a in report:
        doc.ln(3)
        doc.set_font("sans", "B", 13)
        doc.multi_cell(0, 7, a.title, new_x="LMARGIN", new_y="NEXT")
        doc.ln(1)
        doc.set_font("serif", size=10.5)
        for p in paras(a.text):
            doc.multi_cell(0, 5.5, p, align="J", new_x="LMARGIN", new_y="NEXT")
            doc.ln(2)
    doc.output(str(path))


def docx_font(n: int, report: Sequence[Any], paras: Paras, path: Path) -> None:
    import docx
    from docx.shared import Pt

    d = docx.Document()
    run = d.add_paragraph().add_run(f"Report {n}")
    run.bold, run.font.size = True, Pt(20)
    for a in report:
        run = d.add_paragraph().add_run(a.title)
        run.bold, run.font.size = True, Pt(14)
        for p in paras(a.text):
            d.add_paragraph(p)
    d.save(str(path))


def pandoc(md: Path, path: Path, fmt: str) -> None:
    args = ["pandoc", str(md), "-f", "markdown", "-o", str(path), "-s"]
    if fmt == "epub":
        args += ["--metadata", f"title={md.stem}", "--epub-chapter-level=1"]
    if fmt == "html":
        args += ["--metadata", f"title={md.stem}"]
    subprocess.run(args, check=True, capture_output=True)


def notes_md(n: int, report: Sequence[Any], paras: Paras, path: Path) -> None:
    """The report as Markdown with a footnote and a table in each abstract (pdf-notes)."""
    lines = [f"# Report {n}", ""]
    for k, a in enumerate(report, 1):
        lines += [f"## {a.title}", ""]
        for j, p in enumerate(paras(a.text)):
            # wrapped as the `md` reference is (pandoc joins the lines again)
            lines += [*textwrap.wrap(p + (f"[^{k}]" if j == 0 else ""), 100,
                                     break_long_words=False, break_on_hyphens=False), ""]
            if j == 0:
                lines += ["| Group | Participants | Follow-up (months) |", "|---|---:|---:|",
                          f"| Treated | {40 + 7 * k} | {6 + k % 5} |",
                          f"| Control | {38 + 5 * k} | {6 + k % 5} |", ""]
        # each note its own words: one repeated on every page would be a running foot
        about = " ".join(a.title.split()[:5])
        lines += [f"[^{k}]: Received {k} March. Letters about \"{about}\" go to the first "
                  "author, who holds the data.", ""]
    path.write_text("\n".join(lines), encoding="utf-8")


def libreoffice(sources: list[Path], fmt: str, out: Path) -> None:
    """Convert files with LibreOffice in one process (its own profile, so runs do not clash)."""
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(["soffice", f"-env:UserInstallation=file://{profile}", "--headless",
                        "--convert-to", fmt, "--outdir", str(out), *map(str, sources)],
                       check=True, capture_output=True, timeout=1800)


def epub_ebooklib(n: int, report: Sequence[Any], paras: Paras, path: Path) -> None:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier(f"report-{n}")
    book.set_title(f"Report {n}")
    book.set_language("en")
    chapters = []
    for c in range(0, len(report), 5):
        part = report[c:c + 5]
        html = "".join(f"<h2>{escape(a.title)}</h2>" + "".join(f"<p>{escape(p)}</p>"
                                                                for p in paras(a.text))
                       for a in part)
        ch = epub.EpubHtml(title=f"Part {c // 5 + 1}", file_name=f"part{c // 5 + 1}.xhtml",
                           lang="en")
        ch.content = f"<h1>Part {c // 5 + 1}</h1>{html}"
        book.add_item(ch)
        chapters.append(ch)
    book.toc = chapters
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *chapters]
    epub.write_epub(str(path), book)


def write_all(name: str, items: list[tuple[int, Sequence[Any], Path]], paras: Paras,
              md: Callable[[int, Sequence[Any], Path], None],
              docx: Callable[[int, Sequence[Any], Path], None]) -> None:
    """Write every report of layout `name` (items: number, abstracts, path)."""
    if name in ("pdf-reportlab", "pdf-fpdf", "docx-font", "epub-ebooklib"):
        fn = {"pdf-reportlab": pdf_reportlab, "pdf-fpdf": pdf_fpdf, "docx-font": docx_font,
              "epub-ebooklib": epub_ebooklib}[name]
        for n, report, path in items:
            fn(n, report, paras, path)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if name.endswith("-pandoc") or name in NOTES:
            fmt = name.split("-")[0]
            for n, report, path in items:
                src = work / f"{path.stem}.md"
                if name in NOTES:
                    notes_md(n, report, paras, src)
                else:
                    md(n, report, src)
                if fmt == "md":
                    shutil.copy(src, path)
                else:
                    pandoc(src, path, fmt)
            return
        # LibreOffice converts the python-docx reports (pdf-notes: pandoc's from Markdown)
        sources = []
        for n, report, path in items:
            src = work / f"{path.stem}.docx"
            if name == "pdf-notes":
                notes_md(n, report, paras, work / f"{path.stem}.md")
                pandoc(work / f"{path.stem}.md", src, "docx")
            else:
                docx(n, report, src)
            sources.append(src)
        fmt = name.split("-")[0]
        libreoffice(sources, fmt, work / "out")
        for _, _, path in items:
            shutil.move(str(work / "out" / f"{path.stem}.{fmt}"), path)
