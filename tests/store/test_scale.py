"""Large tables get an approximate vector index (store.ANN_ROWS), kept up to date by index runs
and dropped when the table shrinks; searches through it find what exact search finds. The
threshold is lowered here so that a few hundred real chunks stand for a large table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from conftest import write_tree
from hydra_rag.checks.doctor import check_index
from hydra_rag.config import load_settings
from hydra_rag.index import index_folder
from hydra_rag.search.retrieve import Searcher
from hydra_rag.store import index_dir as store_module
from hydra_rag.store.index_dir import Store

TOPICS = ["tides", "glaciers", "volcanoes", "deserts", "rainforests", "coral reefs", "tundra",
          "wetlands", "savannas", "mangroves"]


def _notes(n: int, start: int = 0) -> dict[str, str]:
    return {f"notes/n{i:03}.md": f"# Note {i}\n\nField note {i} on {TOPICS[i % 10]}: station "
            f"{i} measured {TOPICS[(i * 3) % 10]} and {i % 17} samples of sediment.\n"
            for i in range(start, start + n)}


def test_a_large_table_gets_a_vector_index(home: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "ANN_ROWS", 300)
    root = write_tree(tmp_path / "big", _notes(320))
    index_folder(root, load_settings())
    info = Store(root).vector_index("prose")
    assert info is not None and info["type"] == "IVF_HNSW_SQ"
    assert info["indexed"] == 320 and info["unindexed"] == 0
    meta = yaml.safe_load((root / ".hydra-index" / "meta.yaml").read_text())
    assert meta["vector_index"]["prose"] == 320
    assert Store(root).vector_index("code") is None  # an empty table stays exact
    checks = {c.name: c for c in check_index(root)}
    assert all(c.status == "ok" for c in checks.values())
    assert "vector index IVF_HNSW_SQ over 320 rows" in checks["table prose"].detail
    assert "exact vector search" in checks["table code"].detail
    from hydra_rag.index import folder_status

    vi = folder_status(root, load_settings()).vector_index
    assert vi["prose"] == 320 and vi.get("code", 0) == 0

    # Through the index (LanceDB, cache off) as by exact search (the table in memory).
    exact = Searcher(root, load_settings())
    ann = Searcher(root, dataclasses.replace(load_settings(), search_cache_mb=0))
    overlap = []
    for q in ("field note 17 on glaciers", "sediment samples at station 204",
              "coral reefs measured at station 99", "volcanoes and tundra"):
        a = [h.id for h in exact.search(q, 10, methods=("vector",))]
        b = [h.id for h in ann.search(q, 10, methods=("vector",))]
        assert a[0] == b[0]
        overlap.append(len(set(a) & set(b)) / 10)
    assert sum(overlap) / len(overlap) >= 0.9

    # Rows added later join the index (no retraining below a fifth more than it was trained on).
    write_tree(root, _notes(40, start=320))
    index_folder(root, load_settings())
    info = Store(root).vector_index("prose")
    assert info is not None and (info["indexed"], info["unindexed"]) == (360, 0)
    assert yaml.safe_load((root / ".hydra-index" / "meta.yaml").read_text())[
        "vector_index"]["prose"] == 320

    # Shrunk below half the threshold: exact search again.
    for f in sorted((root / "notes").iterdir())[:250]:
        f.unlink()
    index_folder(root, load_settings())
    assert Store(root).vector_index("prose") is None
    hits = Searcher(root, dataclasses.replace(load_settings(), search_cache_mb=0)).search(
        "field note 300 on tides", 3)
    assert hits[0].path == "notes/n300.md"
