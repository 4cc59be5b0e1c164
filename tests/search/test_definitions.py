"""Code navigation through the real index, sidecar and LanceDB: definitions first in search,
`def`, `refs` and `outline`, the symbol table kept with the chunks, and an older index filled
in without embedding again."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import yaml

from conftest import run_cli, write_tree
from hydra_rag.search.definitions import Wanted, one_of, wanted
from hydra_rag.store.index_dir import Store
from hydra_rag.store.symbols import Entry

HELPER = '''"""Proxy helpers."""

import os


# Whether a URL goes around the proxy: the hosts in no_proxy do.
@functools.lru_cache
def should_bypass_proxies(url, no_proxy):
    """Return True when the URL's host is one the environment says to reach directly."""
    hosts = [h.strip() for h in (no_proxy or os.environ.get("NO_PROXY", "")).split(",")]
    host = url.split("://", 1)[-1].split("/", 1)[0]
    return any(host.endswith(h) for h in hosts if h)


def get_environ_proxies(url, no_proxy=None):
    if should_bypass_proxies(url, no_proxy):
        return {}
    return {"http": os.environ.get("HTTP_PROXY", "")}
'''

SESSION = "".join([
    '"""Sessions."""\n\n\nclass Session:\n    """A session keeps settings across requests."""\n\n',
    *(f"    def helper_{i}(self, value):\n        \"\"\"Helper {i} of the session.\"\"\"\n"
      f"        return value * {i}\n\n" for i in range(12)),
    "    def send(self, request, **kwargs):\n",
    "        \"\"\"Send a prepared request, through the proxy unless it is bypassed.\"\"\"\n",
    "        proxies = get_environ_proxies(request.url)\n",
    "        return self.adapter.send(request, proxies=proxies, **kwargs)\n",
])

TESTS = "".join(
    f"def test_bypass_{i}():\n    assert should_bypass_proxies('http://h{i}.local', 'local')\n\n\n"
    for i in range(8))


@pytest.fixture
def project(home: Path, tmp_path: Path) -> Path:
    root = write_tree(tmp_path / "proj", {
        "src/net/utils.py": HELPER,
        "src/net/sessions.py": SESSION,
        "tests/test_utils.py": TESTS,
        "docs/proxies.md": ("# Proxies\n\nshould_bypass_proxies decides which hosts skip the "
                            "proxy; set NO_PROXY to a list of host suffixes.\n"),
        "web/router.js": ("// Routes a path to its handler.\nexport function routePath(path) {\n"
                          "  return handlers[path];\n}\n"),
        "cmd/serve.go": ("package main\n\n// Server serves.\ntype Server struct{ port int }\n\n"
                         "// Start listens.\nfunc (s *Server) Start() error {\n\treturn nil\n}\n"),
        "src/lib.rs": ("/// Compiles a pattern.\npub fn compile_pattern(p: &str) -> usize {\n"
                       "    p.len()\n}\n"),
    })
    proc = run_cli("index", str(root))
    assert proc.returncode == 0, proc.stderr
    return root


def _search(root: Path, query: str, *extra: str) -> list[dict]:  # type: ignore[type-arg]
    proc = run_cli("search", query, "--path", str(root), "-k", "5", "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["results"]


@pytest.mark.parametrize(("query", "found"), [
    ("send_from_directory", Wanted("send_from_directory", "", False)),
    ("`Session.send`", Wanted("send", "Session", False)),
    ("Session::send()", Wanted("send", "Session", False)),
    ("where is should_bypass_proxies defined?", Wanted("should_bypass_proxies", "", True)),
    ("Where's the function parse_url declared", Wanted("parse_url", "", True)),
    ("definition of Flask.route", Wanted("route", "Flask", True)),
    ("find the definition of make_response", Wanted("make_response", "", True)),
    ("HTTPAdapter definition", Wanted("HTTPAdapter", "", True)),
    ("how are proxies bypassed", None),
    ("where is the config file", None),
    ("what does send do?", None),
    # C++ destructors and operators: the last part of the name
    ("logger::~logger", Wanted("~logger", "logger", False)),
    ("where is pool::operator== defined?", Wanted("operator==", "pool", True)),
    ("operator ==", Wanted("operator==", "", False)),
    ("Foo::operator()", Wanted("operator()", "Foo", False)),
    ("a->b", Wanted("b", "a", False)),
    ("~/notes", None),
])
def test_what_a_query_names(query: str, found: Wanted | None) -> None:
    assert wanted(query) == found


def test_definitions_come_first(project: Path) -> None:
    for query in ("should_bypass_proxies", "where is should_bypass_proxies defined?",
                  "should_bypass_proxies()"):
        top = _search(project, query)[0]
        assert top["path"] == "src/net/utils.py", (query, top)
        assert top["line_start"] <= 8 <= top["line_end"] and "definition" in top["ranks"]
    top = _search(project, "Session.send")[0]
    assert top["path"] == "src/net/sessions.py" and top["ranks"] == {"definition": 1}
    assert "def send(self, request" in top["text"]
    for query, path in (("routePath", "web/router.js"), ("Server.Start", "cmd/serve.go"),
                        ("compile_pattern", "src/lib.rs")):
        assert _search(project, query)[0]["path"] == path, query
    # A question in words is left as the search ranks it.
    assert not any("definition" in h["ranks"] for h in _search(project, "how are proxies bypassed"))
    off = _search(project, "should_bypass_proxies", "--prose-only")
    assert not any("definition" in h["ranks"] for h in off)


def test_def_refs_outline(project: Path) -> None:
    proc = run_cli("def", "Session.send", "--path", str(project))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("src/net/sessions.py:")
    assert "method Session.send  def send(self, request, **kwargs):" in proc.stdout
    proc = run_cli("def", "should_bypass_proxies", "--path", str(project), "--json")
    (row,) = json.loads(proc.stdout)["results"]
    assert (row["path"], row["kind"], row["line_start"], row["line"]) == \
        ("src/net/utils.py", "function", 6, 8)  # the comment and decorator above it count
    proc = run_cli("refs", "should_bypass_proxies", "--path", str(project))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "src/net/utils.py:16: if should_bypass_proxies(url, no_proxy):"
    assert len(lines) == 9 and all(ln.startswith("tests/test_utils.py:") for ln in lines[1:])
    assert proc.stderr == "9 uses of should_bypass_proxies\n"  # the total, as README says
    proc = run_cli("outline", str(project / "src/net/sessions.py"), "--json")
    doc = json.loads(proc.stdout)
    assert doc["language"] == "python"
    assert [(r["name"], r["depth"]) for r in doc["results"]][:2] == [("Session", 0),
                                                                     ("helper_0", 1)]
    proc = run_cli("outline", "src/net/utils.py", cwd=project)
    assert proc.stdout.splitlines()[0].split() == ["6-12", "function", "should_bypass_proxies"]
    for args, code, said in ((["def", "nowhere_defined"], 1, "defined nowhere"),
                             (["refs", "nowhere_used"], 1, "used nowhere"),
                             (["def", "two words"], 2, "is not a name"),
                             # a file that is not there: the same line and code as `get`'s
                             (["outline", "docs/missing.py"], 1, "docs/missing.py: no such file")):
        proc = run_cli(*args, cwd=project)
        assert proc.returncode == code and said in proc.stderr, (args, proc.stderr)


MARKUP = ('"""Markup."""\n\n\ndef escape(text):\n    """HTML-escape text."""\n'
          '    return text.replace("<", "&lt;")\n')
VIEW = ("import re\n\nfrom app import markup\nfrom app.markup import escape\n\n\n"
        "def render(title, pattern, foo, client):\n"
        "    a = escape(title)\n"  # 8: the project's own
        "    b = markup.escape(title)\n"  # 9: through its own module
        "    c = re.escape(pattern)\n"  # 10: another's escape
        "    d = foo.escape(title)\n"  # 11: some object's, not this function
        "    return client.session.send(a + b + c + d)\n")  # 12: a method, any object's
SESSION_SEND = "class Session:\n    def send(self, data):\n        return self.send_raw(data)\n"


def _entry(path: str, scope: str, kind: str, definition: bool) -> Entry:
    return Entry(path, "escape", kind, scope, 1, 1, 1, definition)


FUNCTION = [_entry("src/app/markup.py", "", "function", True)]
METHOD = [_entry("src/app/markup.py", "Markup", "method", True)]


@pytest.mark.parametrize(("through", "defs", "counts"), [
    ("", FUNCTION, True),  # a bare use
    ("markup", FUNCTION, True),  # through its own module
    ("app", FUNCTION, True),  # through its package
    ("app.markup", FUNCTION, True),
    ("re", FUNCTION, False),  # another module's escape
    ("foo", FUNCTION, False),  # an object's: not a function of a module
    ("self", FUNCTION, False),
    ("crate", FUNCTION, True),  # Rust's path to the crate's own module
    ("foo", METHOD, True),  # a method: any object may hold one
    ("re", [], True),  # defined nowhere here: every use of the name
])
def test_a_use_is_one_of_the_projects_own(through: str, defs: list[Entry], counts: bool) -> None:
    assert one_of(_entry("src/view.py", through, "call", False), defs) is counts


def test_refs_counts_the_projects_own_name(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "app", {"app/markup.py": MARKUP, "app/view.py": VIEW,
                                         "app/session.py": SESSION_SEND})
    assert run_cli("index", str(root)).returncode == 0
    proc = run_cli("refs", "escape", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ("app/view.py:8: a = escape(title)\n"
                           "app/view.py:9: b = markup.escape(title)\n"), proc.stdout
    assert proc.stderr == ("2 uses of escape (2 through other modules not counted: "
                           "foo.escape, re.escape)\n"), proc.stderr
    doc = json.loads(run_cli("refs", "escape", "--json", cwd=root).stdout)
    assert doc["total"] == 2 and doc["others"] == {"total": 2, "through": ["foo", "re"]}
    assert [(r["line"], r["scope"], r["qualified"]) for r in doc["results"]] == [
        (8, "", "escape"), (9, "markup", "markup.escape")]
    # A method is reached through any object: every use counts.
    doc = json.loads(run_cli("refs", "send", "--json", cwd=root).stdout)
    assert [r["line"] for r in doc["results"]] == [12] and doc["others"]["total"] == 0
    # A name the folder does not define is another's: every use of it counts.
    doc = json.loads(run_cli("refs", "replace", "--json", cwd=root).stdout)
    assert [(r["path"], r["line"]) for r in doc["results"]] == [("app/markup.py", 6)]


def test_outline_of_markdown_and_a_document_is_its_headings(home: Path, tmp_path: Path) -> None:
    from docmaker import handbook_docx

    root = write_tree(tmp_path / "docs", {
        "guide.md": "# Guide\n\nIntro.\n\n## Install\n\nRun it.\n\n## Use\n\nGo.\n",
        "notes.md": "Only text, no heading.\n",
    })
    handbook_docx(root / "handbook.docx")
    assert run_cli("index", str(root)).returncode == 0
    proc = run_cli("outline", "guide.md", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (" 1-11  heading Guide\n"
                           " 5-7     heading Install\n"
                           " 9-11    heading Use\n"), proc.stdout
    # A Word document: the headings of the text the index read, each with its page (the lines
    # are those `get handbook.docx:START-END` shows).
    doc = json.loads(run_cli("outline", "handbook.docx", "--json", cwd=root).stdout)
    assert (doc["language"], doc["markup"]) == ("", "md")
    assert [(r["name"], r["kind"], r["anchor"]) for r in doc["results"]] == [
        ("Staff Handbook", "heading", "p. 1"), ("Onboarding", "heading", "p. 1"),
        ("Travel Policy", "heading", "p. 2"), ("Security", "heading", "p. 3")]
    first = doc["results"][1]
    proc = run_cli("get", f"handbook.docx:{first['line_start']}-{first['line_start']}",
                   cwd=root)
    assert "# Onboarding" in proc.stdout
    proc = run_cli("outline", "notes.md", cwd=root)
    assert proc.returncode == 0 and proc.stderr == "notes.md: no headings found\n"


def _symbols(root: Path, rel: str) -> set[str]:
    with sqlite3.connect(Store(root).files_path) as con:
        return {n for (n,) in con.execute("SELECT name FROM symbols WHERE rel = ? AND def = 1",
                                          (rel,))}


def test_the_symbol_table_follows_the_files(project: Path) -> None:
    assert _symbols(project, "src/net/utils.py") == {"should_bypass_proxies",
                                                     "get_environ_proxies"}
    (project / "src/net/utils.py").write_text(HELPER.replace("should_bypass_proxies",
                                                             "skips_proxy"))
    (project / "src/lib.rs").unlink()
    proc = run_cli("index", str(project))
    assert proc.returncode == 0, proc.stderr
    assert _symbols(project, "src/net/utils.py") == {"skips_proxy", "get_environ_proxies"}
    assert _symbols(project, "src/lib.rs") == set()
    assert run_cli("def", "skips_proxy", cwd=project).returncode == 0
    assert run_cli("def", "compile_pattern", cwd=project).returncode == 1
    # An index made before the symbol table: filled in by the next run, nothing embedded.
    meta_path = project / ".hydra-index/meta.yaml"
    meta = yaml.safe_load(meta_path.read_text())
    meta.pop("symbols")
    meta_path.write_text(yaml.safe_dump(meta))
    with sqlite3.connect(Store(project).files_path) as con:
        con.execute("DROP TABLE symbols")
    assert run_cli("def", "skips_proxy", cwd=project).returncode == 1
    proc = run_cli("index", str(project), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["chunks_embedded"] == 0
    assert run_cli("def", "skips_proxy", cwd=project).returncode == 0


def test_definitions_across_folders(project: Path, tmp_path: Path) -> None:
    other = write_tree(tmp_path / "other", {"lib/proxy.py": (
        "def should_bypass_proxies(url):\n    return False\n")})
    assert run_cli("index", str(other)).returncode == 0
    proc = run_cli("def", "should_bypass_proxies", "--path", str(project), "--path", str(other))
    assert proc.returncode == 0, proc.stderr
    assert sorted(ln.split(":", 2)[1] for ln in proc.stdout.splitlines()) == \
        ["lib/proxy.py", "src/net/utils.py"]
    proc = run_cli("search", "should_bypass_proxies", "--path", str(project), "--path",
                   str(other), "-k", "3", "--json")
    top = json.loads(proc.stdout)["results"][:2]
    assert {h["path"] for h in top} == {"lib/proxy.py", "src/net/utils.py"}
    assert all("definition" in h["ranks"] for h in top)


def test_search_kept_to_some_files(project: Path) -> None:
    # The prose about proxies ranks below the code for this query; kept to Markdown it is first.
    hits = _search(project, "which hosts skip the proxy", "--lang", "markdown")
    assert [h["path"] for h in hits] == ["docs/proxies.md"]
    hits = _search(project, "should_bypass_proxies", "--glob", "tests/**")
    assert hits and all(h["path"] == "tests/test_utils.py" for h in hits)
    hits = _search(project, "should_bypass_proxies", "--glob", "!tests/", "--glob", "!docs/")
    assert hits[0]["path"] == "src/net/utils.py" and "definition" in hits[0]["ranks"]
    assert all(not h["path"].startswith(("tests/", "docs/")) for h in hits)
    proc = run_cli("search", "proxy", "--path", str(project), "--files", "-k", "3")
    files = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(files) == 3 == len(set(files))
    assert "src/net/utils.py" in files
    proc = run_cli("search", "proxy", "--path", str(project), "--lang", "klingon")
    assert proc.returncode == 2 and "unknown language 'klingon'" in proc.stderr


def test_a_dotted_string_that_names_no_class_is_an_exact_string(project: Path) -> None:
    from hydra_rag.search.definitions import select
    from hydra_rag.store.symbols import Entry

    send = Entry("src/net/sessions.py", "send", "method", "Session", 40, 44, 40, True)
    helper = Entry("src/net/utils.py", "send", "function", "", 8, 12, 8, True)
    assert select(Wanted("send", "Session", False), [helper, send]) == [send]
    assert select(Wanted("send", "net.Session", False), [helper, send]) == []
    assert select(Wanted("send", "utils", False), [helper, send]) == []
    assert select(Wanted("send", "utils", True), [helper, send], strict=False) == [helper]
    # In the index: a module path is looked for where it is written, not as a definition.
    hits = _search(project, "net.utils.should_bypass_proxies")
    assert not any("definition" in h["ranks"] for h in hits)
    proc = run_cli("def", "utils.should_bypass_proxies", cwd=project)
    assert proc.returncode == 0 and proc.stdout.startswith("src/net/utils.py:6-12")


LEVEL_H = """#pragma once
#include <string>

namespace demo {
namespace level {
enum level_enum { trace, info, warn, off };

// Reads a level name written in a configuration file.
DEMO_API level_enum from_str(const std::string &name) DEMO_NOEXCEPT;
} // namespace level
} // namespace demo
"""

LEVEL_INL = """#pragma once
#include "level.h"

namespace demo {
namespace level {
DEMO_INLINE level_enum from_str(const std::string &name) DEMO_NOEXCEPT
{
    if (name == "trace")
        return trace;
    if (name == "warn" || name == "warning")
        return warn;
    // an unknown name turns logging off rather than failing
    return off;
}
} // namespace level
} // namespace demo
"""


def test_a_c_function_body_before_its_prototype(home: Path, tmp_path: Path) -> None:
    from hydra_rag.search.definitions import prototype, select

    body = Entry("include/level-inl.h", "from_str", "method", "demo.level", 6, 14, 6, True)
    proto = Entry("include/level.h", "from_str", "method", "demo.level", 8, 9, 9, True)
    py = Entry("src/level.py", "from_str", "function", "", 3, 3, 3, True)
    assert prototype(proto) and not prototype(body) and not prototype(py)
    assert select(Wanted("from_str", "", False), [proto, body]) == [body, proto]
    # Through the real index: the question's name leads to the body, not the header's line.
    root = write_tree(tmp_path / "cpp", {"include/level.h": LEVEL_H,
                                         "include/level-inl.h": LEVEL_INL})
    assert run_cli("index", str(root)).returncode == 0
    hits = _search(root, "What does `level::from_str` return for a name it does not know?")
    named = [h for h in hits if "name" in h["ranks"]]
    assert [h["path"] for h in named] == ["include/level-inl.h"]
    proc = run_cli("def", "from_str", "--json", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert [d["path"] for d in json.loads(proc.stdout)["results"]][:2] \
        == ["include/level-inl.h", "include/level.h"]


def test_the_values_made_from_a_class() -> None:
    """symbols.made_from: a module value made by calling (Python) or `new` (JavaScript) a
    class defined on the lines asked about; not a function's call, nor another class's."""
    from hydra_rag.read.symbols import parse
    from hydra_rag.store import symbols as symtab

    con = sqlite3.connect(":memory:")
    symtab.make(con)
    py = ("class Limits:\n    pass\n\n\nclass Timeout:\n    pass\n\n\ndef build():\n    return 1\n\n\n"
          "DEFAULT_LIMITS = Limits(max_connections=100)\nDEFAULT_TIMEOUT = Timeout(5.0)\n"
          "BUILT = build()\n")
    js = "import { Pool } from './pool.js';\nexport const pool = new Pool(4);\n"
    pool = "export class Pool {\n  constructor(n) { this.n = n; }\n}\n"
    symtab.replace(con, {"cfg.py": parse(py, "python"), "use.js": parse(js, "javascript"),
                         "pool.js": parse(pool, "javascript")})
    kinds = ("constant", "variable", "macro")
    got = symtab.made_from(con, "cfg.py", 1, 2, kinds)
    assert [(e.path, e.name, e.name_line) for e in got] == [("cfg.py", "DEFAULT_LIMITS", 13)]
    assert [e.name for e in symtab.made_from(con, "cfg.py", 1, 6, kinds)] == [
        "DEFAULT_LIMITS", "DEFAULT_TIMEOUT"]
    assert symtab.made_from(con, "cfg.py", 9, 10, kinds) == []  # build() is no class
    assert [(e.path, e.name) for e in symtab.made_from(con, "pool.js", 1, 3, kinds)] == [
        ("use.js", "pool")]
    # Two classes of one name: each lends only the values of its own file.
    mine = "class Pool:\n    pass\n\n\nSMALL = Pool(2)\n"
    symtab.replace(con, {"other.py": parse(mine, "python")})
    assert [(e.path, e.name) for e in symtab.made_from(con, "pool.js", 1, 3, kinds)] == []
    assert [(e.path, e.name) for e in symtab.made_from(con, "other.py", 1, 2, kinds)] == [
        ("other.py", "SMALL")]
