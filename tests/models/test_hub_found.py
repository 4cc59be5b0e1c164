"""Finding other tools' models on disk, with odd layouts: manifests that are not what Ollama
writes, caches with broken links and several snapshots (files only; nothing is loaded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hydra_rag.hub import found


def _manifest(root: Path, name: str, tag: str, doc: object) -> None:
    path = root / "manifests" / "registry.ollama.ai" / "library" / name / tag
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)


def test_odd_ollama_manifests_are_passed_over(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_MODELS", raising=False)
    root = tmp_path / ".ollama" / "models"
    (root / "blobs").mkdir(parents=True)
    (root / "blobs" / ("sha256-" + "a" * 64)).write_bytes(b"GGUF")
    _manifest(root, "null-layers", "latest", {"layers": None})
    _manifest(root, "not-json", "latest", "{")
    _manifest(root, "a-list", "latest", [1, 2])
    _manifest(root, "no-blob", "latest", {"layers": [
        {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + "b" * 64}]})
    _manifest(root, "fine", "7b", {"layers": [
        {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + "a" * 64},
        {"mediaType": "application/vnd.ollama.image.params", "digest": "sha256:" + "c" * 64}]})
    got = {f.name: f for f in found.ollama(tmp_path)}
    assert set(got) == {"no-blob:latest", "fine:7b"}
    assert "missing" in got["no-blob:latest"].note
    assert got["fine:7b"].note == "" and got["fine:7b"].id_hint == "fine-7b"
    assert got["fine:7b"].params == {}  # its params blob is missing: none carried over


def test_a_hub_layout_cache_skips_broken_links_and_counts_a_file_once(
        tmp_path: Path) -> None:
    repo = tmp_path / "models--org--m-GGUF"
    blob = repo / "blobs" / "abc"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"GGUF")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("new")
    for snap in ("old", "new"):
        d = repo / "snapshots" / snap
        d.mkdir(parents=True)
        (d / "m-Q8_0.gguf").symlink_to(blob)
        (d / "mmproj-m-f16.gguf").symlink_to(blob)
    (repo / "snapshots" / "old" / "gone-Q4_0.gguf").symlink_to(repo / "blobs" / "missing")
    got = list(found._hub_layout(tmp_path, "hf"))
    assert [(f.name, f.path.parent.name) for f in got] == [("org/m-GGUF/m-Q8_0.gguf", "new")]
