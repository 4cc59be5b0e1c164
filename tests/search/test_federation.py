"""Federated retrieval over several real indexed folders: relevance order, tags, broken stores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import run_cli, write_tree

QUESTION = "where is the Zephyr launch code kept"


def _make(tmp: Path) -> list[Path]:
    a = write_tree(tmp / "alpha", {
        "notes.md": "# Alpha notes\n\nThe team lunch is on Fridays at noon in the park.\n",
        "deploy.md": "# Deploys\n\nWe deploy the web app with a blue-green switch.\n"})
    b = write_tree(tmp / "beta", {
        "garden.md": "# Garden\n\nTomatoes need full sun and deep watering.\n",
        "code.py": "def launch():\n    return 'started'\n"})
    c = write_tree(tmp / "gamma", {
        "secrets-policy.md": "# Project Zephyr\n\nThe Zephyr launch code is kept in the blue "
                             "safe in the basement archive.\n",
        "misc.md": "# Misc\n\nParking permits are renewed every March.\n"})
    return [a, b, c]


def _index(folder: Path, *tags: str) -> None:
    proc = run_cli("index", str(folder), *[x for t in tags for x in ("--tag", t)])
    assert proc.returncode == 0, proc.stderr


def test_all_ranks_by_relevance_not_registry_order(isolated_home: Path, tmp_path: Path) -> None:
    a, b, c = _make(tmp_path)
    _index(a, "work")
    _index(b)
    _index(c, "work")  # the only answer lives in the folder registered last
    proc = run_cli("search", QUESTION, "--all", "--json", "-k", "5")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert (results[0]["store"], results[0]["path"]) == (str(c), "secrets-policy.md")
    assert results[0]["score"] > results[1]["score"]
    assert {r["store"] for r in results} >= {str(a), str(b)}  # the others were searched too

    proc = run_cli("search", QUESTION, "--tag", "work", "--json", "-k", "10")
    stores = {r["store"] for r in json.loads(proc.stdout)["results"]}
    assert stores == {str(a), str(c)}

    proc = run_cli("search", QUESTION, "--path", str(a), "--path", str(c), "-k", "2")
    assert "gamma:secrets-policy.md:1-3" in proc.stdout

    proc = run_cli("ask", "smollm2-135m", "Where is the Zephyr launch code kept?", "--rag-all",
                   "--json", "--max-tokens", "24", "--temperature", "0")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["sources"][0]["store"], out["sources"][0]["path"]) == (str(c), "secrets-policy.md")


def test_broken_stores_are_skipped_with_a_warning(isolated_home: Path, tmp_path: Path) -> None:
    a, b, c = _make(tmp_path)
    for f in (a, b, c):
        _index(f)
    shutil.move(str(b), str(tmp_path / "beta-moved"))       # moved away
    (a / ".hydra-index" / "meta.yaml").write_text("tables: [broken\n")  # corrupted
    proc = run_cli("search", QUESTION, "--all", "--json")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert results[0]["store"] == str(c)
    assert {r["store"] for r in results} == {str(c)}
    assert f"warning: {b} is gone" in proc.stderr
    assert str(a / ".hydra-index" / "meta.yaml") in proc.stderr and "corrupt" in proc.stderr
    assert "Traceback" not in proc.stderr

    listed = {r["path"]: r for r in json.loads(run_cli("stores", "list", "--json").stdout)}
    assert listed[str(b)]["folder_exists"] is False and listed[str(b)]["problem"]
    assert listed[str(c)]["chunks"] == {"prose": 2} and listed[str(c)]["problem"] == ""
    proc = run_cli("stores", "prune")
    assert f"forgot {b}" in proc.stdout and str(c) not in proc.stdout


def test_stores_commands(isolated_home: Path, tmp_path: Path) -> None:
    a, b, _ = _make(tmp_path)
    _index(a)
    _index(b, "home")
    assert run_cli("stores", "tag", str(a), "work", "x").returncode == 0
    assert run_cli("stores", "untag", str(a), "x").returncode == 0
    listed = {r["path"]: r for r in json.loads(run_cli("stores", "list", "--json").stdout)}
    assert listed[str(a)]["tags"] == ["work"] and listed[str(b)]["tags"] == ["home"]
    assert listed[str(a)]["embedders"] == {"code": "minilm-l6", "prose": "minilm-l6"}
    proc = run_cli("stores", "rm", str(a), "--delete-index")
    assert proc.returncode == 0 and not (a / ".hydra-index").exists()
    proc = run_cli("stores", "tag", str(a), "y")
    assert proc.returncode == 1 and "not a registered folder" in proc.stderr
    proc = run_cli("search", "x", "--tag", "nothing-tagged")
    assert proc.returncode == 1 and "no folders tagged nothing-tagged" in proc.stderr


def test_in_memory_tables_answer_like_lancedb_and_follow_reindexing(
        isolated_home: Path, tmp_path: Path) -> None:
    from dataclasses import replace

    from hydra_rag.config import load_settings
    from hydra_rag.search.retrieve import Searcher

    folders = _make(tmp_path)
    for f in folders:
        _index(f)
    settings = load_settings()
    cached = Searcher(folders, settings)
    direct = Searcher(folders, replace(settings, search_cache_mb=0))
    for q in (QUESTION, "watering tomatoes", "def launch", "blue"):
        a, b = cached.search(q, 8), direct.search(q, 8)
        assert [(h.store, h.id, h.ranks) for h in a] == [(h.store, h.id, h.ranks) for h in b]
        assert [h.text for h in a] == [h.text for h in b]
        for x, y in zip(a, b, strict=True):
            assert x.similarity is not None and y.similarity is not None
            assert abs(x.similarity - y.similarity) < 1e-4
    assert cached._cache and not direct._cache  # the two really took different paths

    # A long-lived searcher (a chat) sees a re-index made by another process.
    (folders[1] / "garden.md").write_text("# Garden\n\nThe quince tree was pruned by Ottoline.\n")
    _index(folders[1])
    for s in (cached, direct):
        top = s.search("who pruned the quince tree", 3)[0]
        assert (top.path, "Ottoline" in top.text) == ("garden.md", True)
    cached.close()
    direct.close()


def test_tables_with_different_embedders_keep_stdout(isolated_home: Path, tmp_path: Path) -> None:
    """Code and prose on two embedders: both clients are made at once in the search's thread
    pool. Their quiet model loads used to swap file descriptors 1 and 2 concurrently and left
    the process writing stdout to /dev/null — `search` printed nothing and exited 0."""
    gguf = isolated_home / "data" / "models" / "minilm-l6.q8_0.gguf"
    proc = run_cli("embedders", "add", "minilm-copy", str(gguf), "--dims", "384")
    assert proc.returncode == 0, proc.stderr
    folder = write_tree(tmp_path / "mixed", {
        "notes.md": "# Rivers\n\nRivers flow to the sea through deltas.\n",
        "code.py": "def flow(river):\n    return river.to_sea()\n"})
    env = {"HYDRA_RAG_PROSE_EMBEDDER": "minilm-copy"}
    assert run_cli("index", str(folder), env=env).returncode == 0
    for _ in range(3):
        proc = run_cli("search", "where do rivers go", "--path", str(folder), "--json", env=env)
        assert proc.returncode == 0, proc.stderr
        results = json.loads(proc.stdout)["results"]
        assert {r["kind"] for r in results} == {"code", "prose"}


def test_concurrent_tokenizer_loads_leave_the_descriptors_alone(session_home: Path) -> None:
    import os
    import threading

    from conftest import MODELS_HOME
    from hydra_rag.models.embed import Tokenizer

    path = str(MODELS_HOME / "data" / "models" / "minilm-l6.q8_0.gguf")
    before = [os.fstat(fd).st_ino for fd in (1, 2)]
    for _ in range(10):
        barrier = threading.Barrier(2)

        def load(barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            Tokenizer(path)

        threads = [threading.Thread(target=load) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [os.fstat(fd).st_ino for fd in (1, 2)] == before
