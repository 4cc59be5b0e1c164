"""Reading a local index through LanceDB's native core, without its Python layer.

A search reads tables; it never writes, and never needs LanceDB's remote clients, embedding
registry, namespaces or pydantic models. `import lancedb` pays for all of them (0.7 s of a
1.5 s cold `hydra-rag search` on two cores, with the REST client already deferred), while
the Rust core that does the reading (`lancedb._lancedb`) loads in ~20 ms. So searches open
local tables with that core directly, through the few query calls they use; the calls are
the ones LanceDB's own `AsyncQuery` makes, and a test compares the results of both ways on
the same tables.

If the core cannot be loaded on its own (another layout, another version's signatures), or
the tables are not on a local path, the full `lancedb` package is used instead.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path
from typing import Any

from hydra_rag.store.loop_thread import before_lancedb_exits, in_a_thread

_CORE = "lancedb._lancedb"
# Searches of a server start side by side: the module is put in sys.modules before it has run,
# so a second thread must wait for the first to finish loading it, not take it half made.
_LOADING = threading.Lock()


def _core() -> Any | None:
    """LanceDB's native module, loaded without running `lancedb/__init__.py` (None: cannot)."""
    with _LOADING:
        return _load_core()


def _load_core() -> Any | None:
    if _CORE in sys.modules:
        return sys.modules[_CORE]
    try:
        spec = importlib.util.find_spec("lancedb")
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = Path(next(iter(spec.submodule_search_locations)))
        found = sorted(folder.glob("_lancedb.*.so")) + sorted(folder.glob("_lancedb.*.pyd"))
        if not found:
            return None
        core_spec = importlib.util.spec_from_file_location(_CORE, found[0])
        if core_spec is None or core_spec.loader is None:
            return None
        module = importlib.util.module_from_spec(core_spec)
        sys.modules[_CORE] = module  # `import lancedb` later finds and keeps this one
        try:
            core_spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(_CORE, None)
            raise
        before_lancedb_exits()
        return module
    except Exception:  # noqa: BLE001 - any trouble: the full package answers instead
        return None


class _Query:
    """A query of the native core, built the way LanceDB's `AsyncQuery` builds it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def where(self, predicate: str) -> _Query:
        self._inner.where(predicate)
        return self

    def limit(self, limit: int) -> _Query:
        self._inner.limit(limit)
        return self

    def select(self, columns: list[str]) -> _Query:
        self._inner.select_columns(list(columns))
        return self

    def with_row_id(self) -> _Query:
        self._inner.with_row_id()
        return self

    def nearest_to(self, vector: Any) -> _Query:
        import pyarrow as pa

        return _Query(self._inner.nearest_to(vector if isinstance(vector, pa.Array)
                                             else pa.array(vector)))

    def nearest_to_text(self, text: str, columns: str | list[str] | None = None) -> _Query:
        names = [columns] if isinstance(columns, str) else list(columns or [])
        return _Query(self._inner.nearest_to_text({"query": text, "columns": names}))

    def column(self, name: str) -> _Query:
        self._inner.column(name)
        return self

    def distance_type(self, kind: str) -> _Query:
        self._inner.distance_type(kind)
        return self

    def nprobes(self, n: int) -> _Query:
        self._inner.nprobes(n)
        return self

    def refine_factor(self, n: int) -> _Query:
        self._inner.refine_factor(n)
        return self

    async def to_arrow(self) -> Any:
        import pyarrow as pa

        stream = await self._inner.execute(max_batch_length=None, timeout=None)
        batches = [batch async for batch in stream]
        return pa.Table.from_batches(batches, schema=stream.schema)


class ReadTable:
    """A table opened for reading: `schema()` and `query()`, as LanceDB's `AsyncTable`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def schema(self) -> Any:
        return await self._inner.schema()

    def query(self) -> _Query:
        return _Query(self._inner.query())


async def open_table(uri: str, name: str) -> Any:
    """Table `name` of the database at `uri`, for reading: through the native core for a local
    path, else (or where the core cannot be loaded alone) through LanceDB's Python API."""
    core = None if "://" in uri else _core()
    if core is not None:
        conn = await core.connect(uri, None, None, None, None, None, None, None, None)
        return ReadTable(await conn.open_table(name))
    from hydra_rag.store.lance import lancedb

    db = await lancedb().connect_async(uri)
    return await db.open_table(name)


def read_rows(uri: str, name: str, wheres: list[str], columns: list[str]) -> Any:
    """The rows of table `name` that match any of `wheres` (one query each, the table opened
    once), these columns, as one Arrow table; callable from anywhere, an event loop's thread
    included."""
    async def read() -> Any:
        import pyarrow as pa

        tbl = await open_table(uri, name)
        return pa.concat_tables([await tbl.query().where(w).select(columns).to_arrow()
                                 for w in wheres])

    return in_a_thread(read)
