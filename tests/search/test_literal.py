"""Exact strings: the literal list finds what the query holds verbatim, as grep would, through
the real index, sidecar and LanceDB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli, write_tree
from hydra_rag.search.retrieve import TERM_MAX, literal_phrase, literal_terms, literal_whole


@pytest.mark.parametrize(("query", "phrase"), [
    ("X-Forwarded-For", "X-Forwarded-For"),
    ('  click.core.Context ', "click.core.Context"),
    ('why "no secret key was set" here', "no secret key was set"),
    ("“smart quotes here” too", "smart quotes here"),
    ("abc", ""),  # too short to tell anything
    ('say "ab" please', 'say "ab" please'),  # a quoted pair too short is no phrase
])
def test_literal_phrase(query: str, phrase: str) -> None:
    assert literal_phrase(query) == phrase


def test_literal_whole() -> None:
    assert literal_whole('raise ValueError("Cannot use None as a query value")') == \
        'raise ValueError("Cannot use None as a query value")'
    assert literal_whole('"no secret key was set"') == ""  # the quotes are all of it
    assert literal_whole("X-Forwarded-For") == ""  # no quoted phrase: the literal is the query


@pytest.fixture
def strings(home: Path, tmp_path: Path) -> Path:
    # Many files about headers and secrets, one holding each exact string; a large one-line
    # data file whose tokens look alike.
    files: dict[str, str | bytes] = {
        f"src/mod{i}.py": (f'"""Request headers, part {i}."""\n\n'
                           f"def header_{i}(request):\n"
                           f"    return request.headers.get('X-Header-{i}')\n")
        for i in range(TERM_MAX + 4)  # request.headers.get: too common to be decisive
    }
    files["src/helpers.py"] = (
        '"""Helpers."""\n\n'
        "def trusted_proxy(request):\n"
        "    return request.headers.get('X-Unique-Header-zqxjkv')\n\n\n"
        "def secret(app):\n"
        "    if not app.secret_key:\n"
        '        raise RuntimeError("The session is unavailable because no secret key was set.")\n'
    )
    # a test that checks the message, in more of the query's words than the raise has
    files["tests/test_session.py"] = (
        "def test_session_unavailable_raises_runtime_error(app):\n"
        "    # raise RuntimeError when the session is unavailable: no secret key was set\n"
        "    with pytest.raises(RuntimeError) as raised:\n"
        "        secret(app)\n"
        '    assert str(raised.value) == "The session is unavailable because no secret key was '
        'set."\n')
    files["data.json"] = json.dumps({f"X-Header-{i}": f"value-{i}" for i in range(800)})
    root = write_tree(tmp_path / "strings", files)
    proc = run_cli("index", str(root))
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.mark.parametrize(("query", "terms"), [
    ("what calls get_current_context", ["get_current_context"]),
    ("where is flask.helpers.send_file defined?", ["flask.helpers.send_file"]),
    ("how does --no-color work", ["--no-color"]),
    ("explain the X-Forwarded-For header", ["X-Forwarded-For"]),
    ("is getCurrentContext() used, or `Context.invoke`", ["Context.invoke", "getCurrentContext"]),
    ("what is 0x7f in foo::bar", ["0x7f", "foo::bar"]),
    ("get_current_context", []),  # the whole query: the literal list already looks for it
    ("what is the capital of Mongolia?", []),
    ("e.g. the IL-6 and TNF-alpha levels", []),  # one hyphen: a word, not a name
    ("a_b1 c_d2 e_f3 g_h4 i_j5", ["a_b1", "c_d2", "e_f3"]),  # three at most
])
def test_literal_terms(query: str, terms: list[str]) -> None:
    assert literal_terms(query) == terms


def _paths(proc_stdout: str) -> list[str]:
    return [r["path"] for r in json.loads(proc_stdout)["results"]]


def test_exact_string_comes_first(strings: Path) -> None:
    proc = run_cli("search", "X-Unique-Header-zqxjkv", "--path", str(strings), "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["results"]
    assert got[0]["path"] == "src/helpers.py"
    assert "literal" in got[0]["ranks"]
    assert all("literal" not in r["ranks"] for r in got[1:])


def test_quoted_phrase_and_copied_message(strings: Path) -> None:
    for q in ('"no secret key was set"', "no secret key was set",
              "The session is unavailable because no secret key was set."):
        proc = run_cli("search", q, "--path", str(strings), "--json", "-k", "3")
        assert proc.returncode == 0, proc.stderr
        assert _paths(proc.stdout)[0] == "src/helpers.py", q


def test_the_whole_line_before_its_quoted_message(strings: Path) -> None:
    """A line copied with its quoted message: the chunk holding the whole line (the raise)
    comes before one holding only the message (the test that checks it)."""
    q = 'raise RuntimeError("The session is unavailable because no secret key was set.")'
    proc = run_cli("search", q, "--path", str(strings), "--json", "-k", "3")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["results"]
    assert [r["path"] for r in got[:2]] == ["src/helpers.py", "tests/test_session.py"]
    assert "literal:whole" in got[0]["ranks"] and "literal:whole" not in got[1]["ranks"]
    assert "literal" in got[1]["ranks"]


def test_modes_and_setting_leave_it_out(strings: Path) -> None:
    proc = run_cli("search", "X-Unique-Header-zqxjkv", "--path", str(strings), "--json",
                   "--mode", "vector")
    assert all("literal" not in r["ranks"] for r in json.loads(proc.stdout)["results"])
    proc = run_cli("search", "X-Unique-Header-zqxjkv", "--path", str(strings), "--json",
                   env={"HYDRA_RAG_LITERAL": "false"})
    assert all("literal" not in r["ranks"] for r in json.loads(proc.stdout)["results"])


def test_rare_name_in_a_question(strings: Path) -> None:
    # The name stands in one chunk: that chunk comes first, through a list of its own.
    for q in ("what calls trusted_proxy?", "where is `X-Unique-Header-zqxjkv` read"):
        proc = run_cli("search", q, "--path", str(strings), "--json", "-k", "5")
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout)["results"]
        assert got[0]["path"] == "src/helpers.py", q
        assert any(name.startswith("term:") for name in got[0]["ranks"]), got[0]["ranks"]
    # In more than TERM_MAX chunks a name tells nothing: no list for it.
    proc = run_cli("search", "how is request.headers.get used", "--path", str(strings), "--json")
    assert proc.returncode == 0, proc.stderr
    assert all(not name.startswith("term:")
               for r in json.loads(proc.stdout)["results"] for name in r["ranks"])
    proc = run_cli("search", "what calls trusted_proxy?", "--path", str(strings), "--json",
                   env={"HYDRA_RAG_LITERAL": "false"})
    assert all(not name.startswith("term:")
               for r in json.loads(proc.stdout)["results"] for name in r["ranks"])
