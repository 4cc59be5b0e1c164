"""Headings of a document that marks none (a PDF without an outline, a Word file without
heading styles), told by their type: a line set larger than the body text, or a short line
all in bold, is a heading; the larger, the higher its level.

Many writers leave no outline (reportlab, fpdf2, most scanners' OCR layers, LaTeX without
hyperref, Word's "save as PDF" with bookmarks off): without headings a hit's section trail is
empty and a reader is told nothing of where it is. `pdf._page_lines` marks each printed line
with its type (`mark`: the font size of its ends and whether both are bold, in private-use
characters that no pattern of the text reads as a letter), and `ocr.pages_of` each line it
reads with the size Tesseract measured (no weight: OCR does not tell bold); `find_headings`
reads the marks of the whole document, decides, and leaves each heading as HEAD, its level
and its text. `levels` is the decision itself, which DOCX uses too.
"""

from __future__ import annotations

from collections import Counter

_MARK = "\ue010"
_BOLD, _PLAIN = "\ue011", "\ue012"
_MEASURED = "\ue014"  # not bold as far as anyone knows: OCR measured the size, told no weight
_SIZE0 = 0xE100  # size in quarter points, as one character (up to 959 points)
HEAD = "\ue013"  # a heading line: HEAD, its level (one digit), its text
LINE_END_HYPHEN = "\ue000"  # a hyphen at a printed line's end, resolved for the whole document

LARGER = 1.12  # a heading's size over the body's
# The same for a size OCR measured (a paragraph's median x_size): 13-point titles over 11-point
# text measured 1.09-1.25 times the text's size on 200-dpi scans, paragraphs of text within
# 1.03 of it.
LARGER_MEASURED = 1.06
MAX_HEADING = 150  # characters: a longer printed line is text however it is set
MAX_BOLD_HEADING = 100
# A paragraph (DOCX, ODT) holds a whole title, which a printed line may not: long titles of
# papers and reports run to 250 characters.
MAX_PARAGRAPH_HEADING = 300
SAME_LEVEL = 0.95  # a heading size this close to the next larger one is of its level
SAME_LEVEL_MEASURED = 0.88  # the same for sizes OCR measured
SAME_TITLE = 0.9  # printed lines of one title, as OCR measures them, are this close in size
MAX_SHARE = 0.35  # a "heading" size that sets more of the lines than this is body text
_END = (".", ",", ";", ":")


def mark(size: float, bold: bool, measured: bool = False) -> str:
    """A printed line's type: its font size in points and weight, or (`measured`) the size
    OCR measured on a picture of it."""
    return _MARK + chr(_SIZE0 + max(0, min(int(round(size * 4)), 0xEFF))) + (
        _MEASURED if measured else _BOLD if bold else _PLAIN)


def _read(line: str) -> tuple[float, bool, str] | None:
    if len(line) >= 3 and line[0] == _MARK:
        return (ord(line[1]) - _SIZE0) / 4, line[2] == _BOLD, line[3:]
    return None


def unmark(pages: list[list[str]]) -> list[list[str]]:
    return [[(r[2] if (r := _read(ln)) else ln) for ln in lines] for lines in pages]


def levels(typed: list[tuple[float, bool, str] | None], longest: int = MAX_HEADING,
           same_level: float = SAME_LEVEL, larger: float = LARGER) -> list[int]:
    """A heading level (1 highest) for each line or paragraph of a document, 0 for text,
    from its type: (font size, all bold, text), None where the type is not known. `longest`:
    the most characters a heading has (a printed line's limit by default); `same_level`: how
    close two heading sizes are to be one level; `larger`: how much larger than the text a
    heading is set."""
    chars: Counter[float] = Counter()
    bold_chars = plain_chars = 0
    for t in typed:
        if t and t[2].strip():
            chars[t[0]] += len(t[2])
            if t[1]:
                bold_chars += len(t[2])
            else:
                plain_chars += len(t[2])
    if not chars:
        return [0] * len(typed)
    body = chars.most_common(1)[0][0]
    bold_body = bold_chars > plain_chars  # a document set in bold: weight tells nothing
    bold_longest = longest * MAX_BOLD_HEADING // MAX_HEADING

    def rank(t: tuple[float, bool, str] | None) -> float | None:
        """The size a heading is ranked by (None: not a heading)."""
        if t is None:
            return None
        size, bold, text = t
        s = text.strip()
        if not s or len(s) > longest or not any(c.isalpha() for c in s):
            return None
        if size >= body * larger:
            return size
        if bold and not bold_body and size >= body * 0.95 and len(s) <= bold_longest \
                and not s.endswith(_END):
            return body  # bold at the body's size: the lowest level
        return None

    ranks = [rank(t) for t in typed]
    last = -1  # the line before, blank lines aside
    for i, t in enumerate(typed):
        if not (t and t[2].strip()):
            continue
        # A title's last printed line ("2015.") is of its type though it may have no letters.
        prev = typed[last] if last >= 0 else None
        if ranks[i] is None and prev and ranks[last] is not None and t[:2] == prev[:2] \
                and len(t[2].strip()) <= longest:
            ranks[i] = ranks[last]
        last = i
    lines_n = sum(1 for t in typed if t and t[2].strip())
    counts = Counter(r for r in ranks if r is not None)
    sizes = sorted((r for r, n in counts.items() if n <= MAX_SHARE * lines_n), reverse=True)
    # Sizes less than 5% apart are one level (12 and 12.5 points are no hierarchy); sizes OCR
    # measured, less than 12% (one type measured at 8, 8.5 and 9 points on one page).
    level: dict[float, int] = {}
    n, above = 0, 0.0  # the level so far, and the size before
    for r in sizes:
        if n == 0 or r < above * same_level:
            n += 1
        level[r], above = min(n, 6), r
    return [level.get(r, 0) if r is not None else 0 for r in ranks]


def find_headings(pages: list[list[str]]) -> list[list[str]]:
    """A PDF's marked lines unmarked, headings as HEAD + level + text."""
    flat = [ln for lines in pages for ln in lines]
    typed = [_read(ln) for ln in flat]
    measured = any(len(ln) >= 3 and ln[0] == _MARK and ln[2] == _MEASURED for ln in flat)
    found = levels(typed, same_level=SAME_LEVEL_MEASURED if measured else SAME_LEVEL,
                   larger=LARGER_MEASURED if measured else LARGER)
    for i in range(1, len(found)):
        # The printed lines of one title are one heading though OCR measures each line's
        # size anew: a heading line next to one of nearly its size and the same weight.
        a, b = typed[i - 1], typed[i]
        if found[i] and found[i - 1] and a and b and a[1] == b[1] \
                and min(a[0], b[0]) >= SAME_TITLE * max(a[0], b[0]):
            found[i] = found[i - 1]
    each = iter(found)
    out: list[list[str]] = []
    for lines in pages:
        page = []
        for ln in lines:
            t, lv = _read(ln), next(each)
            page.append(ln if t is None else f"{HEAD}{lv}{t[2].strip()}" if lv else t[2])
        out.append(page)
    return out
