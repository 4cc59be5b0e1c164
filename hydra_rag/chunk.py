"""Line-aware chunking: ~1500-character chunks, ~200 characters of overlap, lines kept whole.

Only a single line longer than the hard limit is cut (minified JSON, a data dump), so no chunk
can exceed what the embedder accepts. Every chunk keeps its 1-based line range.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

CHUNKER_VERSION = 1
TARGET = 1500
OVERLAP = 200
HARD = 3000
# A break is only searched for in the last part of a full chunk, so chunks stay near TARGET.
_MIN_FILL = 0.6


@dataclass(frozen=True)
class Chunk:
    """A piece of a file: its text and the 1-based, inclusive line range it came from."""

    line_start: int
    line_end: int
    text: str


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


def _units(text: str, hard: int, piece: int) -> list[_Unit]:
    units = []
    for n, line in enumerate(text.splitlines(keepends=True), start=1):
        if len(line) <= hard:
            units.append(_Unit(n, line, True))
        else:
            units.extend(_Unit(n, p, False) for p in _cut_long_line(line, piece))
    return units


def _break_score(units: list[_Unit], i: int) -> int:
    """How good a place it is to end a chunk after unit i."""
    cur = units[i].text
    nxt = units[i + 1].text if i + 1 < len(units) else ""
    if not cur.strip():
        return 3  # after a blank line: between paragraphs or definitions
    if nxt and not nxt[0].isspace() and units[i + 1].whole:
        return 2  # before a top-level line: a new definition, heading or statement
    if nxt and not nxt.strip():
        return 1
    return 0


def _split(units: list[_Unit], target: int, overlap: int) -> list[list[_Unit]]:
    groups: list[list[_Unit]] = []
    start = 0
    n = len(units)
    while start < n:
        size = 0
        end = start  # exclusive
        while end < n and (end == start or size + len(units[end].text) <= target):
            size += len(units[end].text)
            end += 1
        if end < n:
            # Prefer ending at a natural boundary in the last part of the chunk.
            best, best_score, acc = end - 1, -1, 0
            for i in range(start, end):
                acc += len(units[i].text)
                if acc < target * _MIN_FILL:
                    continue
                score = _break_score(units, i)
                if score >= best_score:
                    best, best_score = i, score
            if best_score > 0:
                end = best + 1
        groups.append(units[start:end])
        if end >= n:
            break
        # Overlap: step back over whole units worth at most `overlap` characters.
        back, acc = end, 0
        while back - 1 > start and acc + len(units[back - 1].text) <= overlap:
            back -= 1
            acc += len(units[back].text)
        start = back if back > start else end
    return groups


def chunk_text(
    text: str,
    target: int = TARGET,
    overlap: int = OVERLAP,
    hard: int = HARD,
    fits: Callable[[str], bool] | None = None,
) -> list[Chunk]:
    """Chunk a file's text; `fits` (e.g. a token count check) forces smaller chunks where needed."""
    units = _units(text, hard, min(target, hard))
    chunks: list[Chunk] = []
    for group in _split(units, target, overlap):
        body = "".join(u.text for u in group)
        if not body.strip():
            continue
        if fits is not None and not fits(body):
            chunks.extend(_refit(group, target, overlap, fits))
        else:
            chunks.append(Chunk(group[0].line, group[-1].line, body))
    return chunks


def _refit(group: list[_Unit], target: int, overlap: int, fits: Callable[[str], bool]) -> list[Chunk]:
    """Split a chunk that the embedder cannot take, halving the target until every piece fits."""
    if len(group) == 1:
        unit = group[0]
        half = max(1, len(unit.text) // 2)
        if len(unit.text) <= 1:
            return [Chunk(unit.line, unit.line, unit.text)]
        pieces = [_Unit(unit.line, p, False) for p in _cut_long_line(unit.text, half)]
        return _refit_all(pieces, max(1, target // 2), overlap // 2, fits)
    return _refit_all(group, max(1, target // 2), overlap // 2, fits)


def _refit_all(units: list[_Unit], target: int, overlap: int, fits: Callable[[str], bool]) -> list[Chunk]:
    out: list[Chunk] = []
    for group in _split(units, target, overlap):
        body = "".join(u.text for u in group)
        if not body.strip():
            continue
        if fits(body):
            out.append(Chunk(group[0].line, group[-1].line, body))
        else:
            out.extend(_refit(group, target, overlap, fits))
    return out
