"""Line-aware chunking: ~1500-character chunks, ~200 characters of overlap, lines kept whole.

Only a single line longer than the hard limit is cut (minified JSON, a data dump), so no chunk
can exceed what the embedder accepts. Every chunk keeps its 1-based line range.

In code whose definitions are known (hydra_rag.read.symbols) a chunk prefers to end before a
definition (its decorators and comment included), else where one ends, and one that starts a
definition has no overlap with the chunk before: a hit on a function shows the function.

In a document with headings (Markdown, reStructuredText, AsciiDoc, Org) a chunk prefers to end
before a heading, never ends on one, and starts a section without overlap; each chunk also
knows its *section*, the titles of the headings it stands under ("Guide › Install › Linux"),
which the indexer puts before its text for the embedder and the full-text index.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

# 2: heading-aware breaks and sections
# 3: code chunks start where a definition starts and end where one ends (hydra_rag.read.symbols)
# 4: a section's tail is not run on into the next section (_section_start)
# 5: a code chunk's section is the definition it stands in, and it is embedded and indexed
#    under its file's path and that section (heading)
# 6: a code chunk is embedded without the licence and imports it starts with (read.preamble)
# 7: a code chunk too long for the embedder is cut at the definitions it holds first
CHUNKER_VERSION = 7
TARGET = 1500
OVERLAP = 200
HARD = 3000
# A break is only searched for in the last part of a full chunk, so chunks stay near TARGET.
_MIN_FILL = 0.6
# In code a chunk may end sooner, from this share, so that the next one starts a definition.
_DEF_FILL = 0.3
_BEFORE_DEF = 6  # _break_score before a definition
# A chunk that goes on with a section may end sooner, from this share, so that the next one
# starts a section (_section_start).
_HEAD_FILL = 0.25
_BEFORE_HEAD = 4  # _break_score before a heading


@dataclass(frozen=True)
class Chunk:
    """A piece of a file: its text and the 1-based, inclusive line range it came from."""

    line_start: int
    line_end: int
    text: str
    section: str = ""  # the titles of the headings above the chunk, outermost first


# Where a file's headings can be read, by extension.
MARKUPS = {".md": "md", ".markdown": "md", ".mdx": "md", ".mkd": "md", ".rst": "rst",
           ".adoc": "adoc", ".asciidoc": "adoc", ".org": "org"}
SECTION_SEP = " › "
_TITLE_MAX = 100  # characters of one title in a section
_SECTION_MAX = 300
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*$")
# lines that cannot start a paragraph a setext underline makes a heading: indented code, list
# items, quotes, tables, HTML
_NOT_TITLE = re.compile(r"(?: {4}|\t| {0,3}(?:[-*+>|]|\d+[.)])(?:[ \t]|$)| {0,3}<)")
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")  # any indent: fences in list items are indented
_ADOC = re.compile(r"(={1,6})[ \t]+(\S.*?)[ \t]*$")
_ADOC_BLOCK = re.compile(r"(-{4,}|\.{4,}|={4,}|\+{4,}|/{4,}|_{4,}|\*{4,}|--|`{3,}|\|={3,})[ \t]*$")
_ORG = re.compile(r"(\*+)[ \t]+(\S.*?)[ \t]*$")
_RST_RULE = re.compile(r"([!-/:-@\[-`{-~])\1+[ \t]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # never let a title carry terminal escapes


def markup_of(path: str) -> str | None:
    """The heading syntax of a file, from its extension (None: a file without headings)."""
    return MARKUPS.get(PurePosixPath(path).suffix.lower())


def outline(lines: list[str], markup: str | None) -> dict[int, tuple[int, str, int]]:
    """The headings of a document: {1-based first line: (level, title, lines it spans)}."""
    if markup == "md":
        return _outline_md(lines)
    if markup == "rst":
        return _outline_rst(lines)
    if markup == "adoc":
        return _outline_prefixed(lines, _ADOC, _ADOC_BLOCK)
    if markup == "org":
        return _outline_prefixed(lines, _ORG, None)
    return {}


def _outline_md(lines: list[str]) -> dict[int, tuple[int, str, int]]:
    heads: dict[int, tuple[int, str, int]] = {}
    fence = ""
    comment = False
    i = 0
    if lines and lines[0].strip() == "---":  # front matter: its closing rule is no heading
        end = next((j for j in range(1, len(lines)) if lines[j].strip() in ("---", "...")), 0)
        i = end + 1
    para = 0  # lines of the current plain paragraph (a setext heading's title is its last)
    while i < len(lines):
        line = lines[i].rstrip("\r\n")
        m = _FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line[m.end():].strip():
                fence = ""
        elif comment:
            comment = "-->" not in line
        elif m:
            fence, para = m.group(1), 0
        elif line.lstrip().startswith("<!--"):
            comment, para = "-->" not in line, 0
        elif (a := _ATX.match(line)) and (a.group(2) or "").strip():
            heads[i + 1] = (len(a.group(1)), a.group(2).strip(), 1)
            para = 0
        elif para == 1 and (u := _SETEXT.match(line)):
            heads[i] = (1 if u.group(1)[0] == "=" else 2, lines[i - 1].strip(), 2)
            para = 0
        elif not line.strip():
            para = 0
        elif para:
            para = -1  # a paragraph of several lines: no heading (titles are one line here)
        else:
            para = -1 if _NOT_TITLE.match(line) else 1
        i += 1
    return heads


def _outline_rst(lines: list[str]) -> dict[int, tuple[int, str, int]]:
    """reStructuredText: a title underlined (and maybe overlined) by one punctuation character
    at least as long as the title; levels in the order the styles first appear."""
    heads: dict[int, tuple[int, str, int]] = {}
    styles: list[tuple[str, bool]] = []
    i = 0
    while i + 1 < len(lines):
        over = _RST_RULE.match(lines[i].rstrip("\r\n"))
        title, under_at = (lines[i + 1], i + 2) if over else (lines[i], i + 1)
        title = title.strip()
        under = _RST_RULE.match(lines[under_at].rstrip("\r\n")) if under_at < len(lines) else None
        before = lines[i - 1].strip() if i > 0 else ""
        if (title and under and not _RST_RULE.match(title) and not lines[under_at - 1][:1].isspace()
                and len(under.group(0).rstrip()) >= min(len(title), 4)
                and (not over or over.group(1) == under.group(1))
                and (over or not before)):  # a title is a paragraph of its own
            style = (under.group(1), bool(over))
            if style not in styles:
                styles.append(style)
            heads[i + 1] = (styles.index(style) + 1, title, under_at - i + 1)
            i = under_at + 1
            continue
        i += 1
    return heads


def _outline_prefixed(lines: list[str], head: re.Pattern[str],
                      block: re.Pattern[str] | None) -> dict[int, tuple[int, str, int]]:
    """AsciiDoc (`== Title`) and Org (`** Title`): the level is the marker's length. Lines inside
    an AsciiDoc delimited block (listing, literal…) are not headings."""
    heads: dict[int, tuple[int, str, int]] = {}
    fence = ""
    for i, raw in enumerate(lines):
        line = raw.rstrip("\r\n")
        if block is not None and (b := block.match(line)):
            fence = "" if fence == b.group(1) else fence or b.group(1)
            continue
        if not fence and (m := head.match(line)):
            heads[i + 1] = (len(m.group(1)), m.group(2), 1)
    return heads


def _short(title: str) -> str:
    title = _CONTROL.sub("", title)
    return title if len(title) <= _TITLE_MAX else title[: _TITLE_MAX - 1].rstrip() + "…"


def _path(titles: list[str]) -> str:
    text = SECTION_SEP.join(titles)
    if len(text) > _SECTION_MAX and len(titles) > 2:
        text = SECTION_SEP.join([titles[0], "…", titles[-1]])
    return text[:_SECTION_MAX]


def _sections(heads: dict[int, tuple[int, str, int]]) -> Callable[[int], str]:
    """A function from a line to the section it stands in. The heading on that very line is not
    part of it (the chunk's text shows it), so a chunk that starts with a heading gets the
    path of the headings above that one."""
    ats: list[int] = []
    inside: list[str] = []  # the path below each heading
    above: dict[int, str] = {}  # the path above each heading
    stack: list[tuple[int, str]] = []
    for at, (level, title, _span) in sorted(heads.items()):
        while stack and stack[-1][0] >= level:
            stack.pop()
        above[at] = _path([t for _, t in stack])
        stack.append((level, _short(title)))
        ats.append(at)
        inside.append(_path([t for _, t in stack]))

    def section(line: int) -> str:
        if line in above:
            return above[line]
        k = bisect.bisect_left(ats, line)
        return inside[k - 1] if k else ""

    return section


@dataclass(frozen=True)
class Heading:
    """A heading of a document and the lines its section spans (up to the next heading of
    its level or above), with the titles above it and how deep it is among them."""

    title: str
    level: int
    line_start: int
    line_end: int
    above: tuple[str, ...]

    @property
    def depth(self) -> int:
        return len(self.above)


def headings(text: str, markup: str | None) -> list[Heading]:
    """The headings of a document, in line order: its outline, as `outline` shows a code
    file's definitions (the same headings the chunks' sections are made of)."""
    if not markup:
        return []
    lines = text.splitlines(keepends=True)
    heads = sorted(outline(lines, markup).items())
    out = []
    stack: list[tuple[int, str]] = []
    for n, (at, (level, title, _span)) in enumerate(heads):
        while stack and stack[-1][0] >= level:
            stack.pop()
        end = next((a - 1 for a, (lv, _, _) in heads[n + 1:] if lv <= level), len(lines))
        while end > at and not lines[end - 1].strip():  # the blank lines before the next
            end -= 1
        out.append(Heading(_short(title), level, at, end,
                           tuple(t for _, t in stack)))
        stack.append((level, _short(title)))
    return out


def section_at(text: str, markup: str | None, line: int) -> str:
    """The section a line of a document stands in (1-based), as its chunk would be given."""
    if not markup:
        return ""
    return _sections(outline(text.splitlines(keepends=True), markup))(line)


@dataclass(frozen=True)
class _Outline:
    """Heading lines of a document, as the splitter needs them."""

    starts: frozenset[int] = frozenset()  # the first line of each heading
    lines: frozenset[int] = frozenset()  # every line that belongs to a heading
    # Code: the first line of each definition (its decorators and comment included), the last
    defs: frozenset[int] = frozenset()
    ends: frozenset[int] = frozenset()


@dataclass(frozen=True)
class _Unit:
    line: int
    text: str
    whole: bool  # False for a piece of a cut line


def _cut_long_line(text: str, limit: int) -> list[str]:
    """Cut one over-long line into pieces of at most `limit` characters, at spaces when possible."""
    pieces = []
    while len(text) > limit:
        cut = limit
        window = text[int(limit * 0.8) : limit]
        for sep in (". ", ", ", " ", ";", ","):
            at = window.rfind(sep)
            if at >= 0:
                cut = int(limit * 0.8) + at + len(sep)
                break
        pieces.append(text[:cut])
        text = text[cut:]
    if text:
        pieces.append(text)
    return pieces


def _units(lines: list[str], hard: int, piece: int) -> list[_Unit]:
    units = []
    for n, line in enumerate(lines, start=1):
        if len(line) <= hard:
            units.append(_Unit(n, line, True))
        else:
            units.extend(_Unit(n, p, False) for p in _cut_long_line(line, piece))
    return units


def _is_head(unit: _Unit, lines: frozenset[int]) -> bool:
    return unit.whole and unit.line in lines


def _break_score(units: list[_Unit], start: int, i: int, ol: _Outline) -> int:
    """How good a place it is to end a chunk (begun at unit `start`) after unit i (below 0:
    never)."""
    cur = units[i].text
    nxt = units[i + 1] if i + 1 < len(units) else None
    if ol.defs and nxt is not None and nxt.whole and nxt.line != units[i].line:
        if nxt.line in ol.defs:
            return _BEFORE_DEF  # the next chunk starts with a definition
        if units[i].line in ol.ends:
            return 5  # a definition ends here
    if ol.lines:
        j = i
        while j > start and not units[j].text.strip():
            j -= 1
        if _is_head(units[j], ol.lines):
            return -1  # on a heading, or the blank lines after one
        if nxt is not None and nxt.line != units[i].line and _is_head(nxt, ol.starts):
            return _BEFORE_HEAD  # before a heading: the next chunk starts a section
    if not cur.strip():
        return 3  # after a blank line: between paragraphs or definitions
    if nxt is not None and not nxt.text[0].isspace() and nxt.whole:
        return 2  # before a top-level line: a new definition, heading or statement
    if nxt is not None and not nxt.text.strip():
        return 1
    return 0


def _section_start(units: list[_Unit], start: int, end: int, target: int,
                   ol: _Outline) -> int | None:
    """A chunk that goes on with a section (it does not start at a heading) ends before the
    next section starts within it, once it holds _HEAD_FILL of the target: the end (exclusive)
    it takes then, else None. Otherwise a section's short tail runs on into the next
    section's title and first lines, and the chunk is about two things."""
    if not ol.starts or ol.defs or _is_head(units[start], ol.starts):
        return None
    acc = 0
    for i in range(start, end - 1):
        acc += len(units[i].text)
        if acc >= target * _HEAD_FILL and _break_score(units, start, i, ol) == _BEFORE_HEAD:
            return i + 1
    return None


def _off_heading(units: list[_Unit], start: int, end: int, ol: _Outline) -> int:
    """A chunk that would end on headings ends before them instead, or, if headings are all it
    holds, takes their first content along."""
    n = len(units)
    j = end  # the first unit of the headings (and blank lines) the chunk would end with
    k = end - 1
    while k >= start and (not units[k].text.strip() or _is_head(units[k], ol.lines)):
        if units[k].text.strip():
            j = k
        k -= 1
    if j == end:
        return end
    if any(u.text.strip() and not _is_head(u, ol.lines) for u in units[start:j]):
        while j > start and not _is_head(units[j], ol.starts) and _is_head(units[j - 1], ol.lines):
            j -= 1  # the heading's first line (a setext or reST heading spans two or three)
        return j
    while end < n and (not units[end].text.strip() or _is_head(units[end], ol.lines)):
        end += 1
    return min(end + 1, n)


def _split(units: list[_Unit], target: int, overlap: int, ol: _Outline) -> list[list[_Unit]]:
    groups: list[list[_Unit]] = []
    start = 0
    n = len(units)
    while start < n:
        size = 0
        end = start  # exclusive
        while end < n and (end == start or size + len(units[end].text) <= target):
            size += len(units[end].text)
            end += 1
        if sooner := _section_start(units, start, end, target, ol):
            end = sooner
        elif end < n:
            # Prefer ending at a natural boundary in the last part of the chunk.
            best, best_score, acc = end - 1, -1, 0
            for i in range(start, end):
                acc += len(units[i].text)
                if acc < target * (_DEF_FILL if ol.defs else _MIN_FILL):
                    continue
                score = _break_score(units, start, i, ol)
                if acc < target * _MIN_FILL and score < _BEFORE_DEF:
                    continue  # a shorter chunk only to let the next one start a definition
                if score >= best_score:
                    best, best_score = i, score
            if best_score > 0:
                end = best + 1
            elif ol.lines:
                end = _off_heading(units, start, end, ol)
        groups.append(units[start:end])
        if end >= n:
            break
        if (_is_head(units[end], ol.starts) or _is_head(units[end], ol.defs)) \
                and units[end].line != units[end - 1].line:
            start = end  # a section or a definition starts: no overlap with the one before
            continue
        # Overlap: step back over whole units worth at most `overlap` characters, unless the
        # next unit would not fit after them (the next chunk would end where this one did).
        back, acc = end, 0
        while back - 1 > start and acc + len(units[back - 1].text) <= overlap:
            back -= 1
            acc += len(units[back].text)
        start = back if back > start and acc + len(units[end].text) <= target else end
    return groups


class _Chunker:
    """One document's chunking: its outline and the size limits."""

    def __init__(self, lines: list[str], markup: str | None, fits: Callable[[str], bool] | None,
                 defs: Sequence[tuple[int, int]] = ()):
        heads = outline(lines, markup) if markup else {}
        self.ol = _Outline(frozenset(heads), frozenset(
            line for at, (_, _, span) in heads.items() for line in range(at, at + span)),
            frozenset(a for a, _ in defs), frozenset(b for _, b in defs))
        self.section = _sections(heads)
        self.fits = fits

    def chunk(self, group: list[_Unit]) -> Chunk:
        first = next((u.line for u in group if u.text.strip()), group[0].line)
        return Chunk(group[0].line, group[-1].line, "".join(u.text for u in group),
                     self.section(first))

    def split(self, units: list[_Unit], target: int, overlap: int,
              refitting: bool = False) -> list[Chunk]:
        out: list[Chunk] = []
        # A chunk too long for the embedder is split without its headings: keeping a heading
        # with its text is what may have made it too long. A code file's definitions stay.
        ol = _Outline(defs=self.ol.defs, ends=self.ol.ends) if refitting else self.ol
        for group in _split(units, target, overlap, ol):
            if not any(u.text.strip() for u in group):
                continue
            chunk = self.chunk(group)
            if self.fits is not None and not self.fits(chunk.text):
                out.extend(self.refit(group, target, overlap))
            else:
                out.append(chunk)
        return out

    def refit(self, group: list[_Unit], target: int, overlap: int) -> list[Chunk]:
        """Split a chunk that the embedder cannot take: at the definitions it starts, into as
        few pieces as fit, then (a piece that still does not) halving the target until every
        piece fits."""
        fits = self.fits
        assert fits is not None  # only the embedder's limit sends a chunk here
        pieces = self.at_definitions(group, fits)
        if len(pieces) > 1:
            out = []
            for piece, fitting in pieces:
                if not any(u.text.strip() for u in piece):
                    continue
                chunk = self.chunk(piece)
                out.extend([chunk] if fitting or fits(chunk.text)
                           else self.refit(piece, target, overlap))
            return out
        if len(group) == 1:
            unit = group[0]
            if len(unit.text) <= 1:
                return [self.chunk(group)]
            half = max(1, len(unit.text) // 2)
            group = [_Unit(unit.line, p, False) for p in _cut_long_line(unit.text, half)]
        return self.split(group, max(1, target // 2), overlap // 2, refitting=True)

    def at_definitions(self, group: list[_Unit], fits: Callable[[str], bool]
                       ) -> list[tuple[list[_Unit], bool]]:
        """`group` cut before each definition that starts in it (after its first line), the
        pieces then joined again, in order, as long as the joined text fits; each with
        whether it is known to fit (a joined piece was measured, a lone one was not)."""
        cuts = [i for i in range(1, len(group)) if _is_head(group[i], self.ol.defs)
                and group[i].line != group[i - 1].line]
        if not cuts:
            return [(group, False)]
        bounds = [0, *cuts, len(group)]
        pieces = [group[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
        out = [(pieces[0], False)]
        for piece in pieces[1:]:
            joined = out[-1][0] + piece
            if fits("".join(u.text for u in joined)):
                out[-1] = (joined, True)
            else:
                out.append((piece, False))
        return out


def chunk_text(
    text: str,
    target: int = TARGET,
    overlap: int = OVERLAP,
    hard: int = HARD,
    fits: Callable[[str], bool] | None = None,
    markup: str | None = None,
    defs: Sequence[tuple[int, int]] = (),
) -> list[Chunk]:
    """Chunk a file's text; `fits` (e.g. a token count check) forces smaller chunks where
    needed; `markup` (see `markup_of`) makes the chunks follow the document's headings, `defs`
    (the first and last lines of a code file's definitions) its definitions."""
    lines = text.splitlines(keepends=True)
    return _Chunker(lines, markup, fits, defs).split(_units(lines, hard, min(target, hard)),
                                                     target, overlap)


def heading(kind: str, path: str, section: str) -> str:
    """What a chunk is embedded and full-text indexed under: a document's headings; for code,
    its file's path and the definition it stands in (`httpx/_client.py › Client.send`), so
    that the vector and BM25 of a chunk deep in a function know where it is. Names that are
    only digits (`4471.py`) say nothing and are left out."""
    if kind != "code":
        return section
    p = PurePosixPath(path)
    parts = [d for d in p.parent.parts if not d.isdigit()]
    if not p.stem.isdigit():
        parts.append(p.name)
    return SECTION_SEP.join(x for x in ("/".join(parts), section) if x)


def with_context(context: str, text: str) -> str:
    """The text embedded and full-text indexed for a chunk: its context (the headings it stands
    under, or contextual retrieval's situating sentences) before its own text."""
    return f"{context}\n\n{text}" if context else text
