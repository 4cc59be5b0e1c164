"""Chunks stored before their vectors (the second phase of an index run): a row whose `vector`
is null is in every list but the vector one until its vector is set. LanceDB's vector search
passes over null vectors; `pending` counts them, `waiting` reads a batch of them, `put` sets
their vectors by chunk id in one commit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra_rag.store.index_dir import TABLES, Store

NULL = "vector IS NULL"
# What the text the embedder reads is made of (prepare.embed_input), read back for a batch.
COLUMNS = ["id", "path", "kind", "section", "text"]


def recorded(meta: dict[str, Any]) -> dict[str, int]:
    """What meta.yaml's `vectors_pending` says waits for a vector, per table (none: {})."""
    return {t: int(n) for t, n in (meta.get("vectors_pending") or {}).items()
            if t in TABLES and int(n) > 0}


def pending(store: Store, name: str) -> int:
    """How many chunks of table `name` wait for their vector."""
    tbl = store.table(name)
    return 0 if tbl is None else int(tbl.count_rows(NULL))


def waiting(store: Store, name: str, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` chunks of table `name` that wait for their vector, in path order (a
    file's chunks together, so that an interrupted run leaves whole files embedded)."""
    tbl = store.table(name)
    if tbl is None:
        return []
    rows: list[dict[str, Any]] = (tbl.search().where(NULL).select(COLUMNS).limit(limit)
                                  .to_list())
    return sorted(rows, key=lambda r: (r["path"], r["id"]))


def put(store: Store, name: str, ids: Sequence[str], vectors: Sequence[Any]) -> None:
    """Set the vectors of these chunks (one commit: a kill leaves all of them or none)."""
    import pyarrow as pa

    tbl = store.table(name)
    if tbl is None or not ids:
        return
    dims = tbl.schema.field("vector").type.list_size
    data = pa.table({"id": pa.array(list(ids), pa.string()),
                     "vector": pa.array([list(map(float, v)) for v in vectors],
                                        pa.list_(pa.float32(), dims))})
    tbl.merge_insert("id").when_matched_update_all().execute(data)
