"""The walk's fast path for ignore files made of plain name globs (walk._by_name) decides as
pathspec's GitIgnoreSpec does, on random patterns and paths (in folders the walk enters);
other ignore files are left to pathspec."""

from __future__ import annotations

import random

import pathspec

from hydra_rag.read.walk import _by_name

NAMES = ["build", "dist", "a.log", "b.log", "x.py", "README.md", ".env", ".env.local", "node",
         "out1", "out2", "[x]", "a b", "data.json", "Build", "tmp~", "#x", "m.pyc", "m.py"]
GLOBS = ["*.log", "build", "build/", "dist/", ".env*", "*.py", "out?", "out[12]", "*~",
         "[!a]*.md", "*", "*/", "a b", "Build", "*.JSON", "[a-c].log", "node/", "*.py[co]"]


def test_name_globs_decide_as_pathspec() -> None:
    rng = random.Random(19)
    for _ in range(400):
        lines = rng.sample(GLOBS, rng.randint(1, 4))
        fast = _by_name(lines)
        assert fast is not None, lines
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
        for name in NAMES:
            for parent in ("", "src/", "src/deep/"):
                if parent and any(spec.check_file(d).include for d in ("src/", parent)):
                    continue  # an ignored folder is not walked into: its files are not asked
                for is_dir in (False, True):
                    rel = parent + name
                    want = spec.check_file(rel + "/" if is_dir else rel).include is True
                    got = fast[is_dir].match(name) is not None
                    assert got == want, (lines, rel, is_dir)


def test_other_patterns_are_left_to_pathspec() -> None:
    for lines in (["!keep.log"], ["docs/*.md"], ["/build"], ["**/tmp"], ["\\#x"], [" x"],
                  ["x "], ["a[^b]"], ["[a"], ["a["], ["*.py[co"], ["[]"]):
        assert _by_name(lines) is None, lines
