"""Candidates of one list from one table, and the tables searched in memory: a table of up to
CACHED_ROWS chunks is held as Arrow rows and a numpy matrix of its vectors (exact kNN by one
matrix product, literal matches by a scan), within the `search_cache_mb` budget shared by all
the tables a searcher reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Tables up to this many chunks are searched in memory (when search_cache_mb allows).
CACHED_ROWS = 20_000

Stamp = tuple[int, int]  # a table's generation and its files.db's mtime: when caches hold


@dataclass
class Found:
    """One list's candidates from one table: ids, raw scores (cosine similarity or BM25), and
    where their rows are (an Arrow table and row numbers) — read only for the final winners."""

    ids: list[str]
    scores: list[float]
    rows: Any
    at: list[int]

    @classmethod
    def from_lance(cls, table: Any, score_col: str) -> Found:
        raw = table.column(score_col).to_pylist()
        if score_col == "_distance":  # dot distance is 1 - cosine for unit vectors
            raw = [1.0 - d for d in raw]
        return cls(table.column("id").to_pylist(), raw, table, list(range(len(raw))))


@dataclass
class CachedTable:
    """A small table held in memory: its rows (Arrow), vectors (n × dims), chunk ids, and
    LanceDB row id → row, so that a full-text query need return row ids and scores only."""

    stamp: Stamp
    rows: Any
    vectors: Any
    ids: list[str]
    rowids: list[int]
    missing: Any = None  # row numbers without a vector yet (an array): never a vector hit
    index: dict[int, int] = field(init=False)

    def __post_init__(self) -> None:
        self.index = {r: i for i, r in enumerate(self.rowids)}

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.vectors.nbytes + 150 * len(self.ids))

    def nearest(self, vector: Any, limit: int, only: frozenset[str] | None = None) -> Found:
        """Exact kNN by dot product (cosine for unit vectors), as LanceDB would answer it;
        among the chunks of the paths `only` when it is given."""
        sims = self.vectors @ vector
        if self.missing is not None:
            sims[self.missing] = -np.inf
            limit = min(limit, len(sims) - len(self.missing))
            if limit <= 0:
                return Found([], [], self.rows, [])
        if only is not None:
            sims = np.where(self._of(only), sims, -np.inf)
            limit = min(limit, int(np.isfinite(sims).sum()))
            if not limit:
                return Found([], [], self.rows, [])
        top = np.argpartition(-sims, limit - 1)[:limit] if limit < len(sims) else np.arange(len(sims))
        top = top[np.argsort(-sims[top], kind="stable")].tolist()
        return Found([self.ids[i] for i in top], sims[top].tolist(), self.rows, top)

    def containing(self, phrase: str, limit: int, only: frozenset[str] | None = None) -> Found:
        """Chunks whose text holds `phrase`, case aside (a scan of the rows in memory)."""
        import pyarrow.compute as pc

        mask = pc.match_substring(self.rows.column("text"), phrase, ignore_case=True)
        hold = mask.to_numpy(zero_copy_only=False)
        if only is not None:
            hold = hold & self._of(only)
        at = np.flatnonzero(hold)[:limit].tolist()
        return Found([self.ids[i] for i in at], [1.0] * len(at), self.rows, at)

    def _of(self, only: frozenset[str]) -> Any:
        """Which rows belong to the paths `only` (a boolean array)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        member = pc.is_in(self.rows.column("path"), value_set=pa.array(sorted(only), pa.string()))
        return member.to_numpy(zero_copy_only=False).astype(bool)

    def take(self, found: Any) -> Found:
        """A full-text result of row ids and scores, pointed at the cached rows (the query and
        the cache read the same table version, so every row id is there)."""
        at = [self.index[r] for r in found.column("_rowid").to_pylist()]
        return Found([self.ids[i] for i in at], found.column("_score").to_pylist(), self.rows, at)


class TableCache:
    """The tables held in memory, by key, each valid for one stamp, within `budget` bytes."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._held: dict[str, CachedTable | None] = {}  # None: not worth caching at this stamp
        self._stamps: dict[str, Stamp] = {}
        self._reserved = 0  # bytes of tables being loaded right now

    def __len__(self) -> int:
        """How many tables are held."""
        return sum(1 for c in self._held.values() if c is not None)

    def _used(self) -> int:
        return sum(c.nbytes for c in self._held.values() if c is not None)

    async def get(self, key: str, tbl: Any, stamp: Stamp, size: int,
                  columns: list[str]) -> CachedTable | None:
        """Table `key` in memory (`size` rows, these `columns`), if it is small enough and the
        budget allows; loaded from the LanceDB table `tbl` once per stamp."""
        if self._stamps.get(key) == stamp:
            return self._held.get(key)
        self._held.pop(key, None)
        self._stamps[key] = stamp
        # Tables load concurrently: reserve an estimate (a 384-dim vector and ~2 KB of row)
        # before loading, and check the real size against what is held after.
        estimate = size * (4 * 384 + 2048)
        if not 0 < size <= CACHED_ROWS or self._used() + self._reserved + estimate > self.budget:
            return None
        self._reserved += estimate
        try:
            data = await tbl.query().with_row_id().select([*columns, "vector"]).to_arrow()
        finally:
            self._reserved -= estimate
        vec = data.column("vector").combine_chunks()
        dims = vec.type.list_size
        if vec.null_count:
            # Chunks stored before their vectors (an index run's second phase): rows of
            # zeros, which a product with a unit query vector puts last, and left out.
            matrix = np.zeros((len(vec), dims), np.float32)
            valid = vec.is_valid().to_numpy(zero_copy_only=False)
            matrix[valid] = vec.filter(vec.is_valid()).flatten().to_numpy() \
                .astype(np.float32, copy=False).reshape(-1, dims)
        else:
            matrix = vec.flatten().to_numpy().astype(np.float32, copy=False) \
                .reshape(len(vec), dims)
        cached = CachedTable(
            stamp, data.drop_columns(["vector", "_rowid"]).combine_chunks(), matrix,
            data.column("id").to_pylist(), data.column("_rowid").to_pylist(),
            missing=np.flatnonzero(~valid) if vec.null_count else None,
        )
        if self._used() + self._reserved + cached.nbytes <= self.budget:
            self._held[key] = cached
        return cached
