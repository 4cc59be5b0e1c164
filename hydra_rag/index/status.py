"""Whether a folder's index is current, without changing anything: the walk diffed against
files.db exactly as `index` diffs it (state.diff), and the rebuild `index` would start
(state.rebuild_reason). No lock is taken and nothing is written; meta.yaml and files.db are
replaced atomically by a run, so reading them beside one is safe. No LanceDB, no sidecar:
the counts come from files.db."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra_rag.config import Settings, table_embedder
from hydra_rag.errors import HydraError, MetaCorrupt, UsageError
from hydra_rag.index.state import (
    Diff,
    context_model,
    diff,
    prose_language,
    prose_samples,
    rebuild_reason,
    stale_analysis,
)
from hydra_rag.locks import lock_holder
from hydra_rag.read.source import (
    reader_for,
    recorded_secrets,
    recorded_selection,
    resolve_root,
    walker,
)
from hydra_rag.read.walk import OVERRIDABLE, WalkResult
from hydra_rag.store.index_dir import TABLES, FileEntry, Store
from hydra_rag.store.lexical import Analysis, detect_language

CURRENT, STALE, NOT_INDEXED = "current", "stale", "not_indexed"

# Skips of the walk's rules that an --include naming the path overrides (walk.Walker._rule);
# with OVERRIDABLE, the content checks it overrides. Size, emptiness, binaries, encodings,
# symlinks, unreadable documents and secrets (those take --include-secrets) it does not.
_RULES = frozenset({"blacklisted", "vector_image", "certificate", "excluded",
                    "gitignore", "hydraignore"})


GONE = "the folder is gone (`hydra-rag stores prune` forgets it)"

@dataclass(frozen=True)
class FileStatus:
    """One file (or skipped folder, `path` ending in /) as `status --files` shows it."""

    path: str
    state: str  # indexed, skipped, failed (a document that cannot be read), added, changed, removed
    kind: str | None = None  # code or prose, for an indexed file
    chunks: int = 0
    reason: str = ""  # the skip reason (gitignore, secret, binary, encrypted…)
    detail: str = ""  # what was wrong with a failed document ("password-protected")
    include: str | None = None  # the --include pattern that would index it, where one would

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "state": self.state, "kind": self.kind, "chunks": self.chunks,
                "reason": self.reason or None, "detail": self.detail or None,
                "include": self.include}


@dataclass
class FolderStatus:
    """What `status` says of one folder (see README, `status`, for the JSON keys)."""

    root: str
    state: str  # CURRENT, STALE or NOT_INDEXED
    rebuild: str | None = None  # why the next run rebuilds the index (or re-analyses it)
    repair: str | None = None  # what the next run repairs (an interrupted run, a corrupt file)
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)  # a new stat, the same content: current
    embedders: dict[str, str] = field(default_factory=dict)  # per table, as indexed
    languages: dict[str, str] = field(default_factory=dict)  # per table, of its analysis
    files: int = 0  # files indexed
    chunks: dict[str, int] = field(default_factory=dict)  # per table
    skipped: dict[str, int] = field(default_factory=dict)  # reason → files (and folders)
    last_indexed: str | None = None
    selection: dict[str, list[str]] = field(default_factory=dict)  # the diff's --include/--exclude
    problem: str | None = None  # the folder is gone, or cannot be read
    notes: list[str] = field(default_factory=list)  # what else the reader should know
    # per table: the rows its vector index was trained on (0: exact search; see store.ANN_ROWS)
    vector_index: dict[str, int] = field(default_factory=dict)
    # chunks stored without their vector yet (setting vectors_later): how many, whether a run
    # is embedding them now, its rate and the time left; None when every chunk has one
    vectors: dict[str, Any] | None = None
    file_list: list[FileStatus] | None = None  # with files=True

    @property
    def fix(self) -> str | None:
        """The command that brings the index up to date (None when it is current)."""
        if self.state == CURRENT or self.problem:
            return None
        flags = [f"--{k} {shlex.quote(p)}" for k in ("include", "exclude")
                 for p in self.selection.get(k, [])]
        return " ".join(["hydra-rag index", shlex.quote(self.root), *flags])

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "root": self.root, "state": self.state, "rebuild": self.rebuild,
            "repair": self.repair, "added": self.added, "changed": self.changed,
            "removed": self.removed, "touched": self.touched, "embedders": self.embedders,
            "languages": self.languages, "files": self.files, "chunks": self.chunks,
            "skipped": self.skipped, "last_indexed": self.last_indexed,
            "selection": self.selection, "fix": self.fix, "problem": self.problem,
            "notes": self.notes, "vector_index": self.vector_index, "vectors": self.vectors}
        if self.file_list is not None:
            doc["file_list"] = [f.to_json() for f in self.file_list]
        return doc


def folder_status(path: Path, settings: Settings, include: list[str] | None = None,
                  exclude: list[str] | None = None, files: bool = False) -> FolderStatus:
    """Whether `path`'s index is current with the folder, read-only. The walk takes the
    selection of the last index run (meta.yaml), unless `include` or `exclude` is given (then
    both are exactly what is given, as for `index`). Raises `resolve_root`'s error for a path
    that is not a folder."""
    root = resolve_root(path)
    store = Store(root)
    status = FolderStatus(str(root), STALE)
    meta, recorded, problem = _read(store)
    if problem is None and not meta and not store.table_names() and not recorded:
        status.state = NOT_INDEXED
    if include is None and exclude is None:
        recorded_sel = recorded_selection(meta)
        include, exclude = recorded_sel or ([], [])
        if recorded_sel is None and meta:
            status.notes.append("this index does not record the --include/--exclude it was made "
                                "with (it predates that): diffed with none; the next `hydra-rag "
                                "index` records its own")
    status.selection = {"include": list(include or []), "exclude": list(exclude or [])}
    status.last_indexed = str(meta["updated"]) if meta.get("updated") else None
    status.vector_index = {t: int(n) for t, n in (meta.get("vector_index") or {}).items()
                           if isinstance(n, int)}
    status.embedders = {t: str(v.get("embedder")) for t, v in (meta.get("tables") or {}).items()
                        if isinstance(v, dict)}
    status.languages = {t: str(v.get("language")) for t, v in (meta.get("lexical") or {}).items()
                        if isinstance(v, dict) and v.get("language")}
    indexed = {rel: e for rel, e in recorded.items() if e.kind and not e.skip}
    status.files = len(indexed)
    status.chunks = {t: sum(len(e.chunks) for e in indexed.values() if e.kind == t)
                     for t in TABLES}

    walked = walker(root, include, exclude, settings, recorded_secrets(meta)).walk()
    from hydra_rag.documents import ocr

    engine, _ = ocr.for_settings(settings)
    d = diff(root, walked, recorded, meta, engine.languages if engine else "")
    status.skipped = dict(sorted(d.skipped.items()))
    if status.state != NOT_INDEXED:
        status.added, status.changed, status.removed = d.added, d.changed, d.removed
        status.touched = [c.rel for c in d.touched]
        status.repair = problem
        if problem is None and store.journal_path.exists():
            status.repair = ("an index run was interrupted, or is running now: the next "
                             "`hydra-rag index` checks the index and completes it")
        status.rebuild = None if problem and store.meta_path.is_file() and recorded \
            else _rebuild(root, store, meta, recorded, walked, settings) or None
        status.vectors = _vectors(store, meta)
        if status.vectors and not status.vectors["running"] and not status.repair:
            status.repair = (f"{status.vectors['pending']:,} chunks are without their vector "
                             "(searches use the others): the next `hydra-rag index` embeds them")
        if d.current and not status.rebuild and not status.repair:
            status.state = CURRENT
    if files:
        status.file_list = _file_list(walked, recorded, d)
    return status


def _vectors(store: Store, meta: dict[str, Any]) -> dict[str, Any] | None:
    """The second phase of an index run, as meta.yaml records it (hydra_rag.index.vectors):
    chunks still without a vector, whether the run holding the folder's lock is alive and
    embedding them, at what rate, and the time left."""
    from hydra_rag.index.background import PID_FILE, alive, left

    phase = left(meta)
    if not phase["pending"]:
        return None
    try:  # the holder of the folder's lock, or the child `index --background` started
        child = (store.dir / PID_FILE).read_text().strip()
    except OSError:
        child = ""
    running = any(pid.isdigit() and alive(int(pid), ours=False)
                  for pid in (lock_holder(store.lock_path), child))
    return {"running": running, **phase, "left_s": phase["left_s"] if running else None}


def _read(store: Store) -> tuple[dict[str, Any], dict[str, FileEntry], str | None]:
    """meta.yaml and files.db of the generation in use, and a problem reading them. A
    rebuild may switch generations between the two reads: then they are read again."""
    for _ in range(3):
        try:
            meta = store.read_meta()
            generation = store.generation
            recorded = store.read_files()
        except MetaCorrupt as exc:
            # An index run rebuilds meta.yaml from the tables (which name their embedder) and
            # keeps every file: what it would index is files.db's diff, as for any run.
            if not all(store.table_embedder(t) for t in store.table_names()):
                return {}, {}, f"{exc.problem}: the next `hydra-rag index` rebuilds the index"
            try:
                recorded = store.read_files()
            except HydraError:
                recorded = {}
            return {}, recorded, (f"{exc.problem}: the next `hydra-rag index` rebuilds it "
                                  "from the tables, re-embedding nothing")
        except HydraError as exc:
            return {}, {}, f"{exc} (the next `hydra-rag index` repairs it, or rebuilds)"
        fresh = Store(store.root)
        try:
            fresh.read_meta()
        except HydraError:
            continue
        if fresh.generation == generation:
            return meta, recorded, None
        store = fresh
    return meta, recorded, None


def _rebuild(root: Path, store: Store, meta: dict[str, Any], recorded: dict[str, FileEntry],
             walked: WalkResult, settings: Settings) -> str:
    """Why the next `index` would build the index anew ("" when it would not), as it decides."""
    if not meta:
        return "the index has tables but no meta.yaml" if store.table_names() else ""
    has_prose = any(e.kind == "prose" and e.chunks for e in recorded.values())

    def detect() -> str:
        # Extracted texts are read from the index's cache, never written to it.
        reader = reader_for(settings, store.dir, write=False)
        try:
            return detect_language(prose_samples(root, walked, reader))
        finally:
            reader.close()

    lang = prose_language(None, meta, has_prose, detect)
    embedders = {t: table_embedder(settings, t, lang) for t in TABLES}
    wanted = {t: (e.id, e.dims) for t, e in embedders.items()}
    reason = rebuild_reason(meta, wanted, context_model(meta, settings, None))
    if reason:
        from hydra_rag.models.speeds import embed_estimate

        chunks = {t: sum(len(e.chunks) for e in recorded.values() if e.kind == t and not e.skip)
                  for t in TABLES}
        return reason + embed_estimate(chunks, embedders)
    analysis = {"code": Analysis("en"), "prose": Analysis(lang)}
    stale = stale_analysis(meta, store.table_names(), analysis)
    if stale:
        return (f"the full-text index of {' and '.join(stale)} is re-analysed (prose in "
                f"{lang}); no chunk is re-embedded")
    return ""


def _file_list(walked: WalkResult, recorded: dict[str, FileEntry], d: Diff) -> list[FileStatus]:
    """Every file the walk met or files.db records, with its state, sorted by path."""
    from hydra_rag.index.batches import DOCUMENT_SKIPS

    added, changed = set(d.added), set(d.changed)
    out: dict[str, FileStatus] = {}
    for reason, paths in walked.skipped_paths.items():
        for rel in paths:
            out[rel] = FileStatus(rel, "skipped", reason=reason, include=_include_for(rel, reason))
    for cand in walked.files:
        rel = cand.rel
        e = recorded.get(rel)
        if rel in added:
            out[rel] = FileStatus(rel, "added")
        elif rel in changed:
            out[rel] = FileStatus(rel, "changed")
        elif e is None:
            continue
        elif e.skip in DOCUMENT_SKIPS:
            out[rel] = FileStatus(rel, "failed", reason=e.skip, detail=e.error)
        elif e.skip:
            out[rel] = FileStatus(rel, "skipped", reason=e.skip, detail=e.error,
                                  include=_include_for(rel, e.skip))
        else:
            out[rel] = FileStatus(rel, "indexed", kind=e.kind, chunks=len(e.chunks))
    for rel in d.removed:
        e = recorded[rel]
        out[rel] = FileStatus(rel, "removed", kind=e.kind, chunks=len(e.chunks), reason=e.skip)
    return [out[k] for k in sorted(out)]


def _include_for(rel: str, reason: str) -> str | None:
    """The --include pattern that would bring back a path skipped for `reason`, if one would
    (a skipped folder: everything under it)."""
    from hydra_rag.paths import INDEX_DIR

    if reason not in _RULES and reason not in OVERRIDABLE:
        return None
    if rel.rstrip("/") == INDEX_DIR:
        return None
    pattern = re.sub(r"([*?\[\\])", r"\\\1", rel)  # a literal path, as a glob
    if "/" not in rel.rstrip("/"):
        pattern = "/" + pattern  # anchored: `id_rsa` alone would also match old/id_rsa
    return pattern + "**" if rel.endswith("/") else pattern


def statuses(paths: list[Path] | None, settings: Settings, all_: bool = False,
             tags: list[str] | None = None, include: list[str] | None = None,
             exclude: list[str] | None = None, files: bool = False) -> list[FolderStatus]:
    """`folder_status` of each folder: `paths` (default: the working folder), or the
    registered folders (`all_`, or those with one of `tags`). A path that is not a folder is
    `resolve_root`'s error, raised before any folder is walked; a registered folder that is gone is a
    status with its `problem`."""
    from hydra_rag.store import registry

    if all_ or tags:
        if paths:
            raise UsageError("PATH excludes --all and --tag")
        chosen = registry.chosen(all_, tags)
        return [folder_status(Path(p), settings, include, exclude, files) if Path(p).is_dir()
                else FolderStatus(p, NOT_INDEXED, problem=GONE)
                for p in chosen]
    roots = list(dict.fromkeys(resolve_root(p) for p in paths or [Path(".")]))
    return [folder_status(p, settings, include, exclude, files) for p in roots]


