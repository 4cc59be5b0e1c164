"""Hybrid retrieval: vector kNN and BM25 over both tables and every folder, fused.

Fusion is hydra_rag.search.fuse's: by default each list's scores min-max normalised and
summed with a dense weight per table and query, which beat Reciprocal Rank Fusion by 0.015
and 0.072 nDCG@10 on SciFact and CoSQA (BENCHMARKS.md).

A third list, "literal", holds the chunks that contain the query as typed (or the phrase in
its quotes), case aside, as grep would find them; strings that tokenizers break (`a.b.c`,
`--flag`, `X-Forwarded-For`, a copied error message) are found there even when BM25's terms and
the vectors miss them. In score fusion it weighs LITERAL_WEIGHT, so a chunk holding the exact
string comes before every chunk that does not (setting `literal`, on by default). When the
phrase is quoted inside a longer line (`raise ValueError("…")`), a list of the chunks holding
the whole line ("literal:whole") weighs as much again: the raise before the test that checks
the message. A rare name
inside a longer query ("what calls get_current_context": a snake_case, camelCase, dotted or
backticked name in at most TERM_MAX chunks) gets a list of its own of the chunks holding it,
weighing TERM_WEIGHT, so a weak vector top does not outrank the few chunks that name it.

RRF (k = 60), score(d) = Σ 1 / (60 + rank), stays available (`fusion: rrf`). Either way lists
are fused first and cut to top-k after.

With `rerank` on, a cross-encoder then reorders the first `rerank_top` fused candidates
(hydra_rag.search.rerank).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hydra_rag.catalog import Embedder, get_embedder
from hydra_rag.config import Settings, chosen_embedder
from hydra_rag.documents import anchors, text_anchors
from hydra_rag.errors import EmbedError, HydraError, UsageError
from hydra_rag.models.embed import EmbedClient, connect
from hydra_rag.search import definitions, rescore, signals
from hydra_rag.search.definitions import wanted
from hydra_rag.search.evidence import best_lines
from hydra_rag.search.files import FileHit, distinct_spans, group, still_holding
from hydra_rag.search.folder_state import pointer, vector_coverage, vectors_notice
from hydra_rag.search.fuse import (  # noqa: F401  (RRF_K, looks_like_code: part of this module's API)
    CANDIDATES,
    CODE_DENSE_WEIGHT,
    DENSE_WEIGHT,
    FOREIGN_DENSE_WEIGHT,
    LITERAL_WEIGHT,
    RRF_K,
    TERM_MAX,
    TERM_WEIGHT,
    dense_weight,
    literal_phrase,
    literal_terms,
    literal_whole,
    looks_like_code,
    rrf,
    score_fusion,
)
from hydra_rag.search.hits import Hit
from hydra_rag.search.paths import PathFilter
from hydra_rag.search.rerank import RerankClient, check_top, connect_reranker, rerank
from hydra_rag.search.table_cache import Found, Stamp, TableCache
from hydra_rag.search.tables import TableQueries, key_of
from hydra_rag.store.index_dir import TABLES, Store
from hydra_rag.store.lexical import Analysis
from hydra_rag.store.loop_thread import LoopThread
from hydra_rag.store.rebuild import notice as rebuild_notice

# After an embedder fails, the folders built with it are searched without vectors (full text and
# literal lists only) for this long before it is tried again: a sidecar being restarted, or a
# remote endpoint's blip, costs a searcher (a server's, a chat's) its vectors for a while, not
# for the rest of its life.
RETRY_S = 30.0
FOLLOW_UP_WEIGHT = 0.5  # the lists of the previous question, searched along with a follow-up
FUSIONS = ("score", "rrf")
METHODS = ("vector", "bm25")
LITERAL_LIMIT = 200  # chunks taken from one table's literal matches


class _Moved(Exception):
    """A table failed while its folder switched to a new generation of its index."""


_key = key_of


@dataclass
class _Lists:
    """Ranked candidates per list name, as (key, raw score), and where each key's row lives."""

    scores: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    where: dict[str, tuple[str, Any, int]] = field(default_factory=dict)  # key → (store, arrow, row)
    similarity: dict[str, float] = field(default_factory=dict)
    # (list tag, key) → the dense weight of the key's table for that list's query
    dense: dict[tuple[str, str], float] = field(default_factory=dict)
    embedder: dict[str, str] = field(default_factory=dict)  # key → its table's embedder

    def add(self, name: str, store: str, found: Found, vector: bool, dense: float) -> None:
        out = self.scores.setdefault(name, [])
        tag = "+context" if name.endswith("+context") else ""
        for cid, value, at in zip(found.ids, found.scores, found.at, strict=True):
            key = _key(store, cid)
            self.dense[(tag, key)] = dense
            if vector:
                self.similarity[key] = max(self.similarity.get(key, -1.0), value)
            out.append((key, value))
            self.where.setdefault(key, (store, found.rows, at))

    def place(self, key: str) -> tuple[str, str, str]:
        """A key's folder, path and kind, without reading the rest of its row."""
        store, table, i = self.where[key]
        return store, table.column("path")[i].as_py(), table.column("kind")[i].as_py()

    def row(self, key: str) -> dict[str, Any]:
        store, table, i = self.where[key]
        return {**table.slice(i, 1).to_pylist()[0], "store": store}


class Searcher(TableQueries):
    """Searches one or more indexed folders; keeps embedding clients and open tables between
    queries.

    The candidates of every table and folder are merged into one ranked list per embedder
    (by cosine similarity, directly comparable for vectors of one embedder) and one BM25 list
    (by BM25 score, comparable only roughly across indexes with different statistics), and
    those lists are fused with RRF, so the best chunk wins wherever it lives.

    All LanceDB queries of one search run at once on LanceDB's async API (each query has a
    fixed cost of about a millisecond that threads over the sync API did not overlap), and the
    full-text queries start while the question is being embedded.

    Every LanceDB query costs about a millisecond however small the table, so twenty small
    folders cost twenty times one. Tables of up to CACHED_ROWS chunks are therefore read into
    memory once (within `search_cache_mb`, refreshed when files.db changes) and searched
    there exactly, by dot product, leaving one full-text query per table.

    A folder being rebuilt is searched in the generation of its index in use, with a warning
    (`warnings`); each query checks meta.yaml (a stat) and follows a switch to a new one.
    """

    def __init__(self, roots: Path | Sequence[Path], settings: Settings,
                 skip_broken: bool = False) -> None:
        self.roots = [roots] if isinstance(roots, Path) else list(roots)
        self.settings = settings
        # Queries are embedded with the model each index was built with, not the chosen one,
        # but a chosen one that does not exist is a mistake to say, as index and status say it.
        for table in TABLES:
            chosen_embedder(settings, table)
        # Federated search skips a broken folder with a one-line reason instead of failing.
        self.skip_broken = skip_broken
        self._skipped: list[str] = []
        self._rebuilding: dict[Path, str] = {}  # folder → its "being rebuilt" warning
        self._waiting: dict[Path, str] = {}  # folder → how many of its chunks have vectors
        self._coverage: dict[Path, dict[str, tuple[int, int]]] = {}  # … per table
        # meta.yaml as last read, per folder: when it changes, a rebuild may have switched
        # the folder to a new generation of its index (see hydra_rag.store.rebuild).
        self._pointers: dict[Path, tuple[int, int]] = {}
        self.stores: list[tuple[Store, dict[str, Any]]] = []
        for root in self.roots:
            try:
                store = Store(root)
                if not root.is_dir():
                    raise HydraError(f"{root} is gone (moved or deleted)")
                self._pointers[root] = pointer(store)
                meta = store.read_meta()
                if not meta:
                    raise HydraError(f"{root} has no index — run `hydra-rag index {root}`")
            except HydraError as exc:
                self._skip(exc)
                continue
            tables = {t: v for t, v in meta.get("tables", {}).items() if t in TABLES}
            self.stores.append((store, tables))
            self._covered(store, meta)
        if not self.stores:
            raise HydraError("no usable index: " + "; ".join(self.warnings))
        self._clients: dict[str, EmbedClient] = {}
        self._entries: dict[str, Embedder | None] = {}
        # embedder → (when to try it again, time.monotonic(); its warning) after it failed
        self._down: dict[str, tuple[float, str]] = {}
        self._sizes: dict[str, tuple[Stamp, int]] = {}
        # Open async tables, reopened when files.db changes (another process re-indexed).
        self._tables: dict[str, tuple[Stamp, Any]] = {}
        self._analysis: dict[str, Analysis | None] = {}  # None: a format-1 index, raw queries
        self._columns: dict[str, list[str]] = {}  # the row columns each table has
        self._cache = TableCache(settings.search_cache_mb * 2**20)
        self._docs: dict[str, tuple[Stamp, dict[str, dict[str, Any]]]] = {}
        self._kept: dict[tuple[str, Stamp, PathFilter], frozenset[str]] = {}
        self._graphs = rescore.Graphs(self._stamp)
        self._reranker: RerankClient | None = None
        if settings.rerank:
            check_top(settings.rerank_top)
        # The searcher's event loop runs in a thread of its own (the open tables belong to it):
        # a Ctrl-C in the caller (the chat REPL goes on after one) stops the wait, not a read.
        self._runner = LoopThread("hydra-rag-search")
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="hydra-embed")
        weakref.finalize(self, _close, self._runner, self._pool)

    def close(self) -> None:
        _close(self._runner, self._pool)

    @property
    def warnings(self) -> list[str]:
        """One line per folder skipped, and per folder searched while it is being rebuilt."""
        return [*self._skipped, *(w for _, w in self._down.values()),
                *(w for w in self._rebuilding.values() if w),
                *(w for w in self._waiting.values() if w)]

    @property
    def skipped(self) -> list[str]:
        """The folders left out (no index, damaged, gone), one line each."""
        return list(self._skipped)

    def _covered(self, store: Store, meta: dict[str, Any]) -> None:
        """Note how far a folder's vectors are (an index run's second phase)."""
        self._coverage[store.root] = vector_coverage(store, meta)
        self._waiting[store.root] = vectors_notice(self._coverage[store.root], store.root)

    def _dense(self, store: Store, table: str, weight: float) -> float:
        """The vector list's weight for a table whose vectors are still arriving: in
        proportion to the chunks that have one. A chunk without a vector is in no vector
        list, so at full weight the few that have one would outrank the rest on it alone."""
        have, total = self._coverage.get(store.root, {}).get(table, (1, 1))
        return weight * (have / total if total else 1.0)

    def _skip(self, exc: HydraError) -> None:
        if not self.skip_broken:
            raise exc
        msg = str(exc).splitlines()[0]
        if msg not in self._skipped:
            self._skipped.append(msg)

    def _follow(self, i: int) -> tuple[Store, dict[str, Any]]:
        """Folder i's store as it is now: if meta.yaml changed (an index run; a rebuild's switch
        among them), read it again and follow it to the generation it names. Notes a rebuild
        in progress. Two stats when nothing changed."""
        store, tables = self.stores[i]
        now = pointer(store)
        if now != self._pointers.get(store.root):
            self._pointers[store.root] = now
            fresh = Store(store.root)
            try:
                meta = fresh.read_meta()
            except HydraError:
                meta = {}  # torn or gone: keep searching what was opened
            if meta:
                tables = {t: v for t, v in meta.get("tables", {}).items() if t in TABLES}
                if fresh.generation != store.generation:
                    store = fresh
                self.stores[i] = (store, tables)
                self._covered(store, meta)
        self._rebuilding[store.root] = rebuild_notice(store)
        return store, tables

    def _moved(self, store: Store) -> bool:
        """Whether meta.yaml changed since `store` was followed (a switch during a search)."""
        return pointer(store) != self._pointers.get(store.root)

    def _client(self, embedder_id: str) -> EmbedClient:
        if embedder_id not in self._clients:
            self._clients[embedder_id] = connect(get_embedder(embedder_id), self.settings)
        return self._clients[embedder_id]

    def _embedder(self, embedder_id: str) -> Embedder | None:
        """The catalog entry (read once: the catalog is YAML, slow to parse on every query)."""
        if embedder_id not in self._entries:
            try:
                self._entries[embedder_id] = get_embedder(embedder_id)
            except HydraError:
                self._entries[embedder_id] = None
        return self._entries[embedder_id]

    def _embed(self, embedder_id: str, queries: list[str]) -> Any:
        """Query vectors for one embedder, all queries in one request."""
        client = self._client(embedder_id)
        return client.embed(queries, client.embedder.query_prefix)

    def _stamp(self, store: Store) -> Stamp:
        """What the caches of a table are valid for: its generation and its files.db."""
        try:
            return store.generation, store.files_path.stat().st_mtime_ns
        except OSError:
            return store.generation, -1

    def _searchable(self, store: Store, meta_tables: dict[str, Any], t: str,
                    stamp: Stamp) -> bool:
        """Skip tables known to be empty (from files.db, re-read only when it changed)."""
        key = _key(store.root, t)
        if self._sizes.get(key, (None, 0))[0] != stamp:  # re-read only after an index run
            try:
                size = store.file_list.chunk_totals().get(t, 0)
            except HydraError:
                size = -1  # unknown: search it
            self._sizes[key] = (stamp, size)
        return t in meta_tables and self._sizes[key][1] != 0

    async def _gather(self, queries: list[str], tables: Sequence[str],
                      candidates: int, methods: Sequence[str],
                      needles: Sequence[tuple[str, str, int]] = (),
                      where: PathFilter | None = None) -> _Lists:
        loop = asyncio.get_running_loop()
        unknown = set(methods) - set(METHODS)
        if unknown or not methods:
            raise HydraError(f"unknown search method {', '.join(sorted(unknown))!r}; "
                             f"known: {', '.join(METHODS)}")
        no_vectors = loop.create_future()
        no_vectors.set_result(None)
        jobs: list[tuple[Store, str, str, Stamp]] = []
        only: dict[str, frozenset[str] | None] = {}
        for i in range(len(self.stores)):
            store, meta_tables = self._follow(i)
            stamp = self._stamp(store)
            only[str(store.root)] = self._only(store, stamp, where)
            if only[str(store.root)] == frozenset():
                continue  # none of its files is wanted
            for t in tables:
                if not self._searchable(store, meta_tables, t, stamp):
                    continue
                jobs.append((store, t, meta_tables[t]["embedder"], stamp))
        # One embedding request per distinct embedder, shared by every folder built with it.
        vectors = {eid: asyncio.ensure_future(self._vectors(eid, queries))
                   if "vector" in methods and not self._resting(eid) else no_vectors
                   for eid in dict.fromkeys(j[2] for j in jobs)}
        results = await asyncio.gather(
            *[self._search_table(store, t, stamp, vectors[eid], queries, candidates,
                                 "bm25" in methods, needles, only[str(store.root)])
              for store, t, eid, stamp in jobs],
            return_exceptions=True,
        )
        out = _Lists()
        for (store, t, eid, _), res in zip(jobs, results, strict=True):
            if isinstance(res, BaseException):
                if isinstance(res, Exception) and self._moved(store):
                    raise _Moved  # switched to a new generation meanwhile: search that one
                if isinstance(res, EmbedError) and not self.skip_broken:
                    raise res  # the query could not be embedded (_vectors): said as it is
                if isinstance(res, HydraError):
                    self._skip(HydraError(f"skipping {store.root} ({t}): {res}"))
                elif isinstance(res, Exception):  # a damaged table: LanceDB raises many types
                    self._skip(HydraError(f"skipping {store.root} ({t}): index damaged ({res})"))
                else:
                    raise res
                continue
            # One vector list per embedder and one BM25 list, across tables and folders:
            # similarities from one embedder are comparable wherever the chunk lives, and a
            # list per table or per folder would give every table's or folder's best hit the
            # same fused score, however weak it is.
            analysis = self._analysis.get(_key(store.root, t))
            language = analysis.language if analysis else None
            lists, literal = res
            for found in [*literal.values(), *(f for pair in lists for f in pair)]:
                if found is not None:
                    out.embedder.update((_key(store.root, cid), eid) for cid in found.ids)
            for name, matches in literal.items():
                if matches is not None:
                    out.add(name, str(store.root), matches, False, self._dense(
                        store, t, dense_weight(queries[0], t, language, self._embedder(eid))))
            for i, (vec_hits, fts_hits) in enumerate(lists):
                tag = "" if i == 0 else "+context"
                dense = self._dense(store, t, dense_weight(queries[i], t, language,
                                                           self._embedder(eid)))
                if vec_hits is not None:
                    out.add(f"vector:{eid}{tag}", str(store.root), vec_hits, True, dense)
                if fts_hits is not None:
                    out.add(f"bm25{tag}", str(store.root), fts_hits, False, dense)
        return out

    async def _vectors(self, eid: str, queries: list[str]) -> Any:
        """The queries' vectors from embedder `eid` (in a thread), or None where it failed: with
        `skip_broken`, its folders are then searched without vectors, with a warning, until
        RETRY_S have passed; otherwise the failure is the search's error."""
        try:
            matrix = await asyncio.get_running_loop().run_in_executor(
                self._pool, self._embed, eid, queries)
        except HydraError as exc:
            if not self.skip_broken:
                raise EmbedError(f"cannot embed the query with {eid}: {exc}") from None
            reason = str(exc).splitlines()[0]
            self._down[eid] = (time.monotonic() + RETRY_S, (
                f"folders built with {eid} searched without vectors (full text only): {reason}; "
                f"it is tried again after {RETRY_S:g} s"))
            return None
        self._down.pop(eid, None)
        return matrix

    def _resting(self, eid: str) -> bool:
        """Whether embedder `eid` failed less than RETRY_S ago (its folders go without vectors
        meanwhile; its warning stays until it answers again)."""
        down = self._down.get(eid)
        return down is not None and time.monotonic() < down[0]

    def search(self, query: str, k: int = 10, tables: Sequence[str] = TABLES,
               candidates: int = CANDIDATES, also: str | None = None,
               methods: Sequence[str] = METHODS, where: PathFilter | None = None) -> list[Hit]:
        """Top-k hits for `query` from the chosen tables, fused over all lists. `also` adds
        the lists of a second query (a follow-up question together with the one before it);
        `methods` picks the lists ("vector", "bm25"; both by default); `where` keeps the
        search to some files (--glob, --lang)."""
        return self.fused(query, tables, candidates, also, methods, k, where)

    def _only(self, store: Store, stamp: Stamp, where: PathFilter | None) -> frozenset[str] | None:
        """The recorded paths of a folder that `where` keeps (None: all), read again after
        an index run."""
        if where is None:
            return None
        key = (str(store.root), stamp, where)
        if key not in self._kept:
            self._kept = {key: where.select(store.file_list.light(), str(store.root))}  # the latest one only
        return self._kept[key]

    @staticmethod
    def _pages(starts: list[int], line_start: int, text: str, query: str) -> tuple[int, int]:
        """The pages (slides, chapters) a document's hit is cited by: those of the lines that
        match the query best, else the chunk's whole span."""
        best = best_lines(text, query)
        if not best:
            return text_anchors(starts, line_start, text)
        pages = [anchors(starts, line_start + i, line_start + i)[0] for i in best]
        return min(pages), max(pages)

    def fused(self, query: str, tables: Sequence[str] = TABLES, candidates: int = CANDIDATES,
              also: str | None = None, methods: Sequence[str] = METHODS,
              k: int | None = None, where: PathFilter | None = None) -> list[Hit]:
        """Every candidate of every list, fused, best first (the first k when k is given)."""
        query = query.strip()
        if not query:
            raise UsageError("the query is empty")
        queries = [query]
        if also and also.strip() and also.strip() != query:
            queries.append(also.strip())
        fusion = self.settings.fusion
        question = signals.kind_of(queries[-1] if len(queries) > 1 else query)
        # The literal list is part of the default hybrid (score fusion of both methods) only:
        # `--mode vector|bm25` and RRF stay what they were.
        hybrid = "vector" in methods and "bm25" in methods
        needles: list[tuple[str, str, int]] = []
        if hybrid and fusion == "score" and self.settings.literal:
            phrase, whole = literal_phrase(query), literal_whole(query)
            needles = [("literal", phrase, LITERAL_LIMIT)] if phrase else []
            # The line as typed around a quoted message: the chunk holding all of it first
            needles += [("literal:whole", whole, LITERAL_LIMIT)] if whole else []
            # One more than TERM_MAX, to tell a rare name from a common one.
            # A follow-up's names may stand in the question before it ("and its default?").
            needles += [(f"term:{t}", t, TERM_MAX + 1) for t in literal_terms(queries[-1])]
        try:
            found = self._runner.run(
                lambda: self._gather(queries, tables, candidates, methods, needles, where))
        except _Moved:
            found = self._runner.run(
                lambda: self._gather(queries, tables, candidates, methods, needles, where))
        ranked = {name: sorted(items, key=lambda kv: -kv[1])[:candidates]
                  for name, items in found.scores.items()
                  # a name in more chunks than TERM_MAX (over every table and folder) tells
                  # nothing a list of its own should weigh
                  if not (name.startswith("term:") and len(items) > TERM_MAX)}
        if fusion == "rrf":
            fused = rrf({name: [key for key, _ in items] for name, items in ranked.items()})
        elif fusion == "score":

            literal = (signals.literal_weight(question, LITERAL_WEIGHT)
                       if self.settings.rank_kind else LITERAL_WEIGHT)

            def weight(name: str, key: str) -> float:
                if name in ("literal", "literal:whole"):
                    return literal
                if name.startswith("term:"):
                    return TERM_WEIGHT
                follow_up = name.endswith("+context")
                dense = found.dense[("+context" if follow_up else "", key)]
                # One method alone: its own order, whatever table a chunk is in.
                w = 1.0 if not hybrid else dense if name.startswith("vector:") else 1.0 - dense
                return w * (FOLLOW_UP_WEIGHT if follow_up else 1.0)

            fused = score_fusion(ranked, weight, candidates)
        else:
            raise HydraError(f"unknown fusion {fusion!r} (setting `fusion`): use "
                             + " or ".join(FUSIONS))
        moved: dict[str, dict[str, float]] = {}
        if hybrid:
            fused, moved = self._signals(question, fused, found, where)
        top = self.settings.rerank_top if self.settings.rerank else 0
        keep = None if k is None else max(k, top)
        hits = []
        documents: dict[str, dict[str, Any]] = {}
        for key, score, ranks in fused if keep is None else fused[:keep]:
            r = found.row(key)
            ls, le = int(r["line_start"]), int(r["line_end"])
            if r["store"] not in documents:
                documents[r["store"]] = self._documents(r["store"])
            first, last, unit = self._cited(documents[r["store"]].get(r["path"]), ls,
                                            r["text"], query)
            hits.append(Hit(r["store"], r["path"], r["kind"], ls, le, r["text"], score, ranks,
                            r["id"], found.similarity.get(key), section=r.get("section") or "",
                            embedder=found.embedder.get(key, ""),
                            min_similarity=self._min_similarity(found.embedder.get(key, "")),
                            page_start=first, page_end=last, page_unit=unit,
                            signals=moved.get(key, {})))
        if hybrid and fusion == "score" and self.settings.rank_names and "code" in tables:
            hits = rescore.with_names(query if len(queries) == 1 else queries[-1], hits,
                                      [store for store, _ in self.stores])
        if top:
            # A follow-up is judged together with the question before it, as it was searched.
            hits = self._rerank(queries[-1] if len(queries) > 1 else query, hits, top)
        # Like the literal list, part of the default hybrid only: one method alone stays itself.
        w = wanted(query) if self.settings.definitions and hybrid and "code" in tables else None
        if w is not None:
            code = {s: str(t["code"].get("embedder", "")) for s, t in map(self._follow,
                    range(len(self.stores))) if "code" in t}
            hits = definitions.first(list(code), w, hits, k, code.get)
        if where is not None:  # the definitions too; and lists too long to filter in LanceDB
            hits = [h for h in hits if where.match(h.path, h.store)]
        # neighbouring chunks' shared lines take one place
        hits = distinct_spans(hits, self._recut(query, needles))
        return hits if k is None else hits[:k]

    def files(self, query: str, k: int = 10, tables: Sequence[str] = TABLES,
              candidates: int = CANDIDATES, also: str | None = None,
              methods: Sequence[str] = METHODS, where: PathFilter | None = None
              ) -> list[FileHit]:
        """The top-k files for `query`, each scored from all its candidate chunks
        (hydra_rag.search.files), with its best passages; a header's implementation just
        before it (`rank_bodies`), unless a path query names the file it wants."""
        bodies = (self.settings.rank_bodies and set(METHODS) <= set(methods)
                  and signals.kind_of(query).kind != "path")
        return group(self.fused(query, tables, candidates, also, methods, None, where), k,
                     bodies_first=bodies)

    def _recut(self, query: str, needles: Sequence[tuple[str, str, int]]
               ) -> Callable[[Hit], Hit]:
        """A hit cut to fewer lines (distinct_spans): without the literal ranks (`needles`:
        list name, string) whose string its lines no longer hold, so that a weak remnant is
        not kept by a neighbour's match; a document's hit cited by the pages of its lines."""
        strings = {name: text for name, text, _ in needles}

        def recut(h: Hit) -> Hit:
            h = still_holding(h, strings)
            if not h.page_unit:
                return h
            first, last, unit = self._cited(self._documents(h.store).get(h.path), h.line_start,
                                            h.text, query)
            return replace(h, page_start=first, page_end=last, page_unit=unit)
        return recut

    def _cited(self, doc: dict[str, Any] | None, line_start: int, text: str, query: str
               ) -> tuple[int, int, str]:
        """The pages a hit of a document (its documents.json entry) is cited by, and their
        unit; (0, 0, "") for a file without pages."""
        unit = doc.get("unit", "") if doc else ""
        if not unit or not doc:
            return 0, 0, ""
        first, last = self._pages(doc.get("starts") or [], line_start, text, query)
        return first, last, unit if first else ""

    def _signals(self, q: signals.Question, fused: list[tuple[str, float, dict[str, int]]],
                 found: _Lists, where: PathFilter | None
                 ) -> tuple[list[tuple[str, float, dict[str, int]]], dict[str, dict[str, float]]]:
        """The fused list re-scored by the ranking signals that are on (hydra_rag.search.
        rescore), best first, and the signals that moved each chunk."""
        return rescore.rescore(q, fused, found.place, self.settings, where, self._graphs,
                               [store for store, _ in self.stores])

    def _documents(self, root: str) -> dict[str, dict[str, Any]]:
        """A folder's documents.json (path → anchors), read again after an index run."""
        for store, _ in self.stores:
            if str(store.root) == root:
                break
        else:
            return {}
        stamp = self._stamp(store)
        have = self._docs.get(root)
        if have is None or have[0] != stamp:
            have = (stamp, store.read_documents())
            self._docs[root] = have
        return have[1]

    def _min_similarity(self, embedder_id: str) -> float:
        entry = self._embedder(embedder_id) if embedder_id else None
        return entry.min_similarity if entry is not None else Hit.min_similarity

    def _rerank(self, query: str, hits: list[Hit], top: int) -> list[Hit]:
        if self._reranker is None:
            self._reranker = connect_reranker(self.settings)
        # A sidecar that stopped after an idle time is started again by the client itself.
        return rerank(self._reranker, query, hits, top)

    @property
    def sidecar_ids(self) -> list[str]:
        """The sidecars this searcher uses (embedders, and the reranker once used)."""
        return [*self._clients, *([self._reranker.reranker.id] if self._reranker else [])]


def _close(runner: LoopThread, pool: ThreadPoolExecutor) -> None:
    pool.shutdown(wait=False)
    runner.close()
