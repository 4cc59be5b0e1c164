"""Documents end to end: a folder of them indexed, searched and cited by page, chapter or
slide with the real embedder sidecar; skips reported; later runs extract and embed only what
changed. Every input is made here (tests/docmaker.py)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest

import docmaker
from conftest import recorded, run_cli
from hydra_rag.documents import format_of

PAGE2 = docmaker.PAGE2

# id → (query, path of the expected top hit, its unit, the anchor the sentence is on)
QUERIES: dict[str, tuple[str, str, str | None, int | None]] = {
    "pdf": (PAGE2, "report.pdf", "page", 2),
    "epub": ("A schooner loaded with oranges ran aground on the northern reef", "book.epub",
             "chapter", 2),
    "docx": ("Receipts must be uploaded to the expense portal within thirty days",
             "handbook.docx", "page", 2),
    "pptx": ("Two backend engineers", "deck.pptx", "slide", 2),
    "html": ("Discard half of the starter and feed it equal weights of rye flour", "blog.html",
             None, None),
    "template": ("{% for invoice in invoices %}", "templates/invoices.html", None, None),
}
DOCUMENTS = {"report.pdf", "handbook.docx", "book.epub", "deck.pptx", "blog.html"}


def _library(root: Path) -> Path:
    """A folder of documents: five readable, an encrypted PDF, a broken DOCX and a template."""
    root.mkdir(parents=True)
    docmaker.report_pdf(root / "report.pdf")
    docmaker.handbook_docx(root / "handbook.docx", filler=4)
    docmaker.book_epub(root / "book.epub", filler=10)
    docmaker.deck_pptx(root / "deck.pptx", filler=10)
    (root / "blog.html").write_text(docmaker.ARTICLE_PAGE)
    (root / "templates").mkdir()
    (root / "templates" / "invoices.html").write_text(docmaker.TEMPLATE)
    docmaker.encrypted_pdf(root / "locked.pdf")
    good = (root / "handbook.docx").read_bytes()
    (root / "broken.docx").write_bytes(good[:len(good) // 2])
    return root


def _cli_json(*args: str, env: dict[str, str] | None = None) -> Any:
    proc = run_cli(*args, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _index(root: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    return _cli_json("index", str(root), "--json", env=env)


def _index_files(root: Path) -> dict[str, Any]:
    return recorded(root)


def _cached_keys(root: Path) -> set[str]:
    # a PDF's text may have been read by OCR: cached as KEY~ocr-LANGUAGES
    return {p.name.split(".", 1)[0].split("~", 1)[0]
            for p in (root / ".hydra-index" / "extracted").iterdir()}


def _stored_ids(root: Path) -> set[str]:
    from hydra_rag.store.index_dir import Store

    store = Store(root)
    return {i for t in ("code", "prose") for i in store.id_counts(t)}


@pytest.fixture(scope="module")
def library(session_home: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The library folder indexed once, and what the commands said about it then: the index
    report, the dry run (JSON and text), files.db, the cache, and searches (JSON for each of
    QUERIES and the text of one). Tests that change the folder may: the others read these."""
    root = _library(tmp_path_factory.mktemp("lib") / "library")
    got: dict[str, Any] = {"root": root, "index": _index(root)}
    got["files"] = _index_files(root)
    got["cached"] = _cached_keys(root)
    key = got["files"]["report.pdf"]["doc"]["key"]
    cached = next((root / ".hydra-index" / "extracted").glob(f"{key}*.json.gz"))
    with gzip.open(cached, "rt") as f:
        got["report_text"] = json.load(f)["text"]
    got["dry_run"] = _cli_json("index", str(root), "--dry-run", "--json")
    proc = run_cli("index", str(root), "--dry-run", env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    got["dry_run_text"] = proc.stderr
    queries = root.parent / "queries.jsonl"
    queries.write_text("".join(json.dumps({"_id": k, "text": q}) + "\n"
                               for k, (q, *_) in QUERIES.items()))
    proc = run_cli("search", "--queries", str(queries), "--path", str(root), "-k", "10")
    assert proc.returncode == 0, proc.stderr
    got["search"] = {r["query_id"]: r["results"] for r in map(json.loads, proc.stdout.splitlines())}
    proc = run_cli("search", PAGE2, "--path", str(root), "-k", "1", env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    got["search_text"] = proc.stdout
    return got


def test_index_reports_document_skips(library: dict[str, Any]) -> None:
    rep, files = library["index"], library["files"]
    assert rep["files_indexed"] == 6  # five documents and the template
    assert rep["files_skipped"].get("encrypted") == 1 and rep["files_skipped"].get("corrupt") == 1
    assert set(rep["document_problems"]) == {"locked.pdf", "broken.docx"}
    assert rep["document_problems"]["locked.pdf"].startswith("encrypted: ")
    assert rep["document_problems"]["broken.docx"].startswith("corrupt: ")
    assert rep["documents_extracted"] == 5
    assert files["locked.pdf"]["skip"] == "encrypted" and files["locked.pdf"]["chunks"] == []
    assert files["broken.docx"]["skip"] == "corrupt"
    # The template is code, searched as written; the page is prose read from its article.
    assert files["templates/invoices.html"]["kind"] == "code"
    assert not files["templates/invoices.html"].get("doc")
    assert {rel for rel, e in files.items() if e.get("doc")} == DOCUMENTS
    assert all(files[rel]["kind"] == "prose" for rel in DOCUMENTS)
    pdf = files["report.pdf"]["doc"]
    assert (pdf["format"], pdf["unit"], len(pdf["starts"])) == ("pdf", "page", 4)
    # Every indexed document's text is cached by its content.
    assert library["cached"] == {files[rel]["doc"]["key"] for rel in DOCUMENTS}
    assert PAGE2 in library["report_text"]


def test_dry_run_lists_the_document_skips(library: dict[str, Any]) -> None:
    rep = library["dry_run"]
    assert rep["skipped"]["encrypted"] == ["locked.pdf"]
    assert rep["skipped"]["corrupt"] == ["broken.docx"]
    assert rep["document_problems"]["locked.pdf"].startswith("encrypted: ")
    assert rep["document_problems"]["broken.docx"].startswith("corrupt: ")
    kinds = {f["path"]: f["kind"] for f in rep["files"]}
    assert kinds == {**{rel: "prose" for rel in DOCUMENTS}, "templates/invoices.html": "code"}
    assert "locked.pdf: encrypted: password-protected" in library["dry_run_text"]


def test_search_cites_the_page_and_section(library: dict[str, Any]) -> None:
    top = library["search"]["pdf"][0]
    assert top["path"] == "report.pdf" and top["kind"] == "prose"
    assert (top["page_start"], top["page_end"], top["page_unit"]) == (2, 2, "page")
    assert top["section"] == "Field Season"
    assert PAGE2 in top["text"]
    assert "report.pdf p. 2 " in library["search_text"]
    assert "§ Field Season" in library["search_text"]


@pytest.mark.parametrize("qid", [q for q in QUERIES if q != "pdf"])
def test_search_finds_each_format(library: dict[str, Any], qid: str) -> None:
    query, path, unit, at = QUERIES[qid]
    hits = library["search"][qid]
    assert hits[0]["path"] == path and query in hits[0]["text"]
    assert hits[0]["page_unit"] == unit
    if at is None:
        assert hits[0]["page_start"] is None and hits[0]["page_end"] is None
    else:
        # A chunk may run on from the previous chapter or page, never further.
        assert at - 1 <= hits[0]["page_start"] <= at == hits[0]["page_end"]
    assert hits[0]["kind"] == ("code" if qid == "template" else "prose")
    assert all(h["path"] not in ("locked.pdf", "broken.docx") for h in hits)


def test_eval_and_get_read_a_document_by_page(library: dict[str, Any]) -> None:
    root = library["root"]
    questions = root.parent / "questions.jsonl"
    questions.write_text(
        json.dumps({"id": "right", "question": PAGE2, "path": "report.pdf", "page": 2,
                    "quote": "Ptarmigan nests were found"}) + "\n"
        + json.dumps({"id": "wrong", "question": PAGE2, "path": "report.pdf", "page": 4,
                      "quote": "Ptarmigan nests were found"}) + "\n")
    rep = _cli_json("eval", str(questions), "--path", str(root), "-k", "3", "--json")
    got = {r["id"]: r for r in rep["results"]}
    assert got["right"]["rank"] == 1 and got["right"]["label"] == "ok"
    # The quote is in the document (in its extracted text): not a data problem, the page is.
    assert got["wrong"]["rank"] is None and got["wrong"]["label"] != "data"

    ex = _cli_json("get", str(root / "report.pdf"), "--page", "2", "--json")
    assert (ex["page_start"], ex["page_end"], ex["page_unit"], ex["anchor"]) == (2, 2, "page",
                                                                                  "p. 2")
    assert any(PAGE2 in line for line in ex["lines"])
    both = run_cli("get", f"{root / 'report.pdf'}:1-3", "--page", "2")
    assert both.returncode == 2 and "not both" in both.stderr


def test_later_runs_extract_and_embed_only_what_changed(library: dict[str, Any]) -> None:
    root = library["root"]
    # Unchanged: nothing read, and the unreadable documents are not tried again.
    again = _index(root)
    assert (again["documents_extracted"], again["files_unchanged"], again["chunks_added"]) == (0, 6, 0)
    assert again["files_skipped"].get("encrypted") == 1 and again["files_skipped"].get("corrupt") == 1

    # Touched (same bytes, new mtime): its content hash is unchanged, so it is only re-recorded.
    st = (root / "report.pdf").stat()
    os.utime(root / "report.pdf", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    touched = _index(root)
    assert (touched["files_indexed"], touched["files_touched"]) == (0, 1)
    assert (touched["documents_extracted"], touched["chunks_added"], touched["chunks_removed"]) == (0, 0, 0)
    assert _cached_keys(root) == library["cached"]

    # One section of the handbook changed: only its chunks are embedded again.
    before = _index_files(root)["handbook.docx"]
    assert len(before["chunks"]) >= 4
    sections = [*docmaker.HANDBOOK[:2],
                ("Security", ["Visitors sign in at reception and wear a badge at all times."])]
    docmaker.handbook_docx(root / "handbook.docx", sections=sections, filler=4)
    changed = _index(root)
    assert changed["files_indexed"] == 1 and changed["documents_extracted"] == 1
    assert changed["chunks_reused"] > 0
    assert 0 < changed["chunks_added"] < len(before["chunks"])
    after = _index_files(root)["handbook.docx"]
    assert after["doc"]["key"] != before["doc"]["key"]
    # The handbook's old text leaves the cache with it.
    assert _cached_keys(root) == library["cached"] - {before["doc"]["key"]} | {after["doc"]["key"]}
    assert set(after["chunks"]) <= _stored_ids(root)

    # A deleted document: its chunks, its record and its cached text go.
    epub = _index_files(root)["book.epub"]
    (root / "book.epub").unlink()
    gone = _index(root)
    assert gone["files_removed"] == 1 and gone["chunks_removed"] == len(epub["chunks"])
    assert epub["doc"]["key"] not in _cached_keys(root) and len(_cached_keys(root)) == 4
    assert "book.epub" not in _index_files(root)
    assert not set(epub["chunks"]) & _stored_ids(root)
    documents = (root / ".hydra-index").rglob("documents.json")
    assert all("book.epub" not in json.loads(p.read_text()) for p in documents)


def test_max_document_mb_skips_larger_documents(library: dict[str, Any]) -> None:
    root = library["root"]
    _index(root)  # whatever an earlier test changed
    sizes = sorted((p.stat().st_size, p.name) for p in root.iterdir()
                   if p.is_file() and format_of(p.name))
    (second, _), (largest, name) = sizes[-2:]
    assert largest > second
    env = {"HYDRA_RAG_MAX_DOCUMENT_MB": f"{(second + largest) / 2 / (1 << 20):.6f}"}
    dry = _cli_json("index", str(root), "--dry-run", "--json", env=env)
    assert dry["skipped"]["too_large"] == [name]
    chunks = _index_files(root)[name]["chunks"]
    assert chunks
    rep = _index(root, env=env)
    assert rep["files_skipped"].get("too_large") == 1
    assert rep["chunks_removed"] == len(chunks) and not set(chunks) & _stored_ids(root)
    assert name not in _index_files(root)


def test_an_app_page_with_no_text_is_indexed_as_its_source(home: Path, tmp_path: Path) -> None:
    """An app's index.html (a root element and scripts) has no text to read: it was skipped as
    `empty`; it is its source that a user searches for."""
    root = tmp_path / "app"
    root.mkdir()
    (root / "index.html").write_text(
        "<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"><title></title>\n"
        "<link rel=\"stylesheet\" href=\"/style.css\"></head>\n<body>\n<div id=\"root\"></div>\n"
        "<script>\nfunction mountDashboard(el) {\n  const store = createStore(reducers);\n"
        "  render(App(store), el);\n}\nmountDashboard(document.getElementById('root'));\n"
        "</script>\n</body>\n</html>\n")
    (root / "notes.md").write_text("# Notes\n\nThe dashboard shows the weekly sales.\n")
    rep = _index(root)
    assert rep["files_indexed"] == 2 and not rep["files_skipped"], rep
    proc = run_cli("search", "mountDashboard", "--path", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)["results"]
    assert hits[0]["path"] == "index.html" and hits[0]["kind"] == "code", hits
    again = _index(root)
    assert again["files_indexed"] == 0 and again["files_unchanged"] == 2, again
