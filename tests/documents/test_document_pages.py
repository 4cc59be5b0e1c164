"""Documents, the hard parts: pages that break inside paragraphs and tables, blank pages, Word
content controls, hostile HTML and RTF, and a worker that cannot be made to run the folder's
own code. Every input is made here."""

from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path

import pytest

from hydra_rag.documents import Skip, anchors, text_anchors
from hydra_rag.documents.extract import extract_file, is_page
from hydra_rag.documents.reader import Reader
from hydra_rag.documents.sandbox import Sandbox


def _page(ex: object, needle: str) -> int:
    """The page (slide, chapter) the line holding `needle` is on."""
    lines = ex.text.splitlines()  # type: ignore[attr-defined]
    n = next(i for i, ln in enumerate(lines, start=1) if needle in ln)
    return anchors(ex.starts, n, n)[0]  # type: ignore[attr-defined]


# -- DOCX -----------------------------------------------------------------------------------


def _rendered_break(run: object) -> None:
    """Mark that Word laid this run out at the top of a new page."""
    from docx.oxml import OxmlElement

    r = run._r  # type: ignore[attr-defined]
    at = 1 if r.rPr is not None else 0
    r.insert(at, OxmlElement("w:lastRenderedPageBreak"))


def test_docx_breaks_inside_and_at_the_end_of_paragraphs(tmp_path: Path) -> None:
    import docx
    from docx.enum.text import WD_BREAK

    doc = docx.Document()
    doc.add_paragraph("Alpha sits alone on the first page.").add_run().add_break(WD_BREAK.PAGE)
    doc.add_paragraph("Beta opens the second page.")
    p = doc.add_paragraph("Gamma starts on the second page")
    p.add_run().add_break(WD_BREAK.PAGE)
    p.add_run(" and Gamma ends on the third.")
    doc.add_paragraph("Delta closes the third page.")
    path = tmp_path / "breaks.docx"
    doc.save(str(path))

    ex = extract_file(path, "docx")
    assert ex.unit == "page" and len(ex.starts) == 3
    assert _page(ex, "Alpha") == 1
    assert _page(ex, "Beta") == 2
    assert _page(ex, "Gamma starts") == 2
    assert _page(ex, "Gamma ends") == 3
    assert _page(ex, "Delta") == 3


def test_docx_pages_word_recorded_inside_a_table(tmp_path: Path) -> None:
    import docx

    doc = docx.Document()
    doc.add_paragraph("Introduction on the first page.")
    table = doc.add_table(rows=3, cols=2)
    for i, row in enumerate(table.rows):
        for j, cell in enumerate(row.cells):
            run = cell.paragraphs[0].add_run(f"cell {i}{j}")
            if i == 2:  # the last row went over to page two
                _rendered_break(run)
    doc.add_paragraph("Conclusion on the second page.")
    p = doc.add_paragraph()
    _rendered_break(p.add_run("Appendix on the third page."))
    path = tmp_path / "table.docx"
    doc.save(str(path))

    ex = extract_file(path, "docx")
    assert ex.unit == "page" and len(ex.starts) == 3
    assert _page(ex, "Introduction") == 1
    assert _page(ex, "cell 10") == 1
    assert _page(ex, "cell 20") == 2
    assert _page(ex, "Conclusion") == 2
    assert _page(ex, "Appendix") == 3


def test_docx_content_controls_are_read(tmp_path: Path) -> None:
    import docx
    from docx.oxml import parse_xml

    doc = docx.Document()
    doc.add_paragraph("Parties to this agreement.")
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    block = parse_xml(f'<w:sdt {w}><w:sdtPr/><w:sdtContent><w:p><w:r><w:t>The contract term '
                      'is five years.</w:t></w:r></w:p></w:sdtContent></w:sdt>')
    doc.element.body.insert(len(doc.element.body) - 1, block)  # before the section properties
    p = doc.add_paragraph("Signed in ")
    p._p.append(parse_xml(f'<w:sdt {w}><w:sdtPr/><w:sdtContent><w:r><w:t>Lisbon</w:t></w:r>'
                          '</w:sdtContent></w:sdt>'))
    path = tmp_path / "form.docx"
    doc.save(str(path))

    text = extract_file(path, "docx").text
    assert "The contract term is five years." in text
    assert "Signed in Lisbon" in text


# -- ODT ------------------------------------------------------------------------------------


def _odt(path: Path, body: str) -> Path:
    content = ('<?xml version="1.0" encoding="UTF-8"?>\n<office:document-content '
               'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
               'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
               'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
               f'office:version="1.2"><office:body><office:text>{body}</office:text>'
               '</office:body></office:document-content>')
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        z.writestr("content.xml", content)
    return path


def test_odt_pages_libreoffice_recorded(tmp_path: Path) -> None:
    path = _odt(tmp_path / "pages.odt", (
        '<text:h text:outline-level="1">Survey</text:h>'
        "<text:p>Moss grows on the first page.</text:p>"
        "<text:soft-page-break/>"
        "<text:p>Lichen starts on the second page<text:soft-page-break/> and ends on the third."
        "</text:p>"
        "<table:table><table:table-row><table:table-cell><text:p>row one</text:p>"
        "</table:table-cell></table:table-row><text:soft-page-break/><table:table-row>"
        "<table:table-cell><text:p>row two</text:p></table:table-cell></table:table-row>"
        "</table:table>"
        "<text:p>Fern closes the fourth page.</text:p>"))
    ex = extract_file(path, "odt")
    assert ex.unit == "page" and len(ex.starts) == 4
    assert _page(ex, "Moss") == 1
    assert _page(ex, "Lichen starts") == 2
    assert _page(ex, "ends on the third") == 3
    assert _page(ex, "row one") == 3
    assert _page(ex, "row two") == 4
    assert _page(ex, "Fern") == 4


# -- blank pages ----------------------------------------------------------------------------


def test_blank_pages_are_never_cited(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    for text in ["Orchids flower on the first page.", "", "Tulips flower on the third page.", ""]:
        pdf.add_page()
        if text:
            pdf.set_font("helvetica", size=12)
            for _ in range(3):
                pdf.multi_cell(0, 8, text + " " + "Petals and stems and leaves. " * 4,
                               new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "blank.pdf"
    pdf.output(str(path))

    ex = extract_file(path, "pdf")
    assert len(ex.starts) == 4
    n = len(ex.text.splitlines())
    assert _page(ex, "Orchids") == 1 and _page(ex, "Tulips") == 3
    # The whole document, first line to last, spans pages 1 to 3: not the blank page 4.
    assert text_anchors(ex.starts, 1, ex.text.rstrip("\n")) == (1, 3)
    assert anchors(ex.starts, n, n) == (3, 3)
    # No line is cited as page 2.
    assert all(anchors(ex.starts, i, i)[0] != 2 for i in range(1, n + 1))


# -- hostile input --------------------------------------------------------------------------


def test_unclosed_code_tags_do_not_make_the_page_check_slow() -> None:
    data = b"<!DOCTYPE html><html><body>" + b"<pre>x " * 60_000
    t0 = time.monotonic()
    assert is_page(data[:4096], data)
    assert time.monotonic() - t0 < 1.0
    # Template syntax in prose outside code is a template; inside code it is an example.
    assert not is_page(b"<html>", b"<html><body><p>{{ user.name }}</p></body></html>")
    assert is_page(b"<html>", b"<html><body><pre>{{ user.name }}</pre></body></html>")


def test_an_rtf_with_a_lone_surrogate_gives_valid_text(tmp_path: Path) -> None:
    path = tmp_path / "lone.rtf"
    path.write_text("{\\rtf1\\ansi\\uc1 Broken \\u-10179? here. And the meadow survey found "
                    "forty two plots on three ridges.}", encoding="ascii")
    ex = extract_file(path, "rtf")
    ex.text.encode("utf-8")  # raised UnicodeEncodeError in the embedder before
    assert "meadow survey" in ex.text


def test_the_worker_never_imports_the_folders_own_modules(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import docx

    marker = tmp_path / "ran"
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "docx.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n"
                                    "raise ImportError('shadowed')\n")
    d = docx.Document()
    d.add_paragraph("An ordinary note about the garden.")
    d.save(str(folder / "note.docx"))
    monkeypatch.chdir(folder)
    with Sandbox(timeout=30, memory_mb=1024) as sandbox:
        ex = sandbox.extract(Path("note.docx"), "docx")  # relative, as `index .` may give
    assert "garden" in ex.text
    assert not marker.exists()


def test_a_failing_document_is_extracted_once_per_run(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4\n" + os.urandom(2000))
    calls = []
    reader = Reader(30, 1024, None)
    real = reader.sandbox.extract

    def spy(path: Path, fmt: str) -> object:
        calls.append(path)
        return real(path, fmt)

    monkeypatch.setattr(reader.sandbox, "extract", spy)
    try:
        for _ in range(3):
            with pytest.raises(Skip) as info:
                reader.read(bad, "pdf")
            assert info.value.reason == "corrupt"
    finally:
        reader.close()
    assert len(calls) == 1


# -- PDF headings ---------------------------------------------------------------------------


def test_pdf_titles_that_wrap_over_lines_head_their_own_sections(tmp_path: Path) -> None:
    from fpdf import FPDF

    from hydra_rag.read.chunk import section_at

    sections = [
        ("Short title one", "Alder catkins open first in the wet hollow."),
        ("A rather long title about a disease of ash trees that wraps onto a second printed "
         "line at this size", "Ash dieback spread along the river within two summers."),
        ("3.1 Short title three", "Birch seedlings took over the cleared slope."),
    ]
    pdf = FPDF()
    pdf.add_page()
    for title, body in sections:
        pdf.start_section(title)
        pdf.set_font("helvetica", "B", 16)
        pdf.multi_cell(0, 9, title, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("helvetica", size=11)
        pdf.multi_cell(0, 6, body, new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "wrapped.pdf"
    pdf.output(str(path))

    ex = extract_file(path, "pdf")
    heads = [ln for ln in ex.text.splitlines() if ln.startswith("#")]
    assert len(heads) == 3 and "wraps onto a second printed line" in heads[1]
    for (title, body), _ in zip(sections, heads, strict=True):
        line = next(n for n, ln in enumerate(ex.text.splitlines(), 1) if body[:20] in ln)
        assert section_at(ex.text, "md", line) == title
    # The printed title is the heading, not body text as well.
    assert ex.text.count("wraps onto a second") == 1


def test_long_paragraphs_are_wrapped_like_a_markdown_file(tmp_path: Path) -> None:
    import docx

    para = " ".join(f"Sentence {i} of a long paragraph about hedgerows and their birds." for i in
                    range(12))
    doc = docx.Document()
    doc.add_paragraph(para)
    path = tmp_path / "long.docx"
    doc.save(str(path))
    lines = extract_file(path, "docx").text.splitlines()
    assert len(lines) > 5 and max(len(ln) for ln in lines) <= 100
    assert " ".join(lines) == para  # wrapped between words, nothing lost


def test_pdf_words_broken_at_a_line_end_are_rejoined_only_if_they_are_words(
        tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    for line in ["The library provides careful structure man-", "agement of every tree, and a well-",
                 "established habit of checking input. Its management is simple."]:
        pdf.cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "hyphens.pdf"
    pdf.output(str(path))
    text = extract_file(path, "pdf").text
    # "management" occurs in the document: one word; "wellestablished" does not: a hyphen.
    assert "structure management of every tree" in text
    assert "a well-established habit" in text


def test_pdf_identifiers_broken_at_a_line_end_are_one_word_again(tmp_path: Path) -> None:
    """A user copied "asn1_der_decoding() returns" from a PDF and searched: extraction had made
    it "asn1_der_ decoding()"."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    for line in ["The parser hands each certificate to the decoder, which calls asn1_der_",
                 "decoding() on the body, then reads the configuration file named in the src/",
                 "config/limits.toml file of the checkout, and then it returns to the caller",
                 "with the fields it found, in the order in which the certificate holds them,",
                 "so that the caller may check each of them against the policy of the site it",
                 "serves, which names the issuers it trusts and the key sizes it accepts."]:
        pdf.cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "ids.pdf"
    pdf.output(str(path))
    text = " ".join(extract_file(path, "pdf").text.split())
    assert "calls asn1_der_decoding() on the body" in text, text
    assert "named in the src/config/limits.toml file" in text, text


def test_pdf_paragraphs_are_found_by_their_gaps_and_reflowed(tmp_path: Path) -> None:
    from fpdf import FPDF

    paragraphs = [" ".join(f"Otters{i} fish the weir at dusk and rest under the alders." for i in
                           range(k, k + 9)) for k in (0, 20, 40)]
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=11)
    for para in paragraphs:
        pdf.multi_cell(0, 6, para, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(6)  # the gap between paragraphs, and nothing else marks them
    path = tmp_path / "paras.pdf"
    pdf.output(str(path))
    text = extract_file(path, "pdf").text
    blocks = [" ".join(b.split()) for b in text.strip().split("\n\n")]
    assert blocks == paragraphs
    # Reflowed and wrapped as a Markdown file: no line is a printer's short leftover.
    assert all(len(ln) <= 100 for ln in text.splitlines())


def test_a_hit_is_cited_by_the_page_of_its_matching_lines() -> None:
    """A one-chunk Word file was cited "pp. 1–3" although the answer was on page 2."""
    from hydra_rag.search.retrieve import Searcher

    starts = [1, 4, 7]  # pages 1, 2, 3 begin on lines 1, 4 and 7
    text = "\n".join(["Budget overview", "", "Travel costs rose.", "The ferry timetable",
                      "changed in March.", "", "Staff were hired.", "Audit closed."])
    assert Searcher._pages(starts, 1, text, "ferry timetable") == (2, 2)
    assert Searcher._pages(starts, 1, text, "travel and audit") == (1, 3)  # both lines tie
    assert Searcher._pages(starts, 1, text, "photosynthesis") == (1, 3)  # no line: the span


def test_pdf_headings_without_an_outline_are_told_by_their_type(tmp_path: Path) -> None:
    """fpdf2, reportlab and many others write no outline: headings are the lines set larger
    than the text, or short and all bold; a title over two lines is one heading."""
    from fpdf import FPDF

    body = ("The survey team sampled every stream twice and wrote down the temperature, the "
            "flow and the colour of the water at each of the marked points along the banks. ")
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", "B", 18)
    pdf.multi_cell(0, 9, "Annual Survey", new_x="LMARGIN", new_y="NEXT")
    for section, sub in (("Rivers and lakes of the northern district, surveyed from the first "
                          "week of May to the last week of September", "Water quality"),
                         ("Forests", "Bird counts")):
        pdf.set_font("helvetica", "B", 14)
        pdf.multi_cell(0, 8, section, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("helvetica", "B", 11)
        pdf.multi_cell(0, 6, sub, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("helvetica", size=11)
        pdf.multi_cell(0, 6, body * 3, new_x="LMARGIN", new_y="NEXT")
        pdf.multi_cell(0, 6, "Done.", new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "survey.pdf"
    pdf.output(str(path))
    heads = [ln for ln in extract_file(path, "pdf").text.splitlines() if ln.startswith("#")]
    assert heads == ["# Annual Survey",
                     "## Rivers and lakes of the northern district, surveyed from the first week "
                     "of May to the last week of September",
                     "### Water quality", "## Forests", "### Bird counts"], heads


def test_pdf_titles_told_by_type_over_a_page_turn_and_without_letters(tmp_path: Path) -> None:
    """A title the page turn cuts in two is one heading on the page it starts; a title's last
    printed line may hold no letter ("2015.")."""
    from fpdf import FPDF

    body = "Counts were taken at dawn and at dusk on every marked plot of the reserve. " * 4
    pdf = FPDF()
    pdf.add_page()
    for n, title in enumerate(("Estimates of childhood underweight between 1990 and\n2015.",
                               "Nesting success of waders\non the restored salt marshes\n"
                               "of the estuary")):
        if n:
            pdf.set_y(265)  # the second title starts two lines above the page's foot
        pdf.set_font("helvetica", "B", 14)
        pdf.multi_cell(0, 8, title, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("helvetica", size=11)
        for _ in range(2):
            pdf.multi_cell(0, 6, body, new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "marsh.pdf"
    pdf.output(str(path))
    ex = extract_file(path, "pdf")
    assert len(ex.starts) == 2  # the second title did cross the page turn
    heads = [ln for ln in ex.text.splitlines() if ln.startswith("#")]
    assert heads == ["# Estimates of childhood underweight between 1990 and 2015.",
                     "# Nesting success of waders on the restored salt marshes of the estuary"], heads
    line = ex.text.splitlines().index(heads[1]) + 1
    assert line < ex.starts[1]  # cited on the page it starts


def test_docx_headings_without_styles_are_told_by_their_type(tmp_path: Path) -> None:
    """A Word file whose titles are bold, larger runs in plain paragraphs (no heading style)."""
    import docx
    from docx.shared import Pt

    body = "The committee met twice and agreed the budget for the coming year. " * 3

    def titled(d: object, text: str, size: float | None, bold: bool = True) -> None:
        run = d.add_paragraph().add_run(text)  # type: ignore[attr-defined]
        run.bold = bold
        if size:
            run.font.size = Pt(size)

    long_title = ("Buildings: the report of the working group on the repair, insulation and "
                  "heating of the village hall, the chapel and the old school, with its costs, "
                  "its timetable and the grants the parish can apply for")  # 200 characters
    d = docx.Document()
    titled(d, "Minutes of the Spring Meeting", 20)
    for section in ("Finance", long_title):
        titled(d, section, 14)
        titled(d, "Decisions", None)
        d.add_paragraph(body)
        p = d.add_paragraph()
        p.add_run("Note: ").bold = True
        p.add_run("a bold word at a paragraph's start does not make it a heading.")
    path = tmp_path / "minutes.docx"
    d.save(str(path))
    heads = [ln for ln in extract_file(path, "docx").text.splitlines() if ln.startswith("#")]
    assert heads == ["# Minutes of the Spring Meeting", "## Finance", "### Decisions",
                     f"## {long_title}", "### Decisions"], heads
