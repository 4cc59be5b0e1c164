"""Documents end to end: SciFact abstracts laid out as PDF and DOCX reports and as HTML pages,
indexed and searched next to the same text as Markdown, in the same run.

    python bench/documents.py [--docs 500] [--queries 300] [--json]
                              [--layouts md,md-paras,pdf,docx,html,html-divs,scan]

The abstracts (../shared/data/scifact: every abstract judged for the chosen training queries,
then others up to --docs) are shuffled with a fixed seed and grouped into reports of 20, each
abstract a section headed by its title (a title two abstracts share gets its doc id added).
The same reports are written as

* `md`: `# Report N`, `## <title>`, the text wrapped at 100 columns: the reference;
* `md-paras`: the same with each paragraph on one line, as DOCX and HTML paragraphs come out
  of extraction (the chunker never cuts a line, so this alone moves chunk ends);
* `pdf`: that report as an HTML page printed by chromium (Playwright `page.pdf`, A4, with a
  running head and a "Page X of Y" foot, outline on, so the headings are bookmarks);
* `docx`: python-docx, Heading 1 per report, Heading 2 per abstract, a page break every 3;
* `html`: one page per report, the text in <main><article> inside a nav bar, a cookie banner,
  breadcrumbs, a sidebar of related titles, a "most read" box and a footer;
* `html-divs`: the same page with no landmarks at all: classed <div>s only (the harder case);
* the `*-notes` layouts of bench/doc_writers.py are compared with `md-notes`, the same
  reports (a footnote and a table in each abstract) as Markdown;
* `scan`: the `pdf` reports as a scanner app saves them: every page a grey picture at 200 dpi
  in an image-only PDF (Pillow), no text layer, read by OCR (Tesseract). Its `extract` column
  is OCR through the extraction worker, the way `index` reads them (into the folder's cache,
  which the index run then uses); pages/s there is OCR speed.

Each layout is indexed in its own folder (bench/.work/documents/<layout>, rebuilt every run) with
`hydra_rag.index.index_folder` and the configured embedder, and every query is searched
(`Searcher.search(q, 40)`). A hit becomes abstracts two ways:

* by section, as a reader is told where it is: the last title of the hit's section trail (or
  the title the chunk starts with) names the abstract (a title OCR misread a letter or two of,
  "lon Channels" for "Ion Channels", still names it: the closest title at a similarity of 0.9
  or more): nDCG@10 "sect";
* by text, what the chunk holds: the abstracts its 8-word shingles come from: nDCG@10 "text".

The first is the figure asked for (goal: within 0.02 of Markdown); the second tells retrieval
apart from attribution. Also per layout: `sec_ok`, the share of the top-10 hits whose section
names an abstract their text comes from; `paged`, the share of hits that carry a page (PDF,
DOCX) and `page_ok`, of those, the share whose cited lines (those matching the query best, as
search cites a page; the chunk's lines for a hit by meaning alone) are all, by their words, on
its cited pages; `heads`, the abstract titles that come out of extraction as headings; `leak`,
boilerplate phrases that come out of the HTML pages. Extraction speed: `extract_file` in this
process over every file of the layout, pages/s (PDF, DOCX) and seconds per MB of files; the
`index` column is the whole index_folder run against the same text as Markdown. Work files go
to bench/.work/documents/.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import doc_writers  # noqa: E402  (other writers: reportlab, fpdf2, pandoc, LibreOffice, …)
import retrieval_quality as rq  # noqa: E402  (data loading, same queries and judgements)

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "documents"
REPORT_SIZE = 20
WRAP = 100
DOCX_PER_PAGE = 3
SEARCH_K = 40
SHINGLE = 8
LAYOUTS = ("md", "md-paras", "pdf", "docx", "html", "html-divs", "scan")
SUFFIX = {"md": ".md", "md-paras": ".md", "pdf": ".pdf", "docx": ".docx", "html": ".html",
          "html-divs": ".html", "scan": ".pdf"}
SUFFIX.update(doc_writers.SUFFIX)
SCAN_DPI = 200  # what scanner apps save by default: the scan layout's pictures
CHROMIUM = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"]

NAV = ["Home", "Journals", "Browse by subject", "Submit a manuscript", "Editorial board",
       "About us", "Contact", "Sign in", "Subscribe to alerts"]
COOKIE = ("We use cookies to improve your experience on our website. By continuing to browse you "
          "agree to our use of cookies. Manage preferences")
FOOTER = ("© 2024 Open Science Press Ltd. All rights reserved. Registered in England, company "
          "number 0457123. Privacy policy · Terms of use · Cookie settings · Accessibility")
SHARE = "Share this report: Twitter Facebook LinkedIn Email · Cite this report · Download PDF"
# phrases of the page furniture; any of them in the extracted text is a leak
BOILER = {"nav": "Submit a manuscript", "cookie": "We use cookies", "footer": "All rights reserved",
          "crumbs": "You are here", "share": "Share this report", "related": "Related reports",
          "most-read": "Most read this week"}

_WORDS = re.compile(r"\w+")
_NONWORD = re.compile(r"\W+")


def key(title: str) -> str:
    """A title compared without case, punctuation or spaces (a PDF outline can lose the space
    where a title wrapped)."""
    return _NONWORD.sub("", title.casefold())


@dataclass
class Abstract:
    id: str
    title: str
    text: str


@dataclass
class Layout:
    name: str
    folder: Path
    files: list[Path] = field(default_factory=list)
    # rel path → page texts (compact keys) where the truth of a page is known
    pages: dict[str, list[set[str]]] = field(default_factory=dict)  # the words of each page


# ------------------------------------------------------------------------------ the corpus


def select(keep: set[str], n: int) -> list[dict[str, str]]:
    """Every judged abstract, then the first others of the corpus up to n in all."""
    docs = rq._documents("scifact", None, 0)
    judged = [d for d in docs if d["_id"] in keep]
    others = [d for d in docs if d["_id"] not in keep][:max(0, n - len(judged))]
    return judged + others


def reports(docs: list[dict[str, str]]) -> list[list[Abstract]]:
    seen: dict[str, str] = {}
    out: list[Abstract] = []
    for d in docs:
        title = " ".join((d["title"] or d["_id"]).split())
        if key(title) in seen:
            title = f"{title} [{d['_id']}]"
        seen[key(title)] = d["_id"]
        out.append(Abstract(d["_id"], title, " ".join(d["text"].split())))
    random.Random(7).shuffle(out)
    return [out[i:i + REPORT_SIZE] for i in range(0, len(out), REPORT_SIZE)]


def paragraphs(text: str) -> list[str]:
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text)
    k = max(1, (len(sentences) + 2) // 3)
    return [" ".join(sentences[j:j + k]) for j in range(0, len(sentences), k)]


def write_md(n: int, report: list[Abstract], path: Path, wrap: bool = True) -> None:
    lines = [f"# Report {n}", ""]
    for a in report:
        lines += [f"## {a.title}", ""]
        for p in paragraphs(a.text):
            lines += (textwrap.wrap(p, WRAP) if wrap else [p]) + [""]
    path.write_text("\n".join(lines), encoding="utf-8")


def print_html(n: int, report: list[Abstract]) -> str:
    body = "".join(f"<h2>{escape(a.title)}</h2>" + "".join(f"<p>{escape(p)}</p>"
                                                            for p in paragraphs(a.text))
                   for a in report)
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Report "
            f"{n}</title><style>body{{font:11pt serif;margin:0}} h1{{font:bold 18pt sans-serif}}"
            "h2{font:bold 13pt sans-serif;margin:14pt 0 4pt} p{margin:0 0 6pt}</style></head>"
            f"<body><h1>Report {n}</h1>{body}</body></html>")


def write_pdfs(items: list[tuple[int, list[Abstract], Path]]) -> None:
    from playwright.sync_api import sync_playwright

    exe = next((c for c in CHROMIUM if Path(c).exists()), None)
    small = "font-size:8pt;width:100%;text-align:center;font-family:sans-serif"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        page = browser.new_page()
        for n, report, path in items:
            page.set_content(print_html(n, report))
            page.pdf(path=str(path), format="A4", outline=True, tagged=True,
                     display_header_footer=True,
                     header_template=f"<div style='{small}'>Open Science Press · Report {n}</div>",
                     footer_template=f"<div style='{small}'>Page <span class='pageNumber'></span>"
                                     " of <span class='totalPages'></span></div>",
                     margin={"top": "2cm", "bottom": "2cm", "left": "2cm", "right": "2cm"})
        browser.close()


def write_docx(n: int, report: list[Abstract], path: Path) -> None:
    import docx

    d = docx.Document()
    d.add_heading(f"Report {n}", level=1)
    for i, a in enumerate(report):
        if i and i % DOCX_PER_PAGE == 0:
            d.add_page_break()
        d.add_heading(a.title, level=2)
        for p in paragraphs(a.text):
            d.add_paragraph(p)
    d.save(str(path))


def write_html(n: int, report: list[Abstract], others: list[Abstract], path: Path,
               landmarks: bool) -> None:
    nav = "".join(f'<li><a href="/{x.lower().replace(" ", "-")}">{escape(x)}</a></li>' for x in NAV)
    crumbs = f'You are here: <a href="/">Home</a> › <a href="/reports">Reports</a> › Report {n}'
    related = "".join(f'<li><a href="/a/{o.id}">{escape(o.title)}</a></li>' for o in others[:6])
    popular = "".join(f'<li><a href="/a/{o.id}">{escape(o.title)}</a></li>' for o in others[6:10])
    article = f"<h1>Report {n}</h1>" + "".join(
        f"<h2>{escape(a.title)}</h2>" + "".join(f"<p>{escape(p)}</p>" for p in paragraphs(a.text))
        for a in report)
    if landmarks:
        body = (f'<header><div class="logo">Open Science Press</div><nav><ul>{nav}</ul></nav>'
                f'</header><div class="cookie-banner">{COOKIE}</div><div class="crumbs">{crumbs}'
                f'</div><main><article>{article}<p class="share">{SHARE}</p></article></main>'
                f"<aside><h3>Related reports</h3><ul>{related}</ul></aside>"
                f'<div class="widget"><h3>Most read this week</h3><ul>{popular}</ul></div>'
                f"<footer><p>{FOOTER}</p></footer>")
    else:  # no landmarks: what a reader tells apart by class names only
        body = (f'<div class="site-header"><div class="logo">Open Science Press</div>'
                f'<div class="menu"><ul>{nav}</ul></div></div><div class="cookie-notice">{COOKIE}'
                f'</div><div class="crumbs">{crumbs}</div><div class="wrap"><div class="content">'
                f'{article}<div class="share-links">{SHARE}</div></div><div class="sidebar">'
                f"<h3>Related reports</h3><ul>{related}</ul></div>"
                f'<div class="widget"><h3>Most read this week</h3><ul>{popular}</ul></div></div>'
                f'<div class="site-footer"><p>{FOOTER}</p></div>')
    path.write_text(f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Report {n}'
                    " | Open Science Press</title><script>var _paq=[];</script><style>body{margin:0}"
                    f"</style></head><body>{body}</body></html>", encoding="utf-8")


def pdf_pages(path: Path) -> list[str]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(path))
    try:
        out = []
        for page in pdf:
            tp = page.get_textpage()
            out.append(set(_WORDS.findall(tp.get_text_range().casefold())))
            tp.close()
            page.close()
        return out
    finally:
        pdf.close()


def scan(pdf: Path, out: Path) -> None:
    """A PDF as a scanner app saves it: each page a grey picture, no text layer (Pillow)."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(pdf))
    images = [page.render(scale=SCAN_DPI / 72, grayscale=True).to_pil() for page in doc]
    images[0].save(out, "PDF", resolution=SCAN_DPI, save_all=True, append_images=images[1:])
    doc.close()


def build(name: str, reps: list[list[Abstract]], tag: str) -> Layout:
    """The layout's folder, files written afresh (PDFs kept from an earlier run of the same
    set: chromium is the slow part); any old index removed."""
    folder = WORK / name
    lay = Layout(name, folder)
    src = WORK / "src" / f"{name}-{tag}"
    if name == "pdf" and src.exists():
        pass
    elif name == "scan":
        pdfs = build("pdf", reps, tag).files  # the same printed reports, then scanned
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir(parents=True)
        for path in pdfs:
            scan(path, src / path.name)
    else:
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir(parents=True)
        flat = [a for r in reps for a in r]
        if name in doc_writers.WRITERS:
            doc_writers.write_all(
                name, [(i, r, src / f"report-{i:03d}{SUFFIX[name]}") for i, r in enumerate(reps, 1)],
                paragraphs, write_md, write_docx)
        todo = []
        for i, report in enumerate(reps, 1):
            path = src / f"report-{i:03d}{SUFFIX[name]}"
            if name in doc_writers.WRITERS:
                continue
            if name in ("md", "md-paras"):
                write_md(i, report, path, wrap=name == "md")
            elif name == "pdf":
                todo.append((i, report, path))
            elif name == "docx":
                write_docx(i, report, path)
            else:
                others = random.Random(i).sample([a for a in flat if a not in report], 10)
                write_html(i, report, others, path, landmarks=name == "html")
        if todo:
            write_pdfs(todo)
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(src, folder)
    lay.files = sorted(folder.glob("report-*"))
    for i, (report, path) in enumerate(zip(reps, lay.files, strict=True), 1):
        if name == "pdf" or name.startswith("pdf-"):
            lay.pages[path.name] = pdf_pages(path)
        elif name == "scan":  # the truth of a page: what the printed PDF has on it
            lay.pages[path.name] = pdf_pages(WORK / "pdf" / path.name)
        elif name == "docx":
            pages = [f"Report {i}"]
            for j, a in enumerate(report):
                if j and j % DOCX_PER_PAGE == 0:
                    pages.append("")
                pages[-1] += " " + a.title + " " + a.text
            lay.pages[path.name] = [set(_WORDS.findall(t.casefold())) for t in pages]
    return lay


# ------------------------------------------------------------------------------ hits → abstracts


class Mapper:
    def __init__(self, reps: list[list[Abstract]]) -> None:
        self.by_title: dict[str, str] = {}
        self.shingles: dict[tuple[str, ...], str] = {}
        self.text: dict[str, str] = {}
        for a in (a for r in reps for a in r):
            self.by_title[key(a.title)] = a.id
            words = _WORDS.findall(f"{a.title} {a.text}".casefold())
            for i in range(max(1, len(words) - SHINGLE + 1)):
                self.shingles.setdefault(tuple(words[i:i + SHINGLE]), a.id)
            self.text[a.id] = key(a.title + a.text)
        self.keys = sorted(self.by_title)
        self.near: dict[str, str | None] = {}

    def title(self, title: str) -> str | None:
        title = title.strip()
        if title.endswith("…"):  # cut to 100 characters in the section trail
            pre = key(title[:-1])
            found = [k for k in self.keys if k.startswith(pre)] if len(pre) > 20 else []
            return self.by_title[found[0]] if len(found) == 1 else None
        k = key(title)
        if k in self.by_title:
            return self.by_title[k]
        if k not in self.near:  # a title OCR misread a letter or two of
            close = difflib.get_close_matches(k, self.keys, n=1, cutoff=0.9)
            self.near[k] = self.by_title[close[0]] if close else None
        return self.near[k]

    def by_section(self, section: str, text: str) -> list[str]:
        """The abstract the section names; a chunk that starts with its heading is given the
        trail above it, so its first line names it then."""
        lead = None
        for ln in text.splitlines():
            if ln.startswith("#"):
                lead = self.title(ln.lstrip("#")) or lead
            elif ln.strip():
                break
        if lead:
            return [lead]
        doc = self.title(section.rsplit(" › ", 1)[-1]) if section else None
        return [doc] if doc else []

    def by_text(self, text: str) -> list[str]:
        words = _WORDS.findall(text.casefold())
        return list(dict.fromkeys(d for i in range(max(0, len(words) - SHINGLE + 1))
                                  if (d := self.shingles.get(tuple(words[i:i + SHINGLE])))))


def body_line(text: str) -> str:
    """The first line of a chunk's own text long enough to look up."""
    for ln in text.splitlines():
        if ln.strip() and not ln.startswith("#") and len(key(ln)) >= 25:
            return key(ln)[:60]
    return ""


def cited_lines(text: str, query: str) -> list[list[str]]:
    """The lines a hit's page is cited by (as hydra_rag.search.retrieve cites it: those that
    match the query best, else the chunk's text), each as its words (lines of 6 or more)."""
    from hydra_rag.search.evidence import best_lines

    lines = text.splitlines()
    chosen = [lines[i] for i in best_lines(text, query)] or lines
    words = [_WORDS.findall(ln.casefold()) for ln in chosen if not ln.startswith("#")]
    return [w for w in words if len(w) >= 6]


def printed_on(words: list[str], pages: list[set[str]]) -> list[int]:
    """The pages (1-based) a line was printed on: those holding most of its words (OCR's
    misread letters and a PDF's other spacing of a line do not change that). A line that
    runs over a page turn (a paragraph joined) counts for the page of its first words."""
    head = words[:12]
    share = [sum(w in p for w in head) for p in pages]
    best = max(share, default=0)
    return [i + 1 for i, n in enumerate(share) if n == best] if best else []


# ------------------------------------------------------------------------------ evaluation


def evaluate(lay: Layout, mapper: Mapper, queries: list[dict[str, str]],
             qrels: dict[str, dict[str, float]]) -> dict[str, float]:
    from hydra_rag.checks.metrics import distinct, ndcg_at
    from hydra_rag.config import load_settings
    from hydra_rag.search.retrieve import Searcher

    searcher = Searcher(lay.folder, load_settings())
    sect, text, times = [], [], []
    top = unmapped = sec_ok = paged = page_ok = page_checked = 0
    try:
        for q in queries:
            t0 = time.perf_counter()
            hits = searcher.search(q["text"], SEARCH_K)
            times.append(time.perf_counter() - t0)
            rel = qrels[q["_id"]]
            by_sec = distinct([d for h in hits for d in mapper.by_section(h.section, h.text)])
            by_txt = distinct([d for h in hits for d in mapper.by_text(h.text)])
            sect.append(ndcg_at(by_sec[:10], rel, 10))
            text.append(ndcg_at(by_txt[:10], rel, 10))
            for h in hits[:10]:
                top += 1
                docs = mapper.by_section(h.section, h.text)
                line = body_line(h.text)
                if not docs:
                    unmapped += 1
                elif not line or line in mapper.text[docs[0]]:
                    sec_ok += 1
                if h.page_start:
                    paged += 1
                    pages = lay.pages.get(Path(h.path).name)
                    cited = cited_lines(h.text, q["text"])
                    if pages and cited:
                        page_checked += 1
                        page_ok += all(any(h.page_start <= p <= h.page_end
                                           for p in printed_on(words, pages))
                                       for words in cited)
    finally:
        searcher.close()
    mean = statistics.mean
    return {"queries": len(queries), "ndcg10": mean(sect), "ndcg10_text": mean(text),
            "sec_ok": sec_ok / max(1, top), "unmapped": unmapped / max(1, top), "paged": paged / max(1, top),
            "page_ok": page_ok / page_checked if page_checked else None,
            "median_ms": statistics.median(times) * 1000}


def extraction(lay: Layout, reps: list[list[Abstract]]) -> dict[str, object]:
    """extract_file over the layout's files in this process: time, pages, headings, leaks."""
    from hydra_rag.documents import format_of
    from hydra_rag.documents.extract import extract_file

    if lay.name.startswith("md"):
        return {"extract_s": None, "pages": None, "heads": 1.0, "leak": ""}
    secs = 0.0
    pages = found = want = 0
    leaks: dict[str, int] = {}
    reader = None
    if lay.name == "scan":
        # Read by OCR as `index` reads them (the worker, Tesseract), once: into the folder's
        # extraction cache, where the index run finds them.
        from hydra_rag.config import load_settings
        from hydra_rag.read.source import reader_for

        reader = reader_for(load_settings(), lay.folder / ".hydra-index")
        if reader.ocr is None:
            raise SystemExit("the scan layout needs Tesseract: apt-get install tesseract-ocr")
    for path, report in zip(lay.files, reps, strict=True):
        fmt = format_of(path.name)
        t0 = time.perf_counter()
        ex = reader.read(path, fmt)[0] if reader else extract_file(path, fmt)
        secs += time.perf_counter() - t0
        pages += len(ex.starts)
        heads = {key(ln.lstrip("#")) for ln in ex.text.splitlines() if ln.startswith("#")}
        want += len(report)
        found += sum(key(a.title) in heads for a in report)
        for what, phrase in BOILER.items():
            if phrase in ex.text:
                leaks[what] = leaks.get(what, 0) + 1
        # a "most read" or "related" title inside the text: another abstract's title leaked
    if reader is not None:
        reader.close()
    return {"extract_s": secs, "pages": pages or None, "heads": found / max(1, want),
            "leak": ",".join(f"{k}:{v}" for k, v in sorted(leaks.items()))}


def index(folder: Path) -> tuple[float, dict[str, object]]:
    from hydra_rag.config import load_settings
    from hydra_rag.index import index_folder

    t0 = time.perf_counter()
    report = index_folder(folder, load_settings())
    return time.perf_counter() - t0, report.to_json()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=500,
                    help="abstracts: every judged one of the queries, then others up to N in all")
    ap.add_argument("--queries", type=int, default=300, help="0: every training query")
    ap.add_argument("--layouts", default=",".join(LAYOUTS),
                    help="also: " + ",".join(doc_writers.WRITERS) + " (or 'writers' for all)")
    ap.add_argument("--json", action="store_true", help="one JSON line per layout")
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    subprocess.run([sys.executable, "-m", "hydra_rag", "rag", "setup"], check=True,
                   capture_output=True)
    layouts = [x for w in args.layouts.split(",")
               for x in (doc_writers.WRITERS if w == "writers" else [w])]
    unknown = [w for w in layouts if w not in LAYOUTS + doc_writers.WRITERS]
    if unknown:
        raise SystemExit(f"unknown layouts: {', '.join(unknown)}")
    if lacking := doc_writers.missing([w for w in layouts if w in doc_writers.WRITERS]):
        raise SystemExit("the writers' layouts need: " + "; ".join(lacking))
    if "md" not in layouts:
        layouts.insert(0, "md")
    queries, qrels = rq.load("scifact", args.queries or 10**9)
    keep = {d for q in queries for d in qrels[q["_id"]]}
    reps = reports(select(keep, args.docs))
    n_docs = sum(map(len, reps))
    print(f"{n_docs} abstracts in {len(reps)} reports, {len(queries)} queries", flush=True)
    if not (WORK / ".git").exists():
        # Its own repository: otherwise this checkout's .gitignore (bench/.work/) hides it.
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(WORK)], check=True)
    mapper = Mapper(reps)
    # the embedder's sidecar starts on the first run: not on the clock of the first layout
    warm = WORK / "warm-up"
    shutil.rmtree(warm, ignore_errors=True)
    warm.mkdir()
    (warm / "a.md").write_text("# Warm up\n\nThe embedder starts here.\n")
    index(warm)
    rows = []
    tag = f"{n_docs}-{len(queries)}"
    for name in layouts:
        t0 = time.perf_counter()
        lay = build(name, reps, tag)
        made = time.perf_counter() - t0
        ex = extraction(lay, reps)
        secs, report = index(lay.folder)
        chunks = sum(report["chunks_total"].values())  # type: ignore[attr-defined]
        skipped = {k: v for k, v in report["files_skipped"].items() if v}  # type: ignore[union-attr]
        print(f"{name}: {len(lay.files)} files written in {made:.1f}s; indexed "
              f"{report['files_indexed']}, {chunks} chunks, {secs:.1f}s"
              + (f"; skipped {skipped}" if skipped else "")
              + (f"; problems {report['document_problems']}" if report["document_problems"] else ""),
              flush=True)
        m = evaluate(lay, mapper, queries, qrels)
        row = {"layout": name, **m, "files": len(lay.files), "chunks": chunks, **ex,
               "index_s": secs}
        es, pages = ex["extract_s"], ex["pages"]
        row["pages_per_s"] = pages / es if pages and es else None  # type: ignore[operator]
        row["files_per_s"] = len(lay.files) / es if es else None  # type: ignore[operator]
        mb = sum(p.stat().st_size for p in lay.files) / 2**20
        row["mb"] = mb
        row["s_per_mb"] = es / mb if es else None  # type: ignore[operator]
        rows.append(row)
    by_name = {r["layout"]: r for r in rows}
    for r in rows:
        # the notes layouts against the same report as Markdown, notes and tables included
        base = by_name["md-notes" if r["layout"] in doc_writers.NOTES and "md-notes" in by_name
                       else "md"]
        r["delta_vs_markdown"] = r["ndcg10"] - base["ndcg10"]
        r["index_vs_markdown"] = r["index_s"] / base["index_s"]
    print()

    def f(v: object, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    print(f"{'layout':10} {'nDCG sect':>9} {'Δ md':>6} {'nDCG text':>9} {'sec_ok':>6} "
          f"{'paged':>5} {'page_ok':>7} {'heads':>5} {'files':>5} {'pages':>5} {'chunks':>6} "
          f"{'extract':>7} {'s/MB':>6} {'pages/s':>7} {'index':>6} {'×md':>4}  leak")
    for r in rows:
        print(f"{r['layout']:10} {r['ndcg10']:9.3f} {r['delta_vs_markdown']:+6.3f} "
              f"{r['ndcg10_text']:9.3f} {r['sec_ok']:6.1%} {r['paged']:5.0%} "
              f"{f(r['page_ok'], '7.1%')} {r['heads']:5.0%} {r['files']:5d} "
              f"{f(r['pages'], '5d')} {r['chunks']:6d} {f(r['extract_s'], '6.2f'):>6}s "
              f"{f(r['s_per_mb'], '6.2f')} {f(r['pages_per_s'], '7.1f')} {r['index_s']:5.1f}s "
              f"{r['index_vs_markdown']:4.1f}  "
              f"{r['leak'] or '-'}")
    print("\ngoal: nDCG@10 by section within 0.02 of Markdown "
          + ", ".join(f"{r['layout']} {'ok' if r['delta_vs_markdown'] >= -0.02 else 'MISSED'}"
                      for r in rows if r["layout"] not in ("md", "md-notes")))
    if args.json:
        for r in rows:
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                              for k, v in r.items()}))


if __name__ == "__main__":
    main()
