"""Keeping a search to some files: --glob and --lang (pure)."""

from __future__ import annotations

import pytest

from hydra_rag.errors import UsageError
from hydra_rag.search.paths import PathFilter

PATHS = ["src/app.py", "src/web/index.ts", "src/web/App.tsx", "tests/test_app.py", "README.md",
         "docs/guide.md", "cmd/main.go", "build.sh", "Rakefile"]


@pytest.mark.parametrize(("globs", "langs", "kept"), [
    (["*.py"], [], {"src/app.py", "tests/test_app.py"}),
    (["src/**"], [], {"src/app.py", "src/web/index.ts", "src/web/App.tsx"}),
    (["!tests/"], ["python"], {"src/app.py"}),
    (["*.md", "!docs/"], [], {"README.md"}),
    ([], ["ts"], {"src/web/index.ts", "src/web/App.tsx"}),  # TypeScript takes .tsx too
    ([], ["markdown", "go"], {"README.md", "docs/guide.md", "cmd/main.go"}),
    ([], ["shell", "ruby"], {"build.sh", "Rakefile"}),
])
def test_which_files_a_search_keeps(globs: list[str], langs: list[str], kept: set[str]) -> None:
    f = PathFilter.of(globs, langs)
    assert f is not None
    assert f.select(PATHS) == kept
    assert {p for p in PATHS if f.match(p)} == kept


def test_bad_filters() -> None:
    assert PathFilter.of(None, None) is None and PathFilter.of([], []) is None
    with pytest.raises(UsageError, match="unknown language 'klingon'"):
        PathFilter.of(None, ["klingon"])
    with pytest.raises(UsageError, match="--glob needs a pattern"):
        PathFilter.of(["  "], None)
