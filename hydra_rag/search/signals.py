"""Ranking signals for code: what kind of question it is, what part a file plays, and how the
question's words meet the file's path. Pure functions, no I/O; each signal has a setting
(`rank_*`) and shows in `search --explain`, and bench/code_search.py measures each alone.

A fused score (hydra_rag.search.fuse) says how well a chunk's text matches; these say how
likely its file is the one a question is about:

- `kind_of`: a name (`Session.send`), a path (`src/auth.py`), a question ("how does the client
  retry?"), plain words ("code that parses the charset", or an error message as copied) or a
  phrase (quoted, or with code's punctuation). A question is not answered by a page that
  merely repeats it, so its literal list weighs QUESTION_LITERAL; plain words may be an error
  message, whose verbatim copy is what was asked for.
- `role`: implementation, test, example, benchmark, vendored copy, documentation or build and
  configuration. For a question about code, tests, examples, benchmarks and vendored copies
  weigh ASIDE, and documentation and build files weigh DOCS when the folder holds code: the
  implementation first, unless the question asks for them (`asks`).
- `declared` and `body_of`: a declaration file (a C or C++ header, a Python stub, a
  TypeScript `.d.ts`) and the files that hold its bodies (`logger.h`: `logger.cpp`,
  `logger-inl.h`). A header says what exists, with its doc comments, and so matches a
  question's words better than the code that does it: a file search puts the implementation
  just before its header (hydra_rag.search.files).
- `path_share`: the share of the question's words that its file's and folders' names hold
  (`_transports/default.py` for "default transport"): PATH_WEIGHT times it is added; a path
  query (`auth.py`, `src/auth/`) puts the files it names first (`named_file`: PATH_NAMED).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import PurePosixPath

from hydra_rag.read.grammars import SUFFIXES
from hydra_rag.search.definitions import wanted
from hydra_rag.search.evidence import STOPWORDS, _stem, query_terms

# Measured on bench/code_search.py (six projects, six languages; BENCHMARKS.md): round values,
# each the best of a coarse few on every language at once, not tuned per set.
ASIDE = 0.3  # tests, examples, benchmarks, vendored code, for a question about code
DOCS = 0.6  # documentation in a folder of code, for a question that does not ask for it
PATH_WEIGHT = 0.2  # times the share of the question's words in the path
PATH_NAMED = 1.0  # added to the chunks of a file a path query names: before every other file
QUESTION_LITERAL = 0.25  # the literal list's weight for a question in words (else 1.0)

KINDS = ("name", "path", "question", "words", "phrase")
_QUESTION = frozenset("""how where what which why when who whose does do did is are can could
should would will find show explain list describe""".split())  # noqa: SIM905
_PATHLIKE = re.compile(r"^[\w.\-]*[/\\][\w.\-/\\]*$|^[\w\-]+\.[A-Za-z]{1,5}$")
# Suffixes that make a single word a file's name (`tokens.py`, `README.md`), not a dotted name
_FILES = frozenset([*SUFFIXES, ".md", ".rst", ".txt", ".json", ".yaml", ".yml", ".toml",
                    ".html", ".css", ".cfg", ".ini", ".xml", ".sql", ".kt", ".cs", ".php"])
_SPLIT = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_WORD = re.compile(r"[^\W_]+")

# What part a file plays, by its path: the first role whose pattern matches.
_ROLES = (
    ("vendor", re.compile(r"(^|/)(vendor|vendored|third[_-]party|node_modules|external|"
                          r"extern|deps)(/|$)", re.I)),
    ("test", re.compile(r"(^|/)(tests?|testing|testdata|test[_-]?suites?|__tests__|__mocks__|"
                        r"spec|specs|fixtures?|mocks?)(/|$)|(^|/)(test_[^/]*|conftest\.py)$|"
                        r"[_.-](test|tests|spec)\.[A-Za-z0-9]+$", re.I)),
    ("example", re.compile(r"(^|/)(examples?|samples?|demos?|tutorials?)(/|$)|"
                           r"(^|/)(example|sample|demo)[_.-][^/]*$", re.I)),
    ("bench", re.compile(r"(^|/)(bench|benches|benchmarks?)(/|$)|(^|/)bench(mark)?_[^/]*$|"
                         r"_bench(mark)?\.[A-Za-z0-9]+$", re.I)),
    ("docs", re.compile(r"(^|/)(docs?|documentation|site|man)(/|$)", re.I)),
    # How it is built and configured, not how it works: a Makefile that quotes a question
    # is not its answer.
    ("config", re.compile(r"(^|/)(\.github|\.circleci|\.gitlab)(/|$)|(^|/)(GNUmakefile|"
                          r"[Mm]akefile|CMakeLists\.txt|Dockerfile[^/]*|docker-compose[^/]*|"
                          r"Containerfile|Justfile|Rakefile|meson\.build)$|"
                          r"\.(mk|cmake|ya?ml|toml|json|ini|cfg|conf|lock|bazel|bzl)$")),
)
# Words of a question that ask for a role: then files of that role are not put aside.
_ASKS = {role: frozenset(words.split()) for role, words in {
    "test": "test tests testing tested unittest unittests spec specs fixture fixtures mock mocks "
            "coverage",
    "example": "example examples sample samples demo demos tutorial usage",
    "bench": "bench benchmark benchmarks benches perf",
    "vendor": "vendor vendored third-party thirdparty",
    "docs": "doc docs documentation documented readme guide manual changelog license "
            "contributing faq install installation",
    "config": "build builds make makefile cmake docker dockerfile container ci workflow "
              "config configuration configure settings setting deploy deployment install "
              "installation package packaging dependency dependencies",
}.items()}


@dataclass(frozen=True)
class Question:
    """What a query is, for ranking: its kind, the roles it asks for, its content words."""

    kind: str
    asks: frozenset[str]
    terms: tuple[str, ...]
    text: str = ""


def kind_of(query: str) -> Question:
    """The kind of a query (KINDS), the roles it asks for by name, and its content stems."""
    q = query.strip()
    words = [w.lower() for w in _WORD.findall(q)]
    asks = frozenset(role for role, names in _ASKS.items() if names & set(words))
    terms = tuple(query_terms(q))
    if " " not in q and _PATHLIKE.match(q) and ("/" in q or "\\" in q
                                                or PurePosixPath(q).suffix.lower() in _FILES):
        kind = "path"
    elif wanted(q) is not None:
        kind = "name"
    elif _asked(q):
        kind = "question"
    elif _plain(q):
        kind = "words"
    else:
        kind = "phrase"
    return Question(kind, asks, terms, q)


def _asked(q: str) -> bool:
    """A question: three words or more, not quoted, a question word first or a question mark
    last."""
    tokens = q.split()
    if len(tokens) < 3 or '"' in q or "\u201c" in q:
        return False
    return tokens[0].lower().strip("`'") in _QUESTION or q.endswith("?")


def _plain(q: str) -> bool:
    """Plain words ("code that parses the charset"): three or more, most of them lower case,
    no punctuation of code. May be an error message as copied, too."""
    tokens = q.split()
    return len(tokens) >= 3 and all(re.fullmatch(r"[A-Za-z][A-Za-z'\-]*[,.:]?", t)
                                    for t in tokens) and any(t.lower() in STOPWORDS for t in tokens)


@cache
def role(path: str, kind: str = "code") -> str:
    """The part a file plays: vendor, test, example, bench, docs, config, or code (the
    implementation). Prose outside those folders is docs too."""
    for name, pattern in _ROLES:
        if pattern.search(path):
            return name
    return "docs" if kind == "prose" else "code"


def literal_weight(q: Question, full: float) -> float:
    """The literal list's weight: less for a question in words, whose verbatim copy in a page
    is a page that repeats the question, not its answer."""
    return QUESTION_LITERAL if q.kind == "question" else full


def aside(q: Question, path: str, kind: str, code_folder: bool) -> float:
    """The factor a file's chunks get for the part it plays (1.0: none): tests, examples,
    benchmarks and vendored code after the implementation, and documentation after code in
    a folder of code, unless the question asks for them."""
    r = role(path, kind)
    if r == "code" or r in q.asks or q.kind == "path":
        return 1.0
    if r in ("docs", "config"):
        return DOCS if code_folder and q.kind != "phrase" else 1.0
    return ASIDE


@cache
def path_stems(path: str) -> frozenset[str]:
    """The stems of a path's folder and file names, split at case, `_`, `-` and `.`."""
    p = PurePosixPath(path)
    parts = [*p.parent.parts[-3:], p.stem]  # the nearest folders say most
    out = set()
    for part in parts:
        for word in _SPLIT.findall(part):
            if len(word) > 1 and word.lower() not in STOPWORDS:
                out.add(_stem(word))
    return frozenset(out)


def named_file(q: Question, path: str) -> bool:
    """Does a path query (`auth.py`, `src/auth/`) name this file: its path, or its end after
    a `/`?"""
    if q.kind != "path":
        return False
    want = q.text.replace("\\", "/").strip("/").lower()
    p = path.lower()
    return p == want or p.endswith("/" + want) or p.startswith(want + "/") \
        or ("/" + want + "/") in ("/" + p)


def path_share(q: Question, path: str) -> float:
    """The share of the question's content words that its path's names hold (0: none)."""
    if not q.terms or q.kind == "phrase":
        return 0.0
    have = path_stems(path)
    return sum(1 for t in q.terms if t in have) / len(q.terms)


# A declaration file's suffixes, and the suffixes of the files that implement it: the same
# stem (`logger.h`: `logger.cpp`; spdlog's `logger-inl.h`; `foo.pyi`: `foo.py`).
_HEADERS = (".h", ".hh", ".hpp", ".hxx", ".h++")
_BODIES = (".c", ".cc", ".cpp", ".cxx", ".c++", ".inl", ".ipp", ".tcc", "-inl.h", "_inl.h",
           "-inl.hpp", "_impl.h", "-impl.h", "_impl.hpp")
_DECLARED = {".pyi": (".py",), ".d.ts": (".ts", ".js", ".mjs", ".cjs"),
             ".d.mts": (".mts", ".mjs"), ".d.cts": (".cts", ".cjs"),
             **dict.fromkeys(_HEADERS, _BODIES)}
_ANY_BODY = sorted({b for bodies in _DECLARED.values() for b in bodies}, key=len, reverse=True)


@cache
def declared(path: str) -> tuple[str, tuple[str, ...]] | None:
    """(the file's name without its suffix, the suffixes that implement it) for a declaration
    file, else None. A file that is itself a body (`logger-inl.h`) is not a declaration."""
    name = PurePosixPath(path).name
    lower = name.lower()
    if any(lower.endswith(b) for b in _BODIES):
        return None
    for suffix, bodies in _DECLARED.items():
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)], bodies
    return None


@cache
def body_of(path: str) -> str | None:
    """The stem a file implements (`logger` for `logger-inl.h`, `logger.cpp`, `util.py`),
    else None: a file's name less a body's suffix."""
    name = PurePosixPath(path).name
    lower = name.lower()
    for suffix in _ANY_BODY:  # the longest first: `-inl.h` before `.h`
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)]
    return None
