"""The values a passage leans on: the short definitions of the constants it names, sent with it.

The line that answers "what is the longest URL httpx accepts?" is `MAX_URL_LENGTH = 65536`, at
the top of a file whose chunk there is about something else; the search finds the check that
uses it (`if len(url) > MAX_URL_LENGTH:`). A passage sent to the model that names a constant,
a variable or a macro the symbol table knows (defined in at most NAMED_MAX places, in at most
MAX_LINES lines that hold a number or a string, outside tests and examples) brings that
definition's lines along, as an entry of its own right after it, as an editor's "go to
definition" would show them. A definition in another file is followed within its project:
a folder that holds several projects side by side (no project file at its top) does not
lend one project's `request` to another's code. The names of the lines that match the
question best are followed first, FOLLOW_MAX definitions a turn at most.

The other way round, a passage that shows a class's definition brings the module values made
from it: "how many idle keep-alive connections does a client keep by default?" finds `class
Limits:` and its parameters, and the answer is `DEFAULT_LIMITS = Limits(…,
max_keepalive_connections=20)` further down the file, which no word of the question names.

And the best passage's best lines lend the short helpers they call (at most CALL_LINES
lines, sent whole): "what content type is a file given when it cannot be guessed?" finds
`content_type = _guess_content_type(filename)`, and the answer is that helper's `or
"application/octet-stream"`. Only the first passage's: the budget's later shares are small,
and a helper there takes the tokens of the lines that answer (measured, BENCHMARKS.md).

`follow` is pure apart from the functions it is given (`reading`: where names are defined,
a file's lines as indexed, the values made from a class, where functions are defined) and a
look for a project file at a folder's top.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hydra_rag.answer.prompt import Source
from hydra_rag.search.definitions import NAMED_MAX, aside
from hydra_rag.search.evidence import best_lines, line_scores
from hydra_rag.store.index_dir import Store
from hydra_rag.store.symbols import Entry

VALUE_KINDS = ("constant", "variable", "macro")
MAX_LINES = 3  # of a definition followed: a value, not a body
FOLLOW_MAX = 3  # definitions followed per turn
MADE_MAX = 2  # values made from the classes a passage defines, per passage
CALL_LINES = 12  # of a function followed: a short helper, sent whole
_CALL = re.compile(r"([A-Za-z_$][\w$]*)\s*\(")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_LITERAL = re.compile(r"\d|[\"'`]")  # a number or a string: what makes a definition a value

# store, names → their definitions of VALUE_KINDS; store, path, first, last line → the text
Lookup = Callable[[str, Sequence[str]], list[Entry]]
Lines = Callable[[str, str, int, int], str | None]
# store, path, first, last line → the values made from the classes defined on those lines
Made = Callable[[str, str, int, int], list[Entry]]
FUNCTION_KINDS = ("function", "method")


def called_on_best(text: str, query: str) -> list[str]:
    """The names a passage calls on the lines that match `query` best, each once."""
    lines = text.splitlines()
    return list(dict.fromkeys(m.group(1) for i in best_lines(text, query)
                              for m in _CALL.finditer(lines[i]) if len(m.group(1)) > 1))


def used_names(text: str, query: str) -> list[str]:
    """The identifiers of a passage, those on the lines that match `query` best first, each
    once."""
    lines = text.splitlines()
    scores, _ = line_scores(text, query)
    order = sorted(range(len(lines)), key=lambda i: (-scores[i], i))
    return list(dict.fromkeys(m.group() for i in order for m in _IDENT.finditer(lines[i])
                              if len(m.group()) > 1))


# Files that make a folder one project (its include/ and src/ are one code base).
PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg", "package.json", "go.mod",
                   "Cargo.toml", "CMakeLists.txt", "meson.build", "Makefile", "pom.xml",
                   "build.gradle", "Gemfile")


def _top(path: str) -> str:
    """A path's first folder ("" for a file at the top)."""
    return path.split("/", 1)[0] if "/" in path else ""


def _same_project(root: str, here: str, there: str) -> bool:
    """May a name used in `here` be defined in `there` (paths in the folder `root`)? Yes in
    a folder that is one project (a marker file at its top), in the same top folder, or at
    the top; not across the top folders of a folder that holds projects side by side
    (requests/ and flask/: `request` in one's code is not the other's global)."""
    top = _top(there)
    if top in ("", _top(here)):
        return True
    return any((Path(root) / m).exists() for m in PROJECT_MARKERS)


def _the_one(s: Source, defs: Sequence[Entry]) -> list[Entry]:
    """Of a name's definitions (tests and examples left out already), the ones a passage
    means: those in its own file, else the only one, when it is in the same project. A folder
    may hold several projects side by side, and `request` in one project's code is not the
    `request` another defines."""
    return [e for e in defs if e.path == s.path] or (
        list(defs) if len(defs) == 1 and _same_project(s.store, s.path, defs[0].path) else [])


def _by_name(entries: Sequence[Entry]) -> dict[str, list[Entry]]:
    out: dict[str, list[Entry]] = {}
    for e in entries:
        out.setdefault(e.name, []).append(e)
    return out


def _shown(sources: Sequence[Source], store: str, path: str, first: int, last: int) -> bool:
    """Does a passage show these lines already?"""
    return any(s.store == store and s.path == path and s.line_start <= first
               and last <= s.line_end for s in sources)


def follow(sources: Sequence[Source], query: str, lookup: Lookup, lines: Lines,
           most: int = FOLLOW_MAX, made: Made | None = None, calls: Lookup | None = None
           ) -> list[tuple[int, Source]]:
    """The definitions the passages lean on, each as (the index of the passage it follows,
    its entry): not one a passage already shows, nor one of a name defined in more than
    NAMED_MAX places. With `made`, a passage that shows a class's definition also brings the
    values made from that class (its module's `DEFAULT_LIMITS = Limits(…)`), after the
    names it uses, at most MADE_MAX per passage. With `calls`, the first passage's entries
    (the best chunk's windows) bring one short function their best lines call, whole."""
    out: list[tuple[int, Source]] = []
    # The best chunk's windows: the entries before the first of another file.
    lead = next((i for i, s in enumerate(sources)
                 if (s.store, s.path) != (sources[0].store, sources[0].path)), len(sources))
    helped = False
    taken: set[tuple[str, str, int]] = set()

    def take(i: int, s: Source, e: Entry, whole: bool = False) -> bool:
        first, last = ((e.line_start, e.line_end) if whole else
                       (e.name_line, min(e.line_end, e.name_line + MAX_LINES - 1)))
        key = (s.store, e.path, e.name_line)
        # Not what a passage shows (a function sent whole: not even some of its lines), nor
        # what overlaps an entry followed already.
        near = [*(sources if whole else ()), *(x for _, x in out)]
        if key in taken or _shown(sources, s.store, e.path, first, last) or last < first \
                or any(x.store == s.store and x.path == e.path and x.line_start <= last
                       and first <= x.line_end for x in near):
            return False
        text = lines(s.store, e.path, first, last)
        if not text or not (whole or _LITERAL.search(text.partition(e.name)[2])):
            return False  # no value: `#define SPDLOG_INLINE inline`, `var mu sync.Mutex`
        taken.add(key)
        out.append((i, replace(s, path=e.path, line_start=first, line_end=last, text=text,
                               section="", page_start=0, page_end=0, page_unit="")))
        return True

    for i, s in enumerate(sources):
        if len(out) >= most:
            break
        names = used_names(s.text, query)
        places = _by_name(lookup(s.store, names))
        for name in names:
            if len(out) >= most:
                break
            defs = [e for e in places.get(name, []) if not aside(e.path)]
            if not defs or len(places[name]) > NAMED_MAX:
                continue
            mine = _the_one(s, defs)
            if mine:
                take(i, s, mine[0])
        if calls is not None and i < lead and len(out) < most and not helped:
            # A short helper the best lines call, whole: `_guess_content_type(filename)` on
            # the line that matches "what content type … cannot be guessed" best.
            named = called_on_best(s.text, query)
            helpers = _by_name(calls(s.store, named))
            for name in named:
                mine = _the_one(s, [e for e in helpers.get(name, []) if not aside(e.path)])
                if len(mine) == 1 and mine[0].line_end - mine[0].line_start < CALL_LINES \
                        and take(i, s, mine[0], whole=True):
                    helped = True
                    break
        if made is None:
            continue
        values = [e for e in made(s.store, s.path, s.line_start, s.line_end)
                  if not aside(e.path) and _same_project(s.store, s.path, e.path)]
        brought = 0
        for e in values:
            if len(out) >= most or brought >= MADE_MAX:
                break
            brought += take(i, s, e)
    return out


def interleave(sources: Sequence[Source], extra: Sequence[tuple[int, Source]]) -> list[Source]:
    """The passages with each followed definition right after the passage that names it,
    numbered from 1 again."""
    after: dict[int, list[Source]] = {}
    for i, s in extra:
        after.setdefault(i, []).append(s)
    out: list[Source] = []
    for i, s in enumerate(sources):
        for x in (s, *after.get(i, [])):
            out.append(replace(x, n=len(out) + 1))
    return out


def reading(stores: Mapping[str, Store]) -> tuple[Lookup, Lines, Made, Lookup]:
    """The functions `follow` is given, over these folders' symbol tables and code
    tables (the text as indexed, like every passage's), by each folder's root. What they read
    is kept: a turn that cuts its passages again asks again for much the same."""
    defs: dict[tuple[str, str], list[Entry]] = {}  # (store, name) → its definitions
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (store, path) → its code chunks

    def lookup(store: str, names: Sequence[str]) -> list[Entry]:
        s = stores.get(store)
        new = [n for n in names if (store, n) not in defs]
        if s is not None and new:
            for n in new:
                defs[(store, n)] = []
            for e in s.file_list.defined_among(new, VALUE_KINDS):
                defs[(store, e.name)].append(e)
        return [e for n in names for e in defs.get((store, n), [])]

    def lines(store: str, path: str, first: int, last: int) -> str | None:
        s = stores.get(store)
        if s is None:
            return None
        if (store, path) not in rows:
            rows[(store, path)] = s.rows_for_paths("code", [path],
                                                   ["line_start", "line_end", "text"])
        for r in rows[(store, path)]:
            a, b = int(r["line_start"]), int(r["line_end"])
            if a <= first and last <= b:
                return "\n".join(str(r["text"]).splitlines()[first - a:last - a + 1])
        return None

    def made(store: str, path: str, first: int, last: int) -> list[Entry]:
        s = stores.get(store)
        return [] if s is None else s.file_list.made_from(path, first, last, VALUE_KINDS)

    def calls(store: str, names: Sequence[str]) -> list[Entry]:
        s = stores.get(store)
        return [] if s is None or not names else s.file_list.defined_among(names, FUNCTION_KINDS)

    return lookup, lines, made, calls
