"""`index --contextualize`: the chat model's situating sentences go into what is embedded and
full-text indexed, never into the stored text; they are cached by content. Real SmolLM2."""

from __future__ import annotations

import json
from pathlib import Path

import lancedb
import pytest
import yaml

from conftest import run_cli, write_tree
from hydra_rag.store.index_dir import Store


def _rows(root: Path) -> dict[str, dict[str, str]]:
    # The table of the generation in use: a new language or --no-contextualize builds a new one.
    tbl = lancedb.connect(str(Store(root).lance_path)).open_table("prose")
    return {r["path"]: r for r in tbl.to_arrow().select(["path", "text", "lex"]).to_pylist()}


def test_contextualize_caches_and_never_changes_the_stored_text(
        isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The language change below must only re-analyse: the prose embedder stays MiniLM.
    monkeypatch.setenv("HYDRA_RAG_FOREIGN_EMBEDDER", "off")
    garden = "# Garden\n\nThe quince tree was pruned by Ottoline in March.\n"
    root = write_tree(tmp_path / "c", {
        "garden.md": garden,
        "roof.md": "# Roof\n\nThe north gutter leaks when it rains from the west.\n"})
    proc = run_cli("index", str(root), "--contextualize", "--json")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["contextualized_by"] == "smollm2-135m" and rep["contexts_written"] == 2
    contexts = json.loads((root / ".hydra-index" / "contexts.json").read_text())["contexts"]
    assert len(contexts) == 2
    # The owner's alone, even when the index may be shared: it outlives the files it speaks of.
    assert (root / ".hydra-index" / "contexts.json").stat().st_mode & 0o777 == 0o600
    rows = _rows(root)
    assert rows["garden.md"]["text"] == garden  # what users and the chat model see
    for ctx in contexts.values():  # what search matches: the context, then the chunk
        assert any(r["lex"].startswith(ctx) for r in rows.values())
    hits = json.loads(run_cli("search", "quince pruning", "--path", str(root), "--json").stdout)
    assert hits["results"][0]["text"] == garden

    # The choice is kept; an unchanged chunk never pays again, a changed one does.
    (root / "roof.md").write_text("# Roof\n\nThe south gutter was fixed in May.\n")
    rep = json.loads(run_cli("index", str(root), "--json").stdout)
    assert (rep["contextualized_by"], rep["contexts_written"], rep["files_indexed"]) == (
        "smollm2-135m", 1, 1)
    # A new language re-analyses `lex` from the stored text and the cached contexts.
    rep = json.loads(run_cli("index", str(root), "--language", "de", "--json").stdout)
    assert rep["contexts_written"] == 0 and rep["chunks_added"] == 0
    ctx = json.loads((root / ".hydra-index" / "contexts.json").read_text())["contexts"]
    assert any(_rows(root)["garden.md"]["lex"].startswith(c) for c in ctx.values())

    # Turning it off re-embeds everything (every vector changes) and says why.
    rep = json.loads(run_cli("index", str(root), "--no-contextualize", "--json").stdout)
    assert rep["rebuilt"] and "smollm2-135m → off" in rep["rebuild_reason"]
    assert "contextualize" not in yaml.safe_load((root / ".hydra-index" / "meta.yaml").read_text())
    assert _rows(root)["garden.md"]["lex"].startswith("# Garden")


def test_contextualize_with_a_missing_model_is_a_clear_error(isolated_home: Path,
                                                           tmp_path: Path) -> None:
    root = write_tree(tmp_path / "c", {"a.md": "# A\n\nSome text here.\n"})
    assert run_cli("index", str(root)).returncode == 0
    proc = run_cli("index", str(root), "--contextualize", "--context-model", "nope-model")
    assert proc.returncode == 1 and "nope-model" in proc.stderr and "Traceback" not in proc.stderr
    # the index was not dropped for a rebuild that could not happen
    rep = json.loads(run_cli("index", str(root), "--json").stdout)
    assert (rep["rebuilt"], rep["files_unchanged"], rep["chunks_total"]["prose"]) == (False, 1, 1)
