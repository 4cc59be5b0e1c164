import pytest

from hydra_rag.read.classify import classify


@pytest.mark.parametrize(
    ("path", "head", "kind"),
    [
        ("install.sh", "", "code"),
        ("scripts/setup.md", "", "prose"),  # the old tool called this code
        ("CMakeLists.txt", "", "code"),  # ... and this prose
        ("notes.txt", "", "prose"),
        ("Makefile", "", "code"),
        ("Dockerfile", "", "code"),
        ("Dockerfile.dev", "", "code"),
        ("go.mod", "", "code"),
        ("README", "", "prose"),
        ("LICENSE", "", "prose"),
        ("CHANGELOG", "", "prose"),
        ("README.md", "", "prose"),
        ("src/main.rs", "", "code"),
        ("web/app.tsx", "", "code"),
        ("config.yaml", "", "code"),
        ("bin/deploy", "#!/usr/bin/env bash\nset -e\n", "code"),
        ("bin/tool", "#!/usr/bin/python3\n", "code"),
        ("notes/ideas", "just some thoughts\n", "prose"),
        ("docs/report.rst", "", "prose"),
        # A shebang beats a prose base name: `install` is a script, `INSTALL` the instructions.
        ("install", "#!/bin/sh\nset -e\n", "code"),
        ("scripts/INSTALL", "#!/usr/bin/env python3\n", "code"),
        ("INSTALL", "Run ./configure, then make.\n", "prose"),
        ("CHANGES", "#!! not a shebang line\n", "prose"),
        ("bin/run", "#!/usr/bin/env -S PYTHONPATH=. python3.11 -u\n", "code"),
        ("notes/fish-recipes", "#!/usr/bin/env fish\n", "code"),
        ("notes/shopping", "#! a list, not a program\n", "prose"),
    ],
)
def test_classify(path: str, head: str, kind: str) -> None:
    assert classify(path, head) == kind
