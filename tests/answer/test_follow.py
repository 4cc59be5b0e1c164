"""The values a passage leans on (hydra_rag.answer.follow), pure: a dict stands in for the
symbol table and the files' lines."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra_rag.answer.follow import FOLLOW_MAX, follow, interleave, used_names
from hydra_rag.answer.prompt import Source
from hydra_rag.store.symbols import Entry

FILES = {
    "pkg/limits.py": ["MAX_URL = 65536", "TIMEOUT = 5.0", "RETRIES = 3", "AA = 1", "BB = 2",
                      "CC = 3"],
    "pkg/url.py": ["import x", "DEFAULT_PORT = 80"],
    "tests/conftest.py": ["TIMEOUT = 0.1"],
}


def entry(path: str, name: str, line: int, end: int | None = None) -> Entry:
    return Entry(path, name, "constant", "", line, end or line, line, True)


DEFS = [entry("pkg/limits.py", "MAX_URL", 1), entry("pkg/limits.py", "TIMEOUT", 2),
        entry("tests/conftest.py", "TIMEOUT", 1), entry("pkg/limits.py", "RETRIES", 3),
        entry("pkg/url.py", "DEFAULT_PORT", 2)]
DEFS += [entry(f"pkg/m{i}.py", "COMMON", 1) for i in range(5)]  # defined everywhere
DEFS += [entry("pkg/limits.py", n, i) for i, n in ((4, "AA"), (5, "BB"), (6, "CC"))]


def lookup(store: str, names: Sequence[str]) -> list[Entry]:
    return [e for e in DEFS if e.name in names]


def lines(store: str, path: str, first: int, last: int) -> str | None:
    return "\n".join(FILES[path][first - 1:last])


def src(n: int, path: str, start: int, text: str) -> Source:
    return Source(n, "/corpus", path, start, start + len(text.splitlines()) - 1, text)


def test_names_of_the_best_matching_lines_come_first() -> None:
    text = "x = TIMEOUT\nif len(url) > MAX_URL:\n    raise TooLong(url)"
    assert used_names(text, "the size of a url")[:3] == ["if", "len", "url"]
    names = used_names(text, "the size of a url")
    assert names.index("MAX_URL") < names.index("TIMEOUT")


def test_a_passage_brings_the_definitions_of_the_values_it_names() -> None:
    sent = [src(1, "pkg/url.py", 40, "def check(url):\n    if len(url) > MAX_URL:\n        fail()"),
            src(2, "pkg/other.py", 1, "x = COMMON + TIMEOUT")]
    extra = follow(sent, "longest url", lookup, lines)
    got = [(i, s.path, s.line_start, s.text) for i, s in extra]
    # COMMON is defined in too many places to tell; the test's TIMEOUT is not the code's.
    assert got == [(0, "pkg/limits.py", 1, "MAX_URL = 65536"),
                   (1, "pkg/limits.py", 2, "TIMEOUT = 5.0")]
    out = interleave(sent, extra)
    assert [(s.n, s.path) for s in out] == [(1, "pkg/url.py"), (2, "pkg/limits.py"),
                                            (3, "pkg/other.py"), (4, "pkg/limits.py")]


def test_what_is_shown_already_is_not_sent_twice_and_few_are_followed() -> None:
    shown = src(2, "pkg/limits.py", 1, "MAX_URL = 65536")
    sent = [src(1, "pkg/a.py", 1, "f(MAX_URL, MAX_URL)"), shown]
    assert follow(sent, "url", lookup, lines) == []
    many = [src(1, "pkg/a.py", 1, "g(RETRIES, AA, BB, CC, DEFAULT_PORT)")]
    assert len(follow(many, "retries", lookup, lines)) == FOLLOW_MAX
    # A long definition whose first lines a passage shows: those are what it would send.
    table = ["TABLE = {", "    'a': 1,", "    'b': 2,", "    'c': 3,", "}"]
    head = src(2, "pkg/table.py", 1, "\n".join(table[:3]))
    assert follow([src(1, "pkg/a.py", 1, "h(TABLE)"), head], "table",
                  lambda _, names: [entry("pkg/table.py", "TABLE", 1, 5)],
                  lambda _, p, a, b: "\n".join(table[a - 1:b])) == []
    # The definition in the passage's own file wins over one elsewhere.
    own = [src(1, "pkg/url.py", 10, "connect(DEFAULT_PORT)")]
    assert [s.line_start for _, s in follow(own, "port", lookup, lines)] == [2]


def test_a_definition_without_a_value_is_not_followed() -> None:
    FILES["pkg/api.h"] = ["#define PKG_INLINE inline", "#define PKG_SIZE 64"]
    DEFS.extend([entry("pkg/api.h", "PKG_INLINE", 1), entry("pkg/api.h", "PKG_SIZE", 2)])
    sent = [src(1, "pkg/q.h", 1, "PKG_INLINE int size() { return PKG_SIZE; }")]
    assert [s.text for _, s in follow(sent, "size", lookup, lines)] == ["#define PKG_SIZE 64"]


def test_a_definition_in_another_project_of_the_folder_is_not_followed(tmp_path: Path) -> None:
    # A folder holding two projects side by side: `request` in one's code is a parameter, not
    # the other project's global of that name.
    FILES["web/globals.py"] = ['request = LocalProxy("request")']
    DEFS.append(entry("web/globals.py", "request", 1))
    sent = [src(1, "client/adapters.py", 5, "def send(self, request):\n    return request")]
    assert follow(sent, "how is a request sent", lookup, lines) == []
    same = [src(1, "web/views.py", 5, "def index():\n    return request.args")]
    assert [s.path for _, s in follow(same, "request", lookup, lines)] == ["web/globals.py"]
    # one project (a project file at the folder's top): include/ and src/ are one code base
    FILES["include/x/config.h"] = ["#define X_POOL 8"]
    DEFS.append(entry("include/x/config.h", "X_POOL", 1))
    code = "int n = X_POOL;"
    assert follow([src(1, "src/x.cpp", 3, code)], "pool", lookup, lines) == []  # /corpus: none
    (tmp_path / "CMakeLists.txt").write_text("project(x)\n")
    one = [Source(1, str(tmp_path), "src/x.cpp", 3, 3, code)]
    assert [s.path for _, s in follow(one, "pool", lookup, lines)] == ["include/x/config.h"]
    # a file at the top (settings.py) serves every folder under it
    FILES["settings.py"] = ["LIMIT = 5"]
    DEFS.append(entry("settings.py", "LIMIT", 1))
    top = [src(1, "app/views.py", 1, "if n > LIMIT:\n    stop()")]
    assert [s.path for _, s in follow(top, "limit", lookup, lines)] == ["settings.py"]


def test_a_class_shown_brings_the_values_made_from_it() -> None:
    """`class Limits:` sent; `DEFAULT_LIMITS = Limits(…)` further down its file answers
    "how many … by default", and no word of the question names it."""
    files = {"pkg/config.py": ["class Limits:", "    def __init__(self, most=None):",
                               "        self.most = most", "", "DEFAULT_LIMITS = Limits(most=20)",
                               "NO_LIMITS = Limits()", "STRICT = Limits(most=1)"],
             "tests/test_config.py": ["LOOSE = Limits(most=1000)"]}
    values = [entry("pkg/config.py", "DEFAULT_LIMITS", 5), entry("pkg/config.py", "NO_LIMITS", 6),
              entry("pkg/config.py", "STRICT", 7), entry("tests/test_config.py", "LOOSE", 1)]
    asked: list[tuple[str, int, int]] = []

    def made(store: str, path: str, first: int, last: int) -> list[Entry]:
        asked.append((path, first, last))
        return values if path == "pkg/config.py" and first <= 1 <= last else []

    def file_lines(store: str, path: str, first: int, last: int) -> str | None:
        return "\n".join(files[path][first - 1:last])

    sent = [src(1, "pkg/config.py", 1, "\n".join(files["pkg/config.py"][:3])),
            src(2, "pkg/client.py", 10, "def send(self):\n    pass")]
    extra = follow(sent, "how many connections by default", lambda s, n: [], file_lines,
                   made=made)
    # A value must hold a value (NO_LIMITS's call has none); tests' values are not the code's;
    # two at most for a passage.
    assert [(i, s.path, s.line_start, s.text) for i, s in extra] == [
        (0, "pkg/config.py", 5, "DEFAULT_LIMITS = Limits(most=20)"),
        (0, "pkg/config.py", 7, "STRICT = Limits(most=1)")]
    assert asked == [("pkg/config.py", 1, 3), ("pkg/client.py", 10, 11)]
    # Without `made`, as before.
    assert follow(sent, "how many connections by default", lambda s, n: [], file_lines) == []


def test_the_best_passage_brings_a_short_helper_its_best_line_calls() -> None:
    """`content_type = _guess_content_type(filename)` answers nothing; the helper's body
    does. One helper, whole, short, from the best chunk's windows only."""
    files = {"pkg/multipart.py": [
        "def _guess_content_type(filename):",
        '    """Guess the content type from the file name."""',
        "    if filename:",
        '        return mimetypes.guess_type(filename)[0] or "application/octet-stream"',
        "    return None"] + [f"    # {i}" for i in range(20)] + [
        "def _long_helper(filename):"] + [f"    step({i})" for i in range(20)]}
    fns = [Entry("pkg/multipart.py", "_guess_content_type", "function", "", 1, 5, 1, True),
           Entry("pkg/multipart.py", "_long_helper", "function", "", 26, 46, 26, True)]

    def calls(store: str, names: Sequence[str]) -> list[Entry]:
        return [e for e in fns if e.name in names]

    def file_lines(store: str, path: str, first: int, last: int) -> str | None:
        return "\n".join(files[path][first - 1:last])

    best = src(1, "pkg/multipart.py", 140, "if content_type is None:\n"
               "    content_type = _long_helper(filename) or _guess_content_type(filename)\n"
               "headers = {}")
    other = src(2, "pkg/other.py", 10, "guess = _guess_content_type(filename)  # content type")
    q = "what content type is a file given when it cannot be guessed"
    extra = follow([best, other], q, lambda s, n: [], file_lines, calls=calls)
    assert [(i, s.line_start, s.line_end) for i, s in extra] == [(0, 1, 5)]
    assert "application/octet-stream" in extra[0][1].text
    # A later passage lends none; nor does a line that is not among the best.
    first = src(1, "pkg/other.py", 1, "CONTENT_TYPES = {}  # content type of a file")
    assert follow([first, best], q, lambda s, n: [], file_lines, calls=calls) == []
    plain = src(1, "pkg/multipart.py", 140, "x = _guess_content_type(a)\ncontent type file guessed")
    assert follow([plain], q, lambda s, n: [], file_lines, calls=calls) == []
    # A helper some of whose lines a passage shows already is not sent again.
    part = src(3, "pkg/multipart.py", 4, "\n".join(files["pkg/multipart.py"][3:5]))
    assert follow([best, other, part], q, lambda s, n: [], file_lines, calls=calls) == []
