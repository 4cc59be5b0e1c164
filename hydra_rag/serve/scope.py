"""A scope of indexed folders that a server answers from: search, read, navigate code, ask,
list — what the MCP tools, the HTTP routes and the web page do, each once, here.

Searchers are kept open between requests (tables, caches and embedding clients stay warm) in
a small pool, so that searches of several clients run side by side. A request may narrow the
scope (`paths`, `tag`) but never widen it: a folder outside the scope is an error.

A scope of the registered folders (the default, `--all`, `--tag`) follows the registry while the
server runs: a folder indexed, tagged or forgotten later is in or out of the next request, as
it would be for a new server. A pooled searcher that skipped a folder (no index yet, damaged)
is made again after RETRY_S, so that the folder is tried again.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra_rag import api
from hydra_rag.api import file_json, hit_json
from hydra_rag.errors import HydraError, UsageError
from hydra_rag.paths import store_names
from hydra_rag.store import registry

MODES = {"hybrid": ("vector", "bm25"), "vector": ("vector",), "bm25": ("bm25",)}
MAX_K = 50
GROUPS = ("chunk", "file")  # search results as passages, or as files with their best passages
MAX_QUERY_CHARS = 2_000
STATUS_PATHS = 50  # paths per list (added, changed…) a status answer carries
RETRY_S = 30.0  # how long a pooled searcher that skipped a folder is used before it is remade


class Scope:
    """The folders of one server: `paths` (each one's nearest index), the registered folders
    (`all_`) or those with one of `tags`; by default every registered folder."""

    def __init__(self, paths: list[Path] | None = None, all_: bool = False,
                 tags: list[str] | None = None, searchers: int = 2) -> None:
        if not paths and not tags:
            all_ = True
        self._seen = registry.stamp()  # before reading it: a change meanwhile is not missed
        self._roots, self.federated = api.folders(paths, all_, tags)
        self.names = store_names(self._roots)
        # The registry's choice (all_, tags) that the roots follow; None for paths given.
        self._chosen = (all_, list(tags or [])) if all_ or tags else None
        # Idle searchers: (searcher, generation, when made). A change of the roots starts a
        # new generation; a searcher of an older one is closed when it comes back.
        self._idle: queue.LifoQueue[tuple[Any, int, float]] = queue.LifoQueue()
        self._generation = 0
        self._made = 0
        self._max = max(1, searchers)
        self._lock = threading.Lock()

    @property
    def roots(self) -> list[Path]:
        """The scope's folders as they are now (see _refresh)."""
        self._refresh()
        return self._roots

    def _refresh(self) -> None:
        """Follow the registry (a stat when it did not change): the folders registered, or
        tagged, now."""
        if self._chosen is None or registry.stamp() == self._seen:
            return
        with self._lock:
            stamp = registry.stamp()
            if stamp == self._seen:
                return
            self._seen = stamp
            roots = [Path(p) for p in registry.select(*self._chosen)]
            if roots == self._roots:
                return
            # names first: a request that read the new roots finds their names
            self.names = {**self.names, **store_names(roots)}
            self._roots = roots
            self._generation += 1
            self._made = 0
            self._drain()

    def _drain(self) -> None:
        """Close the idle searchers (a waiter may take one meanwhile: never block here)."""
        while True:
            try:
                searcher = self._idle.get_nowait()[0]
            except queue.Empty:
                return
            searcher.close()

    def _require(self) -> list[Path]:
        """The folders, or the error of a scope left with none (every one forgotten)."""
        roots = self.roots
        if not roots and self._chosen is not None:
            registry.chosen(*self._chosen)  # says what is missing and how to index one
        return roots

    # -- folders ---------------------------------------------------------------------------

    def narrow(self, paths: list[str] | None = None, tag: str | None = None) -> list[Path]:
        """The scope's folders a request asks for; a folder outside the scope is an error."""
        roots = self._require()
        if paths:
            wanted = []
            for p in paths:
                match = self._folder(p)
                if match is None:
                    raise UsageError(f"{p!r} is not a folder of this server's scope "
                                     f"({', '.join(self.names.values())})")
                wanted.append(match)
            roots = list(dict.fromkeys(wanted))
        if tag:
            tagged = {Path(p) for p, e in registry.stores().items() if tag in e.get("tags", [])}
            roots = [r for r in roots if r in tagged]
            if not roots:
                raise UsageError(f"no folder of this server's scope has the tag {tag!r}")
        return roots

    def _folder(self, name: str) -> Path | None:
        """A scope folder by path or short name."""
        for root in self.roots:
            if name in (str(root), self.names[str(root)], root.name):
                return root
        try:
            resolved = Path(name).expanduser().resolve()
        except OSError:
            return None
        return resolved if resolved in self.roots else None

    # -- search ----------------------------------------------------------------------------

    @contextmanager
    def _searcher(self, roots: list[Path]) -> Iterator[Any]:
        """A searcher over the whole scope from the pool (made on demand, at most `searchers`
        of them; a request waits for one), or a fresh one for a narrower set of folders."""
        from hydra_rag.config import load_settings
        from hydra_rag.search.retrieve import Searcher

        with self._lock:
            pooled = roots == self._roots
        if not pooled:
            searcher = Searcher(roots, load_settings(), skip_broken=True)
            try:
                yield searcher
            finally:
                searcher.close()
            return
        while True:
            with self._lock:
                make = self._idle.empty() and self._made < self._max
                if make:
                    self._made += 1
                generation, roots = self._generation, self._roots
            if make:
                try:
                    entry = (Searcher(roots, load_settings(), skip_broken=True), generation,
                             time.monotonic())
                except BaseException:
                    with self._lock:
                        if generation == self._generation:
                            self._made -= 1
                    raise
                break
            try:  # a wait for one in use, checking now and then whether one may be made
                entry = self._idle.get(timeout=0.5)
                break
            except queue.Empty:
                continue
        try:
            yield entry[0]
        finally:
            self._give_back(entry)

    def _give_back(self, entry: tuple[Any, int, float]) -> None:
        """Back to the pool; closed instead if the roots changed since it was made, or if it
        skipped a folder RETRY_S ago or more (made again, it tries that folder again)."""
        searcher, generation, made = entry
        with self._lock:
            current = generation == self._generation
            stale = bool(searcher.skipped) and time.monotonic() - made >= RETRY_S
            if current and not stale:
                self._idle.put(entry)
                return
            if current:
                self._made -= 1
        searcher.close()

    def search(self, query: str, k: int = 10, paths: list[str] | None = None,
               tag: str | None = None, mode: str = "hybrid", glob: list[str] | None = None,
               lang: list[str] | None = None, group_by: str = "chunk") -> dict[str, Any]:
        """Ranked passages: `{"query", "results": [...], "warnings": [...]}` as `search --json`;
        with `group_by="file"`, ranked files with their best passages (`search --files
        --json`)."""
        query = (query or "").strip()
        if not query:
            raise UsageError("the query is empty")
        if len(query) > MAX_QUERY_CHARS:
            raise UsageError(f"the query is longer than {MAX_QUERY_CHARS} characters")
        if mode not in MODES:
            raise UsageError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if not 1 <= k <= MAX_K:
            raise UsageError(f"k must be from 1 to {MAX_K}, not {k}")
        if group_by not in GROUPS:
            raise UsageError(f"group_by must be one of {', '.join(GROUPS)}, not {group_by!r}")
        from hydra_rag.search.paths import PathFilter

        where = PathFilter.of(glob, lang)
        roots = self.narrow(paths, tag)
        with self._searcher(roots) as searcher:
            if group_by == "file":
                files = searcher.files(query, k, methods=MODES[mode], where=where)
                results = [file_json(i, f, query, self.names) for i, f in enumerate(files, 1)]
            else:
                hits = searcher.search(query, k, methods=MODES[mode], where=where)
                results = [hit_json(i, h, query, self.names) for i, h in enumerate(hits, 1)]
            warnings = list(searcher.warnings)
        return {"query": query, "results": results, "warnings": warnings}

    # -- read ------------------------------------------------------------------------------

    def get(self, path: str, line_start: int | None = None, line_end: int | None = None,
            page: int | None = None) -> dict[str, Any]:
        """Lines of an indexed file of the scope (`path` relative to its folder, `NAME:path`,
        or absolute), or one page of a document."""
        from hydra_rag.search.excerpt import read_excerpt

        ex = read_excerpt(path, line_start, line_end, scope=self.roots, page=page)
        doc = ex.to_json()
        root = doc.pop("root")
        return {"store": root, "store_name": self.names.get(root, ""), **doc,
                "text": "\n".join(ex.lines)}

    # -- code navigation -------------------------------------------------------------------

    def definition(self, name: str, paths: list[str] | None = None,
                   tag: str | None = None) -> dict[str, Any]:
        """Where a name is defined (hydra_rag.search.navigate.definitions)."""
        from hydra_rag.search.navigate import definitions

        return definitions(self.narrow(paths, tag), name)

    def references(self, name: str, paths: list[str] | None = None,
                   tag: str | None = None) -> dict[str, Any]:
        """Where a name is used (hydra_rag.search.navigate.references)."""
        from hydra_rag.search.navigate import references

        return references(self.narrow(paths, tag), name)

    def outline(self, path: str) -> dict[str, Any]:
        """The definitions of one indexed file (hydra_rag.search.navigate.outline)."""
        from hydra_rag.search.navigate import outline

        if not (path or "").strip():
            raise UsageError("the path is empty")
        return outline(self.roots, path)

    # -- ask -------------------------------------------------------------------------------

    def ask(self, question: str, model: str | None = None, bundle: str | None = None,
            k: int | None = None, on_token: Callable[[str], None] | None = None,
            earlier: list[str] | None = None) -> dict[str, Any]:
        """An answer with numbered citations, its sources and the citation check: a bundle
        retrieves from its own folders, a model from the scope's. `earlier`: the questions
        asked before it, so that a follow-up ("where is it defined?") keeps their subject."""
        question = (question or "").strip()
        if not question:
            raise UsageError("the question is empty")
        if bundle and model:
            raise UsageError("give a model or a bundle, not both")
        if k is not None and not 1 <= k <= MAX_K:
            raise UsageError(f"k must be from 1 to {MAX_K}, not {k}")
        if earlier is not None and not (isinstance(earlier, list)
                                        and all(isinstance(q, str) for q in earlier)):
            raise UsageError("earlier must be a list of questions")
        chat = self.open_chat(bundle or model, bundle is not None, k)
        try:
            chat.earlier = [q for q in (earlier or []) if q.strip()]
            result = chat.ask(question, on_token or (lambda _t: None))
        finally:
            chat.close()
        return turn_json(result)

    def open_chat(self, model: str | None, is_bundle: bool = False, k: int | None = None,
                  rag: list[str] | None = None) -> Any:
        """A chat (not saved) for a model over the scope (or `rag`, narrowed), or for a bundle
        over its own folders."""
        from hydra_rag.catalog import load_bundles

        name = api.model_or_default(model)
        bundles = load_bundles()
        if is_bundle and name not in bundles:
            raise UsageError(f"no bundle {name!r} (`hydra-rag list`)")
        if name in bundles:
            if not self.serves_bundle(bundles[name]):
                raise UsageError(f"bundle {name!r} retrieves from folders this server does not "
                                 "serve: start serve with them (--path, --tag) or ask a model")
            return api.open_chat(name, top_k=k, new=True, save=False)
        roots = self.narrow(rag) if rag else self._require()
        return api.open_chat(name, rag=roots, top_k=k, new=True, save=False)

    def stores(self) -> list[dict[str, Any]]:
        """The scope's folders: tags, chunks, embedders, when last indexed, problems."""
        rows = {r["path"]: r for r in api.store_rows()}
        out = []
        for root in self.roots:
            row = rows.get(str(root)) or {"path": str(root), "tags": [], "chunks": {},
                                          "embedders": {}, "last_indexed": None, "problem": ""}
            out.append({**row, "name": self.names[str(root)]})
        return out

    def status(self, paths: list[str] | None = None, tag: str | None = None) -> list[dict[str, Any]]:
        """Whether each folder's index is current, as `hydra-rag status --json` says it (with
        the folder's `name`); the lists of paths are cut at STATUS_PATHS, their lengths kept in
        `counts`."""
        from hydra_rag.config import load_settings
        from hydra_rag.index.status import GONE, NOT_INDEXED, FolderStatus, folder_status

        settings = load_settings()
        out = []
        for root in self.narrow(paths, tag):
            doc = (folder_status(root, settings) if root.is_dir()
                   else FolderStatus(str(root), NOT_INDEXED, problem=GONE)).to_json()
            doc["counts"] = {k: len(doc[k]) for k in ("added", "changed", "removed", "touched")}
            for k in doc["counts"]:
                doc[k] = doc[k][:STATUS_PATHS]
            out.append({**doc, "name": self.names[str(root)]})
        return out

    # -- saved sessions --------------------------------------------------------------------

    def owns(self, stores: Any) -> bool:
        """Whether a session's folders are all this scope's (or inside them). A session of no
        folder, or of one not served here, is another server's business: it may hold
        another project's questions and passages."""
        if not isinstance(stores, list) or not stores:
            return False
        return all(isinstance(s, str) and any(Path(s) == r or Path(s).is_relative_to(r)
                                              for r in self.roots) for s in stores)

    def serves_bundle(self, bundle: Any) -> bool:
        """Whether every folder a bundle retrieves from is served here (a bundle of none, a
        plain chat, is); a bundle over other folders is not this server's to offer."""
        try:
            roots = api.bundle_roots(bundle)
        except HydraError:
            return False
        return roots is None or self.owns([str(r) for r in roots])

    def sessions(self) -> list[dict[str, Any]]:
        """The saved chat sessions over this scope's folders (`hydra-rag sessions` lists all)."""
        from hydra_rag.answer import sessions

        return [s for s in sessions.all_sessions() if self.owns(s.get("stores"))]

    def session(self, name: str) -> dict[str, Any] | None:
        """A saved session over this scope's folders; None if there is none such (one of
        other folders is not told apart from one that does not exist)."""
        from hydra_rag.answer import sessions

        doc = sessions.load(name)
        return doc if doc is not None and self.owns(doc.get("stores")) else None

    def close(self) -> None:
        self._drain()


def turn_json(result: Any) -> dict[str, Any]:
    """A chat turn as the MCP `ask` tool and `/api` give it: `ask --json`, plus the citation
    check's verdict in one word ("ok", or the problems)."""
    doc = result.to_json()
    problems = result.citations.problems()
    doc["verdict"] = "no context" if result.no_context else ("ok" if not problems else "problems")
    doc["problems"] = problems
    # as OpenAI says it: "length" when cut at max_tokens (a client may ask for the rest)
    doc["finish_reason"] = "length" if result.finish == "length" else "stop"
    return doc

