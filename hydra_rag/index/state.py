"""An index run's state, and the decisions taken before any file is indexed: read meta.yaml and
files.db, rebuild or not, repair after an interruption, choose the prose language and the
full-text analysis."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra_rag.catalog import Embedder, foreign_for
from hydra_rag.config import Settings, chosen_embedder, table_embedder
from hydra_rag.documents import EXTRACTOR_VERSION, OCR_FORMATS, format_of
from hydra_rag.errors import HydraError, IndexError_, MetaCorrupt
from hydra_rag.index.contextualize import Contextualizer
from hydra_rag.index.report import IndexReport, Progress, ProgressFn
from hydra_rag.paths import on_disk
from hydra_rag.read.chunk import CHUNKER_VERSION, heading, with_context
from hydra_rag.read.classify import classify
from hydra_rag.read.secrets import SECRET, holds_private_key
from hydra_rag.read.source import digest_of, read_source, reader_for, recorded_secrets
from hydra_rag.read.walk import OVERRIDABLE, Candidate, WalkResult, read_indexable, read_text
from hydra_rag.store import rebuild
from hydra_rag.store.filelist import Light, light_of
from hydra_rag.store.index_dir import (
    FORMAT_VERSION,
    MIGRATED_FORMATS,
    TABLES,
    FileEntry,
    Store,
    marker,
    new_meta,
)
from hydra_rag.store.lexical import Analysis, detect_language, parse_language

if TYPE_CHECKING:
    from hydra_rag.models.embed import EmbedClient


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
        self._light_read: dict[str, Light] | None = None  # files.db as choose_language read it
        self.analysis: dict[str, Analysis] = {}
        self.settings = settings
        self.progress = progress
        self.store = Store(root)  # what this run writes: the index in use, or a new generation
        self.live: Store | None = None  # while a new generation is built: the one in use
        self.switched = False  # the new generation is the one in use
        self.from_files = False  # the new generation is built by this run from the files alone
        self.resumed = False  # a journal was found: an earlier run was interrupted
        self._done: Progress | None = None  # the embedding stage's progress, once it started
        self._changed: list[Candidate] = []  # the files this run indexes
        self.report = IndexReport(str(root))
        self.embedders: dict[str, Embedder] = {
            t: chosen_embedder(settings, t) for t in TABLES
        }
        self.clients: dict[str, EmbedClient] = {}
        # Whole entries (chunk ids and all) of the files this run changes, or of every file
        # when it repairs; the others are known by their `Light` entry alone (load_state).
        self.files: dict[str, FileEntry] = {}
        # Extracted texts are cached beside every generation, in .hydra-index/extracted/.
        self.docs = reader_for(settings, self.store.dir)

    def client(self, table: str) -> EmbedClient:
        from hydra_rag.models.embed import connect

        emb = self.embedders[table]
        if emb.id not in self.clients:
            self.clients[emb.id] = connect(
                emb, self.settings, lambda m: self.progress(Progress("sidecar", message=m))
            )
        return self.clients[emb.id]

    # -- consistency -----------------------------------------------------------------------

    def load_state(self, full: bool) -> dict[str, Light]:
        """Read meta.yaml and files.db, decide whether to rebuild, repair after an interrupted
        run. Returns every recorded file's `Light` entry; `self.files` holds whole entries only
        when a repair needed them all."""
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
                    said = exc.problem if isinstance(exc, MetaCorrupt) else str(exc)
                    self.report.repaired.append(f"{said}: rebuilt it from the tables")
                else:
                    reason = f"{exc} and the tables do not say which embedder built them"
        ctx_model = context_model(meta, self.settings, self.contextualize)
        if not reason and meta:
            reason = rebuild_reason(meta, wanted, ctx_model)
        elif not reason and store.table_names():
            reason = "the index has tables but no meta.yaml"
        if ctx_model:  # a missing model fails here, before anything is dropped
            self.ctx = Contextualizer(ctx_model, self.settings, store.dir / "contexts.json")
        # A rebuild that was interrupted: this run goes on with it if it builds the same,
        # else it is removed (rebuild.clean left it for this decision).
        left = rebuild.unfinished(store)
        resumed = self._resumable(left, wanted, ctx_model) if reason and left else None
        if left is not None and resumed is None:
            self.report.repaired += rebuild.drop(store, left)
        if reason:
            if store.exists():  # built beside it, while searches keep reading it
                self.report.rebuilt = True
                self.report.rebuild_reason = reason
                took = self._rebuild_time()
                self.progress(Progress("rebuild", message=f"rebuilding the index: {reason}{took} "
                                       "(searches use the current one until the new one is done)"))
                if resumed is not None and (m := marker(store)) is not None:
                    self.report.repaired.append(
                        f"resumed the rebuild interrupted before ({m.reason}, started {m.started}): "
                        "the files it had indexed were kept")
                self._stage(reason, left if resumed is not None else None)
            meta = resumed or {}
        self.meta = meta or new_meta(wanted)
        self.meta["tables"] = {t: {"embedder": e, "dims": d} for t, (e, d) in wanted.items()}
        self.meta.pop("contextualize", None)
        if ctx_model:
            self.meta["contextualize"] = ctx_model
            self.report.contextualized_by = ctx_model

        store = self.store  # a new generation, if this is a rebuild
        files: dict[str, FileEntry] | None = None
        light: dict[str, Light] | None = None
        # What choose_language read: the caller holds it from here as long as it needs it.
        read_before, self._light_read = self._light_read, None
        try:
            if store.journal_path.exists():
                files = store.read_files()  # the repair checks every entry
            else:
                # Read once per run: on a large tree it is most of a no-op run's reading.
                read = None if reason else read_before
                light = store.file_list.light() if read is None else read
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
            files = self._repair(store.read_files() if files is None else files)
        if files is not None:
            self.files = files
            light = {rel: light_of(e) for rel, e in files.items()}
        assert light is not None
        return light

    def _rebuild_time(self) -> str:
        """How long re-embedding the index's chunks should take at the rates measured here
        ("" when none is known)."""
        from hydra_rag.models.speeds import embed_estimate

        try:
            light = self._light_read or self.store.file_list.light()
        except (IndexError_, OSError):
            return ""
        chunks = {t: sum(e.chunks for e in light.values() if e.kind == t and not e.skip)
                  for t in self.embedders}
        return embed_estimate(chunks, self.embedders)

    def _stage(self, reason: str, resume: Store | None = None, fresh: bool = True) -> Store:
        """From here on, write a new generation beside the one in use (see hydra_rag.store.rebuild),
        or go on with `resume`, one an interrupted rebuild left. `fresh`: built from the files
        alone (a later run may resume it), not from the tables in use."""
        assert self.live is None
        if resume is not None:
            self.live, self.store = self.store, rebuild.resume(self.store, resume, reason)
            self.resumed = True
        else:
            self.live, self.store = self.store, rebuild.begin(self.store, reason, fresh)
            self.from_files = fresh
        return self.store

    def _resumable(self, left: Store | None, wanted: dict[str, tuple[str, int]],
                   ctx_model: str) -> dict[str, Any] | None:
        """The meta.yaml of `left`, the generation an interrupted rebuild left, if this run
        would build the same (embedders, chunker, format, contexts and full-text analysis):
        its stored files are kept, their vectors being what this run would compute."""
        if left is None:
            return None
        try:
            meta = left.read_meta()
        except HydraError:
            return None
        if rebuild_reason(meta, wanted, ctx_model) or stale_analysis(meta, list(TABLES),
                                                                      self.analysis):
            return None
        return meta

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
                light = self._light_read = self.store.file_list.light()
                has_prose = any(e.kind == "prose" and e.chunks for e in light.values())
            except HydraError:
                pass  # load_state reports and repairs it
        lang = prose_language(self.language, meta, has_prose,
                              lambda: detect_language(prose_samples(self.root, walked, self.docs)))
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

    def _lex_for(self, a: Analysis, kind: str) -> Callable[[str, str, str], str]:
        """The `lex` of a stored chunk (text, path, section): its section before it, and its
        cached context when contextualized."""
        ctx = self.ctx
        if ctx is None:
            return lambda text, path, section: a.document(
                with_context(heading(kind, path, section), text))
        return lambda text, path, section: a.document(
            with_context(ctx.cached(path, text) or "",
                         with_context(heading(kind, path, section), text)))

    def _files_from_tables(self) -> dict[str, FileEntry]:
        """Rebuild files.db from the rows: stat unknown, so every file is re-checked."""
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


# -- the decisions, as functions of what is on disk: `index` takes them, `status` reports them --


def context_model(meta: dict[str, Any], settings: Settings, contextualize: bool | None) -> str:
    """The chat model that writes chunk contexts ("" = off): --contextualize switches to the
    configured one, --no-contextualize off, neither keeps the folder's choice."""
    if contextualize:
        return settings.context_model
    return "" if contextualize is False else str(meta.get("contextualize") or "")


def rebuild_reason(meta: dict[str, Any], wanted: dict[str, tuple[str, int]], ctx_model: str) -> str:
    """Why the index that `meta` describes must be rebuilt to hold vectors of the `wanted`
    (embedder id, dims) per table, contextualized by `ctx_model` ("" when it need not be)."""
    if meta.get("format_version") not in (*MIGRATED_FORMATS, FORMAT_VERSION):
        return f"index format {meta.get('format_version')} → {FORMAT_VERSION}"
    if meta.get("chunker_version") != CHUNKER_VERSION:
        return f"chunker version {meta.get('chunker_version')} → {CHUNKER_VERSION}"
    for t, (eid, dims) in wanted.items():
        have = meta.get("tables", {}).get(t)
        if have and (have.get("embedder"), have.get("dims")) != (eid, dims):
            return (f"table {t} was built with embedder {have.get('embedder')} "
                    f"({have.get('dims')} dims), now {eid} ({dims} dims)")
    was_ctx = str(meta.get("contextualize") or "")
    if was_ctx != ctx_model:
        return (f"contextualize {was_ctx or 'off'} → {ctx_model or 'off'} "
                "(every vector changes; contexts already written are reused)")
    return ""


def prose_language(requested: str | None, meta: dict[str, Any], has_prose: bool,
                   detect: Callable[[], str]) -> str:
    """The prose language: --language (`requested`), else the one `meta` records if the index
    has prose, else `detect()` (also for --language auto)."""
    stored = ((meta.get("lexical") or {}).get("prose") or {}).get("language")
    if requested and requested != "auto":
        return parse_language(requested)
    if requested != "auto" and stored and has_prose:
        return str(stored)
    return detect()


def stale_analysis(meta: dict[str, Any], tables: list[str],
                   analysis: dict[str, Analysis]) -> list[str]:
    """The tables whose full-text index was built with another analysis than `analysis`
    (a new language, a new lexical version, a format-1 index): they are re-analysed."""
    lexical = meta.get("lexical") or {}
    return [t for t in tables if lexical.get(t) != analysis[t].to_meta()]


def prose_samples(root: Path, walked: WalkResult, reader: Any, want: int = 40,
                  look: int = 400) -> list[str]:
    """Texts to detect the prose language on: prose files by name, then a few documents."""
    samples: list[str] = []
    # Prose by name alone first: a code-only folder reads nothing here.
    named = [c for c in walked.files if classify(c.rel, "") == "prose"]
    for cand in named[:look]:
        text, _ = read_indexable(on_disk(root, cand.rel))
        if text and classify(cand.rel, text[:200]) == "prose":
            samples.append(text[:3000])
            if len(samples) >= want:
                break
    # Documents next (what is extracted here is cached: the run does not read it again).
    docs = [c for c in walked.files if format_of(c.rel) and format_of(c.rel) != "html"]
    for cand in docs[:max(0, min(want - len(samples), 10))]:
        src = read_source(root, cand, reader)
        if src.text:
            samples.append(src.text[:3000])
    return samples


@dataclass
class Diff:
    """A walk against files.db: what an index run reads (`reread`, in walk order: the
    `added` and the `changed` files), what it forgets (`removed`), and what it only re-records
    (`touched`: a new size or mtime, the same content)."""

    reread: list[Candidate] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    touched: list[Candidate] = field(default_factory=list)
    unchanged: int = 0  # not touched, not read (the touched ones aside)
    skipped: Counter[str] = field(default_factory=Counter)  # the walk's and files.db's skips

    @property
    def current(self) -> bool:
        return not (self.reread or self.removed)


def diff(root: Path, walked: WalkResult, files: Mapping[str, FileEntry | Light],
         meta: dict[str, Any], ocr: str = "") -> Diff:
    """Compare a walk with files.db by (size, mtime); a file whose stat changed is hashed,
    and is only `touched` if its content did not. Reads files, writes nothing."""
    d = Diff(skipped=Counter(walked.skipped))
    # Files of a document format indexed by another extractor version (or as plain text,
    # before documents were read) are read again, once.
    redo_docs = meta.get("extractor_version") != EXTRACTOR_VERSION
    # PDFs and images read with other OCR languages than now (`ocr`: "" for no OCR) are read
    # again, and so are the scans skipped for want of OCR once it can be done.
    redo_ocr = meta.get("ocr", "") != ocr
    # An index made with --include-secrets, walked now without: a text file it holds may hold
    # a private key, and an unchanged file is not read again otherwise (those named as secrets
    # leave with the walk).
    was_secrets = recorded_secrets(meta)
    for cand in walked.files:
        e = files.get(cand.rel)
        fmt = format_of(cand.rel)
        redo = (redo_docs and fmt is not None) or (redo_ocr and fmt in OCR_FORMATS)
        if e is None:
            d.reread.append(cand)
            d.added.append(cand.rel)
            continue
        if ocr and e.skip == "scanned":
            redo = True
        if (was_secrets and not cand.secrets and e.kind and not e.skip
                and _holds_private_key(on_disk(root, cand.rel))):
            redo = True
        if (e.size == cand.size and e.mtime_ns == cand.mtime_ns
                and not (cand.included and e.skip in OVERRIDABLE)
                and not (cand.secrets and e.skip == SECRET) and not redo):
            if e.skip:
                d.skipped[e.skip] += 1
            else:
                d.unchanged += 1
            continue
        if (e.digest and e.kind and not e.skip and not redo
                and digest_of(root, cand.rel, bool(e.doc)) == e.digest):
            # Touched, checked out again, copied over with the same bytes: re-recorded only.
            d.touched.append(cand)
            continue
        d.reread.append(cand)
        d.changed.append(cand.rel)
    seen = {c.rel for c in walked.files}
    d.removed = [rel for rel in files if rel not in seen]
    return d



def _holds_private_key(path: Path) -> bool:
    text, _ = read_text(path)
    return text is not None and holds_private_key(text)
