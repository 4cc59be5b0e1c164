"""Printed lines (a PDF's text layer, OCR) into text: words broken at a line's end, and lines
marked as headings (heads.HEAD) into the builder's headings."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from hydra_rag.documents.heads import HEAD, LINE_END_HYPHEN

if TYPE_CHECKING:
    from hydra_rag.documents.text import Builder

_BROKEN_WORD = re.compile(rf"(\w+){LINE_END_HYPHEN}(\w*)")


def rejoin(pages: list[list[str]]) -> list[list[str]]:
    """Words broken over printed lines at a hyphen: "man-agement" is one word if "management"
    occurs elsewhere in the document, "well-established" keeps its hyphen otherwise."""
    if not any(LINE_END_HYPHEN in ln for lines in pages for ln in lines):
        return pages
    words = {w.casefold() for lines in pages for ln in lines for w in re.findall(r"\w+", ln)}

    def join(m: re.Match[str]) -> str:
        a, b = m.group(1), m.group(2)
        return a + b if (a + b).casefold() in words else f"{a}-{b}"

    return [[_BROKEN_WORD.sub(join, ln).replace(LINE_END_HYPHEN, "-") for ln in lines]
            for lines in pages]


def blocks(b: Builder, lines: list[str]) -> None:
    """A page's lines into the builder, a line marked as a heading (heads.HEAD and its
    level) as one; a title printed over several lines is one heading."""
    run: list[str] = []
    title: list[str] = []
    level = 0
    for line in [*lines, ""]:
        if line.startswith(HEAD):
            lv = int(line[1])
            if title and lv != level:
                b.heading(level, " ".join(title))
                title = []
            if not title:
                b.block("\n".join(run))
                run = []
            level = lv
            title.append(line[2:].strip())
            continue
        if title and line.strip():
            b.heading(level, " ".join(title))
            title = []
        if not title:
            run.append(line)
    if title:
        b.heading(level, " ".join(title))
    b.block("\n".join(run))
