"""Fusion: how the ranked lists of one search become one ranking. Pure functions, no I/O.

Default ("score"): each list's raw scores are min-max normalised over its candidates (its
best = 1, its last = 0) and a chunk's score is the weighted sum, `w · vector + (1 - w) · bm25`,
with the dense weight w chosen per table and query (`dense_weight`). The literal list (chunks
holding the query as typed, `literal_phrase`) weighs LITERAL_WEIGHT on top, and each rare name
inside a longer query (`literal_terms`) TERM_WEIGHT. RRF (k = 60) is the alternative
(`fusion: rrf`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from hydra_rag.catalog import Embedder

RRF_K = 60
# Candidates taken from each list before fusion; fusion happens before the cut to top-k.
# Min-max normalisation uses the whole list: 100 measured better than 50 on SciFact.
CANDIDATES = 100
DENSE_WEIGHT = 0.5
CODE_DENSE_WEIGHT = 0.75
FOREIGN_DENSE_WEIGHT = 0.1
# camelCase, snake_case, a dotted name (os.path, README.md — not "e.g." or "2.0"), a call, ::, ->
_CODE_LIKE = re.compile(r"[a-z][A-Z]|[A-Za-z0-9]_[A-Za-z0-9]|[A-Za-z_]{2,}\.[A-Za-z_]{2,}|\w\(|"
                        r"::|->|[{}\[\];=<>]")
# A chunk that holds the query as typed gets this much on top of its other lists (each at most
# 1 together): it outranks every chunk that does not.
LITERAL_WEIGHT = 1.0
LITERAL_MIN = 4  # shorter strings stand in too many chunks to tell anything
_QUOTED = re.compile(r'"([^"]{3,})"|\u201c([^\u201d]{3,})\u201d')
# A name inside a longer query ("what calls get_current_context"): each is a list of its own,
# the chunks holding it verbatim, weighing TERM_WEIGHT — if it is rare enough to tell anything
# (in at most TERM_MAX chunks of the folders searched). A rare name found exactly is decisive
# evidence that a weak vector top must not outweigh.
TERM_WEIGHT = 0.5
TERM_MAX = 20
TERMS = 3  # names looked for per query, at most
_BACKTICKED = re.compile(r"`([^`\n]+)`")
# camelCase (lower, upper, lower: not mRNA or iPSC), snake_case, _private, a dotted or ::
# path, ->, a --flag, a Header-Name (every part capitalised: not loss-of-function), hex
_NAME = re.compile(r"[a-z][A-Z][a-z]|[A-Za-z0-9]_[A-Za-z0-9]|^_+[A-Za-z]|"
                   r"[A-Za-z_]{2,}\.[A-Za-z_]{2,}|::|->|^--?[A-Za-z]|"
                   r"^[A-Z][A-Za-z0-9]*(?:-[A-Z][A-Za-z0-9]*)+$|^0x[0-9A-Fa-f]+$")
_EDGE = "?!,;:.\"'()[]{}<>"


def rrf(lists: Mapping[str, Sequence[str]], k: int = RRF_K) -> list[tuple[str, float, dict[str, int]]]:
    """Fuse ranked id lists: (id, score, {list: 1-based rank}) best first; ties by id."""
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name, ids in lists.items():
        for rank, doc in enumerate(ids, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
            ranks.setdefault(doc, {})[name] = rank
    order = sorted(scores, key=lambda d: (-scores[d], d))
    return [(d, scores[d], ranks[d]) for d in order]


def looks_like_code(query: str) -> bool:
    """Does the query name code (an identifier, a call, a dotted path, a backticked span, a
    --flag or Header-Name) rather than ask in words?"""
    return bool(_CODE_LIKE.search(query)) or bool(literal_terms(query))


def literal_phrase(query: str) -> str:
    """What a chunk must hold verbatim (case aside) to be a literal match: the first quoted
    phrase, else the query as typed; "" when it is too short to tell anything."""
    m = _QUOTED.search(query)
    phrase = (m.group(1) or m.group(2)) if m else query
    phrase = phrase.strip()
    return phrase if len(phrase) >= LITERAL_MIN else ""


def literal_whole(query: str) -> str:
    """The query as typed, when its literal phrase is only the quoted part of it (`raise
    ValueError("Cannot use None")`): a chunk that holds the whole line is a closer match than
    one that holds the message ("" when the phrase is the query)."""
    whole = query.strip()
    phrase = literal_phrase(query)
    return whole if phrase and phrase != whole and len(whole) - len(phrase) > 2 else ""


def literal_terms(query: str) -> list[str]:
    """The names in a query (backticked spans, snake_case, camelCase, dotted and `::` paths,
    `--flags`, Header-Names, hex numbers) to look for verbatim on their own; not the
    literal phrase itself, which has a list of its own."""
    whole = literal_phrase(query).lower()
    found = [m.group(1).strip() for m in _BACKTICKED.finditer(query)]
    for token in _BACKTICKED.sub(" ", query).split():
        token = token.strip(_EDGE).removesuffix("()").strip(_EDGE)
        if _NAME.search(token):
            found.append(token)
    terms: list[str] = []
    for t in found:
        if len(t) >= LITERAL_MIN and t.lower() != whole and t.lower() not in map(str.lower, terms):
            terms.append(t)
    return terms[:TERMS]


def dense_weight(query: str, table: str, language: str | None, embedder: Embedder | None) -> float:
    """The weight of the vector list for chunks of one table (BM25 gets the rest)."""
    if language and embedder is not None and not embedder.knows(language):
        return FOREIGN_DENSE_WEIGHT
    if table == "code" and not looks_like_code(query):
        return CODE_DENSE_WEIGHT
    return DENSE_WEIGHT


def score_fusion(lists: Mapping[str, Sequence[tuple[str, float]]],
                 weight: Callable[[str, str], float],
                 depth: int = CANDIDATES) -> list[tuple[str, float, dict[str, int]]]:
    """Fuse ranked lists of (id, raw score), best first: each list min-max normalised over its
    candidates, weighted by weight(list name, id), summed. (id, score, {list: rank}) best first.

    A BM25 list shorter than `depth` holds every chunk that matches at all: its floor is then 0
    (no match), not its last entry — otherwise, in a small folder where two chunks match, the
    second would count as no match."""
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name, items in lists.items():
        if not items:
            continue
        hi, lo = items[0][1], items[-1][1]
        if name.startswith("bm25") and len(items) < depth:
            lo = min(lo, 0.0)
        for rank, (doc, raw) in enumerate(items, start=1):
            norm = (raw - lo) / (hi - lo) if hi > lo else 1.0
            scores[doc] = scores.get(doc, 0.0) + weight(name, doc) * norm
            ranks.setdefault(doc, {})[name] = rank
    order = sorted(scores, key=lambda d: (-scores[d], d))
    return [(d, scores[d], ranks[d]) for d in order]
