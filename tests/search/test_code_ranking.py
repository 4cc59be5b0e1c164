"""Code questions through the real index, sidecar and LanceDB: the implementation before the
tests and the page that repeats the question, files ranked from all their evidence, a name
inside a question bringing its definition, and what --explain says moved each hit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli, write_tree

PORTS = '''"""Ports for the sidecars: each gets a stable loopback port of its own."""

import socket


class PortPicker:
    """Chooses the loopback port a sidecar listens on."""

    def __init__(self, first: int, last: int) -> None:
        self.first, self.last = first, last

    def pick_port(self, name: str) -> int:
        """A port derived from the sidecar's name, moved on while another process holds it."""
        start = self.first + sum(map(ord, name)) % (self.last - self.first)
        for port in range(start, self.last):
            if self._free(port):
                return port
        raise OSError("no free port between %d and %d" % (self.first, self.last))

    def _free(self, port: int) -> bool:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
            return True
'''

# Tests that say "port" and "sidecar" far more often than the implementation does.
TESTS = "".join(
    f"def test_sidecar_port_{i}():\n"
    f"    # a sidecar picks its port: sidecar {i} gets a free port, port after port\n"
    f"    assert PortPicker(19000, 19100).pick_port('sidecar-{i}') >= 19000  # port\n\n\n"
    for i in range(12))

README = """# Sidecars

How does a sidecar pick its port? Each sidecar runs on loopback. How does a sidecar pick its
port is a question people ask; the answer is in the code.
"""

FILLER = "".join(f"def step_{i}(x):\n    return x + {i}\n\n\n" for i in range(80))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, session_home: Path) -> Path:
    root = write_tree(tmp_path_factory.mktemp("ranking") / "proj", {
        "src/sidecars/ports.py": PORTS,
        "src/sidecars/steps.py": FILLER,  # a long file: two chunks that overlap
        "tests/test_ports.py": TESTS,
        "README.md": README,
        "Makefile": "demo:\n\thydra-rag search 'how does a sidecar pick its port'\n",
    })
    proc = run_cli("index", str(root))
    assert proc.returncode == 0, proc.stderr
    return root


def _files(root: Path, query: str, *extra: str) -> list[dict]:  # type: ignore[type-arg]
    proc = run_cli("search", query, "--path", str(root), "--files", "--json", "-k", "5", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["files"]


def test_the_implementation_comes_before_tests_and_the_page_that_repeats_the_question(
        project: Path) -> None:
    files = _files(project, "how does a sidecar pick its port")
    paths = [f["path"] for f in files]
    assert paths[0] == "src/sidecars/ports.py", paths
    assert paths.index("src/sidecars/ports.py") < paths.index("tests/test_ports.py")
    assert "README.md" not in paths[:1]
    best = files[0]["passages"][0]
    assert best["path"] == "src/sidecars/ports.py" and best["section"].startswith("PortPicker")
    # a file is one place: its passages never overlap
    for f in files:
        spans = sorted((p["line_start"], p["line_end"]) for p in f["passages"])
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
    # plain `--files`: the same files, one per line
    proc = run_cli("search", "how does a sidecar pick its port", "--path", str(project),
                   "--files", "-k", "5")
    assert proc.stdout.splitlines() == paths


def test_a_path_query_finds_its_file(project: Path) -> None:
    assert _files(project, "ports.py")[0]["path"] == "src/sidecars/ports.py"
    assert _files(project, "tests/test_ports.py")[0]["path"] == "tests/test_ports.py"


def test_tests_come_first_when_asked_for_or_globbed(project: Path) -> None:
    assert _files(project, "where are the tests for picking a sidecar port")[0]["path"] \
        == "tests/test_ports.py"
    assert [f["path"] for f in _files(project, "pick its port", "--glob", "tests/**")] \
        == ["tests/test_ports.py"]


def test_a_name_inside_a_question_brings_its_definition(project: Path) -> None:
    proc = run_cli("search", "what does pick_port raise when every port is taken", "--path",
                   str(project), "--json", "-k", "3")
    assert proc.returncode == 0, proc.stderr
    top = json.loads(proc.stdout)["results"][0]
    assert top["path"] == "src/sidecars/ports.py" and "name" in top["ranks"]
    assert top["signals"]["name"] > 0


def test_overlapping_chunks_never_take_two_places(project: Path) -> None:
    proc = run_cli("search", "step", "--path", str(project), "--json", "-k", "10")
    hits = [h for h in json.loads(proc.stdout)["results"] if h["path"] == "src/sidecars/steps.py"]
    spans = sorted((h["line_start"], h["line_end"]) for h in hits)
    assert len(spans) >= 2 and all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_explain_says_which_signal_moved_a_hit(project: Path) -> None:
    proc = run_cli("search", "how does a sidecar pick its port", "--path", str(project),
                   "--explain", "-k", "10")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "signals: aside:test ×0.30" in out
    assert "signals: aside:docs ×0.60" in out
    # every signal off: the test file is not put aside
    off = run_cli("search", "how does a sidecar pick its port", "--path", str(project),
                  "--explain", "-k", "10", env={"HYDRA_RAG_RANK_ASIDE": "false"})
    assert "aside:" not in off.stdout
