"""The context budget (pure): what of each retrieved passage the model is sent.

A chunk is up to 1,500 characters; five of them cost a small model on a CPU tens of seconds
of prompt evaluation before the first token. The evidence for an answer is usually a few of
those lines: the ones holding the question's words (hydra_rag.search.evidence). So each chunk
is cut to windows around its best-matching lines, as `grep -C` would show them: the best line
first, with the lines around it, then the next best line's window, and so on while the chunk's
share of the budget lasts; what is left of the share widens the first window. Each window is
a context entry of its own with its exact file and lines, so a citation [n] names the lines
the model read and a quote is checked against them. Chunks are taken best first until the
budget is spent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

from hydra_rag.answer.prompt import PREFIX, Source, neutralise
from hydra_rag.config import SMALLEST_SHARE
from hydra_rag.search.evidence import clip_around, line_scores, term_weights
from hydra_rag.search.hits import Hit

# The smallest share of the budget a chunk is given, in tokens: a function signature with a
# few lines of body, or two sentences of prose (the smallest context_tokens there is).
MIN_SHARE = SMALLEST_SHARE
# The share of what is left that each passage after the best may take: 300, 150, 96... tokens of
# 600 rather than 120 each; an answering line in the second or third passage is more often
# within reach, and a fifth passage is seldom sent (BENCHMARKS.md).
DECAY = 0.5
AROUND = 2  # lines shown on each side of a matching line before any window is widened
MAX_WINDOWS = 3  # per chunk: each is an entry, with a header of its own
CHARS_PER_TOKEN = 3  # to cut one overlong line (a paragraph) by characters, conservatively
# Beside a hit's fused score, the weight of its best line's match (each as a share of the best
# among the candidates) when the passages are chosen (by_lines).
LINE_WEIGHT = 0.4


def by_lines(hits: Sequence[Hit], query: str, k: int, also: str | None = None) -> list[Hit]:
    """The `k` passages a prompt is built from: the hits ranked again by their fused score
    plus LINE_WEIGHT times the score of their best-matching line (line_scores, the question's
    words weighed by how few of the candidates' lines hold them), each as a share of the best
    among `hits`. A chunk that holds the question's words together on one line is the one
    the budget can cut to its answering lines; one found by meaning alone keeps its place
    only by its fused score. A follow-up searched with the question before it (`also`)
    counts a line's match to either."""
    if not hits:
        return []
    texts = [h.text for h in hits]
    lines = [0.0] * len(hits)
    for q in (query, also) if also else (query,):
        weights = term_weights(texts, q)
        lines = [max(best, *line_scores(t, q, weights)[0], 0.0)
                 for best, t in zip(lines, texts, strict=True)]
    top_line = max(lines) or 1.0
    top_score = max(h.score for h in hits) or 1.0
    order = sorted(range(len(hits)), key=lambda i: (
        -(hits[i].score / top_score + LINE_WEIGHT * lines[i] / top_line), i))
    return [hits[i] for i in order[:k]]


def entry_cost(s: Source, count: Callable[[str], int]) -> int:
    """Tokens of a context entry as the prompt renders it (header, section, `| ` lines)."""
    head = f"§ {s.section}\n" if s.section else ""
    return count(f"[{s.n}] {s.label}\n{neutralise(head + s.text)}") + 2


def innermost(scopes: Sequence[tuple[int, int]], line: int) -> tuple[int, int] | None:
    """The narrowest of the (first, last) line spans that holds `line`, if any."""
    around = [s for s in scopes if s[0] <= line <= s[1]]
    return min(around, key=lambda s: (s[1] - s[0], -s[0])) if around else None


def windows(source: Source, query: str, count: Callable[[str], int], cap: int,
            heads: bool = False, weights: dict[str, float] | None = None,
            scopes: Sequence[tuple[int, int]] = (),
            named: Collection[tuple[int, int]] = ()) -> list[Source]:
    """The chunk as entries of at most `cap` tokens in all, around the lines that best match
    `query` (the whole chunk when it fits already), in file order. The best line's window is
    the whole definition it stands in when one of `scopes` (the file's definitions, as line
    spans) holds it and fits; else, with `heads`, it keeps the lines that say what it stands
    in (head_lines), as they fit. When that definition is one of `named` (the spans of the
    definitions of a name the question names) and starts in the chunk, it is sent alone: the
    rest of its chunk is about something else, and the passages after it get the tokens."""
    if entry_cost(source, count) <= cap:
        return [source]
    lines = source.text.splitlines()
    if not lines:
        return [source]
    scores, first_match = line_scores(source.text, query, weights)
    header = entry_cost(replace(source, text=""), count)
    cost = [count(PREFIX + x) + 1 for x in lines]
    ranked = [i for i in sorted(range(len(lines)), key=lambda i: (-scores[i], i)) if scores[i] > 0]
    if not ranked:  # found by meaning alone: its first lines
        ranked = [next((i for i, x in enumerate(lines) if x.strip()), 0)]
    best = ranked[0]
    if header + cost[best] > cap:  # one line longer than the share: the part around its match
        width = max(cap - header, 16) * CHARS_PER_TOKEN
        text, _ = clip_around(lines[best], first_match[best], width)
        n = source.line_start + best
        return [replace(source, line_start=n, line_end=n, text=text)]
    spans: list[list[int]] = []  # [lo, hi] of each window, the best first
    left = cap

    def span_cost(lo: int, hi: int) -> int:
        return sum(cost[lo:hi + 1])

    alone = False  # the definition of a name the question names, whole
    scope = innermost(scopes, source.line_start + best)
    if scope is not None:  # the definition the best line stands in, whole, as it fits
        lo = max(0, scope[0] - source.line_start)
        hi = min(len(lines) - 1, scope[1] - source.line_start)
        if lo < hi and header + span_cost(lo, hi) <= left:
            spans.append([lo, hi])
            left -= header + span_cost(lo, hi)
            alone = scope in named and scope[0] >= source.line_start

    todo = [] if alone else [(i, AROUND) for i in ranked]
    if heads and not alone:  # right after the best window, before any other
        todo[1:1] = [(h, 0) for h in head_lines(lines, best)]
    for i, around in todo:
        lo, hi = max(0, i - around), min(len(lines) - 1, i + around)
        near = next((s for s in spans if lo <= s[1] + 1 and hi >= s[0] - 1), None)
        if near is not None:  # joins a window it touches
            extra = span_cost(min(lo, near[0]), max(hi, near[1])) - span_cost(*near)
            if extra <= left:
                near[0], near[1] = min(lo, near[0]), max(hi, near[1])
                left -= extra
            continue
        if len(spans) == MAX_WINDOWS + (2 if heads else 0):
            continue
        need = header + span_cost(lo, hi)
        if need > left:
            if spans:
                continue
            lo = hi = i  # the first window: the line itself, widened below as it fits
            need = header + cost[i]
        spans.append([lo, hi])
        left -= need
    first = spans[0]
    def free(j: int) -> bool:
        return 0 <= j < len(lines) and cost[j] <= left and not any(
            s is not first and s[0] - 1 <= j <= s[1] + 1 for s in spans)

    grew = not alone
    while grew:  # what is left widens the best window, a line each side in turn
        grew = False
        for below in (True, False):
            j = first[1] + 1 if below else first[0] - 1
            if free(j):
                first[0], first[1] = min(first[0], j), max(first[1], j)
                left -= cost[j]
                grew = True
    out = []
    for lo, hi in sorted(spans):
        while lo < hi and not lines[lo].strip():  # no blank lines at the edges
            lo += 1
        while hi > lo and not lines[hi].strip():
            hi -= 1
        out.append(replace(source, line_start=source.line_start + lo,
                           line_end=source.line_start + hi, text="\n".join(lines[lo:hi + 1])))
    return out


# A line that opens a definition, in the languages the chunker reads: its keyword, after any
# modifiers (`pub async fn`, `export default class`, `static inline int`…), followed by what
# it defines, not by `=`, `:` or `.` (`type = …`, `message: str`, `record.close()` are not).
_OPENS = re.compile(
    r"^\s*(?:[@#]\[?[\w.]+.*|(?:(?:export|default|pub(?:\([\w:]+\))?|public|private|"
    r"protected|internal|static|async|abstract|final|sealed|override|virtual|inline|unsafe|"
    r"extern|const|open|suspend|partial|declare|readonly)\s+)*(?:def|class|func|fn|function|"
    r"struct|enum|trait|impl|interface|type|module|namespace|template|union|object|record|"
    r"protocol|extension|message|service|mod|macro_rules!|let|var|val|constexpr)\b"
    r"(?!\s*(?:[=,;.)\]}]|:(?!:)|$)).*)$")
_CLOSES = re.compile(r"^\s*[)\]}>]")
# A docstring after a definition's signature (Python), a doc comment above one (the others).
_DOC_AFTER = re.compile(r'^\s*[rubfRUBF]?(?:"""|\'\'\')')
_DOC_ABOVE = re.compile(r"^\s*(?:/\*\*?|///?|//!|#(?![\[!])|\*(?:/|\s|$)|--(?:\s|$))")
_EMPTY_DOC = re.compile(r'^\s*(?:[rubfRUBF]?"""|[rubfRUBF]?\'\'\'|/\*\*?|\*|///?|#|--)\s*$')
HEAD_REACH = 4  # lines of a definition's signature before its docstring, at most


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _docstring(lines: Sequence[str], head: int) -> int | None:
    """The line of the docstring that is the first statement after the signature that
    starts at `head` (the signature ends at its first line ending in `:`), if any."""
    for end in range(head, min(head + HEAD_REACH, len(lines))):
        if lines[end].split("#")[0].rstrip().endswith(":"):
            after = next((j for j in range(end + 1, len(lines)) if lines[j].strip()), None)
            return after if after is not None and _DOC_AFTER.match(lines[after]) else None
    return None


def head_lines(lines: Sequence[str], at: int) -> list[int]:
    """The lines (0-based) that say what line `at` stands in: the first line of the nearest
    definition above it that encloses it by indentation (`def send(…):`, `func (c *Command)
    Execute() error {`, `class Segment(NamedTuple):`), or `at` itself when it opens one, and
    the first line of that definition's docstring (after it) or doc comment (before it). None
    when no line of the chunk encloses it."""
    if not lines[at].strip():
        return []
    head = at if _OPENS.match(lines[at]) else None
    if head is None:
        depth, outer = _indent(lines[at]), None
        for j in range(at - 1, -1, -1):
            line = lines[j]
            if not line.strip() or _indent(line) >= depth or _CLOSES.match(line):
                continue
            if _OPENS.match(line):
                head = j
                break
            depth, outer = _indent(line), j  # `if`, `for`, or a C signature: look above
        if head is None and outer is not None and lines[outer].rstrip().endswith(("{", "(")):
            head = outer  # no keyword opens it (C, C++, Java): the outermost enclosing line
    if head is None:
        return []
    doc = _docstring(lines, head)
    if doc is None:  # a comment above: the first line of the block of comment lines
        j = head - 1
        while j >= 0 and lines[j].strip() and _DOC_ABOVE.match(lines[j]):
            j -= 1
        doc = j + 1 if j + 1 < head else None
    if doc is not None and _EMPTY_DOC.match(lines[doc]) and doc + 1 < len(lines) \
            and doc + 1 != head:
        doc += 1  # `"""` or `/**` alone on its line: the line after it
    return [head] if doc is None or doc == head else [head, doc]


def _retitled(w: Source, chunk: Source, title: Callable[[int, int], str] | None) -> Source:
    """A window under the section of the definition it stands in (as a chunk's is given),
    where that is not its chunk's: a chunk may run from one definition into the next."""
    if title is None or (w.line_start, w.line_end) == (chunk.line_start, chunk.line_end):
        return w
    here = title(w.line_start, w.line_end)
    return w if here == title(chunk.line_start, chunk.line_end) else replace(w, section=here)


def fit(sources: Sequence[Source], query: str, count: Callable[[str], int],
        budget: int, lead: float = 0.0, heads: bool = False,
        named: Sequence[bool] = (), scopes: Sequence[Sequence[tuple[int, int]]] = (),
        defining: Sequence[Collection[tuple[int, int]]] = (),
        titles: Sequence[Callable[[int, int], str] | None] = ()) -> list[Source]:
    """The chunks cut to share `budget` tokens, best first, as entries numbered from 1; a
    budget of 0 keeps whole chunks. The best chunk, and each chunk `named` marks (the
    definition of a name the question names), may take a `lead` share of the budget, and
    come before the others; each of those takes a DECAY share of what is left (at least
    MIN_SHARE), in their order. Chunks that no longer fit are left out. `scopes`: each
    chunk's file's definitions (line spans); `defining`: of those, the definitions of a name
    the question names, which a marked chunk sends alone (`windows`); `titles`: for each
    chunk, the section of lines of its file (the definition they stand in: a window in
    another definition than its chunk's is shown under that one)."""
    if budget <= 0:
        return list(sources)
    out: list[Source] = []
    left = budget
    # The best chunk, then the named definitions, then the others in their order.
    marked = [i < len(named) and named[i] for i in range(len(sources))]
    weights = term_weights([s.text for s in sources], query)
    order = sorted(range(len(sources)), key=lambda i: (i > 0, not marked[i], i))
    for rank, i in enumerate(order):
        s = sources[i]
        # Each passage after the best takes a DECAY share of what is left (the last one: all
        # of it): retrieval's confidence falls with the rank.
        share = left if rank == len(sources) - 1 else max(MIN_SHARE, int(left * DECAY))
        if lead and (i == 0 or marked[i]):
            share = max(share, int(budget * lead))
        share = min(share, left)
        if share < MIN_SHARE:
            break
        for w in windows(s, query, count, share, heads, weights,
                         scopes[i] if i < len(scopes) else (),
                         defining[i] if marked[i] and i < len(defining) else ()):
            w = _retitled(w, s, titles[i] if i < len(titles) else None)
            fresh = _unseen(w, out)  # chunks overlap: a line is sent once
            if fresh is not None:
                out.append(replace(fresh, n=len(out) + 1))
                left -= entry_cost(out[-1], count)
    return out


def _unseen(w: Source, sent: list[Source]) -> Source | None:
    """The entry without the lines an earlier entry of the same file already holds at its
    start or end (None: all of them)."""
    lo, hi = w.line_start, w.line_end
    for s in sent:
        if (s.store, s.path) != (w.store, w.path) or s.line_end < lo or s.line_start > hi:
            continue
        if s.line_start <= lo and hi <= s.line_end:
            return None
        if s.line_start <= lo:
            lo = s.line_end + 1
        elif hi <= s.line_end:
            hi = s.line_start - 1
        # (an earlier entry inside this one: both are kept, the later one whole)
    if (lo, hi) == (w.line_start, w.line_end):
        return w
    lines = w.text.splitlines()[lo - w.line_start:hi - w.line_start + 1]
    return replace(w, line_start=lo, line_end=hi, text="\n".join(lines))
