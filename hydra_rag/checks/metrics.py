"""Retrieval metrics over ranked lists of document ids, graded by relevance judgements.

`ranked` is best first and holds each document once; `relevant` maps document id to its grade
(> 0 relevant). nDCG uses the gain of the grade itself and log2(rank + 1) discounts, as BEIR does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def first_relevant(ranked: Sequence[str], relevant: Mapping[str, float]) -> int | None:
    """1-based rank of the first relevant document, or None."""
    for rank, doc in enumerate(ranked, start=1):
        if relevant.get(doc, 0) > 0:
            return rank
    return None


def hit_at(ranked: Sequence[str], relevant: Mapping[str, float], k: int) -> float:
    rank = first_relevant(ranked[:k], relevant)
    return 1.0 if rank is not None else 0.0


def reciprocal_rank(ranked: Sequence[str], relevant: Mapping[str, float], k: int = 10) -> float:
    rank = first_relevant(ranked[:k], relevant)
    return 1.0 / rank if rank is not None else 0.0


def recall_at(ranked: Sequence[str], relevant: Mapping[str, float], k: int) -> float:
    wanted = {d for d, g in relevant.items() if g > 0}
    if not wanted:
        return 0.0
    return len(wanted & set(ranked[:k])) / len(wanted)


def ndcg_at(ranked: Sequence[str], relevant: Mapping[str, float], k: int = 10) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(rank + 1)
              for rank, doc in enumerate(ranked[:k], start=1) if relevant.get(doc, 0) > 0)
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))
    return dcg / idcg if idcg > 0 else 0.0


def distinct(items: Sequence[str]) -> list[str]:
    """Items in first-seen order, each once (chunk hits → the files they come from)."""
    return list(dict.fromkeys(items))
