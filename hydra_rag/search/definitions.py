"""Definitions first: a query that names a symbol (`send_from_directory`, `Session.send`,
`parse()`, "where is NAME defined", "definition of NAME") is answered with the chunk that holds
its definition, then the other definitions of the name, then what the search found besides.
A query in words is left alone. Among several definitions of a name, code comes before tests
and examples, and then the search's own order decides.

The names come from the symbol table (hydra_rag.store.symbols); the chunk of a definition is
the one holding the line its name is on, preferring the one that holds most of the definition.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from hydra_rag.read.symbols import operator_name
from hydra_rag.search.hits import Hit
from hydra_rag.store.index_dir import Store
from hydra_rag.store.symbols import Entry

_IDENT = r"[A-Za-z_$][\w$]*"
# The last part of a name may be a C++ destructor (`~logger`) or operator (`operator==`).
_OPERATOR = (r"operator\s*(?:\(\s*\)|\[\s*\]|->\*?|[-+*/%^&|~!=<>,]{1,3}|"
             r"(?:new|delete)\b(?:\s*\[\s*\])?)")
_NAME = rf"(?P<scope>(?:{_IDENT}(?:\.|::|#|->))*)(?P<last>{_OPERATOR}|~?{_IDENT})"
_SEP = re.compile(r"\.|::|#|->")
_KIND = (r"(?:(?:the\s+)?(?:function|method|class|type|struct|interface|trait|enum|constant|"
         r"macro|module|variable|func|fn|def)\s+)?")
_CALL = r"(?:\(\s*\))?"
BARE = re.compile(rf"`?{_NAME}{_CALL}`?\s*\??")
ASKED = [re.compile(p, re.I) for p in (
    rf"(?:where\s+(?:is|are)|where's)\s+(?:the\s+)?{_KIND}`?{_NAME}{_CALL}`?\s+"
    r"(?:defined|declared|implemented|written)\s*\??",
    rf"(?:(?:show|find|go\s+to|goto|open)\s+(?:me\s+)?(?:the\s+)?)?(?:definition|declaration|"
    rf"implementation|source)\s+of\s+{_KIND}`?{_NAME}{_CALL}`?\s*\??",
    rf"`?{_NAME}{_CALL}`?\s+(?:definition|declaration)\s*\??",
    rf"(?:def|defn|definition|goto)\s*:\s*`?{_NAME}{_CALL}`?",
)]
# Paths of tests, examples and vendored copies: their definitions come after the others.
_ASIDE = re.compile(r"(^|/)(tests?|testing|spec|specs|__tests__|test_\w+\.py|\w+_test\.\w+|"
                    r"\w+\.(test|spec)\.\w+|examples?|fixtures?|mocks?|vendor|third_party|"
                    r"node_modules|benchmarks?|docs?)(/|$)", re.I)


@dataclass(frozen=True)
class Wanted:
    """The symbol a query names: its name, the scope written before it (`Session` in
    `Session.send`), and whether the query asked in words (then any case will do)."""

    name: str
    scope: str
    asked: bool


def wanted(query: str) -> Wanted | None:
    """The symbol a query names, or None for a query in words."""
    q = query.strip()
    asked = False
    m = BARE.fullmatch(q)
    if m is None:
        for form in ASKED:
            m = form.fullmatch(q)
            if m is not None:
                asked = True
                break
    if m is None:
        return None
    return _named(m, asked)


def _named(m: re.Match[str], asked: bool) -> Wanted:
    """The Wanted of a match of _NAME: `a::b::~c` is `~c` in `a.b`."""
    scope = ".".join(p for p in _SEP.split(m["scope"]) if p)
    return Wanted(operator_name(m["last"]), scope, asked)


def aside(path: str) -> bool:
    """A test, example, fixture or vendored file (its definitions rank after the others)."""
    return bool(_ASIDE.search(path))


# C and C++ files, where a function is declared in a header and defined in another file.
_C_FAMILY = frozenset({".c", ".h", ".cc", ".cpp", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".inl"})


def prototype(e: Entry) -> bool:
    """A C or C++ declaration without a body (`int f(int x);` in a header), as far as its
    lines tell: it ends on its name's line or the next (a body runs on past that). The
    definition with the body says what the function does; the prototype comes after it."""
    return PurePosixPath(e.path).suffix.lower() in _C_FAMILY and e.line_end - e.name_line < 2


def select(w: Wanted, entries: list[Entry], strict: bool = True) -> list[Entry]:
    """The definitions that answer `w`, best first: the name in its own case (any case only
    when the query asked in words and nothing matches exactly), then code before tests and
    examples, and a C or C++ function's body before its prototype. A scope written
    (`Session.send`) must be the definition's class or type; `strict=False` (the `def`
    command) also takes a module's name (`utils.get_auth`: in utils.py) and, failing both,
    every definition of the name."""
    exact = [e for e in entries if e.name == w.name]
    pool = exact or (entries if w.asked else [])
    if w.scope:
        scoped = [e for e in pool if e.scope == w.scope or e.scope.endswith("." + w.scope)]
        if not strict:
            scoped = scoped or [e for e in pool if _in_module(e, w.scope)] or pool
        # In a search, a dotted string that names no class (`self.app.config`,
        # `click.core.Context`) is looked for as the string it is.
        pool = scoped
    return sorted(pool, key=lambda e: (aside(e.path), prototype(e), e.path.count("/"), e.path,
                                       e.line_start))


def _in_module(e: Entry, scope: str) -> bool:
    """A module path (`utils.get_auth`, `flask.helpers.send_file`) names the file it is in."""
    stem = PurePosixPath(e.path).stem
    last = scope.rsplit(".", 1)[-1]
    return stem == last or PurePosixPath(e.path).parent.name == last and stem == "__init__"


def one_of(use: Entry, defs: list[Entry]) -> bool:
    """Whether a use of a name may be one of these definitions of it: a bare use; one through
    an object when a definition is a method or nested (any object may hold one); one through
    a module or package of the project's own (the file or a folder a definition is in, Rust's
    `crate` and `super`). Not `re.escape(…)` nor `foo.escape(…)` when the project's `escape`
    is a function of its own module. With no definition here (another's name), every use."""
    if not use.scope or not defs:
        return True
    if any(d.scope or d.kind == "method" for d in defs):
        return True
    last = use.scope.rsplit(".", 1)[-1]
    return last in ("crate", "super") or any(
        last in PurePosixPath(d.path).with_suffix("").parts for d in defs)


def holding(e: Entry, chunks: list[tuple[int, int, str]]) -> str | None:
    """The id of the chunk (line_start, line_end, id) that holds a definition: one with the
    line of its name, the most of its lines, and its first line."""
    best, key = None, None
    for a, b, cid in chunks:
        if not a <= e.name_line <= b:
            continue
        k = (min(b, e.line_end) - max(a, e.line_start), a <= e.line_start, -a)
        if key is None or k > key:
            best, key = cid, k
    return best


_COLUMNS = ["id", "path", "kind", "line_start", "line_end", "text", "section"]


def defined(stores: Sequence[Store], w: Wanted, strict: bool = True) -> list[tuple[Store, Entry]]:
    """The definitions `w` names in these folders (`select`), code before tests and
    examples, shallower paths first; folders keep their order otherwise."""
    found = [(store, e) for store in stores
             for e in select(w, store.file_list.definitions(w.name), strict)]
    found.sort(key=lambda se: (aside(se[1].path), se[1].path.count("/")))
    return found


def first(stores: Sequence[Store], w: Wanted, hits: list[Hit], k: int | None,
          embedder: Callable[[Store], str | None] = lambda _s: "") -> list[Hit]:
    """`hits` with the chunks holding the definitions `w` names put first (at most k of
    them): code before tests and examples, then as the search ranked their chunks;
    unchanged when none is defined."""
    found = defined(stores, w)
    if not found:
        return hits

    def searched(se: tuple[Store, Entry]) -> int:
        """Where the search itself ranked the definition's chunk (past the end: not at all)."""
        root, e = str(se[0].root), se[1]
        return next((i for i, h in enumerate(hits) if h.store == root and h.path == e.path
                     and h.line_start <= e.name_line <= h.line_end), len(hits))

    found.sort(key=lambda se: (aside(se[1].path), searched(se), se[1].path.count("/")))
    top = max((h.score for h in hits), default=1.0)
    out = chunks(found[: k or 10], top, "definition", embedder)
    seen = {h.id for h in out}
    return out + [h for h in hits if h.id not in seen]


def chunks(found: Sequence[tuple[Store, Entry]], score: float, rank: str,
           embedder: Callable[[Store], str | None] = lambda _s: "") -> list[Hit]:
    """The chunks holding these definitions, in their order, each once, as hits scored
    `score` and ranked by the list `rank`."""
    rows_of: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for store in dict.fromkeys(s for s, _ in found):  # one query per folder
        paths = sorted({e.path for s, e in found if s is store})
        for r in store.rows_for_paths("code", paths, _COLUMNS):
            rows_of.setdefault((id(store), r["path"]), []).append(r)
    out: list[Hit] = []
    seen: set[str] = set()
    for store, e in found:
        rows = rows_of.get((id(store), e.path), [])
        cid = holding(e, [(int(r["line_start"]), int(r["line_end"]), r["id"]) for r in rows])
        if cid is None or cid in seen:
            continue
        seen.add(cid)
        r = next(r for r in rows if r["id"] == cid)
        out.append(Hit(str(store.root), e.path, r["kind"], int(r["line_start"]),
                       int(r["line_end"]), r["text"], score, {rank: len(out) + 1},
                       cid, section=r.get("section") or "", embedder=embedder(store) or ""))
    return out


_CAPITAL = re.compile(r"[A-Z][A-Za-z0-9]{2,}")
NAMED_MAX = 3  # a name defined in more places than this leads to none of them
# Words a question or a request opens with that are not in the stoplist: not names there.
_OPENERS = frozenset({"please", "thanks", "thank", "compare", "explain", "describe", "show",
    "list", "find", "tell", "give", "summarize", "summarise", "name", "write", "fix", "check",
    "look", "search", "get", "use", "make", "add", "remove", "change", "update", "create",
    "suppose", "assume", "imagine", "consider", "note", "given", "say", "could", "would",
    "should", "can", "does", "did", "is", "are", "was", "were", "will"})


def capitalised(query: str) -> list[str]:
    """The capitalised words of a query that may be names ("the Segment class"): not the
    first word when it is a common one ("What", "Explain", "Compare"), once each."""
    from hydra_rag.search.evidence import STOPWORDS

    words = [w.strip("`'\",.?!:;()") for w in query.split()]
    if words and (words[0].lower() in STOPWORDS or words[0].lower() in _OPENERS
                  or len(words) == 1):
        words = words[1:]
    return list(dict.fromkeys(w for w in words if _CAPITAL.fullmatch(w)
                              and w.lower() not in STOPWORDS))


def named_in(query: str) -> list[Wanted]:
    """The names a query in words names (`what does build_request return`, "how is
    `Style.parse` used", "what does the Segment class represent"): its code-like words and
    backticked spans, and its capitalised words (`capitalised`), in their own case."""
    from hydra_rag.search.fuse import literal_terms

    if wanted(query) is not None:
        return []  # a bare name: `first` puts its definitions first
    out: list[Wanted] = []
    for term in [*literal_terms(query), *capitalised(query)]:
        m = BARE.fullmatch(term)
        if m is None:
            continue
        w = _named(m, False)
        if w not in out:
            out.append(w)
    return out
