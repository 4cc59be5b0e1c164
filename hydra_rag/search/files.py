"""Files as the unit a question is about: the ranked chunks of a search grouped by file, each
file scored from all its evidence, with its best passages. Pure, no I/O.

A file's score is its best chunk's plus SECOND times its second best's. A file with two strong
passages might be likelier the one asked about than one with a single passage as strong, but
measured it was not (SECOND), and a long file's many weak passages must never add up past a
short file's decisive one (a sum would rank files by length). The files of a name's
definitions stay first. Overlapping chunks of one file never take two places: a chunk whose
lines overlap a better one's of the same file is not shown (`distinct_spans`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from hydra_rag.search.hits import Hit

# Measured on bench/code_search.py: 0.2 ranked files 0.007 nDCG@10 worse than the best chunk
# alone (within its noise, 0.014), so by default a file is as good as its best passage.
SECOND = 0.0
PASSAGES = 3  # shown per file


@dataclass(frozen=True)
class FileHit:
    """One file of a file-level search: its score and its best passages, best first."""

    store: str
    path: str
    kind: str
    score: float
    passages: list[Hit] = field(default_factory=list)


def _overlaps(a: Hit, b: Hit) -> bool:
    return a.store == b.store and a.path == b.path and a.line_start <= b.line_end \
        and b.line_start <= a.line_end


def distinct_spans(hits: Iterable[Hit]) -> list[Hit]:
    """The hits in their order, less each one whose lines overlap a better hit's of the same
    file (the 200-character overlap of neighbouring chunks, the same lines twice)."""
    kept: list[Hit] = []
    seen: dict[tuple[str, str], list[Hit]] = {}
    for h in hits:
        mine = seen.setdefault((h.store, h.path), [])
        if any(_overlaps(h, other) for other in mine):
            continue
        mine.append(h)
        kept.append(h)
    return kept


def group(hits: Iterable[Hit], k: int | None = None, second: float | None = None) -> list[FileHit]:
    """The files of ranked hits, best first: each scored by its best chunk plus `second`
    times its second best, with its first PASSAGES non-overlapping passages."""
    second = SECOND if second is None else second
    by_file: dict[tuple[str, str], list[tuple[float, Hit]]] = {}
    # The hits' order is the authority (a reranker's or the definitions' order is not their
    # fused scores'): each counts at most as much as the one before it.
    value = float("inf")
    for h in distinct_spans(hits):
        value = min(value, h.score)
        by_file.setdefault((h.store, h.path), []).append((value, h))
    files = []
    for (store, path), mine in by_file.items():
        score = mine[0][0] + (second * mine[1][0] if len(mine) > 1 else 0.0)
        files.append(FileHit(store, path, mine[0][1].kind, score,
                             [h for _, h in mine[:PASSAGES]]))
    # A name's definitions stay first, as `definitions.first` put them (a name goes to its
    # definition, whatever else a file holds).
    files.sort(key=lambda f: ("definition" not in f.passages[0].ranks, -f.score, f.store, f.path))
    return files if k is None else files[:k]
