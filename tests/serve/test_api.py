"""The library API that the CLI, the MCP server and the HTTP server all call, used directly:
a Scope of folders, search, get, ask, stores, bundles."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli
from hydra_rag import api
from hydra_rag.errors import HydraError, UsageError
from hydra_rag.serve.scope import Scope


@pytest.fixture
def scope(home: Path, corpus: Path) -> Scope:
    assert run_cli("index", str(corpus), "--tag", "api-test").returncode == 0
    s = Scope([corpus])
    yield s
    s.close()


def test_search_get_stores(scope: Scope, corpus: Path) -> None:
    found = scope.search("invalid api key", k=3)
    assert found["results"][0]["path"] == "src/auth.py" and found["warnings"] == []
    assert found["results"][0]["store_name"] == corpus.name
    # the pool hands out the same warm searcher; many calls in a row stay consistent
    assert [r["path"] for r in scope.search("invalid api key", k=3)["results"]] == [
        r["path"] for r in found["results"]]
    assert scope.search("tomatoes", tag="api-test")["results"]
    lines = scope.get("docs/gardening.md", 1, 1)
    assert lines["text"] == "# Growing tomatoes" and lines["total_lines"] == 4
    assert scope.get(f"{corpus.name}:docs/gardening.md", 1, 1)["text"] == "# Growing tomatoes"
    assert scope.stores()[0]["path"] == str(corpus)
    with pytest.raises(UsageError, match="not a folder of this server's scope"):
        scope.search("x", paths=["/etc"])
    with pytest.raises(UsageError, match="no folder of this server's scope has the tag"):
        scope.search("x", tag="nope")
    with pytest.raises(HydraError, match="not allowed"):
        scope.get("../corpus/src/auth.py")
    for bad in ({"query": " "}, {"query": "x", "k": 0}, {"query": "x", "mode": "fuzzy"}):
        with pytest.raises(UsageError):
            scope.search(**bad)  # type: ignore[arg-type]


def test_ask_and_folders(scope: Scope, corpus: Path) -> None:
    got = scope.ask("How often should tomatoes be watered?", k=3)
    assert got["sources"][0]["path"] == "docs/gardening.md"
    assert got["verdict"] in ("ok", "problems")
    assert scope.ask("What is the capital of Mongolia?")["verdict"] == "no context"
    roots, federated = api.folders([corpus / "src"])
    assert roots == [corpus] and not federated
    with pytest.raises(UsageError):
        api.folders([corpus], all_=True)


def test_status_of_a_folder_that_went_away(home: Path, tmp_path: Path) -> None:
    from conftest import write_tree

    one = write_tree(tmp_path / "one", {"a.md": "# One\n\nThe first folder.\n"})
    two = write_tree(tmp_path / "two", {"b.md": "# Two\n\nThe second folder.\n"})
    for f in (one, two):
        assert run_cli("index", str(f)).returncode == 0
    s = Scope([one, two])
    try:
        one.rename(tmp_path / "moved")
        docs = {d["root"]: d for d in s.status()}
        assert docs[str(one)]["problem"].startswith("the folder is gone")
        assert docs[str(two)]["state"] == "current" and docs[str(two)]["problem"] is None
    finally:
        s.close()


def test_a_scope_of_tagged_folders_follows_the_registry(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A server started with --tag (or --all, the default) sees a folder indexed or tagged
    # after it started, and stops seeing one untagged, without a restart.
    import uuid

    from conftest import write_tree
    from hydra_rag.serve import scope as scope_module

    tag = f"live-{uuid.uuid4().hex[:8]}"
    one = write_tree(tmp_path / "one", {"a.md": "# Lighthouses\n\nThe keeper trims the wick.\n"})
    two = write_tree(tmp_path / "two", {"b.md": "# Beekeeping\n\nSmoke calms the hive.\n"})
    assert run_cli("index", str(one), "--tag", tag).returncode == 0
    s = Scope(tags=[tag])
    try:
        assert s.roots == [one]
        assert s.search("keeper wick")["results"][0]["path"] == "a.md"
        with pytest.raises(UsageError, match="not a folder of this server's scope"):
            s.search("hive", paths=[str(two)])
        assert run_cli("index", str(two), "--tag", tag).returncode == 0
        found = s.search("smoke calms the hive", k=3)
        assert found["results"][0]["path"] == "b.md"
        assert found["results"][0]["store_name"] == "two"
        assert {r["path"] for r in s.stores()} == {str(one), str(two)}
        assert s.search("hive", paths=["two"])["results"]
        assert run_cli("stores", "untag", str(one), tag).returncode == 0
        assert s.roots == [two]
        assert all(r["store"] == str(two) for r in s.search("keeper wick", k=5)["results"])
        assert run_cli("stores", "untag", str(two), tag).returncode == 0
        with pytest.raises(HydraError, match=f"no folders tagged {tag}"):
            s.search("hive")
        with pytest.raises(HydraError, match=f"no folders tagged {tag}"):
            s.ask("What calms the hive?")  # not the server's working folder instead
    finally:
        s.close()

    # A folder skipped when a pooled searcher was made (its index away) is tried again.
    monkeypatch.setattr(scope_module, "RETRY_S", 0.0)
    for f in (one, two):
        assert run_cli("stores", "tag", str(f), tag).returncode == 0
    (two / ".hydra-index").rename(tmp_path / "away")
    s = Scope(tags=[tag])
    try:
        first = s.search("smoke calms the hive", k=3)
        assert any("has no index" in w for w in first["warnings"])
        assert all(r["store"] == str(one) for r in first["results"])
        (tmp_path / "away").rename(two / ".hydra-index")
        again = s.search("smoke calms the hive", k=3)
        assert again["warnings"] == [] and again["results"][0]["path"] == "b.md"
    finally:
        s.close()
