"""What a document loses on the way to its lines: real documentation written by pandoc as
DOCX, ODT, EPUB and HTML, read back by hydra-rag, against the same text as Markdown.

The text is Django 5.1.4's topic guides (docs/topics/**/*.txt, reStructuredText: sections,
lists, tables, notes and warnings, code), fetched as the sdist from PyPI; none of it was written
for this bench. Each guide is converted by pandoc to each format; `extract_file` reads it back.
Per format, over every guide:

* `words`: the share of the guide's words (pandoc's plain-text rendering, as a bag: each
  occurrence counts) that come out of extraction; what is missing was lost on the way;
* `extra`: words that come out more often than the text has them (a copy read twice);
* `heads`: the share of the guide's section titles that come out as headings;
* `glued`: sentence ends run into the next word with no space (`spring.Sidebar`), beyond
  those the text has.

    python bench/doc_fidelity.py [--guides 60]

Needs pandoc (Debian's `pandoc`; `make bench-documents` installs it). Run it at two commits to
compare them: the figures depend only on the extraction code.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "fidelity"
DJANGO = "django==5.1.4"
FORMATS = ("docx", "odt", "epub", "html")
_WORD = re.compile(r"[^\W_]{2,}")
_HEAD = re.compile(r"^#{1,6} (.+)$", re.M)
_ARTIFACT = re.compile(r"\{[^{}]*\}|^:::.*$", re.M)
_FENCED = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_GLUED = re.compile(r"[a-z]{3,}[.!?][A-Z][a-z]{2,}")


def guides(n: int) -> list[Path]:
    """The first n topic guides of Django's docs (sorted by path), fetched once."""
    src = WORK / "django"
    if not src.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
                        ":all:", DJANGO, "-d", str(WORK)], check=True)
        tar = next(WORK.glob("[Dd]jango-5.1.4.tar.gz"))
        with tarfile.open(tar) as t:
            members = [m for m in t.getmembers() if "/docs/topics/" in m.name and m.isfile()]
            t.extractall(WORK / "raw", members=members, filter="data")
        (WORK / "raw").rename(src)
    return sorted(src.rglob("docs/topics/**/*.txt"))[:n]


def pandoc(src: Path, fmt: str, out: Path) -> bool:
    args = ["pandoc", "-f", "rst", str(src), "-o", str(out), "--markdown-headings=atx"]
    if fmt in ("docx", "odt", "epub", "html"):
        args += ["-s", "--metadata", f"title={src.stem}"]
    return subprocess.run(args, capture_output=True).returncode == 0


def _key(title: str) -> str:
    """A title's words, whatever marks set them (`Session` objects → session objects)."""
    return " ".join(w.casefold() for w in _WORD.findall(title))


def words(text: str) -> collections.Counter[str]:
    return collections.Counter(w.casefold() for w in _WORD.findall(text))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--guides", type=int, default=60)
    args = ap.parse_args()
    if shutil.which("pandoc") is None:
        raise SystemExit("needs pandoc: apt-get install pandoc (or make bench-documents)")
    from hydra_rag.documents.extract import extract_file

    docs = guides(args.guides)
    out = WORK / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    totals = {f: collections.Counter() for f in FORMATS}  # type: ignore[var-annotated]
    took = dict.fromkeys(FORMATS, 0.0)
    used = 0
    for src in docs:
        plain, md = out / f"{src.stem}.txt", out / f"{src.stem}.md"
        if not (pandoc(src, "plain", plain) and pandoc(src, "markdown", md)):
            continue
        used += 1
        # pandoc's marks of Sphinx's roles and directives it does not know (`{.interpreted-text
        # role="setting"}`, `::: warning`) are not the text
        want = words(_ARTIFACT.sub(" ", plain.read_text(encoding="utf-8")))
        text_md = _FENCED.sub("", md.read_text(encoding="utf-8"))  # a `# comment` in code
        heads = {_key(h) for h in _HEAD.findall(re.sub(r"\{[^}]*\}$", "", text_md,
                                                       flags=re.M))} - {""}
        for fmt in FORMATS:
            path = out / f"{src.stem}.{fmt}"
            if not pandoc(src, fmt, path):
                continue
            t0 = time.perf_counter()
            text = extract_file(path, fmt).text
            took[fmt] += time.perf_counter() - t0
            got = words(text)
            got_heads = {_key(h) for h in _HEAD.findall(text)}
            tot = totals[fmt]
            tot["words"] += sum(want.values())
            tot["found"] += sum((want & got).values())
            tot["extra"] += sum((got - want).values())
            tot["heads"] += len(heads)
            tot["heads_found"] += len(heads & got_heads)
            # a sentence's end run into the next words with no space, more than the text has
            tot["glued"] += max(0, len(_GLUED.findall(text))
                                - len(_GLUED.findall(plain.read_text(encoding="utf-8"))))
    print(f"{used} of Django 5.1.4's topic guides, pandoc {_pandoc_version()}")
    print(f"{'format':6} {'words':>7} {'extra':>7} {'heads':>7} {'glued':>6} {'extract s':>9}")
    for fmt in FORMATS:
        t = totals[fmt]
        print(f"{fmt:6} {t['found'] / t['words']:7.2%} {t['extra'] / t['words']:7.2%} "
              f"{t['heads_found'] / max(1, t['heads']):7.1%} {t['glued']:6d} {took[fmt]:9.2f}")


def _pandoc_version() -> str:
    proc = subprocess.run(["pandoc", "--version"], capture_output=True, text=True)
    return proc.stdout.split("\n", 1)[0].removeprefix("pandoc ").strip()


if __name__ == "__main__":
    main()
