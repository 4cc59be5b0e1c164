"""Scanned documents: pages without a text layer read by OCR with the real Tesseract (Debian's
tesseract-ocr, which `make install` brings as root), images only when included, the time bound
per page, the cache, and a clear reason where OCR cannot run. The scans are made here: PDFs
printed by fpdf2, rendered to pictures by PDFium and written back as image-only PDFs by
Pillow, as scanner apps do."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import run_cli
from docmaker import letter_pdf, scanned, scanned_image
from hydra_rag.documents import Skip, anchors, ocr
from hydra_rag.documents.extract import extract_file
from hydra_rag.documents.sandbox import Sandbox

TOPICS = ["heavy swell near the northern breakwater", "a broken mooring line at the ferry pier",
          "fog rolling over the outer anchorage", "a trawler drifting with engine trouble",
          "divers inspecting the cracked quay wall", "gulls nesting on the container crane"]
LOGS = ["The keeper polished the brass of the lamp room before the evening watch.",
        "Customs officers counted crates of oranges unloaded from the coaster.",
        "A schoolteacher brought her class to see the tide gauge and its charts.",
        "The harbourmaster signed the register of the configura-\ntion changes.",
        "Rain flooded the cellar of the chandlery where the ropes are stored.",
        "A storm warning was hoisted on the signal mast at dusk."]


@pytest.fixture(scope="module")
def engine() -> ocr.Ocr:
    found, why = ocr.configure("eng")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must have Tesseract: {why}")
        pytest.skip(why)
    return found


@pytest.fixture(scope="module")
def letter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pages = [[f"On day {i + 1} the pilot boat reported {topic}.", LOGS[i],
              "The configuration of the harbour lights was checked." if i == 5 else ""]
             for i, topic in enumerate(TOPICS)]
    return letter_pdf(tmp_path_factory.mktemp("letter") / "harbour.pdf", pages)


def _page(ex: object, needle: str) -> int:
    lines = ex.text.splitlines()  # type: ignore[attr-defined]
    n = next(i for i, ln in enumerate(lines, start=1) if needle in ln)
    return anchors(ex.starts, n, n)[0]  # type: ignore[attr-defined]


def test_a_scanned_pdf_is_read_page_by_page(engine: ocr.Ocr, letter: Path,
                                            tmp_path: Path) -> None:
    scan = scanned(letter, tmp_path / "scan.pdf")
    with pytest.raises(Skip) as no_ocr:  # before this issue: every scan was skipped
        extract_file(scan, "pdf")
    assert no_ocr.value.reason == "scanned"
    assert "apt-get install tesseract-ocr" in no_ocr.value.detail

    ex = extract_file(scan, "pdf", ocr_spec=engine.spec)
    assert ex.unit == "page" and len(ex.starts) == 6
    for i, topic in enumerate(TOPICS):
        assert _page(ex, topic.split()[-1]) == i + 1, ex.text
    # a word hyphenated at a printed line's end is one word again (the document has it whole)
    assert "configuration changes" in " ".join(ex.text.split())


def test_a_pdf_with_some_scanned_pages_keeps_every_page(engine: ocr.Ocr, letter: Path,
                                                         tmp_path: Path) -> None:
    mixed = scanned(letter, tmp_path / "mixed.pdf", keep_text=(0, 2))
    ex = extract_file(mixed, "pdf", ocr_spec=engine.spec)
    assert [_page(ex, t.split()[-1]) for t in TOPICS] == [1, 2, 3, 4, 5, 6]
    # without OCR the text pages are still read; the scanned ones are not
    ex = extract_file(mixed, "pdf")
    assert "breakwater" in ex.text and "anchorage" in ex.text and "ferry" not in ex.text


def test_an_image_is_read_by_ocr(engine: ocr.Ocr, letter: Path, tmp_path: Path) -> None:
    for suffix in (".png", ".jpg", ".tiff"):
        image = scanned_image(letter, tmp_path / f"page{suffix}", page=1)
        ex = extract_file(image, "image", ocr_spec=engine.spec)
        assert "broken mooring line" in ex.text, (suffix, ex.text)
        assert ex.starts == []  # one picture: cited by lines, not pages
    with pytest.raises(Skip) as no_ocr:
        extract_file(tmp_path / "page.png", "image", ocr_why="OCR is off (ocr_languages: off)")
    assert no_ocr.value.reason == "scanned" and "ocr_languages: off" in no_ocr.value.detail


def test_configure_says_what_is_missing(engine: ocr.Ocr) -> None:
    assert ocr.configure("off") == (None, "OCR is off (ocr_languages: off)")
    # A program named by the setting that is not there is named, with the setting, and
    # Tesseract (which is installed) is not advised again: where it is is said instead.
    found, why = ocr.configure("eng", "/nonexistent/tesseract")
    assert found is None and why == (
        "the OCR program '/nonexistent/tesseract' (setting ocr_command) was not found: set it "
        f"to {engine.program} or remove the setting")
    assert ocr.INSTALL not in why
    from hydra_rag.checks.doctor import ocr_check
    from hydra_rag.config import Settings

    check = ocr_check(Settings(ocr_command="/nonexistent/tesseract"))
    assert (check.status, check.detail) == (
        "warn", "the OCR program '/nonexistent/tesseract' (setting ocr_command) was not found")
    assert check.fix == f"set it to {engine.program} or remove the setting"
    found, why = ocr.configure("eng+zzz")
    assert found is None and "apt-get install tesseract-ocr-zzz" in why and "eng" in why
    found, why = ocr.configure("eng; rm -rf /")
    assert found is None and "not a Tesseract language code" in why
    assert ocr.configure(" eng ")[0] == engine


def test_the_time_bound_is_per_page(engine: ocr.Ocr, letter: Path, tmp_path: Path) -> None:
    """Six pages take longer than one page's bound; each page alone does not. The whole
    document is still capped."""
    scan = scanned(letter, tmp_path / "scan.pdf")
    box = Sandbox(timeout=6, ocr_spec=engine.spec)
    try:
        ex = box.extract(scan, "pdf")
    finally:
        box.close()
    assert len(ex.starts) == 6
    box = Sandbox(timeout=1, ocr_spec=engine.spec, max_pages_s=1)
    try:
        with pytest.raises(Skip) as late:
            box.extract(scan, "pdf")
    finally:
        box.close()
    assert late.value.reason == "timed_out"


def test_index_reads_scans_images_when_included_and_retries_when_ocr_comes(
        engine: ocr.Ocr, home: Path, letter: Path, tmp_path: Path) -> None:
    root = tmp_path / "harbour"
    root.mkdir()
    scanned(letter, root / "log.pdf")
    scanned_image(letter, root / "notice.png", page=4)
    (root / "README.md").write_text("# Harbour\n\nThe harbour office keeps its logs here.\n")
    minutes = letter_pdf(tmp_path / "minutes.pdf", [
        ["Minutes of the meeting of the lock keepers, held in the harbour office."],
        ["The sluice gate of the east lock was repaired by the divers in April."]])
    scanned(minutes, root / "minutes.pdf", keep_text=(0,))  # page 2 scanned

    # No OCR at hand: the scan is skipped with how to get it, the picture is left out by name,
    # and a PDF with a scanned page is indexed with a note naming the page it could not read.
    missing = {"HYDRA_RAG_OCR_COMMAND": str(tmp_path / "no-tesseract")}
    proc = run_cli("index", str(root), "--json", env=missing)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["files_indexed"] == 2 and report["files_skipped"]["scanned"] == 1, report
    assert report["unread_pages"] == {"minutes.pdf": [2]}, report
    # The program the setting names is not there (Tesseract is, elsewhere): said as such.
    assert any("minutes.pdf (p. 2)" in n and "(setting ocr_command) was not found" in n
               for n in report["notes"]), report["notes"]
    proc = run_cli("status", str(root), "--files", env=missing)
    assert "log.pdf" in proc.stdout and "(setting ocr_command) was not found" in proc.stdout, \
        proc.stdout
    assert "notice.png" in proc.stdout and "blacklisted" in proc.stdout, proc.stdout

    # With Tesseract: the unchanged scan is read now, and the picture once it is included.
    proc = run_cli("index", str(root), "--json", "--include", "*.png")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    # the scan, the picture, and the PDF whose scanned page is read now
    assert report["files_indexed"] == 3 and report["documents_extracted"] == 3, report
    assert report["unread_pages"] == {}, report
    proc = run_cli("search", "sluice gate of the east lock", "--path", str(root), "--json")
    top = json.loads(proc.stdout)["results"][0]
    assert (top["path"], top["page_start"]) == ("minutes.pdf", 2), top
    proc = run_cli("search", "fog rolling over the anchorage", "--path", str(root), "--json")
    top = json.loads(proc.stdout)["results"][0]
    # cited by the page of the lines that match, not the span of the chunk (pages 1-6)
    assert (top["path"], top["page_start"], top["page_end"], top["page_unit"]) == (
        "log.pdf", 3, 3, "page"), top
    proc = run_cli("search", "cellar of the chandlery flooded", "--path", str(root), "--json")
    paths = [r["path"] for r in json.loads(proc.stdout)["results"][:2]]
    assert "notice.png" in paths and "log.pdf" in paths, paths

    # Nothing is read by OCR twice: a full rebuild takes the texts from the cache.
    proc = run_cli("index", str(root), "--json", "--full")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["documents_extracted"] == 0


def test_doctor_says_whether_scans_can_be_read(engine: ocr.Ocr, monkeypatch: pytest.MonkeyPatch,
                                               isolated_home: Path) -> None:
    from hydra_rag.checks.doctor import ocr_check
    from hydra_rag.config import load_settings

    assert ocr_check(load_settings()).status == "ok"
    monkeypatch.setenv("HYDRA_RAG_OCR_LANGUAGES", "eng+zzz")
    check = ocr_check(load_settings())
    assert (check.status, check.fix) == ("warn", "apt-get install tesseract-ocr-zzz")
    monkeypatch.setenv("HYDRA_RAG_OCR_COMMAND", "/nonexistent/tesseract")
    check = ocr_check(load_settings())
    assert check.status == "warn" and "(setting ocr_command) was not found" in check.detail
    assert check.fix.endswith("or remove the setting"), check.fix


def test_a_scan_keeps_its_headings_told_by_size(engine: ocr.Ocr, tmp_path: Path) -> None:
    """OCR tells no bold, but Tesseract measures each line (hOCR x_size): a title set larger
    than the text is a heading, its printed lines one title, on a scanned page as in a PDF
    without an outline; the section trail follows."""
    from fpdf import FPDF

    from hydra_rag.read.chunk import section_at

    body = ("The pilot boat left the inner harbour at first light and reported the state of "
            "the sea, the wind and the visibility at each of the outer buoys. ")
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", "B", 20)
    pdf.multi_cell(0, 10, "Harbour Report", new_x="LMARGIN", new_y="NEXT")
    for title in ("Moorings and the state of the\nnorthern breakwater after the storm",
                  "Lights and signals"):
        pdf.ln(4)
        pdf.set_font("helvetica", "B", 14)
        pdf.multi_cell(0, 8, title, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(2)
        pdf.set_font("helvetica", size=11)
        pdf.multi_cell(0, 6, body * 3, new_x="LMARGIN", new_y="NEXT")
    source = tmp_path / "report.pdf"
    pdf.output(str(source))
    scan = scanned(source, tmp_path / "scan.pdf")
    ex = extract_file(scan, "pdf", ocr_spec=engine.spec)
    heads = [ln for ln in ex.text.splitlines() if ln.startswith("#")]
    assert heads == ["# Harbour Report",
                     "## Moorings and the state of the northern breakwater after the storm",
                     "## Lights and signals"], heads
    line = next(i for i, ln in enumerate(ex.text.splitlines(), start=1)
                if ln.startswith("## Lights")) + 2
    assert section_at(ex.text, "md", line) == "Harbour Report › Lights and signals"
    png = extract_file(scanned_image(source, tmp_path / "report.png"), "image",
                       ocr_spec=engine.spec)
    assert [ln for ln in png.text.splitlines() if ln.startswith("#")] == heads
