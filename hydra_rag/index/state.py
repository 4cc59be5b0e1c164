"""An index run's state, and the decisions taken before any file is indexed: read meta.yaml and
files.json, rebuild or not, repair after an interruption, choose the prose language and the
full-text analysis."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra_rag import rebuild
from hydra_rag.catalog import Embedder, foreign_for, get_embedder, table_embedder
from hydra_rag.chunk import CHUNKER_VERSION
from hydra_rag.classify import classify
from hydra_rag.config import Settings
from hydra_rag.contextualize import Contextualizer, with_context
from hydra_rag.documents import format_of
from hydra_rag.errors import HydraError, IndexError_
from hydra_rag.index.report import IndexReport, Progress, ProgressFn
from hydra_rag.index.source import read_source, reader_for
from hydra_rag.lexical import Analysis, detect_language, parse_language
from hydra_rag.store import FORMAT_VERSION, TABLES, FileEntry, Store, new_meta
from hydra_rag.walk import Candidate, WalkResult, read_indexable

if TYPE_CHECKING:
    from hydra_rag.embed import EmbedClient


class State:
    """State of one index run over one folder (holding its lock): what it reads, what it
    decides before indexing (the language, the analysis, whether to rebuild) and the repair
    of what an interrupted run left. `Run` (run.py) does the indexing."""

    def __init__(self, root: Path, settings: Settings, progress: ProgressFn,
                 language: str | None = None, contextualize: bool | None = None) -> None:
        self.root = root
        self.contextualize = contextualize  # True/False: switch; None: keep the folder's choice
        self.ctx: Contextualizer | None = None
        self.language = language  # --language: a code or name, "auto", or None (keep/detect)
        self.prose_language = "en"  # what the prose is analysed and embedded as (see choose_language)
        self._files_read: dict[str, FileEntry] | None = None  # files.json as choose_language read it
        self.analysis: dict[str, Analysis] = {}
        self.settings = settings
        self.progress = progress
        self.store = Store(root)  # what this run writes: the index in use, or a new generation
        self.live: Store | None = None  # while a new generation is built: the one in use
        self.switched = False  # the new generation is the one in use
        self.resumed = False  # a journal was found: an earlier run was interrupted
        self._done: Progress | None = None  # the embedding stage's progress, once it started
        self._changed: list[Candidate] = []  # the files this run indexes
        self.report = IndexReport(str(root))
        self.embedders: dict[str, Embedder] = {
            t: get_embedder(settings.embedder_for(t)) for t in TABLES
        }
        self.clients: dict[str, EmbedClient] = {}
        self.files: dict[str, FileEntry] = {}
        # Extracted texts are cached beside every generation, in .hydra-index/extracted/.
        self.docs = reader_for(settings, self.store.dir)

    def client(self, table: str) -> EmbedClient:
        from hydra_rag.embed import connect

        emb = self.embedders[table]
        if emb.id not in self.clients:
            self.clients[emb.id] = connect(
                emb, self.settings, lambda m: self.progress(Progress("sidecar", message=m))
            )
        return self.clients[emb.id]

    # -- consistency -----------------------------------------------------------------------

    def load_state(self, full: bool) -> dict[str, FileEntry]:
        """Read meta/files, decide whether to rebuild, repair after an interrupted run."""
        store = self.store
        wanted = {t: (e.id, e.dims) for t, e in self.embedders.items()}
        reason = "--full" if full else ""
        meta: dict[str, Any] = {}
        if not reason:
            try:
                meta = store.read_meta()
            except IndexError_ as exc:
                # The tables carry their embedder in their schema: use that copy.
                recorded = {t: store.table_embedder(t) for t in store.table_names()}
                if all(v is not None for v in recorded.values()):
                    meta = new_meta({t: v for t, v in recorded.items() if v is not None})
                    # Tables without sections were chunked by an older chunker.
                    sections = all(store.has_column(t, "section") for t in recorded)
                    meta["chunker_version"] = CHUNKER_VERSION if sections else 1
                    self.report.repaired.append(f"{exc}; rebuilt it from the tables")
                else:
                    reason = f"{exc} and the tables do not say which embedder built them"
        if not reason and meta:
            if meta.get("format_version") not in (1, FORMAT_VERSION):  # 1 is migrated
                reason = f"index format {meta.get('format_version')} → {FORMAT_VERSION}"
            elif meta.get("chunker_version") != CHUNKER_VERSION:
                reason = (f"chunker version {meta.get('chunker_version')} → {CHUNKER_VERSION}")
            else:
                for t, (eid, dims) in wanted.items():
                    have = meta.get("tables", {}).get(t)
                    if have and (have.get("embedder"), have.get("dims")) != (eid, dims):
                        reason = (f"table {t} was built with embedder {have.get('embedder')} "
                                  f"({have.get('dims')} dims), now {eid} ({dims} dims)")
                        break
        elif not reason and store.table_names():
            reason = "the index has tables but no meta.yaml"
        was_ctx = str(meta.get("contextualize") or "")
        ctx_model = (self.settings.context_model if self.contextualize
                     else "" if self.contextualize is False else was_ctx)
        if not reason and meta and was_ctx != ctx_model:
            reason = (f"contextualize {was_ctx or 'off'} → {ctx_model or 'off'} "
                      "(every vector changes; contexts already written are reused)")
        if ctx_model:  # a missing model fails here, before anything is dropped
            self.ctx = Contextualizer(ctx_model, self.settings, store.dir / "contexts.json")
        if reason:
            if store.exists():  # built beside it, while searches keep reading it
                self.report.rebuilt = True
                self.report.rebuild_reason = reason
                self.progress(Progress("rebuild", message=f"rebuilding the index: {reason} "
                                       "(searches use the current one until the new one is done)"))
                self._stage(reason)
            meta = {}
        self.meta = meta or new_meta(wanted)
        self.meta["tables"] = {t: {"embedder": e, "dims": d} for t, (e, d) in wanted.items()}
        self.meta.pop("contextualize", None)
        if ctx_model:
            self.meta["contextualize"] = ctx_model
            self.report.contextualized_by = ctx_model

        store = self.store  # a new generation, if this is a rebuild
        try:
            # Parsed once per run: on a large tree files.json is most of a no-op run's reading.
            read = None if reason else self._files_read
            files = store.read_files() if read is None else read
        except IndexError_ as exc:
            files = self._files_from_tables()
            self.report.repaired.append(f"{exc}; rebuilt it from the tables")
            store.journal_path.touch()
        if store.journal_path.exists():
            self.resumed = True
            interrupted = _read_journal(store.journal_path)
            if interrupted:
                self.report.repaired.append(
                    f"resumed the run interrupted at {interrupted['at']}: it had indexed and kept "
                    f"{interrupted['files_done']} of {interrupted['files_total']} files, this run "
                    "indexes the rest")
                store.journal_path.write_text("")  # said once
            files = self._repair(files)
        return files

    def _stage(self, reason: str) -> Store:
        """From here on, write a new generation beside the one in use (see hydra_rag.rebuild)."""
        assert self.live is None
        self.live, self.store = self.store, rebuild.begin(self.store, reason)
        return self.store

    def choose_language(self, walked: WalkResult, full: bool) -> None:
        """The prose language: --language, else the one recorded for the folder, else (first
        build, --full, or an empty prose table) the one detected on a sample of its files. It
        picks the prose table's lexical analysis and, for a language the chosen embedder does
        not know, its embedder (`foreign_embedder`). Runs before the index state is loaded,
        because the embedders decide whether the index must be rebuilt."""
        meta: dict[str, Any] = {}
        has_prose = False
        if not full:
            try:
                meta = self.store.read_meta()
                files = self._files_read = self.store.read_files()
                has_prose = any(e.kind == "prose" and e.chunks for e in files.values())
            except HydraError:
                pass  # load_state reports and repairs it
        stored = ((meta.get("lexical") or {}).get("prose") or {}).get("language")
        if self.language and self.language != "auto":
            lang = parse_language(self.language)
        elif self.language != "auto" and stored and has_prose:
            lang = str(stored)
        else:
            lang = detect_language(self._prose_samples(walked))
        self.prose_language = lang
        chosen = self.embedders["prose"]
        emb = table_embedder(self.settings, "prose", lang)
        was = ((meta.get("tables") or {}).get("prose") or {}).get("embedder")
        foreign = foreign_for(self.settings, "prose", lang)
        if foreign is not None and emb.id == chosen.id and was != foreign.id:  # not installed
            self.report.notes.append(
                f"the prose is in {lang}, which {chosen.id} does not know; {foreign.id} would "
                "search it by meaning if installed (`hydra-rag rag setup`, then index again)")
        if emb.id != chosen.id and was != emb.id:
            self.report.notes.append(
                f"the prose is in {lang}, which {chosen.id} does not know: it is embedded with "
                f"{emb.id} (to keep {chosen.id}, set foreign_embedder: off)")
        self.embedders["prose"] = emb

    def choose_analysis(self) -> None:
        """The lexical analysis of each table: code is English with identifier splitting;
        prose is analysed in its language (see choose_language)."""
        self.analysis = {"code": Analysis("en"), "prose": Analysis(self.prose_language)}
        self.report.languages = {t: a.language for t, a in self.analysis.items()}

    def _lex_for(self, a: Analysis) -> Callable[[str, str, str], str]:
        """The `lex` of a stored chunk (text, path, section): its section before it, and its
        cached context when contextualized."""
        ctx = self.ctx
        if ctx is None:
            return lambda text, path, section: a.document(with_context(section, text))
        return lambda text, path, section: a.document(
            with_context(ctx.cached(path, text) or "", with_context(section, text)))

    def _prose_samples(self, walked: WalkResult, want: int = 40, look: int = 400) -> list[str]:
        samples: list[str] = []
        # Prose by name alone first: a code-only folder reads nothing here.
        named = [c for c in walked.files if classify(c.rel, "") == "prose"]
        for cand in named[:look]:
            text, _ = read_indexable(self.root / cand.rel)
            if text and classify(cand.rel, text[:200]) == "prose":
                samples.append(text[:3000])
                if len(samples) >= want:
                    break
        # Documents next (what is extracted here is cached: the run does not read it again).
        docs = [c for c in walked.files if format_of(c.rel) and format_of(c.rel) != "html"]
        for cand in docs[:max(0, min(want - len(samples), 10))]:
            src = read_source(self.root, cand, self.docs)
            if src.text:
                samples.append(src.text[:3000])
        return samples

    def _files_from_tables(self) -> dict[str, FileEntry]:
        """Rebuild files.json from the rows: stat unknown, so every file is re-checked."""
        files: dict[str, FileEntry] = {}
        for t in self.store.table_names():
            for r in self.store.scan(t, ["id", "path"]).to_pylist():
                e = files.setdefault(r["path"], FileEntry(-1, -1, t))
                e.chunks.append(r["id"])
        return files

    def _repair(self, files: dict[str, FileEntry]) -> dict[str, FileEntry]:
        """After an interrupted run: drop orphan and duplicate rows, and forget files whose
        chunks are incomplete so that they are indexed again."""
        store = self.store
        orphans = dups = forgotten = 0
        for t in store.table_names():
            counts = store.id_counts(t)
            known = {c for e in files.values() if e.kind == t for c in e.chunks}
            bad = [i for i, n in counts.items() if i not in known or n > 1]
            dups += sum(1 for i in bad if counts[i] > 1)
            orphans += sum(1 for i in bad if i not in known)
            store.delete_ids(t, bad)
            present = {i for i, n in counts.items() if i in known and n == 1}
            for rel, e in list(files.items()):
                if e.kind == t and any(c not in present for c in e.chunks):
                    # Its surviving chunks are orphans now; drop them too.
                    store.delete_ids(t, [c for c in e.chunks if c in present])
                    del files[rel]
                    forgotten += 1
        for rel, e in list(files.items()):
            if e.kind not in TABLES and e.chunks:
                del files[rel]
        if orphans or dups or forgotten:
            self.report.repaired.append(
                f"repaired an interrupted run: {orphans} orphan and {dups} duplicate chunks "
                f"removed, {forgotten} files to index again"
            )
        store.write_files(files)
        return files


def _read_journal(path: Path) -> dict[str, Any] | None:
    """What an interrupted run wrote in its journal (None: it was killed, or it is --repair)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8") or "null")
        return record if isinstance(record, dict) and {"at", "files_done", "files_total"} <= set(
            record) else None
    except (OSError, ValueError):
        return None
