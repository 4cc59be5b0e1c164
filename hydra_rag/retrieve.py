"""Hybrid retrieval: vector kNN and BM25 over both tables, fused with Reciprocal Rank Fusion.

RRF (k = 60): score(d) = Σ over lists of 1 / (60 + rank). k = 60 is the constant of the
original RRF paper; it keeps one list's top hit from swamping agreement between lists.
Lists are fused first and cut to top-k after, so a chunk ranked 12th by both lists can
beat one ranked 1st by only one of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra_rag.catalog import get_embedder
from hydra_rag.config import Settings
from hydra_rag.embed import EmbedClient, connect
from hydra_rag.errors import HydraError
from hydra_rag.paths import INDEX_DIR
from hydra_rag.store import TABLES, Store

RRF_K = 60
# Candidates taken from each list before fusion; fusion happens before the cut to top-k.
CANDIDATES = 50


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk, with its fused score and the rank each list gave it."""

    store: str
    path: str
    kind: str
    line_start: int
    line_end: int
    text: str
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    id: str = ""


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


def find_index_root(start: Path) -> Path:
    """The nearest folder at or above `start` that has a `.hydra-index`."""
    start = start.expanduser().resolve()
    for folder in (start, *start.parents):
        if (folder / INDEX_DIR / "meta.yaml").is_file():
            return folder
    raise HydraError(
        f"no index at or above {start} — run `hydra-rag index {start}` first"
    )


_COLUMNS = ["id", "path", "kind", "line_start", "line_end", "text"]


class Searcher:
    """Searches one indexed folder; keeps the embedding client between queries."""

    def __init__(self, root: Path, settings: Settings) -> None:
        self.root = root
        self.store = Store(root)
        self.settings = settings
        meta = self.store.read_meta()
        if not meta:
            raise HydraError(f"{root} has no index — run `hydra-rag index {root}`")
        self.tables = {t: v for t, v in meta.get("tables", {}).items() if t in TABLES}
        self._clients: dict[str, EmbedClient] = {}

    def _client(self, embedder_id: str) -> EmbedClient:
        if embedder_id not in self._clients:
            self._clients[embedder_id] = connect(get_embedder(embedder_id), self.settings)
        return self._clients[embedder_id]

    def search(self, query: str, k: int = 10, tables: Sequence[str] = TABLES,
               candidates: int = CANDIDATES) -> list[Hit]:
        """Top-k hits for `query` from the chosen tables, fused over all lists."""
        query = query.strip()
        if not query:
            raise HydraError("the query is empty")
        lists: dict[str, list[str]] = {}
        rows: dict[str, dict[str, Any]] = {}
        vectors: dict[str, Any] = {}
        for t in tables:
            tbl = self.store.table(t)
            if tbl is None or t not in self.tables or tbl.count_rows() == 0:
                continue
            eid = self.tables[t]["embedder"]
            if eid not in vectors:
                vectors[eid] = self._client(eid).embed_query(query)
            vec_hits = (
                tbl.search(vectors[eid], query_type="vector", vector_column_name="vector")
                .distance_type("dot").limit(candidates)
                .select([*_COLUMNS, "_distance"]).to_list()
            )
            lists[f"{t}.vector"] = [h["id"] for h in vec_hits]
            for h in vec_hits:
                rows[h["id"]] = h
            try:
                fts_hits = (
                    tbl.search(query, query_type="fts").limit(candidates)
                    .select([*_COLUMNS, "_score"]).to_list()
                )
            except Exception:  # a query the FTS parser rejects still gets vector results
                fts_hits = []
            lists[f"{t}.bm25"] = [h["id"] for h in fts_hits]
            for h in fts_hits:
                rows.setdefault(h["id"], h)
        hits = []
        for doc, score, ranks in rrf(lists)[:k]:
            r = rows[doc]
            hits.append(Hit(str(self.root), r["path"], r["kind"], int(r["line_start"]),
                            int(r["line_end"]), r["text"], score, ranks, doc))
        return hits
