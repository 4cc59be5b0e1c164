"""A retrieval set in another language, made from the translated manual pages of this machine
(Debian's manpages-de, -fr, -ru… under /usr/share/man/<lang>/): known-item search, where the
query is a page's one-line description from its NAME section and the one relevant document is
that page, written as Markdown (its sections as headings) without the NAME section.

    python bench/manpages.py de   # writes bench/.work/data/man-de/ in BEIR layout

`retrieval_quality.py --sets man-de` builds it on first use. Pages are rendered with man-db
(`man --nh --nj -l`, 100 columns, no hyphenation) and `col -bx`.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / ".work" / "data"
MAN = Path("/usr/share/man")
_SECTION = re.compile(r"^\S.*$")  # a section header starts in column 0
_SUBSECTION = re.compile(r"^ {3}\S")  # a subsection header starts in column 3


def render(page: Path) -> str:
    env = {**os.environ, "MANWIDTH": "100", "LANG": "C.UTF-8", "MAN_DISABLE_SECCOMP": "1"}
    man = subprocess.run(["man", "--nh", "--nj", "-E", "UTF-8", "-l", str(page)], env=env,
                         capture_output=True, check=True)
    col = subprocess.run(["col", "-bx"], input=man.stdout, capture_output=True, check=True)
    return col.stdout.decode("utf-8", errors="replace")


def _dedent(line: str) -> str:
    return line[7:] if line.startswith(" " * 7) else line.strip()


def to_markdown(text: str, title: str) -> tuple[str, str]:
    """(the page as Markdown without its NAME section, the NAME section's description)."""
    lines = text.splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    lines = lines[1:-1]  # the running header and footer
    out, name, sections = [f"# {title}", ""], [], 0
    for line in lines:
        if _SECTION.match(line):
            sections += 1
            if sections > 1:  # the first section is NAME, whatever the language calls it
                out += [f"## {line.strip()}", ""]
        elif sections == 1:
            name.append(line.strip())
        elif _SUBSECTION.match(line) and not line.strip().startswith("-"):
            out += [f"### {line.strip()}", ""]
        elif sections:
            out.append(_dedent(line).rstrip())
    description = " ".join(name)
    description = " ".join(description.split())
    parts = re.split(r"\s+[-‐–—]\s+", description, maxsplit=1)
    return "\n".join(out).rstrip() + "\n", (parts[1] if len(parts) == 2 else "")


def build(lang: str) -> Path:
    folder = OUT / f"man-{lang}"
    pages = sorted(p for p in (MAN / lang).glob("man*/*") if p.is_file() and not p.is_symlink())
    if not pages:
        raise SystemExit(f"no manual pages in {MAN / lang} (install manpages-{lang}?)")
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    corpus, queries, qrels = [], [], []
    for page in pages:
        raw = page.read_bytes()
        raw = gzip.decompress(raw) if page.suffix == ".gz" else raw
        if raw.startswith(b".so "):
            continue  # a redirect to another page
        name = page.name.removesuffix(".gz")
        try:
            text = render(page)
        except subprocess.CalledProcessError:
            continue
        doc, description = to_markdown(text, name)
        if len(description.split()) < 2 or len(doc) < 200:
            continue
        doc_id = f"{page.parent.name}-{name}"
        corpus.append({"_id": doc_id, "title": "", "text": doc})
        queries.append({"_id": f"q-{doc_id}", "text": description})
        qrels.append(f"q-{doc_id}\t{doc_id}\t1")
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in corpus)
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(q, ensure_ascii=False) + "\n" for q in queries)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                                + "\n".join(qrels) + "\n")
    return folder


if __name__ == "__main__":
    for lang in sys.argv[1:] or ["de"]:
        where = build(lang)
        n = sum(1 for _ in (where / "corpus.jsonl").open())
        print(f"{where}: {n} pages")
