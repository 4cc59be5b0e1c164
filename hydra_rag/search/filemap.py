"""A map of a folder's code files by the names they define: each file a small document of the
words in its path and in the names of its definitions (`_build_redirect_request` → build,
redirect, request), scored against a question with BM25. "How does the client follow
redirects" is about the file that defines `_redirect_url` and `_build_redirect_request`, even
when its chunks' text matches less than a test's. Pure; built once per index run from the
symbol table (hydra_rag.search.retrieve).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from hydra_rag.search.evidence import _stem
from hydra_rag.search.signals import _SPLIT, path_stems

K1 = 1.2
B = 0.75


def _words(name: str) -> list[str]:
    return [_stem(w) for w in _SPLIT.findall(name) if len(w) > 1]


class FileMap:
    """BM25 over files, each the stems of its path and of the names it defines."""

    def __init__(self, links: Iterable[tuple[str, str, bool]]) -> None:
        docs: dict[str, Counter[str]] = {}
        for rel, name, definition in links:
            if definition:
                docs.setdefault(rel, Counter(path_stems(rel))).update(_words(name))
        self.docs = docs
        self.avg = sum(sum(c.values()) for c in docs.values()) / len(docs) if docs else 0.0
        df: Counter[str] = Counter()
        for c in docs.values():
            df.update(c.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def scores(self, terms: Sequence[str]) -> dict[str, float]:
        """Each file's BM25 score for the question's stems, scaled so the best has 1.0;
        files with none of them are left out."""
        terms = [t for t in dict.fromkeys(terms) if t in self.idf]
        out: dict[str, float] = {}
        for rel, c in self.docs.items():
            length = sum(c.values())
            s = 0.0
            for t in terms:
                tf = c.get(t, 0)
                if tf:
                    s += self.idf[t] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / self.avg))
            if s > 0:
                out[rel] = s
        top = max(out.values(), default=0.0)
        return {rel: s / top for rel, s in out.items()} if top else {}
