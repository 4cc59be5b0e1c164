"""Why a hit matched, and whether it bears on the question at all. Pure functions, no I/O.

- `matching_lines`: the lines of a chunk that hold the query's words (or its exact string),
  best first, with the character spans to highlight; what `search` shows instead of the
  chunk's first lines. `grep_lines`: only those that match as grep means it (--vimgrep).
- `coverage`: the share of the query's content words a text holds.
- `weak`: a hit that neither holds the query's words (BM25 with enough of them, the literal or
  a rare name) nor is close in meaning (cosine at least the embedder's `min_similarity`). The
  chat does not answer from weak hits; `search` marks them.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from functools import cache
from typing import Any

from hydra_rag.search.fuse import literal_phrase, literal_terms

# Words that carry no topic of their own in a question (English; other languages' questions
# simply keep theirs, which only makes coverage stricter).
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from
further had has have having he her here hers him his how i if in into is it its itself
just me more most my no nor not of off on once only or other our out over own same she
should so some such than that the their them then there these they this those through to
too under until up very was we were what when where which while who whom why will with
would you your yours explain tell show find give use used using work works get gets set
sets make thing things way
""".split())  # noqa: SIM905 (a list of words reads better as text)
MAX_LINES = 3  # lines shown per hit
LINE_CHARS = 160  # of each line, around its first match
# Share of the query's content words a BM25-only hit must hold to bear on the question.
MIN_COVERAGE = 2 / 3
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
STEM_CHARS = 7  # of a stem, so that inflections Snowball's English rules miss still meet


_local = threading.local()


def _stemmer() -> Any:
    """This thread's Snowball stemmer: one shared by threads (a server's searches) is not safe,
    it keeps the word being stemmed in itself."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import snowballstemmer

        stemmer = _local.stemmer = snowballstemmer.stemmer("english")
    return stemmer


@cache
def _stem(word: str) -> str:
    """A word's matching key: Snowball's English stem (as the full-text index stems English:
    `configured`, `configure` → `configur`; `retries`, `retry` → `retri`), cut to STEM_CHARS
    so that other languages' inflections meet too (`hauptstadt`, `hauptstädte`)."""
    return str(_stemmer().stemWord(word.lower()))[:STEM_CHARS]


def query_terms(query: str) -> list[str]:
    """The query's content words (stems, lower case), in order, once each."""
    words = [w for w in _WORD.findall(query) if w.lower() not in STOPWORDS and len(w) > 1]
    return list(dict.fromkeys(_stem(w) for w in words))


def _parts(line: str) -> list[tuple[int, int, str]]:
    """The words of a line with their spans; camelCase and snake_case split into parts."""
    out = []
    for m in _WORD.finditer(line):
        word, at = m.group(), m.start()
        for p in re.finditer(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_]+", word):
            out.append((at + p.start(), at + p.end(), _stem(p.group())))
        if len(word) > 1 and not word.islower() and not word.isupper():
            out.append((at, m.end(), _stem(word)))  # the whole identifier too
    return out


@dataclass(frozen=True)
class Line:
    number: int
    text: str
    spans: tuple[tuple[int, int], ...]  # character spans of the matches in `text`


def _needles(query: str) -> list[str]:
    exact = [literal_phrase(query), *literal_terms(query)]
    return [n.lower() for n in exact if n]


def _scored(text: str, query: str, weights: dict[str, float] | None = None
            ) -> list[tuple[float, list[tuple[int, int]]]]:
    """Each line's score against the query (10 per exact string it holds, 1 per distinct
    query word, or the word's weight in `weights`) and the character spans of its matches."""
    terms = set(query_terms(query))
    needles = [re.compile(re.escape(n), re.IGNORECASE) for n in _needles(query)]
    out = []
    for raw in text.splitlines():  # as the chunker counts lines (\f, \r and \u2028 end one too)
        spans: list[tuple[int, int]] = []
        score = 0.0
        for n in needles:
            found = [m.span() for m in n.finditer(raw)]
            if found:
                score += 10.0
                spans += found
        seen = set()
        for a, b, stem in _parts(raw):
            if stem in terms:
                seen.add(stem)
                spans.append((a, b))
        # fsum: the same total whatever order the set gives the words in (a plain sum of
        # floats is not, and a window chosen on a tie then moved from one process to the next)
        words = len(seen) if weights is None else math.fsum(weights.get(t, 1.0) for t in seen)
        out.append((score + words, spans))
    return out


def term_weights(texts: list[str], query: str) -> dict[str, float]:
    """How much each of the query's words tells the lines of `texts` apart: a word on few of
    their lines weighs more than one on many (a project's own name, `return`), as BM25's IDF
    weighs a word in documents; from 0.25 (on every line) to 1."""
    lines = [line for t in texts for line in t.splitlines() if line.strip()]
    terms = query_terms(query)
    if not lines or not terms:
        return {}
    found = [{stem for _, _, stem in _parts(line)} for line in lines]
    df = {t: sum(t in f for f in found) for t in terms}
    top = math.log(1 + len(lines))
    return {t: max(0.25, math.log(1 + len(lines) / (1 + df[t])) / top) for t in terms}


def line_scores(text: str, query: str, weights: dict[str, float] | None = None
                ) -> tuple[list[float], list[int]]:
    """Per line of a chunk: how well it matches the query (0: not at all), and where its first
    match starts (0 when none); the query's words weighed by `weights` (term_weights)."""
    scored = _scored(text, query, weights)
    return [s for s, _ in scored], [min(a for a, _ in spans) if spans else 0 for _, spans in scored]


def best_lines(text: str, query: str) -> list[int]:
    """The 0-based lines of a chunk that match the query best (ties all kept; none when no
    line holds any of its words: a hit found by meaning alone)."""
    scores, _ = line_scores(text, query)
    top = max(scores, default=0.0)
    return [i for i, s in enumerate(scores) if s == top] if top > 0 else []


def matching_lines(text: str, line_start: int, query: str, limit: int = MAX_LINES,
                   whole: bool = False) -> list[Line]:
    """The lines of a chunk that best match the query, in file order: the ones holding its
    exact string first, then those with the most distinct query words. When no line matches
    (a hit found by meaning alone), the first non-blank lines. Each cut to LINE_CHARS around
    its first match, unless `whole`."""
    clip = (lambda line: line) if whole else _clip
    lines = text.splitlines()
    scored = [(-score, i, Line(line_start + i, lines[i], tuple(sorted(set(spans)))))
              for i, (score, spans) in enumerate(_scored(text, query)) if score]
    if not scored:
        plain = [Line(line_start + i, raw, ()) for i, raw in enumerate(lines) if raw.strip()]
        return [clip(x) for x in plain[:limit]]
    best = sorted(scored)[:limit]
    return [clip(line) for _, _, line in sorted(best, key=lambda t: t[1])]


def grep_lines(text: str, line_start: int, query: str) -> list[Line]:
    """The lines of a chunk that match the query as grep tools mean a match, in file order:
    each holding its exact string (or a name it names verbatim), or — for a query of several
    words — every one of its content words; a line holding only some of them is not one
    (`_clip` for `clip around`), nor are the parts of a name typed whole (`clip_around`). For
    `search --vimgrep`, which prints one line per matching line, as `rg --vimgrep` does."""
    terms = set(query_terms(query))
    needles = [re.compile(re.escape(n), re.IGNORECASE) for n in _needles(query)]
    by_words = bool(terms) and (len(query.split()) > 1 or not needles)
    out = []
    for i, raw in enumerate(text.splitlines()):
        spans = [m.span() for n in needles for m in n.finditer(raw)]
        if not spans and by_words:
            parts = [(a, b, stem) for a, b, stem in _parts(raw) if stem in terms]
            if {stem for _, _, stem in parts} == terms:
                spans = [(a, b) for a, b, _ in parts]
        if spans:
            out.append(Line(line_start + i, raw, tuple(sorted(set(spans)))))
    return out


def clip_around(text: str, at: int, width: int) -> tuple[str, int]:
    """At most `width` characters of `text`, starting a quarter of the width before position
    `at`, with `…` where text was cut; and where in `text` the kept part starts."""
    if len(text) <= width:
        return text, 0
    start = max(0, min(at - width // 4, len(text) - width))
    lead = "…" if start else ""
    tail = "…" if start + width < len(text) else ""
    return lead + text[start : start + width] + tail, start


def _clip(line: Line) -> Line:
    """At most LINE_CHARS of a line, around its first match; tabs and runs of spaces kept."""
    text = line.text.rstrip()
    if len(text) <= LINE_CHARS:
        return Line(line.number, text, tuple(s for s in line.spans if s[1] <= len(text)))
    first = line.spans[0][0] if line.spans else 0
    cut, start = clip_around(text, first, LINE_CHARS)
    shift = (1 if start else 0) - start  # the leading `…`
    spans = tuple((a + shift, b + shift) for a, b in line.spans
                  if a >= start and b <= start + LINE_CHARS)
    return Line(line.number, cut, spans)


def coverage(text: str, query: str) -> float:
    """The share of the query's content words (stems) that the text holds; 1.0 for a query
    without any."""
    terms = set(query_terms(query))
    if not terms:
        return 1.0
    found = {stem for line in text.splitlines() for _, _, stem in _parts(line)} & terms
    return len(found) / len(terms)


def weak(hit: Any, query: str, cosine: float | None = None,
         min_coverage: float = MIN_COVERAGE) -> bool:
    """Does this hit fail to bear on the query? Not when it holds the exact string or a rare
    name the query names, or is the definition of the name the query asks for (or names inside
    a question), nor when BM25
    found it holding at least `min_coverage` of the query's words, nor when its cosine
    similarity reaches `cosine` (default: its embedder's `min_similarity`, a catalog field)."""
    if cosine is None:
        cosine = hit.min_similarity
    names = hit.ranks
    if any(n in ("literal", "definition", "name") or n.startswith("term:") for n in names):
        return False
    if any(n.startswith("bm25") for n in names) \
            and coverage(hit.text, query) >= min_coverage - 1e-9:
        return False
    return hit.similarity is None or hit.similarity < cosine
