"""Storing a batch of prepared files: the vectors of its chunks (reused where an earlier run or
the generation in use has them, embedded otherwise), their contexts when contextualized, their rows
added and the old ones dropped, then their entries recorded in files.db."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hydra_rag.documents import SKIPS
from hydra_rag.errors import HydraError
from hydra_rag.index.prepare import Prepared
from hydra_rag.index.report import IndexReport, Progress, ProgressFn
from hydra_rag.read.chunk import heading, with_context
from hydra_rag.read.secrets import SECRET
from hydra_rag.read.walk import OVERRIDABLE
from hydra_rag.store.index_dir import TABLES, FileEntry, Store

if TYPE_CHECKING:
    from hydra_rag.catalog import Embedder
    from hydra_rag.index.contextualize import Contextualizer
    from hydra_rag.models.embed import EmbedClient
    from hydra_rag.store.lexical import Analysis

# Document skips remembered in files.db: an unchanged file is not extracted again to fail again
# (touching it, `index --full` or a new extractor version retries it).
DOCUMENT_SKIPS = tuple(r for r in SKIPS if r != "too_large")


def _missing(rows: list[dict[str, Any]], reused: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows with no vector yet (the Ray engine's come with theirs) and none to reuse."""
    return [r for r in rows if r["hash"] not in reused and "vector" not in r]


class Batches:
    """Embeds and stores a batch of prepared files, for `Run` (run.py), which inherits it.

    It expects of the class: what `State` (state.py) sets up (`store`, `live`, `report`,
    `ctx`, `analysis`, `embedders`, `progress`, `_done` and `client()`), and what `Run.run`
    sets before the first batch: `_kinds_before` (the tables that had chunks when the run
    began) and `_live_embedders` (per table, whether the generation in use has its vectors)."""

    store: Store
    live: Store | None
    report: IndexReport
    ctx: Contextualizer | None
    analysis: dict[str, Analysis]
    embedders: dict[str, Embedder]
    progress: ProgressFn
    _done: Progress | None
    meta: dict[str, Any]
    pending_marker = False  # meta's vectors_pending is a marker, not a count yet
    later = False  # phase one: chunks are stored without vectors, embedded after (Run.vectors)
    _batch_size: tuple[int, int, int] = (0, 0, 0)  # bytes, chunks, chunks done before it
    _kinds_before: set[str | None]
    _live_embedders: dict[str, bool]

    if TYPE_CHECKING:
        def client(self, table: str) -> EmbedClient: ...

    def _flush(self, batch: list[Prepared], files: dict[str, FileEntry],
               start_files: dict[str, FileEntry], skipped: Counter[str]) -> set[str]:
        """Embed a batch of files, add their rows, then drop their old rows, then record them.
        This order is what makes an interruption repairable (see `_repair`). Interrupted while
        embedding (Ctrl-C, an embedder that fails), it stores and records the files whose
        every chunk has its vector, then raises: a batch is minutes of embedding on a CPU."""
        store, report = self.store, self.report
        touched: set[str] = set()
        stopped: BaseException | None = None
        if self._done is not None:  # what the progress estimate counts this batch as
            self._batch_size = (sum(p.cand.size for p in batch),
                                sum(len(p.rows) for p in batch if p.kind),
                                self._done.chunks_done)
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
                if r["vector"] is not None:  # not one still waiting for its vector
                    reused[r["hash"]] = r["vector"]
            all_rows = [r for _, rows in items for r in rows]

            # Embedded already by the Ray engine's actors (ray_engine.py)
            ahead = sum(1 for r in all_rows if "vector" in r)
            if ahead and self._done is not None:
                report.chunks_embedded += ahead
                self._done.chunks_done += ahead
            need = _missing(all_rows, reused)
            if need and self.ctx is None and t in self._kinds_before:
                # The same text anywhere in the table (a moved, renamed or copied file): its
                # vector is this chunk's. Not when contextualized: a context depends on the file.
                for r in store.rows_in(t, "hash", sorted({r["hash"] for r in need}),
                                       ["hash", "vector"]):
                    if r["vector"] is not None:
                        reused[r["hash"]] = r["vector"]
                need = _missing(all_rows, reused)
            if need and self.ctx is None and self._reusable(t):
                # A rebuild for a new chunker: a chunk cut the same way keeps its vector.
                assert self.live is not None
                try:
                    for r in self.live.rows_in(t, "hash", sorted({r["hash"] for r in need}),
                                               ["hash", "vector"]):
                        if r["vector"] is not None:
                            reused[r["hash"]] = r["vector"]
                except Exception:  # noqa: BLE001 - an unreadable old table: embed instead
                    self._live_embedders[t] = False
                need = _missing(all_rows, reused)
            embed_text = {id(r): x for p in batch if p.kind == t
                          for r, x in zip(p.rows, p.inputs, strict=True)}
            if self.ctx is not None:
                self._contextualize(t, [p for p in batch if p.kind == t], self.client(t).fits,
                                    embed_text)
            if need and self.later and self.ctx is None:
                # Phase one: stored now, searchable by every list but the vector one; the
                # vectors come in phase two (Run.vectors), a batch at a time.
                for r in need:
                    r["vector"] = None
                report.chunks_waiting += len(need)
                waiting = self.meta.setdefault("vectors_pending", {})
                if self.pending_marker:  # the run's marker (Run.run) gives way to the count
                    waiting.clear()
                    self.pending_marker = False
                waiting[t] = waiting.get(t, 0) + len(need)
            elif need:
                vecs, stopped = self._embed(self.client(t), [embed_text[id(r)] for r in need])
                report.chunks_embedded += len(vecs)
                for r, v in zip(need, vecs, strict=False):  # all of them, unless stopped
                    r["vector"] = v
                if stopped is not None:
                    whole = {id(p) for p in batch if p.kind == t and all(
                        "vector" in r or r["hash"] in reused for r in p.rows)}
                    batch = [p for p in batch if p.kind != t or id(p) in whole]
                    items = [(p.cand, p.rows) for p in batch if p.kind == t]
                    all_rows = [r for _, rows in items for r in rows]
                    need = _missing(all_rows, reused)
                    if not items:
                        continue
            for r in all_rows:
                if "vector" not in r:
                    r["vector"] = reused[r["hash"]]
            report.chunks_reused += len(all_rows) - len(need) - ahead
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
        if self.later and not self.pending_marker:
            # A search during phase one reads how many chunks wait for their vector (its
            # notice and the vector list's weight); phase two counts them in the tables.
            store.write_meta(self.meta)
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
                size, chunks, start = self._batch_size
                share = min(1.0, (done.chunks_done - start) / chunks) if chunks else 0.0
                done.bytes_estimate = max(done.bytes_estimate, done.bytes_done + int(size * share))
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
                head = heading(r["kind"], r["path"], r["section"])
                r["lex"] = analysis.document(with_context(ctx, with_context(head, r["text"])))
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
