"""Hybrid retrieval: vector kNN and BM25 over both tables, fused with Reciprocal Rank Fusion.

RRF (k = 60): score(d) = Σ over lists of 1 / (60 + rank). k = 60 is the constant of the
original RRF paper; it keeps one list's top hit from swamping agreement between lists.
Lists are fused first and cut to top-k after, so a chunk ranked 12th by both lists can
beat one ranked 1st by only one of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
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
    similarity: float | None = None  # cosine similarity to the query, when a vector list had it


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
    """Searches one or more indexed folders; keeps embedding clients between queries.

    The candidates of every table and folder are merged into one ranked list per embedder
    (by cosine similarity, directly comparable for vectors of one embedder) and one BM25 list
    (by BM25 score, comparable only roughly across indexes with different statistics), and
    those lists are fused with RRF, so the best chunk wins wherever it lives.
    """

    def __init__(self, roots: Path | Sequence[Path], settings: Settings,
                 skip_broken: bool = False) -> None:
        self.roots = [roots] if isinstance(roots, Path) else list(roots)
        self.settings = settings
        # Federated search skips a broken folder with a one-line reason instead of failing.
        self.skip_broken = skip_broken
        self.warnings: list[str] = []
        self.stores: list[tuple[Store, dict[str, Any]]] = []
        for root in self.roots:
            try:
                store = Store(root)
                if not root.is_dir():
                    raise HydraError(f"{root} is gone (moved or deleted)")
                meta = store.read_meta()
                if not meta:
                    raise HydraError(f"{root} has no index — run `hydra-rag index {root}`")
            except HydraError as exc:
                self._skip(exc)
                continue
            tables = {t: v for t, v in meta.get("tables", {}).items() if t in TABLES}
            self.stores.append((store, tables))
        if not self.stores:
            raise HydraError("no usable index: " + "; ".join(self.warnings))
        self._clients: dict[str, EmbedClient] = {}
        self._broken_embedders: set[str] = set()
        self._sizes: dict[str, tuple[int, int]] = {}

    def _skip(self, exc: HydraError) -> None:
        if not self.skip_broken:
            raise exc
        msg = str(exc).splitlines()[0]
        if msg not in self.warnings:
            self.warnings.append(msg)

    def _client(self, embedder_id: str) -> EmbedClient:
        if embedder_id not in self._clients:
            self._clients[embedder_id] = connect(get_embedder(embedder_id), self.settings)
        return self._clients[embedder_id]

    def _searchable(self, store: Store, meta_tables: dict[str, Any], t: str) -> bool:
        """Skip tables known to be empty (from files.json, re-read only when it changed)."""
        try:
            stamp = store.files_path.stat().st_mtime_ns
        except OSError:
            stamp = -1
        key = f"{store.root}\0{t}"
        if self._sizes.get(key, (None, 0))[0] != stamp:  # re-read only after an index run
            try:
                files = store.read_files()
                size = sum(len(e.chunks) for e in files.values() if e.kind == t)
            except HydraError:
                size = -1  # unknown: search it
            self._sizes[key] = (stamp, size)
        return t in meta_tables and self._sizes[key][1] != 0

    def _query_table(self, store: Store, t: str, vector: Any, query: str,
                     candidates: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        tbl = store.table(t)
        if tbl is None:
            return [], []
        vec_hits = (
            tbl.search(vector, query_type="vector", vector_column_name="vector")
            .distance_type("dot").limit(candidates)
            .select([*_COLUMNS, "_distance"]).to_list()
        )
        try:
            fts_hits = (
                tbl.search(query, query_type="fts").limit(candidates)
                .select([*_COLUMNS, "_score"]).to_list()
            )
        except Exception:  # a query the FTS parser rejects still gets vector results
            fts_hits = []
        return vec_hits, fts_hits

    def _lists(self, query: str, tables: Sequence[str], candidates: int, tag: str,
               lists: dict[str, list[tuple[str, float]]], rows: dict[str, dict[str, Any]]) -> None:
        # One query vector per distinct embedder, shared by every folder built with it.
        vectors: dict[str, Any] = {}
        jobs: list[tuple[Store, str, str]] = []
        for store, meta_tables in self.stores:
            for t in tables:
                if not self._searchable(store, meta_tables, t):
                    continue
                eid = meta_tables[t]["embedder"]
                if eid in self._broken_embedders:
                    continue
                if eid not in vectors:
                    try:
                        vectors[eid] = self._client(eid).embed_query(query)
                    except HydraError as exc:
                        self._broken_embedders.add(eid)
                        self._skip(HydraError(f"skipping folders built with {eid}: {exc}"))
                        continue
                jobs.append((store, t, eid))
        # LanceDB searches release the GIL: folders are searched in parallel.
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(jobs)))) as pool:
            futures = [pool.submit(self._query_table, store, t, vectors[eid], query, candidates)
                       for store, t, eid in jobs]
        for (store, t, eid), fut in zip(jobs, futures, strict=True):
            try:
                vec_hits, fts_hits = fut.result()
            except HydraError as exc:
                self._skip(HydraError(f"skipping {store.root} ({t}): {exc}"))
                continue
            except Exception as exc:  # a damaged table: LanceDB raises many types
                self._skip(HydraError(f"skipping {store.root} ({t}): index damaged ({exc})"))
                continue
            # One vector list per embedder and one BM25 list, across tables and folders:
            # similarities from one embedder are comparable wherever the chunk lives, and a
            # list per table or per folder would give every table's or folder's best hit the
            # same fused score, however weak it is.
            for name, hits, score in ((f"vector:{eid}{tag}", vec_hits, "_distance"),
                                      (f"bm25{tag}", fts_hits, "_score")):
                out = lists.setdefault(name, [])
                for h in hits:
                    key = f"{store.root}\0{h['id']}"
                    # dot distance is 1 - cosine for unit vectors: similarity = 1 - d
                    raw = 1.0 - h[score] if score == "_distance" else float(h[score])
                    out.append((key, raw))
                    r = rows.setdefault(key, {**h, "store": str(store.root)})
                    if score == "_distance":
                        r["similarity"] = max(r.get("similarity", -1.0), raw)

    def search(self, query: str, k: int = 10, tables: Sequence[str] = TABLES,
               candidates: int = CANDIDATES, also: str | None = None) -> list[Hit]:
        """Top-k hits for `query` from the chosen tables, fused over all lists. `also` adds
        the lists of a second query (a follow-up question together with the one before it)."""
        query = query.strip()
        if not query:
            raise HydraError("the query is empty")
        lists: dict[str, list[tuple[str, float]]] = {}
        rows: dict[str, dict[str, Any]] = {}
        self._lists(query, tables, candidates, "", lists, rows)
        if also and also.strip() and also.strip() != query:
            self._lists(also.strip(), tables, candidates, "+context", lists, rows)
        ranked = {name: [key for key, _ in sorted(items, key=lambda kv: -kv[1])][:candidates]
                  for name, items in lists.items()}
        hits = []
        for key, score, ranks in rrf(ranked)[:k]:
            r = rows[key]
            hits.append(Hit(r["store"], r["path"], r["kind"], int(r["line_start"]),
                            int(r["line_end"]), r["text"], score, ranks, r["id"],
                            r.get("similarity")))
        return hits
