"""Tables at a URI (`tables_uri`, docs/SCALE.md "The smallest piece that proves the seam"): the
LanceDB tables of an index in an S3 bucket, served here by moto's S3-compatible server on
127.0.0.1, and everything else (meta.yaml, files.db, the journal, the lock) in .hydra-index/.
Indexed, searched, updated and rebuilt like a local index, with the same results."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import BUCKET
from hydra_rag.checks.doctor import check_index
from hydra_rag.config import load_settings
from hydra_rag.index import folder_status, index_folder
from hydra_rag.index.status import CURRENT
from hydra_rag.search.retrieve import Searcher
from hydra_rag.store.index_dir import Store


def _keys(client: Any, prefix: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def _hits(root: Path, q: str) -> list[tuple[str, int]]:
    return [(h.path, h.line_start) for h in Searcher(root, load_settings()).search(q, 5)]


def test_tables_in_a_bucket(home: Path, corpus: Path, tmp_path: Path, s3: Any,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    local = tmp_path / "local-copy"
    shutil.copytree(corpus, local)
    ref = index_folder(local, load_settings())  # the same folder, tables on disk

    monkeypatch.setenv("HYDRA_RAG_TABLES_URI", f"s3://{BUCKET}/indexes")
    rep = index_folder(corpus, load_settings())
    idx = corpus / ".hydra-index"
    uri = (idx / "tables.uri").read_text().strip()
    assert uri.startswith(f"s3://{BUCKET}/indexes/corpus-") and uri.endswith("/gen-0")
    assert not (idx / "lance").exists() and (idx / "files.db").is_file()
    prefix = uri.removeprefix(f"s3://{BUCKET}/") + "/"
    keys = _keys(s3, prefix)
    assert any(k.startswith(prefix + "code.lance/") for k in keys)
    assert any(k.startswith(prefix + "prose.lance/") for k in keys)
    assert (rep.files_indexed, rep.chunks_total) == (ref.files_indexed, ref.chunks_total)
    for q in ("X-Api-Key", "invoice total in cents", "how are requests authenticated"):
        assert _hits(corpus, q) == _hits(local, q), q
    assert all(c.status == "ok" for c in check_index(corpus)), check_index(corpus)

    # An edit: only its new chunk is embedded (the others' vectors are read from the bucket).
    (corpus / "src/billing.py").write_text((corpus / "src/billing.py").read_text()
                                           + "\n\ndef refund(invoice):\n    return -invoice\n")
    again = index_folder(corpus, load_settings())
    assert again.files_indexed == 1 and 0 < again.chunks_embedded <= 2
    assert folder_status(corpus, load_settings()).state == CURRENT
    assert _hits(corpus, "refund an invoice")[0][0] == "src/billing.py"

    # A rebuild makes the next generation in the bucket and removes the previous one there.
    full = index_folder(corpus, load_settings(), full=True)
    assert full.rebuilt and Store(corpus).generation == 1
    new_uri = (idx / "gen-1" / "tables.uri").read_text().strip()
    assert new_uri.endswith("/gen-1") and _keys(s3, prefix) == []
    assert _hits(corpus, "X-Api-Key")[0][0] == "src/auth.py"

    # The setting names where a new index goes: an index keeps its tables where they are.
    monkeypatch.delenv("HYDRA_RAG_TABLES_URI")
    kept = index_folder(corpus, load_settings())
    assert kept.files_unchanged == 5 and (idx / "gen-1" / "tables.uri").is_file()
