"""The ranking signals applied to a fused list (hydra_rag.search.signals says what each one
is): factors and additions per chunk, the graphs built from each folder's symbol table, and
the definitions a question names. Called by the searcher after fusion, before the cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from hydra_rag.errors import HydraError
from hydra_rag.search import definitions, signals
from hydra_rag.search.central import centrality
from hydra_rag.search.filemap import FileMap
from hydra_rag.search.hits import Hit
from hydra_rag.search.paths import PathFilter
from hydra_rag.store.index_dir import Store

# Weights measured on bench/code_search.py (BENCHMARKS.md)
CENTRAL_WEIGHT = 0.1  # times a file's centrality (1.0 the most central), for a question
NAME_WEIGHT = 0.5  # on the chunk that defines a name a question names
MAP_WEIGHT = 0.2  # times how well the names a file defines match a question (1.0 the best)

Fused = list[tuple[str, float, dict[str, int]]]
Place = Callable[[str], tuple[str, str, str]]  # key → (folder, path, kind)


class Graphs:
    """Per folder, built once per index run from its symbol table: how central each file is
    (hydra_rag.search.central) and the map of the names files define (filemap)."""

    def __init__(self, stamp: Callable[[Store], Any]) -> None:
        self._stamp = stamp  # what a folder's graphs are valid for (its index run)
        self._have: dict[str, tuple[Any, dict[str, float], FileMap]] = {}

    def of(self, stores: Sequence[Store], terms: Sequence[str]
           ) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]]:
        """(folder, path) → centrality, and → how well its names match `terms`."""
        central: dict[tuple[str, str], float] = {}
        mapped: dict[tuple[str, str], float] = {}
        for store in stores:
            stamp = self._stamp(store)
            root = str(store.root)
            have = self._have.get(root)
            if have is None or have[0] != stamp:
                try:
                    links = store.file_list.symbol_links()
                except HydraError:
                    links = []
                have = (stamp, centrality(links), FileMap(links))
                self._have[root] = have
            central.update(((root, path), c) for path, c in have[1].items())
            if terms:
                mapped.update(((root, path), c) for path, c in have[2].scores(terms).items())
        return central, mapped


def rescore(q: signals.Question, fused: Fused, place: Place, settings: Any,
            where: PathFilter | None, graphs: Graphs, stores: Sequence[Store]
            ) -> tuple[Fused, dict[str, dict[str, float]]]:
    """The fused list re-scored by the signals that are on, best first, and the signals that
    moved each chunk (for --explain)."""
    s = settings
    on_aside = s.rank_aside and not (where is not None and where.globs)
    # What is added is in units of score fusion's scores; RRF's are a hundred times smaller,
    # so it gets the factors only.
    adds = s.fusion == "score"
    on_paths = s.rank_paths and adds
    words = q.kind in ("question", "words")
    on_central = s.rank_central and words and adds
    on_map = s.rank_map and words and adds
    if not (on_aside or on_paths or on_central or on_map) or not fused:
        return fused, {}
    places = {key: place(key) for key, _, _ in fused}
    code_folder = any(kind == "code" for _, _, kind in places.values())
    central, mapped = graphs.of(stores, q.terms if on_map else ()) if on_central or on_map \
        else ({}, {})
    # the verbatim lists that hold a chunk of the implementation
    in_code = {n for key, _, ranks in fused for n in ranks
               if _verbatim(n, q) and signals.role(places[key][1], places[key][2]) == "code"}
    out, moved = [], {}
    for key, score, ranks in fused:
        store, path, kind = places[key]
        why: dict[str, float] = {}
        # A chunk that holds what was typed verbatim (the literal or a rare name's list) is
        # what was asked for, wherever it lives: a string copied from a test is looked for in
        # the test. Unless the implementation holds it too (a message raised there and
        # checked by a test): then the implementation first. Not a question's verbatim copy,
        # which only repeats it.
        verbatim = any(_verbatim(n, q) and n not in in_code for n in ranks)
        if on_aside and not verbatim:
            f = signals.aside(q, path, kind, code_folder)
            if f != 1.0:
                why[f"aside:{signals.role(path, kind)}"] = f
                score *= f
        if on_paths:
            add = signals.PATH_WEIGHT * signals.path_share(q, path)
            if signals.named_file(q, path):
                add += signals.PATH_NAMED
            if add:
                why["path"] = add
                score += add
        for name, on, weight, values in (("central", on_central, CENTRAL_WEIGHT, central),
                                         ("map", on_map, MAP_WEIGHT, mapped)):
            add = weight * values.get((store, path), 0.0) if on else 0.0
            if add >= 0.005:
                why[name] = add
                score += add
        out.append((key, score, ranks))
        if why:
            moved[key] = why
    out.sort(key=lambda t: (-t[1], t[0]))
    return out, moved


def _verbatim(name: str, q: signals.Question) -> bool:
    """Is `name` a list of the chunks that hold what was typed verbatim?"""
    return name.startswith("term:") or name.startswith("literal") and q.kind != "question"


def with_names(query: str, hits: list[Hit], stores: Sequence[Store]) -> list[Hit]:
    """A question in words that names a symbol of the index (`what does build_request
    return`) gets the chunk of its definition among its hits, NAME_WEIGHT higher."""
    names = definitions.named_in(query)
    if not names:
        return hits
    found = []
    for w in names:
        defs = definitions.defined(stores, w)
        if 0 < len(defs) <= definitions.NAMED_MAX:
            # A C or C++ prototype leads to nothing where the body is found (`select` put it
            # after the body): the body answers what the function does.
            bodies = [(s, e) for s, e in defs if not definitions.prototype(e)]
            found += bodies or defs
    if not found:
        return hits
    by_id = {h.id: h for h in hits}
    for d in definitions.chunks(found, 0.0, "name"):
        h = by_id.get(d.id)
        base = h if h is not None else d
        by_id[d.id] = replace(base, score=base.score + NAME_WEIGHT,
                              ranks={**base.ranks, **d.ranks},
                              signals={**base.signals, "name": NAME_WEIGHT})
    return sorted(by_id.values(), key=lambda h: -h.score)
