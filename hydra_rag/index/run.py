"""Indexing, in pipeline order: walk → classify → chunk → embed → store, incrementally and
crash-safely. The library never prints: progress goes through a callback.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from hydra_rag.documents import EXTRACTOR_VERSION
from hydra_rag.errors import HydraError
from hydra_rag.index.batches import Batches
from hydra_rag.index.prepare import Prepared, in_batches, read_ahead, read_and_prepare, symbols_of
from hydra_rag.index.report import (
    IndexInterrupted,
    IndexReport,
    Progress,
    long_lines_note,
    unread_note,
)
from hydra_rag.index.state import State, diff, stale_analysis
from hydra_rag.index.vectors import Vectors
from hydra_rag.paths import on_disk
from hydra_rag.read.source import (
    recorded_secrets,
    recorded_selection,
    walker,
)
from hydra_rag.read.walk import Candidate, WalkResult
from hydra_rag.store import access, rebuild
from hydra_rag.store.filelist import Light
from hydra_rag.store.index_dir import FORMAT_VERSION, TABLES, FileEntry, Store, marker
from hydra_rag.store.symbols import SYMBOLS_VERSION


class Run(Batches, State, Vectors):
    """One index run: walk, diff, read and chunk, embed, store, switch."""

    # Asked after each stored batch: True ends the run there, whole (what is left of the
    # changed files is the next run's); `watch` stops this way.
    stop_requested: Callable[[], bool] | None = None
    _kinds_before: set[str | None]  # the tables that had chunks when the run began (run())
    # the run's --include and --exclude, and whether --include-secrets (index())
    selection: dict[str, Any] | None = None
    private_text = True  # whether the index may hold a private file's text (index())

    # -- the run ---------------------------------------------------------------------------

    def index(self, include: list[str] | None, exclude: list[str] | None, full: bool,
              repair: bool, include_secrets: bool | None = None) -> IndexReport:
        """The whole run, in its order: remove what an interrupted rebuild left, walk, choose
        the language, load (and repair) the state, analyse, index; then, if it built a new
        generation, switch to it."""
        started = time.monotonic()
        self.report.repaired += rebuild.clean(self.store)
        try:
            recorded = self.store.read_meta()
        except HydraError:
            recorded = {}  # load_state reports and repairs a broken meta.yaml
        if include is None and exclude is None:  # the folder's own, as its last run recorded
            include, exclude = recorded_selection(recorded) or ([], [])
        if include_secrets is None:
            include_secrets = recorded_secrets(recorded)
        if repair:
            self.store.journal_path.touch()  # check every row against files.db
        self.progress(Progress("walk", message=f"walking {self.root}"))
        walked = walker(self.root, include, exclude, self.settings, include_secrets).walk()
        # No wider than its files: narrowed before any file is read, widened only at the end,
        # and (auto) a private one only if this run writes it whole: rows of a private file
        # that left stay in LanceDB's data files, marked deleted.
        first = not self.store.exists()
        # Whether the index may hold a private file's text: recorded by each run before it
        # stores a row (an index older than the record: as private as its folder is), so a
        # first run interrupted before the end does not keep a folder of none private.
        held = recorded.get("private_text")
        if not isinstance(held, bool):
            held = bool(recorded) and access.is_private(self.store.dir)
        keep_private = (self.settings.index_access == "auto" and not first and held
                        and access.is_private(self.store.dir))
        self.private_text = bool(walked.private) or held
        gate = access.wanted(self.settings.index_access, walked.private)
        access.narrow(self.store.dir, gate)
        self.report.dirs = walked.dirs
        self.choose_language(walked, full)
        self.choose_analysis()
        # What this run takes in or leaves out: later runs (index, status, watch) keep it.
        self.selection = {"include": list(include or []), "exclude": list(exclude or [])}
        if include_secrets:
            self.selection["secrets"] = True
        self.run(walked, self.load_state(full))  # its light record is dropped past the diff
        store = self.store
        store.journal_path.unlink(missing_ok=True)
        whole = first or (self.live is not None and self.from_files)
        self.meta["private_text"] = bool(walked.private) or (held and not whole)
        self.meta["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.meta["extractor_version"] = EXTRACTOR_VERSION  # once every document was read by it
        self.meta["ocr"] = self.docs.ocr_tag
        store.write_meta(self.meta)
        if self.live is not None:
            rebuild.switch(store)
            self.switched = True
        store.file_list.migrate()
        # Extracted texts no indexed document uses any more (the document changed or left).
        self.docs.prune(store.file_list.document_keys())
        if access.settle(store.dir, gate, widen=whole or not keep_private) and keep_private:
            self.report.notes.append(
                f"{store.dir} stays private: it may still hold text of a private file that "
                f"left; `hydra-rag index {self.root} --full` rebuilds it, and lets it be shared")
        report = self.report
        report.searchable_s = round(time.monotonic() - started, 3)
        if self.vectors_pending():  # phase two: this run's chunks, or what a run left
            self.vectors()
        report.documents_extracted = self.docs.extracted
        report.embedders = {t: e.id for t, e in self.embedders.items()}
        # files.db and the tables agree (that is what the journal and repair guarantee), so
        # the totals come from files.db: a no-op run never has to load LanceDB.
        totals = store.file_list.chunk_totals()
        report.chunks_total = {t: totals.get(t, 0) for t in TABLES}
        return report

    def _kept(self) -> int:
        """How many of the files this run set out to index files.db now records as they are
        (exactly what the next run will find unchanged, wherever the interruption fell)."""
        try:
            recorded = self.store.file_list.entries(c.rel for c in self._changed)
        except HydraError:
            return 0
        return sum(1 for c in self._changed if (e := recorded.get(c.rel)) is not None
                   and (e.size, e.mtime_ns) == (c.size, c.mtime_ns))

    def interrupted(self) -> IndexInterrupted:
        """What an interruption (Ctrl-C, SIGTERM) leaves, in one line. A run updating the index
        in place records it in its journal, for the next run to say what it resumed."""
        if self.in_phase_two:
            left = self.report.vectors_pending
            return IndexInterrupted(
                f"every file is indexed and searchable; {left:,} chunks are still without their "
                "vector (searches use the others); the next `hydra-rag index` embeds them")
        done = self._done
        n, total = (self._kept(), done.files_total) if done else (0, 0)
        if self.switched:
            return IndexInterrupted("the new index is complete and in use; the next "
                                    "`hydra-rag index` removes the previous one")
        if self.live is not None:
            m = marker(self.live)
            if m is None or not m.fresh:
                return IndexInterrupted(
                    f"the new index was not finished ({n} of {total} files); searches keep using "
                    "the one from before, and the next `hydra-rag index` removes the unfinished one")
            again = ("`hydra-rag index --full` goes on with it (a plain `hydra-rag index` "
                     "removes it)" if self.report.rebuild_reason == "--full"
                     else "`hydra-rag index` goes on with it")
            return IndexInterrupted(
                f"the new index was not finished ({n} of {total} files kept); searches keep using "
                f"the one from before, and the next {again}")
        if done is None:
            return IndexInterrupted("before any file was indexed; the next `hydra-rag index` "
                                    "starts again")
        journal = self.store.journal_path
        if journal.exists():
            try:
                journal.write_text(json.dumps({"at": time.strftime("%Y-%m-%d %H:%M:%S"),
                                               "files_done": n, "files_total": total}))
            except OSError:
                pass  # the journal itself still makes the next run check the index
        if n == total:
            return IndexInterrupted(f"all {total} files indexed and kept; the next "
                                    "`hydra-rag index` brings the full-text index up to date")
        return IndexInterrupted(f"{n} of {total} files indexed and kept; the next "
                                "`hydra-rag index` picks up the rest")

    def run(self, walked: WalkResult, light: dict[str, Light]) -> None:
        """Index what changed since the record (`light`: every recorded file, as load_state
        read it); only the entries of the files it changes are read whole."""
        store, report = self.store, self.report
        report.files_seen = len(walked.files)
        d = diff(self.root, walked, light, self.meta, self.docs.ocr_tag)
        if not light:
            # Nothing recorded yet (a first index, a new generation): every document this
            # store will hold is read by this extractor, so an interrupted run's successor
            # need not read again the ones it recorded.
            self.meta["extractor_version"] = EXTRACTOR_VERSION
            self.meta["ocr"] = self.docs.ocr_tag
        if self.selection is not None:
            # Written with meta.yaml before any row: a run that resumes this one, interrupted,
            # walks the same files.
            self.meta["selection"] = self.selection
        self.meta["private_text"] = self.private_text
        changed, removed, skipped = d.reread, d.removed, d.skipped
        files = self.files
        wanted = [r for r in (*d.changed, *d.removed, *(c.rel for c in d.touched)) if r not in files]
        files.update(store.file_list.entries(wanted) if wanted else {})
        start_files = dict(files)
        self._kinds_before = {e.kind for e in light.values() if e.chunks}
        self._live_embedders: dict[str, bool] = {}
        if self.meta.get("symbols") != SYMBOLS_VERSION:
            again = {c.rel for c in changed}
            self._backfill([rel for rel, e in light.items()
                            if e.kind == "code" and e.chunks and rel not in again])
        del light  # its only holder: not needed past the diff (index() passed it on)
        for cand in d.touched:
            files[cand.rel] = replace(files[cand.rel], size=cand.size, mtime_ns=cand.mtime_ns)
        report.files_unchanged += d.unchanged + len(d.touched)
        report.files_touched += len(d.touched)

        stale = stale_analysis(self.meta, store.table_names(),  # local tables: no LanceDB
                               self.analysis)
        if stale:
            store = self._reanalyse(stale, self.meta.get("lexical") or {}, files)
        self._place_tables(store)
        created = [t for t in TABLES if t not in store.table_names()]
        for t in created:
            a, emb = self.analysis[t], self.embedders[t]
            store.create_table(t, emb.id, emb.dims, a.fts_options())
        self.meta["lexical"] = {t: a.to_meta() for t, a in self.analysis.items()}
        self.meta["format_version"] = FORMAT_VERSION
        # Two phases for an index updated in place (a rebuild is searched in the old one
        # until it is whole), not with contexts (written as each chunk is embedded).
        self.later = bool(self.settings.vectors_later and self.live is None and self.ctx is None
                          and changed and self.settings.engine == "local")
        if self.later and not self.vectors_pending():
            # Recorded before any row (one chunk, until batches count them): a kill in phase
            # one leaves the vectors to the next run, which counts what waits.
            self.meta["vectors_pending"] = {"code": 1}
            self.pending_marker = True
        if stale or created or changed or removed:  # before any row (a no-op run writes it once, at its end)
            store.write_meta(self.meta)
        if d.touched:
            store.update_files({c.rel: files[c.rel] for c in d.touched})
        if not changed and not removed:
            report.files_skipped = dict(skipped)
            if self.resumed:  # the interrupted run may not have brought it up to date
                self._refresh(set(TABLES))
            return

        store.journal_path.touch()
        touched: set[str] = set()
        # The rows of files that left are deleted last: a file that was moved or renamed (or
        # copied from one that left) finds its chunks' vectors among them.
        leaving = {t: [c for rel in removed if files[rel].kind == t for c in files[rel].chunks]
                   for t in TABLES}
        if removed:
            for rel in removed:
                if files[rel].chunks or not files[rel].skip:
                    report.files_removed += 1
                del files[rel]
            store.update_files({}, removed)

        ray = self.settings.engine == "ray"
        if ray and self.ctx is not None:
            raise HydraError("--contextualize runs on the local engine only (engine: local)")
        if not ray:
            for t in TABLES:
                self.client(t)  # start sidecars here, not from the reader thread
        bytes_total = sum(c.size for c in changed)
        self._changed = changed
        kept = d.unchanged + len(d.touched)
        if self.resumed and kept and changed:
            self.progress(Progress("resume", message=f"resuming: {kept} files already indexed, "
                                                      f"{len(changed)} to go"))
        done = Progress("embed", files_total=len(changed), bytes_total=bytes_total,
                        stored_only=self.later)
        self.progress(done)
        self._done = done
        for batch in self._stream(changed, start_files):
            touched |= self._flush(batch, files, start_files, skipped)
            done.files_done += len(batch)
            done.bytes_done += sum(p.cand.size for p in batch)
            done.bytes_estimate = max(done.bytes_estimate, done.bytes_done)
            self.progress(done)
            if self.stop_requested is not None and self.stop_requested() \
                    and done.files_done < len(changed):
                report.files_left = len(changed) - done.files_done
                report.notes.append(f"stopped before the end: {report.files_left} changed files "
                                    "are left for the next run")
                break
        for t, ids in leaving.items():
            store.delete_ids(t, ids)
            report.chunks_removed += len(ids)
            if ids:
                touched.add(t)
        report.files_skipped = dict(skipped)
        if report.long_lines:
            report.notes.append(long_lines_note(report.long_lines))
        if report.unread_pages:
            report.notes.append(unread_note(report.unread_pages, self.docs.sandbox.ocr_why))
        self._refresh(set(TABLES) if self.resumed else touched)

    def _backfill(self, rels: list[str]) -> None:
        """Parse the code files indexed before the symbol table (or before its parser last
        changed) into it: read and parsed, not embedded again."""
        if rels:
            self.progress(Progress("symbols", message=f"reading the definitions of {len(rels)} "
                                                      "code files indexed before"))
        for i in range(0, len(rels), 500):
            parsed = {}
            for rel in rels[i : i + 500]:
                try:
                    text = on_disk(self.root, rel).read_bytes().decode("utf-8", errors="replace")
                except OSError:
                    continue  # gone or unreadable: the diff deals with it
                parsed[rel] = symbols_of(rel, text, "code")
            self.store.update_files({}, (), parsed)
        self.meta["symbols"] = SYMBOLS_VERSION
        self.store.write_meta(self.meta)

    def _place_tables(self, store: Store) -> None:
        """A generation without tables puts them where `tables_uri` says; one with tables
        keeps them where they are (and says so when the setting names another place)."""
        base = self.settings.tables_uri
        if store.table_names():
            if base and not store.lance_uri.startswith(base.rstrip("/") + "/"):
                self.report.notes.append(
                    f"the tables stay at {store.lance_uri}: tables_uri ({base}) applies to a "
                    "new index (`hydra-rag index --full` rebuilds this one there)")
            return
        if base and not store.remote:
            store.place_tables(base)

    def _refresh(self, tables: set[str]) -> None:
        self.progress(Progress("finish", message="updating the full-text index"))
        trained = self.meta.setdefault("vector_index", {})
        for t in tables:
            trained[t] = self.store.refresh(t, self.analysis[t].fts_options(), trained.get(t, 0))

    def _reanalyse(self, stale: list[str], lexical: dict[str, Any],
                   files: dict[str, FileEntry]) -> Store:
        """A new analysis (or a format-1 index): `lex` recomputed from the stored text, the
        vectors kept, in a new generation (the other table copied into it as it is), so that
        searches meanwhile read the old one whole and with the analysis it was made with."""
        live = self.store
        if live.remote:
            raise HydraError(
                f"the full-text index of {self.root} must be analysed again, and its tables are at "
                f"{live.lance_uri}, where that is not built yet: `hydra-rag index {self.root} "
                "--full` rebuilds them")
        new = self._stage("the full-text index is re-analysed", fresh=False)
        for t in TABLES:
            a = self.analysis[t]
            if t not in stale:
                new.copy_table(live, t)
                continue
            self.progress(Progress("reanalyse", message=f"re-analysing the {t} table"))
            n = new.reanalyse(t, self._lex_for(a, t), a.fts_options(), source=live)
            was = (lexical.get(t) or {}).get("language")
            self.report.notes.append(
                f"full-text index of {n} {t} chunks rebuilt for language {a.language}"
                + (f" (was {was})" if was else "") + "; no chunk was re-embedded")
        new.write_files({**live.read_files(), **files})  # every entry, as this run left them
        new.file_list.copy_symbols(live.file_list)
        return new

    def _stream(self, changed: list[Candidate], start_files: dict[str, FileEntry]
                ) -> Iterator[list[Prepared]]:
        """The changed files read and chunked in batches of about `index_batch` chunks: by a
        reader thread here, or (engine: ray) read, chunked and embedded by a Ray Data job
        (ray_engine.py), except the chunks whose text the changed files' stored rows already
        have a vector for."""
        if self.settings.engine != "ray":
            yield from read_ahead(in_batches(map(self._prepare, changed),
                                             self.settings.index_batch))
            return
        from hydra_rag.index import ray_engine

        known: dict[str, set[str]] = {}
        for t in TABLES:
            again = [c.rel for c in changed if (e := start_files.get(c.rel)) is not None
                     and e.kind == t and e.chunks]
            known[t] = {r["hash"] for r in self.store.rows_for_paths(t, again, ["hash", "vector"])
                        if r["vector"] is not None} if again else set()
        yield from in_batches((self._noted(p, unread) for p, unread
                               in ray_engine.prepared(self, changed, known)),
                              self.settings.index_batch)

    def _prepare(self, cand: Candidate) -> Prepared:
        """Read, classify and chunk one file (runs in the reader thread)."""
        p, unread = read_and_prepare(self.root, cand, self.docs,
                                     lambda kind: self.clients[self.embedders[kind].id].fits,
                                     self.analysis, keep_document=self.ctx is not None)
        return self._noted(p, unread)

    def _noted(self, p: Prepared, unread: list[int]) -> Prepared:
        """The file, with what its reading met recorded in the report: a document that could
        not be read, a document's pages that could not."""
        if p.kind is None and p.detail:
            self.report.document_problems[p.cand.rel] = f"{p.skip}: {p.detail}"
        if unread:
            self.report.unread_pages[p.cand.rel] = unread
        return p

