"""Files as the unit a question is about: the ranked chunks of a search grouped by file, each
file scored from all its evidence, with its best passages. Pure, no I/O.

A file's score is its best chunk's plus SECOND times its second best's. A file with two strong
passages might be likelier the one asked about than one with a single passage as strong, but
measured it was not (SECOND), and a long file's many weak passages must never add up past a
short file's decisive one (a sum would rank files by length). The files of a name's
definitions stay first. The same lines of one file never take two places: a chunk whose lines
overlap a better one's of the same file is shown without them (`distinct_spans`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

from hydra_rag.search import signals
from hydra_rag.search.hits import Hit

# Measured on bench/code_search.py: 0.2 ranked files 0.007 nDCG@10 worse than the best chunk
# alone (within its noise, 0.014), so by default a file is as good as its best passage.
SECOND = 0.0
PASSAGES = 3  # shown per file
LIFT = 1e-6  # how far above its header an implementation is put
MIN_REST = 3  # non-blank lines a chunk must keep, less a better neighbour's, to be shown


@dataclass(frozen=True)
class FileHit:
    """One file of a file-level search: its score and its best passages, best first."""

    store: str
    path: str
    kind: str
    score: float
    passages: list[Hit] = field(default_factory=list)


def _uncovered(h: Hit, better: list[Hit]) -> Hit | None:
    """`h` less the lines that better hits of its file already show: its longest run of lines
    none of them holds (None if there is none). Neighbouring chunks share about 200 characters;
    dropping a chunk for those would hide the rest of its lines, which no other hit shows."""
    first, last = h.line_start, h.line_end
    covered = [(o.line_start, o.line_end) for o in better
               if o.line_start <= last and first <= o.line_end]
    if not covered:
        return h
    free, run = (0, -1), None
    for n in range(first, last + 2):
        if n <= last and not any(a <= n <= b for a, b in covered):
            run = run or (n, n)
            run = (run[0], n)
            continue
        if run is not None and run[1] - run[0] > free[1] - free[0]:
            free = run
        run = None
    if free[1] < free[0]:
        return None
    lines = h.text.splitlines(keepends=True)
    if len(lines) != last - first + 1:  # a piece of an over-long line: not cut by lines
        return None
    rest = lines[free[0] - first: free[1] - first + 1]
    if sum(1 for line in rest if line.strip()) < MIN_REST:
        return None  # a closing brace or two is no passage of its own
    return replace(h, line_start=free[0], line_end=free[1], text="".join(rest))


def still_holding(h: Hit, strings: dict[str, str]) -> Hit:
    """`h` (cut by distinct_spans) without the ranks of the literal lists (list name → the
    string it looks for, case aside) whose string its lines no longer hold: the match was in
    the lines a better neighbour shows."""
    low = h.text.lower()
    lost = {n for n in h.ranks if n in strings and strings[n].lower() not in low}
    return replace(h, ranks={n: r for n, r in h.ranks.items() if n not in lost}) if lost else h


def distinct_spans(hits: Iterable[Hit], recut: Callable[[Hit], Hit] | None = None
                   ) -> list[Hit]:
    """The hits in their order, each less the lines a better hit of the same file shows (the
    200-character overlap of neighbouring chunks): the same lines never take two places. A hit
    whose lines are all shown already, or all but fewer than MIN_REST, is left out. `recut`
    mends what a cut hit says of itself (its pages, the matches its lines no longer hold)."""
    kept: list[Hit] = []
    seen: dict[tuple[str, str], list[Hit]] = {}
    for h in hits:
        mine = seen.setdefault((h.store, h.path), [])
        part = _uncovered(h, mine)
        if part is None:
            continue
        if part is not h and recut is not None:
            part = recut(part)
        mine.append(part)
        kept.append(part)
    return kept


def _implementations(best: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    """The files that implement a declaration file ranked above them (`logger-inl.h` below
    `logger.h`), each with a score just above that header's: the header's doc comments match
    a question's words, its bodies are what the question is about. A header and a body of
    the same name pair up in one folder, or across folders (`include/a/x.h`, `src/x.cpp`)
    when neither name stands twice among the files. Names pair whatever their case
    (`Logger.h`, `logger.cpp`)."""
    headers: dict[tuple[str, str], list[tuple[str, tuple[str, ...]]]] = {}
    bodies: dict[tuple[str, str], list[str]] = {}
    for store, path in best:
        d = signals.declared(path)
        if d is not None:
            headers.setdefault((store, d[0].lower()), []).append((path, d[1]))
        stem = signals.body_of(path)
        if stem is not None:
            bodies.setdefault((store, stem.lower()), []).append(path)
    out = {}
    for (store, stem), paths in bodies.items():
        for path in paths:
            # cut with the name's own stem: a lowered one may differ in length (`İ`)
            own = signals.body_of(path) or stem
            folder, suffix = PurePosixPath(path).parent, PurePosixPath(path).name[len(own):]
            mine = [h for h, implementing in headers.get((store, stem), [])
                    if suffix.lower() in implementing
                    and (PurePosixPath(h).parent == folder
                         or len(paths) == 1 and len(headers[(store, stem)]) == 1
                         # a test's or an example's x.cpp is not include/x.h's body
                         and signals.role(path) == signals.role(h))]
            top = max((best[(store, h)] for h in mine), default=None)
            if top is not None and top >= best[(store, path)]:  # a tie too: the body first
                out[(store, path)] = top + LIFT
    return out


def group(hits: Iterable[Hit], k: int | None = None, second: float | None = None,
          bodies_first: bool = False) -> list[FileHit]:
    """The files of ranked hits, best first: each scored by its best chunk plus `second`
    times its second best (a neighbour of the best, less their shared lines, counts as one),
    with its first PASSAGES non-overlapping passages. `bodies_first`: a file that implements
    a header (`logger.cpp`, `logger-inl.h` for `logger.h`) just before it, when it ranked
    after it."""
    second = SECOND if second is None else second
    by_file: dict[tuple[str, str], list[tuple[float, Hit]]] = {}
    # The hits' order is the authority (a reranker's or the definitions' order is not their
    # fused scores'): each counts at most as much as the one before it.
    value = float("inf")
    for h in distinct_spans(hits):
        value = min(value, h.score)
        by_file.setdefault((h.store, h.path), []).append((value, h))
    files = []
    scores = {key: mine[0][0] + (second * mine[1][0] if len(mine) > 1 else 0.0)
              for key, mine in by_file.items()}
    lifted = _implementations(scores) if bodies_first else {}
    for (store, path), mine in by_file.items():
        passages = [h for _, h in mine[:PASSAGES]]
        score = scores[(store, path)]
        if (store, path) in lifted:  # in its first passage's signals (--json)
            passages[0] = replace(passages[0], signals={
                **passages[0].signals, "implements": lifted[(store, path)] - score})
            score = lifted[(store, path)]
        files.append(FileHit(store, path, mine[0][1].kind, score, passages))
    # A name's definitions stay first, as `definitions.first` put them (a name goes to its
    # definition, whatever else a file holds).
    files.sort(key=lambda f: ("definition" not in f.passages[0].ranks, -f.score, f.store, f.path))
    return files if k is None else files[:k]
