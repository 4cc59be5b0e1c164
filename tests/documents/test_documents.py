"""Documents (PDF, DOCX, PPTX, ODT, EPUB, HTML pages): what extraction makes of each format,
and how the sandbox skips broken and hostile files; end to end in test_document_library.py.
Every input is made here (tests/docmaker.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import docmaker
from hydra_rag.documents import Skip, anchors, cite, format_of, locate, text_anchors
from hydra_rag.documents.extract import extract_file, is_page
from hydra_rag.documents.sandbox import Sandbox
from hydra_rag.read.chunk import section_at

PAGE2 = docmaker.PAGE2


def _line_of(text: str, needle: str) -> int:
    """The 1-based line of text holding needle."""
    for n, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return n
    raise AssertionError(f"{needle!r} not in the extracted text:\n{text}")


def _headings(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("#")]


# -- Extraction, one format at a time -------------------------------------------------------


def test_pdf_pages_outline_headings_and_running_heads(tmp_path: Path) -> None:
    ex = extract_file(docmaker.report_pdf(tmp_path / "report.pdf"), "pdf")
    assert ex.format == "pdf" and ex.unit == "page" and len(ex.starts) == 4
    assert ex.starts == sorted(set(ex.starts)) and ex.starts[0] == 1
    # The outline's entries are headings at their level, where their titles are printed.
    assert _headings(ex.text) == ["# Field Season", "## Glacier Observations", "## Vegetation"]
    # Each page's text begins on its anchor's line, or after it.
    for page, (_, _, paras) in enumerate(docmaker.REPORT_PAGES, start=1):
        line = _line_of(ex.text, paras[0])
        assert anchors(ex.starts, line, line) == (page, page), paras[0]
    at = _line_of(ex.text, PAGE2)
    assert section_at(ex.text, "md", at) == "Field Season › Glacier Observations"
    # "# of plots" printed in the PDF is text, not a heading of its own.
    plots = _line_of(ex.text, "of plots surveyed: forty-two")
    assert not ex.text.splitlines()[plots - 1].startswith("#")
    assert section_at(ex.text, "md", plots + 1) == "Field Season"
    # The running head and the page numbers at the foot of every page are dropped…
    assert docmaker.REPORT_TITLE not in ex.text and "of 4" not in ex.text
    # …leaving exactly the text of the same report printed without them.
    bare = extract_file(docmaker.report_pdf(tmp_path / "bare.pdf", running=False), "pdf")
    assert ex.text == bare.text and ex.starts == bare.starts


def test_docx_headings_and_pages_from_page_breaks(tmp_path: Path) -> None:
    ex = extract_file(docmaker.handbook_docx(tmp_path / "h.docx"), "docx")
    assert ex.unit == "page" and len(ex.starts) == 3
    assert _headings(ex.text) == ["# Staff Handbook", "# Onboarding", "# Travel Policy",
                                  "# Security"]
    for page, (heading, paras) in enumerate(docmaker.HANDBOOK, start=1):
        for para in paras:
            line = _line_of(ex.text, para)
            assert anchors(ex.starts, line, line) == (page, page), para
            assert section_at(ex.text, "md", line) == heading
    # Without page breaks Word's pages are not known: no unit, no anchors, same text.
    plain = extract_file(docmaker.handbook_docx(tmp_path / "p.docx", breaks=False), "docx")
    assert (plain.unit, plain.starts) == ("", [])
    assert plain.text == ex.text


def test_pptx_slides(tmp_path: Path) -> None:
    ex = extract_file(docmaker.deck_pptx(tmp_path / "deck.pptx"), "pptx")
    assert ex.unit == "slide" and len(ex.starts) == 3
    assert _headings(ex.text) == [f"# {title}" for title, _ in docmaker.SLIDES]
    for n, (title, bullets) in enumerate(docmaker.SLIDES, start=1):
        for bullet in bullets:
            line = _line_of(ex.text, bullet)
            assert anchors(ex.starts, line, line) == (n, n)
            assert section_at(ex.text, "md", line) == title
    notes = _line_of(ex.text, "Mention the beta testers by name.")
    assert anchors(ex.starts, notes, notes) == (1, 1)


def test_epub_chapters(tmp_path: Path) -> None:
    ex = extract_file(docmaker.book_epub(tmp_path / "book.epub"), "epub")
    # The cover holds only a picture: it is no chapter, so chapter 1 is the first story.
    assert ex.unit == "chapter" and len(ex.starts) == 3
    assert _headings(ex.text) == [f"# {title}" for title, _ in docmaker.CHAPTERS]
    for n, (title, paras) in enumerate(docmaker.CHAPTERS, start=1):
        for para in paras:
            line = _line_of(ex.text, para)
            assert anchors(ex.starts, line, line) == (n, n)
            assert section_at(ex.text, "md", line) == title


MARSH = (
    '<nav epub:type="toc"><ol><li><a href="#s1">Herons</a></li></ol></nav>'
    '<section id="related-work" class="share"><h1>Herons of the marsh</h1>'
    '<p>The heron waits in shallow water before it strikes.'
    '<a epub:type="noteref" href="#n1" id="r1">1</a> Its neck folds\nwhen it flies.</p>'
    '<aside class="sidebar"><p>Boxed: bitterns boom at dusk.</p></aside>'
    "<ul><li><p>Grey heron: tall and patient</p></li><li>Little egret</li></ul>"
    "<table><tr><th>Bird</th>\n<th>Length</th></tr>\n<tr><td>Bittern</td>\n<td>75 cm</td>"
    "</tr></table></section>"
    '<aside epub:type="footnote" id="n1"><p>Herons swallow fish head first.'
    '<a role="doc-backlink" href="#r1">\u21a9</a></p></aside>')


def test_epub_keeps_what_a_book_holds(tmp_path: Path) -> None:
    """A book has no page furniture: its asides (sidebars, footnotes) and sections with any id
    or class are text; its table of contents is not. A note's mark reads [1] and its way back
    is left out; a table is a row a line; a list item's mark stays with its paragraph; line
    ends in the markup are spaces."""
    tides = ('<p class="chapter-title">Tides of the estuary</p><p>Spring tides run highest '
             'after a new moon.</p><p class="subhead">Neap tides</p><p class="body-text">Neap '
             'tides rise least.</p><p class="h3">At the quay</p><p>Boats wait for the flood.</p>')
    ex = extract_file(docmaker.book_epub(tmp_path / "marsh.epub",
                                         bodies=[("Herons", MARSH), ("Tides", tides)]), "epub")
    # headings set as styled paragraphs, as page-layout programs export a book, are headings
    assert _headings(ex.text) == ["# Herons of the marsh", "# Tides of the estuary",
                                  "## Neap tides", "### At the quay"]
    assert section_at(ex.text, "md", _line_of(ex.text, "Boats wait")) == \
        "Tides of the estuary › Neap tides › At the quay"
    # the note follows the paragraph that marks it, not the end of the chapter
    assert ("before it strikes.[1] Its neck folds when it flies.\n\n"
            "[1] Herons swallow fish head first.\n") in ex.text
    assert "Boxed: bitterns boom at dusk." in ex.text and "\u21a9" not in ex.text
    assert "Bird | Length\nBittern | 75 cm\n" in ex.text
    assert "- Grey heron: tall and patient" in ex.text and "- Little egret" in ex.text
    assert "\n-\n" not in ex.text
    assert ex.text.count("Herons") == 2  # the title and the note, not the contents' entry


def test_html_notes_follow_their_mark(tmp_path: Path) -> None:
    """pandoc's and most generators' notes stand at the end of the page, linked both ways: a
    note's words go after the paragraph that marks it, once."""
    page = tmp_path / "notes.html"
    page.write_text(
        "<!doctype html><html><body><h1>Marsh</h1>"
        '<p>Bitterns boom at dusk.<a href="#fn1" class="footnote-ref" id="fnref1" '
        'role="doc-noteref"><sup>1</sup></a></p><p>Rails squeal in the reeds.</p>'
        '<section class="footnotes" role="doc-endnotes"><hr /><ol><li id="fn1">'
        '<p>Heard up to five kilometres away.<a href="#fnref1" class="footnote-back" '
        'role="doc-backlink">\u21a9\ufe0e</a></p></li></ol></section></body></html>')
    ex = extract_file(page, "html")
    assert ("Bitterns boom at dusk.[1]\n\n[1] Heard up to five kilometres away.\n\n"
            "Rails squeal in the reeds.") in ex.text
    assert ex.text.count("five kilometres") == 1 and "\u21a9" not in ex.text


def test_docx_footnotes_and_lists(tmp_path: Path) -> None:
    """python-docx reads no footnotes: their text was lost. A note now follows the paragraph
    that marks it, numbered as Word shows it; a list item keeps a mark; a text box was read
    twice and glued to its paragraph's words."""
    ex = extract_file(docmaker.notes_docx(tmp_path / "marsh.docx"), "docx")
    assert ("before it strikes.[1] Its neck folds when it flies.\n\n"
            "[1] Herons swallow fish head first.\n") in ex.text
    assert "- Grey heron: tall and patient" in ex.text and "- Little egret" in ex.text
    assert "\nReedbeds are quiet in winter." in ex.text  # no mark on plain text
    # a text box once (not its copy for old readers), after the paragraph it stands in
    assert ("The survey began in spring. It ended in June.\n\nSidebar on tides\n\n"
            "Spring tides run highest\n") in ex.text
    assert ex.text.count("Sidebar on tides") == 1


def test_odt_headings_by_outline_level(tmp_path: Path) -> None:
    ex = extract_file(docmaker.odt(tmp_path / "bees.odt"), "odt")
    assert (ex.unit, ex.starts) == ("", [])
    assert _headings(ex.text) == ["# Beekeeping Basics", "## Swarm Control"]
    line = _line_of(ex.text, "every nine days for queen cells")
    assert "brood frames  every" in ex.text  # <text:s text:c="2"/> is two spaces
    assert section_at(ex.text, "md", line) == "Beekeeping Basics › Swarm Control"
    assert "\\# hives in the apiary" in ex.text  # a paragraph, escaped from being a heading
    # a note follows the paragraph that marks it; a list item keeps a mark
    assert ("Smoke calms the bees[1] before the lid comes off.\n\n"
            "[1] Cool smoke from pine needles.\n\n- Veil and gloves") in ex.text


def test_html_page_keeps_the_article_and_drops_the_rest(tmp_path: Path) -> None:
    page = tmp_path / "blog.html"
    page.write_text(docmaker.ARTICLE_PAGE)
    data = page.read_bytes()
    assert is_page(data[:4096], data)
    ex = extract_file(page, "html")
    assert (ex.unit, ex.starts) == ("", [])
    assert _headings(ex.text) == ["# Sourdough at Home", "## Feeding the Starter"]
    for kept in ("A sourdough starter is a living culture of wild yeast",
                 "feed it equal weights of rye flour and water", "Keep it at room temperature"):
        assert kept in ex.text
    line = _line_of(ex.text, "rye flour")
    assert section_at(ex.text, "md", line) == "Sourdough at Home › Feeding the Starter"
    for dropped in ("All recipes", "About the baker", "newsletter", "Popular posts", "cookies",
                    "Copyright", "Privacy", "analytics", "Bread Blog"):
        assert dropped not in ex.text, dropped


def test_html_ids_made_from_titles_are_not_read_as_boilerplate(tmp_path: Path) -> None:
    """pandoc (and most static-site tools) give each heading and section an id made from its
    title: "age-related", "social" or "share" in a title does not make it a sidebar."""
    page = tmp_path / "report.html"
    page.write_text(
        '<!doctype html><html><body><h1 id="report">Report</h1>'
        '<h2 id="age-related-loss-of-hearing-in-adults">Age-related loss of hearing in adults</h2>'
        "<p>Hearing declines slowly from the fourth decade onwards in most adults.</p>"
        '<section id="social-services-and-access-to-care-in-rural-areas" class="level2">'
        "<h2>Social services and access to care in rural areas</h2>"
        "<p>Rural clinics reach fewer patients than the city hospitals do.</p></section>"
        # a section's id is its anchor even when short (a label, or a short title's slug)
        '<section id="related-work"><h2>Related work</h2><p>Earlier surveys counted clinics.'
        '</p></section><section id="cookie-backend" class="level2"><h2>Stored in cookies</h2>'
        "<p>The data is signed, not encrypted.</p></section>"
        '<div id="related"><h3>Related</h3><p>Another report about something else.</p></div>'
        "</body></html>")
    ex = extract_file(page, "html")
    assert _headings(ex.text) == ["# Report", "## Age-related loss of hearing in adults",
                                  "## Social services and access to care in rural areas",
                                  "## Related work", "## Stored in cookies"]
    assert "Rural clinics reach fewer patients" in ex.text
    assert "Earlier surveys counted clinics" in ex.text
    assert "signed, not encrypted" in ex.text
    assert "Another report" not in ex.text  # a short id naming a role still marks boilerplate


def test_a_utf8_page_without_a_charset_keeps_its_letters(tmp_path: Path) -> None:
    page = tmp_path / "gruss.html"
    page.write_bytes("<!DOCTYPE html><html><head><title>Post</title></head><body><article>"
                     "<p>Viele Grüße aus Köln — “Straße” und Café.</p></article></body></html>"
                     .encode())
    assert "Viele Grüße aus Köln — “Straße” und Café." in extract_file(page, "html").text


def test_a_template_is_not_a_page() -> None:
    data = docmaker.TEMPLATE.encode()
    assert not is_page(data[:4096], data)
    assert format_of("templates/invoices.html") == "html" and format_of("a/b.pdf.txt") is None


def test_a_page_with_a_script_template_literal_is_still_a_page() -> None:
    data = (b"<!DOCTYPE html><html><body><article><p>Release notes for version two.</p>"
            b"</article><script>fetch(`${location.origin}/api/stats`);</script></body></html>")
    assert is_page(data[:4096], data)


@pytest.mark.parametrize(("unit", "first", "last", "want"), [
    ("page", 12, 12, "p. 12"), ("page", 12, 13, "pp. 12–13"), ("slide", 4, 4, "slide 4"),
    ("slide", 2, 3, "slides 2–3"), ("chapter", 3, 3, "ch. 3"), ("", 0, 0, ""), ("page", 0, 0, ""),
])
def test_cite(unit: str, first: int, last: int, want: str) -> None:
    assert cite(unit, first, last) == want


def test_a_chunk_is_cited_only_for_pages_it_has_text_on(tmp_path: Path) -> None:
    from hydra_rag.read.chunk import chunk_text

    ex = extract_file(docmaker.handbook_docx(tmp_path / "h.docx", filler=4), "docx")
    lines = ex.text.splitlines()
    for ch in chunk_text(ex.text, markup="md"):
        # what search cites (hydra_rag.search.retrieve): anchors by the chunk's text
        first, last = text_anchors(ex.starts, ch.line_start, ch.text)
        for page in range(first, last + 1):
            begin = max(ch.line_start, ex.starts[page - 1])
            end = min(ch.line_end, ex.starts[page] - 1 if page < len(ex.starts) else len(lines))
            assert any(lines[n - 1].strip() for n in range(begin, end + 1)), (
                f"lines {ch.line_start}-{ch.line_end} cited for page {page}, no text of it")


def test_anchors_and_locate() -> None:
    starts = [1, 10, 20]
    assert anchors(starts, 1, 9) == (1, 1)
    assert anchors(starts, 9, 10) == (1, 2)
    assert anchors(starts, 15, 25) == (2, 3)
    assert anchors([], 5, 6) == (0, 0)
    assert locate("report.pdf", 15, 25, "page", 2, 3) == "report.pdf pp. 2–3"
    assert locate("notes.md", 15, 25) == "notes.md:15-25"
    from hydra_rag.answer.prompt import Source

    assert Source(1, "/s", "deck.pptx", 8, 14, "t", page_start=2, page_end=2,
                  page_unit="slide").label == "deck.pptx slide 2"
    assert Source(1, "/s", "notes.md", 3, 9, "t").label == "notes.md:3-9"


# -- Broken and hostile files through the sandbox -------------------------------------------


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """name → (file, format) of documents that yield no text."""
    d = tmp_path_factory.mktemp("hostile")
    good_pdf = docmaker.report_pdf(d / "good.pdf").read_bytes()
    good_docx = docmaker.handbook_docx(d / "good.docx").read_bytes()
    (d / "truncated.pdf").write_bytes(good_pdf[:len(good_pdf) // 2])
    (d / "text.docx").write_bytes(b"Meeting notes, saved with the wrong name.\n" * 20)
    (d / "cut.docx").write_bytes(good_docx[:len(good_docx) // 2])
    files = {
        "encrypted_pdf": (docmaker.encrypted_pdf(d / "locked.pdf"), "pdf"),
        "truncated_pdf": (d / "truncated.pdf", "pdf"),
        "drawing_pdf": (docmaker.drawing_pdf(d / "scan.pdf"), "pdf"),
        "not_a_zip_docx": (d / "text.docx", "docx"),
        "cut_zip_docx": (d / "cut.docx", "docx"),
        "ole_docx": (docmaker.ole_docx(d / "protected.docx"), "docx"),
        "zip_bomb_docx": (docmaker.zip_bomb_docx(d / "bomb.docx", mb=300), "docx"),
        "good_pdf": (d / "good.pdf", "pdf"),
    }
    # The bomb is refused for what it would expand to, not for its size on disk.
    assert files["zip_bomb_docx"][0].stat().st_size < 1 << 20
    return files


@pytest.fixture(scope="module")
def sandbox() -> Any:
    with Sandbox(timeout=10, memory_mb=1024) as sb:
        yield sb


@pytest.mark.parametrize(("name", "reason"), [
    ("encrypted_pdf", "encrypted"),
    ("truncated_pdf", "corrupt"),
    ("drawing_pdf", "scanned"),
    ("not_a_zip_docx", "corrupt"),
    ("cut_zip_docx", "corrupt"),
    ("ole_docx", "encrypted"),
    ("zip_bomb_docx", "too_large"),
])
def test_unreadable_documents_are_skipped_for_their_reason(
        hostile: dict[str, tuple[Path, str]], sandbox: Sandbox, name: str, reason: str) -> None:
    path, fmt = hostile[name]
    with pytest.raises(Skip) as info:
        sandbox.extract(path, fmt)
    assert info.value.reason == reason, info.value.detail
    assert info.value.detail  # what was wrong, for the index report
    # The worker is unharmed: the next document reads.
    ex = sandbox.extract(*hostile["good_pdf"])
    assert ex.unit == "page" and PAGE2 in ex.text


def test_a_document_that_takes_too_long_times_out(tmp_path: Path) -> None:
    # 200,000 empty pages: PDFium takes seconds to walk them (about 5 s on one laptop core,
    # against the 1 s allowed).
    slow = docmaker.many_pages_pdf(tmp_path / "slow.pdf", 200_000)
    good = docmaker.report_pdf(tmp_path / "good.pdf")
    with Sandbox(timeout=1.0, memory_mb=1024) as sb:
        t0 = time.monotonic()
        with pytest.raises(Skip) as info:
            sb.extract(slow, "pdf")
        assert info.value.reason == "timed_out"
        assert time.monotonic() - t0 < 10
        # A new worker reads the next file.
        assert PAGE2 in sb.extract(good, "pdf").text


def test_a_document_needing_more_memory_than_allowed(tmp_path: Path) -> None:
    # 3 million paragraphs: lxml's tree of them needs well over 512 MiB.
    big = tmp_path / "big.html"
    big.write_bytes(b"<!DOCTYPE html><html><body>" + b"<p>word</p>" * 3_000_000
                    + b"</body></html>")
    good = docmaker.report_pdf(tmp_path / "good.pdf")
    with Sandbox(timeout=60, memory_mb=512) as sb:
        with pytest.raises(Skip) as info:
            sb.extract(big, "html")
        assert info.value.reason in ("too_large", "corrupt"), info.value.detail
        assert PAGE2 in sb.extract(good, "pdf").text
