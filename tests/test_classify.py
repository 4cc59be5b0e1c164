import pytest

from hydra_rag.classify import classify


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
    ],
)
def test_classify(path: str, head: str, kind: str) -> None:
    assert classify(path, head) == kind
