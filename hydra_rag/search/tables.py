"""The queries of one table: its vector, full-text and literal lists, from LanceDB or from
the copy held in memory (hydra_rag.search.table_cache), all on LanceDB's async API; the part
of `Searcher` (hydra_rag.search.retrieve) that talks to the tables.

A search may be kept to some of a folder's files (`--glob`, `--lang`: `only`, their paths):
LanceDB filters before it ranks (`path IN (…)`), and so does the copy in memory, so that the
candidates are the best of those files, not the best of all that happen to be among them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from hydra_rag.errors import IndexError_
from hydra_rag.search.table_cache import CachedTable, Found, Stamp, TableCache
from hydra_rag.store.index_dir import FTS_COLUMN, NPROBES, REFINE_FACTOR, Store, in_list
from hydra_rag.store.lexical import Analysis

COLUMNS = ["id", "path", "kind", "line_start", "line_end", "text", "section"]
OLD_COLUMNS = COLUMNS[:-1]  # a table written before format 3 has no `section`


def key_of(store: object, name: str) -> str:
    """One key for a thing of a store: a chunk (chunk id) or a table (its name)."""
    return f"{store}\0{name}"


def _and(*clauses: str | None) -> str | None:
    kept = [c for c in clauses if c]
    return " AND ".join(f"({c})" for c in kept) if kept else None


class TableQueries:
    """Opens a folder's tables and runs the lists of a search on one of them."""

    _tables: dict[str, tuple[Stamp, Any]]
    _analysis: dict[str, Analysis | None]
    _columns: dict[str, list[str]]
    _cache: TableCache
    _sizes: dict[str, tuple[Stamp, int]]

    async def _table(self, store: Store, t: str, stamp: Stamp) -> Any:
        key = key_of(store.root, t)
        cached = self._tables.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        if t not in store.table_names():
            raise IndexError_(f"table {t!r} in {store.data_dir} is missing; "
                              f"run `hydra-rag index {store.root} --full`")
        from hydra_rag.store.lance_read import open_table

        try:
            lexical = (store.read_meta().get("lexical") or {}).get(t)
            self._analysis[key] = Analysis(str(lexical["language"])) if lexical else None
            tbl = await open_table(store.lance_uri, t)
            names = (await tbl.schema()).names
        except Exception as exc:  # LanceDB raises several types for a damaged table
            raise IndexError_(f"table {t!r} in {store.dir} cannot be opened ({exc}); "
                              f"run `hydra-rag index {store.root} --full`") from None
        self._columns[key] = COLUMNS if "section" in names else OLD_COLUMNS
        self._tables[key] = (stamp, tbl)
        return tbl

    async def _literal(self, tbl: Any, cached: CachedTable | None, phrase: str, limit: int,
                       columns: list[str], only: frozenset[str] | None) -> Found | None:
        """The chunks of one table that hold `phrase` verbatim, case aside (at most `limit`)."""
        if cached:
            return cached.containing(phrase, limit, only)
        quoted = phrase.lower().replace("'", "''")
        where = _and(f"contains(lower(text), '{quoted}')", in_list("path", only))
        try:
            found = await (tbl.query().where(where).limit(limit).select(columns).to_arrow())
        except Exception:  # a string the filter parser rejects: the other lists still answer
            return None
        return Found(found.column("id").to_pylist(), [1.0] * found.num_rows, found,
                      list(range(found.num_rows)))

    async def _search_table(self, store: Store, t: str, stamp: Stamp, vectors: Any,
                            queries: list[str], candidates: int,
                            use_bm25: bool, needles: Sequence[tuple[str, str, int]],
                            only: frozenset[str] | None = None,
                            ) -> tuple[list[tuple[Any, Any]], dict[str, Any]]:
        """(vector result, full-text result) per query, None for a list not searched; and the
        literal matches of each needle (list name, string, limit), None where the filter failed.
        `only`: the paths the search is kept to (None: every file)."""
        key = key_of(store.root, t)
        tbl = await self._table(store, t, stamp)
        cached = await self._cache.get(key, tbl, stamp, self._sizes.get(key, (0, -1))[1],
                                       self._columns[key])
        analysis = self._analysis.get(key)
        columns = self._columns[key]
        literal = {name: asyncio.ensure_future(self._literal(tbl, cached, s, limit, columns,
                                                             only))
                   for name, s, limit in needles}
        where = in_list("path", only)

        async def fts(q: str) -> Any:
            # The query analysed like this table's text (identifier parts, prefix stems).
            text = analysis.query(q) if analysis else q
            if not text.strip():
                return None
            query = tbl.query().nearest_to_text(text, columns=FTS_COLUMN if analysis else None)
            query = query.limit(candidates)
            if where:
                query = query.where(where)
            # Reading no column at all (row ids only) saves a third of a small query's time.
            query = query.with_row_id().select(["_score"]) if cached else query.select(
                [*columns, "_score"])
            try:
                found = await query.to_arrow()
            except Exception:  # a query the FTS parser rejects still gets vector results
                return None
            return cached.take(found) if cached else Found.from_lance(found, "_score")

        fts_jobs = [asyncio.ensure_future(fts(q)) for q in queries] if use_bm25 else []
        try:
            lists = await self._vectors_then(tbl, cached, fts_jobs, vectors, queries,
                                             candidates, columns, only)
            return lists, {name: await job for name, job in literal.items()}
        finally:
            for job in [*fts_jobs, *literal.values()]:  # nothing left pending
                job.cancel()

    async def _vectors_then(self, tbl: Any, cached: CachedTable | None, fts_jobs: list[Any],
                            vectors: Any, queries: list[str], candidates: int,
                            columns: list[str], only: frozenset[str] | None
                            ) -> list[tuple[Any, Any]]:
        matrix = await vectors  # embedded meanwhile, in a thread (None: no vector search)
        vec: list[Found | None]
        if matrix is None:
            vec = [None] * len(queries)
        elif cached:
            vec = [cached.nearest(matrix[i], candidates, only) for i in range(len(queries))]
        else:
            vec = [Found.from_lance(found, "_distance") for found in await asyncio.gather(*[
                # nprobes and refine_factor apply only to a table with a vector index (past
                # ANN_ROWS); without one the search is exact.
                _where(tbl.query().nearest_to(matrix[i]).column("vector").distance_type("dot")
                       .nprobes(NPROBES).refine_factor(REFINE_FACTOR), in_list("path", only))
                .limit(candidates).select([*columns, "_distance"]).to_arrow()
                for i in range(len(queries))
            ])]
        bm25 = await asyncio.gather(*fts_jobs) if fts_jobs else [None] * len(queries)
        return list(zip(vec, bm25, strict=True))


def _where(query: Any, where: str | None) -> Any:
    return query.where(where) if where else query
