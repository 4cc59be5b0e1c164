"""Indexing, in pipeline order: walk → classify → chunk → embed → store, incrementally and
crash-safely. The library never prints: progress goes through a callback.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra_rag.config import Settings
from hydra_rag.documents import EXTRACTOR_VERSION, SKIPS
from hydra_rag.errors import HydraError, IndexLocked
from hydra_rag.index.prepare import Prepared, prepare, read_ahead, symbols_of
from hydra_rag.index.report import IndexInterrupted, IndexReport, Progress, ProgressFn
from hydra_rag.index.state import State, diff, stale_analysis
from hydra_rag.locks import file_lock, lock_holder, lock_label
from hydra_rag.paths import state_dir
from hydra_rag.read.chunk import with_context
from hydra_rag.read.secrets import SECRET
from hydra_rag.read.source import (
    read_source,
    recorded_secrets,
    recorded_selection,
    resolve_root,
    walker,
)
from hydra_rag.read.walk import LONG_LINE, OVERRIDABLE, Candidate, WalkResult
from hydra_rag.store import access, rebuild, registry
from hydra_rag.store.filelist import Light
from hydra_rag.store.index_dir import FORMAT_VERSION, TABLES, FileEntry, Store, marker
from hydra_rag.store.lexical import parse_language
from hydra_rag.store.symbols import SYMBOLS_VERSION

if TYPE_CHECKING:
    from hydra_rag.models.embed import EmbedClient

# Document skips remembered in files.db: an unchanged file is not extracted again to fail again
# (touching it, `index --full` or a new extractor version retries it).
# How long a run waits for a watch's run on the same folder (incremental: seconds, as a rule).
WATCH_WAIT_S = 600.0

DOCUMENT_SKIPS = tuple(r for r in SKIPS if r != "too_large")

class Run(State):
    """One index run: walk, diff, read and chunk, embed, store, switch."""

    # Asked after each stored batch: True ends the run there, whole (what is left of the
    # changed files is the next run's); `watch` stops this way.
    stop_requested: Callable[[], bool] | None = None
    _kinds_before: set[str | None]  # the tables that had chunks when the run began (run())
    # the run's --include and --exclude, and whether --include-secrets (index())
    selection: dict[str, Any] | None = None

    # -- the run ---------------------------------------------------------------------------

    def index(self, include: list[str] | None, exclude: list[str] | None, full: bool,
              repair: bool, include_secrets: bool | None = None) -> IndexReport:
        """The whole run, in its order: remove what an interrupted rebuild left, walk, choose
        the language, load (and repair) the state, analyse, index; then, if it built a new
        generation, switch to it."""
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
        keep_private = self.settings.index_access == "auto" and access.is_private(self.store.dir)
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
        whole = first or (self.switched and self.from_files)
        if access.settle(store.dir, gate, widen=whole or not keep_private) and keep_private:
            self.report.notes.append(
                f"{store.dir} stays private: it may still hold text of a private file that "
                f"left; `hydra-rag index {self.root} --full` rebuilds it, and lets it be shared")
        report = self.report
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

        for t in TABLES:
            self.client(t)  # start sidecars here, not from the reader thread
        bytes_total = sum(c.size for c in changed)
        self._changed = changed
        kept = d.unchanged + len(d.touched)
        if self.resumed and kept and changed:
            self.progress(Progress("resume", message=f"resuming: {kept} files already indexed, "
                                                      f"{len(changed)} to go"))
        done = Progress("embed", files_total=len(changed), bytes_total=bytes_total)
        self.progress(done)
        self._done = done
        for batch in read_ahead(self._batches(changed)):
            touched |= self._flush(batch, files, start_files, skipped)
            done.files_done += len(batch)
            done.bytes_done += sum(p.cand.size for p in batch)
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
            report.notes.append(_long_lines_note(report.long_lines))
        if report.unread_pages:
            report.notes.append(_unread_note(report.unread_pages, self.docs.sandbox.ocr_why))
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
                    text = (self.root / rel).read_bytes().decode("utf-8", errors="replace")
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
            n = new.reanalyse(t, self._lex_for(a), a.fts_options(), source=live)
            was = (lexical.get(t) or {}).get("language")
            self.report.notes.append(
                f"full-text index of {n} {t} chunks rebuilt for language {a.language}"
                + (f" (was {was})" if was else "") + "; no chunk was re-embedded")
        new.write_files({**live.read_files(), **files})  # every entry, as this run left them
        new.file_list.copy_symbols(live.file_list)
        return new

    def _batches(self, changed: list[Candidate]) -> Iterator[list[Prepared]]:
        """Read and chunk files into batches of about `index_batch` chunks: big appends for
        LanceDB (many tiny appends make a slow table), small enough that an interrupted run
        keeps most of its work."""
        batch: list[Prepared] = []
        pending = 0
        for cand in changed:
            prepared = self._prepare(cand)
            batch.append(prepared)
            pending += len(prepared.rows)
            if pending >= self.settings.index_batch:
                yield batch
                batch, pending = [], 0
        if batch:
            yield batch

    def _prepare(self, cand: Candidate) -> Prepared:
        """Read, classify and chunk one file (no index state is touched: runs in a thread)."""
        src = read_source(self.root, cand, self.docs)
        if src.text is None:
            if src.detail:
                self.report.document_problems[cand.rel] = f"{src.skip}: {src.detail}"
            return Prepared(cand, None, [], src.skip, detail=src.detail)
        if src.unread:
            self.report.unread_pages[cand.rel] = list(src.unread)
        return prepare(cand, src, self.clients[self.embedders[src.kind].id].fits,
                       self.analysis[src.kind].document, keep_document=self.ctx is not None)

    def _flush(self, batch: list[Prepared], files: dict[str, FileEntry],
               start_files: dict[str, FileEntry], skipped: Counter[str]) -> set[str]:
        """Embed a batch of files, add their rows, then drop their old rows, then record them.
        This order is what makes an interruption repairable (see `_repair`). Interrupted while
        embedding (Ctrl-C, an embedder that fails), it stores and records the files whose
        every chunk has its vector, then raises: a batch is minutes of embedding on a CPU."""
        store, report = self.store, self.report
        touched: set[str] = set()
        stopped: BaseException | None = None
        for p in batch:
            if p.kind is None:
                touched |= self._skip(p, files, skipped)
        for t in TABLES:
            if stopped is not None:  # not embedded: left out of the batch, for the next run
                batch = [p for p in batch if p.kind != t]
                continue
            items = [(p.cand, p.rows) for p in batch if p.kind == t]
            if not items:
                continue
            touched.add(t)
            # Reuse vectors of unchanged chunk texts of files indexed before.
            reused: dict[str, Any] = {}
            again = [c.rel for c, _ in items if c.rel in start_files and start_files[c.rel].chunks]
            for r in store.rows_for_paths(t, again, ["hash", "vector"]):
                reused[r["hash"]] = r["vector"]
            all_rows = [r for _, rows in items for r in rows]
            need = [r for r in all_rows if r["hash"] not in reused]
            if need and self.ctx is None and t in self._kinds_before:
                # The same text anywhere in the table (a moved, renamed or copied file): its
                # vector is this chunk's. Not when contextualized: a context depends on the file.
                for r in store.rows_in(t, "hash", sorted({r["hash"] for r in need}),
                                       ["hash", "vector"]):
                    reused[r["hash"]] = r["vector"]
                need = [r for r in all_rows if r["hash"] not in reused]
            if need and self.ctx is None and self._reusable(t):
                # A rebuild for a new chunker: a chunk cut the same way keeps its vector.
                assert self.live is not None
                try:
                    for r in self.live.rows_in(t, "hash", sorted({r["hash"] for r in need}),
                                               ["hash", "vector"]):
                        reused[r["hash"]] = r["vector"]
                except Exception:  # noqa: BLE001 - an unreadable old table: embed instead
                    self._live_embedders[t] = False
                need = [r for r in all_rows if r["hash"] not in reused]
            client = self.client(t)
            embed_text = {id(r): x for p in batch if p.kind == t
                          for r, x in zip(p.rows, p.inputs, strict=True)}
            if self.ctx is not None:
                self._contextualize(t, [p for p in batch if p.kind == t], client.fits, embed_text)
            if need:
                vecs, stopped = self._embed(client, [embed_text[id(r)] for r in need])
                report.chunks_embedded += len(vecs)
                for r, v in zip(need, vecs, strict=False):  # all of them, unless stopped
                    r["vector"] = v
                if stopped is not None:
                    whole = {id(p) for p in batch if p.kind == t and all(
                        "vector" in r or r["hash"] in reused for r in p.rows)}
                    batch = [p for p in batch if p.kind != t or id(p) in whole]
                    items = [(p.cand, p.rows) for p in batch if p.kind == t]
                    all_rows = [r for _, rows in items for r in rows]
                    need = [r for r in all_rows if r["hash"] not in reused]
                    if not items:
                        continue
            for r in all_rows:
                if "vector" not in r:
                    r["vector"] = reused[r["hash"]]
            report.chunks_reused += len(all_rows) - len(need)
            # A chunk id already stored in this table (an identical chunk at the same place)
            # must not be added twice.
            old_ids = {c for cand, _ in items
                       if (e := files.get(cand.rel)) is not None and e.kind == t for c in e.chunks}
            new_rows = [r for r in all_rows if r["id"] not in old_ids]
            store.add(t, new_rows)
            new_ids = {r["id"] for r in all_rows}
            stale = [i for i in old_ids if i not in new_ids]
            store.delete_ids(t, stale)
            report.chunks_added += len(new_rows)
            report.chunks_removed += len(stale)
        if self.ctx is not None:
            self.ctx.save()  # before files.db: a recorded file's contexts are never lost
        for p in (p for p in batch if p.kind):
            cand, kind, rows, long_lines = p.cand, p.kind, p.rows, p.long_lines
            if long_lines:
                report.long_lines.append(cand.rel)
            old = files.get(cand.rel)
            if old is not None and old.kind and old.kind != kind and old.chunks:
                store.delete_ids(old.kind, old.chunks)  # the file changed tables
                report.chunks_removed += len(old.chunks)
            files[cand.rel] = FileEntry(cand.size, cand.mtime_ns, kind, [r["id"] for r in rows],
                                        doc=p.doc, digest=p.digest)
            report.files_indexed += 1
        # This batch's files alone (a skipped file may have left the record).
        rels = [p.cand.rel for p in batch]
        store.update_files({rel: files[rel] for rel in rels if rel in files},
                           [rel for rel in rels if rel not in files],
                           {p.cand.rel: (list(p.symbols[0]), list(p.symbols[1])) for p in batch})
        for rel in rels:  # recorded: the run needs their entries no more (memory stays bounded)
            files.pop(rel, None)
            start_files.pop(rel, None)
        if stopped is not None:
            raise stopped
        return touched

    def _embed(self, client: EmbedClient, texts: list[str]) -> tuple[list[Any], BaseException | None]:
        """The vectors of `texts`, a round of requests at a time, with progress. Interrupted
        (Ctrl-C, an embedder that fails), it returns those of the rounds done, with what
        stopped it: the caller keeps them and raises it."""
        done = self._done
        assert done is not None
        base = done.chunks_done
        # One request per server per round: as fast as one call for them all, and an
        # interruption loses at most a round.
        step = client.batch * (1 + len(client.more_urls))
        vecs: list[Any] = []
        for i in range(0, len(texts), step):

            def on_batch(n: int, at: int = base + i, done: Progress = done) -> None:
                done.chunks_done = at + n
                self.progress(done)

            try:
                vecs.extend(client.embed_documents(texts[i : i + step], on_batch))
            except (KeyboardInterrupt, HydraError) as exc:
                return vecs, exc
        return vecs, None

    def _reusable(self, t: str) -> bool:
        """Whether the generation in use, while a new one is built, holds vectors of table t
        by the embedder this run uses, and without contexts (its vectors are then this run's
        for the same embedded text)."""
        if self.live is None or self.report.rebuild_reason == "--full":
            return False  # --full: nothing of the old index is trusted
        if t not in self._live_embedders:
            try:
                meta = self.live.read_meta()
            except HydraError:
                meta = {}
            have = (meta.get("tables") or {}).get(t) or {}
            emb = self.embedders[t]
            self._live_embedders[t] = (not meta.get("contextualize") and t in
                                       self.live.table_names() and
                                       (have.get("embedder"), have.get("dims")) == (emb.id, emb.dims))
        return self._live_embedders[t]

    def _contextualize(self, t: str, prepared: list[Prepared], fits: Callable[[str], bool],
                       embed_text: dict[int, str]) -> None:
        """Write (or recall) each chunk's context; it goes before the chunk (and its section)
        in the embedded text and in `lex`, shortened if they would not fit the embedder."""
        assert self.ctx is not None
        analysis = self.analysis[t]
        for p in prepared:
            for r in p.rows:
                before = self.ctx.written
                ctx = self.ctx.context(p.cand.rel, p.document, r["text"], r["line_start"])
                while ctx and not fits(with_context(ctx, embed_text[id(r)])):
                    ctx = ctx[: len(ctx) // 2].rsplit(" ", 1)[0]
                embed_text[id(r)] = with_context(ctx, embed_text[id(r)])
                # `lex` as reanalyse makes it: the whole section, even if the embedder got less
                r["lex"] = analysis.document(with_context(ctx, with_context(r["section"], r["text"])))
                if self.ctx.written != before and self.ctx.written % 25 == 0:
                    self.ctx.save()  # an interrupted run keeps what the model has written
                    self.progress(Progress("context", message=f"contextualized {self.ctx.written} "
                                                              "chunks"))
        self.report.contexts_written = self.ctx.written

    def _skip(self, p: Prepared, files: dict[str, FileEntry], skipped: Counter[str]) -> set[str]:
        """A file skipped for its content: count it, drop its old chunks, remember it so an
        unchanged file is not read again next time."""
        skipped[p.skip] += 1
        old = files.pop(p.cand.rel, None)
        if p.skip in ("binary", "not_utf8", "empty", "too_large", SECRET, *OVERRIDABLE,
                      *DOCUMENT_SKIPS):
            files[p.cand.rel] = FileEntry(p.cand.size, p.cand.mtime_ns, None, [], p.skip,
                                          error=p.detail)
        if old and old.chunks and old.kind:
            self.store.delete_ids(old.kind, old.chunks)
            self.report.chunks_removed += len(old.chunks)
            return {old.kind}
        return set()


def _unread_note(unread: dict[str, list[int]], why: str) -> str:
    """What a run says of documents it indexed with scanned pages it could not read."""
    shown = [f"{rel} ({_page_list(pages)})" for rel, pages in list(unread.items())[:5]]
    more = f" and {len(unread) - 5} more" if len(unread) > 5 else ""
    n = len(unread)
    return (f"{n} document{'s' * (n > 1)} with pages without a text layer, not read: "
            f"{', '.join(shown)}{more}; {why}")


def _page_list(pages: list[int]) -> str:
    if len(pages) == 1:
        return f"p. {pages[0]}"
    if pages[-1] - pages[0] == len(pages) - 1:
        return f"pp. {pages[0]}–{pages[-1]}"
    return "pp. " + ", ".join(map(str, pages[:6])) + (", …" if len(pages) > 6 else "")


def _long_lines_note(paths: list[str]) -> str:
    n = len(paths)
    return (f"{n} indexed file{'s are' if n > 1 else ' is'} mostly minified code or data on lines "
            f"over {LONG_LINE:,} characters, cut mid-line into chunks that search poorly: "
            + ", ".join(paths[:5]) + (" …" if n > 5 else "")
            + " (--exclude or a .hydraignore leaves them out)")


def index_folder(
    root: Path,
    settings: Settings,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    full: bool = False,
    tags: list[str] | None = None,
    wait: float = 0.0,
    progress: ProgressFn | None = None,
    repair: bool = False,
    language: str | None = None,
    contextualize: bool | None = None,
    stop: Callable[[], bool] | None = None,
    holder: str = "index",
    include_secrets: bool | None = None,
) -> IndexReport:
    """Bring `root/.hydra-index` up to date with the folder; returns what was done. `stop`
    is asked after each stored batch: True ends the run there, with a whole index. `holder`
    says who holds the folder's lock while it runs (a run finds a watch's lock and waits for
    it, up to WATCH_WAIT_S). `include_secrets` lets private keys and credentials in (None:
    as the folder's last run chose)."""
    t0 = time.monotonic()
    root = resolve_root(root)
    say = progress or (lambda _p: None)
    store = Store(root)
    access.create(store.dir)
    state_dir()  # sidecars started for this run log there: private before they do
    with ExitStack() as locks:
        held = locks.enter_context(file_lock(store.lock_path, wait, holder))
        if not held and lock_label(store.lock_path) == "watch" and holder != "watch":
            # A watch's runs are short and incremental: wait for this one rather than fail.
            say(Progress("lock", message=f"waiting for `hydra-rag watch` (pid "
                                         f"{lock_holder(store.lock_path) or '?'}), which is "
                                         f"indexing {root}"))
            held = locks.enter_context(file_lock(store.lock_path, max(wait, WATCH_WAIT_S), holder))
        if not held:
            pid = lock_holder(store.lock_path)
            what = ("`hydra-rag watch`" if lock_label(store.lock_path) == "watch"
                    else "`hydra-rag index`")
            raise IndexLocked(
                f"another {what} (pid {pid or '?'}) is updating {root}; "
                "wait for it to finish, or pass --wait SECONDS"
            )
        if language and language != "auto":
            parse_language(language)  # a typo fails here, before a rebuild could drop anything
        run = Run(root, settings, say, language, contextualize)
        run.stop_requested = stop
        try:
            report = run.index(include, exclude, full, repair, include_secrets)
        except KeyboardInterrupt:
            raise run.interrupted() from None
        finally:
            run.docs.close()
    registry.register(root, tags)
    report.elapsed_s = round(time.monotonic() - t0, 3)
    return report
