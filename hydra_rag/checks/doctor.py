"""`hydra-rag doctor`: the checks a user would otherwise do by hand, each with its fix."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hydra_rag.catalog import load_embedders
from hydra_rag.config import Settings, load_settings, table_embedder
from hydra_rag.errors import HydraError, SidecarCrash
from hydra_rag.models import sidecar
from hydra_rag.read.chunk import CHUNKER_VERSION
from hydra_rag.store.index_dir import ANN_ROWS, TABLES, Store


@dataclass(frozen=True)
class Check:
    """One finding: ok / warn / fail, what was checked, what was seen, what to run."""

    status: str
    name: str
    detail: str
    fix: str = ""


def _gguf_readable(path: Path) -> str:
    """"" if the file has a GGUF header llama.cpp can parse, and so has each later part of a
    model split over several files (or it is an ONNX model hydra-rag converted, with its
    tokenizer), else why not."""
    if path.suffix.lower() == ".onnx":
        from hydra_rag.models.convert_onnx import read_meta

        try:
            read_meta(path)
            return ""
        except HydraError as exc:
            return str(exc)
    from hydra_rag.models.gguf import damage, split_parts

    files = split_parts(path)  # every part of a split model: a pull cut short damages any of them
    if len(files) == 1:
        return damage(path)
    found = []
    for k, part in enumerate(files, start=1):
        where = f"part {k} of {len(files)}, {part.name}"
        if not part.is_file():
            found.append(f"{where}, is missing")
        elif why := damage(part, first=k == 1):
            found.append(f"{where}: {why}")
    return "; ".join(found)


def run_checks(root: Path | None) -> list[Check]:
    """Environment, models, sidecars, and (if given) the index at `root`."""
    from hydra_rag.models.embed import sidecar_spec

    checks: list[Check] = [build_check()]
    try:
        settings = load_settings()
        catalog = load_embedders()
    except HydraError as exc:
        checks.append(Check("fail", "config", str(exc), "fix the file named above"))
        return checks
    chosen = {settings.embedder_for(t) for t in TABLES}
    for eid in sorted(chosen | ({settings.foreign} if settings.foreign else set())):
        emb = catalog.get(eid)
        if emb is None:
            checks.append(Check("fail", f"embedder {eid}", "not in the catalog",
                                "hydra-rag embedders list"))
            continue
        path = emb.model_path()
        if path is None:
            checks.append(Check("ok", f"embedder {eid}", f"served from {emb.url}"))
        else:
            check = _file_check(f"embedder {eid}", path, "hydra-rag rag setup",
                                "hydra-rag rag setup --force")
            if check.status == "ok":
                check = _self_test(check, sidecar_spec(emb, settings), emb, "embed")
            if eid not in chosen and check.status == "fail":
                # Needed only for a folder in a language the chosen embedders do not know.
                check = replace(check, status="warn", detail=check.detail + " (foreign_embedder)")
            checks.append(check)
    checks.append(_chat_check(settings))
    checks.append(fit_check())
    checks.append(ocr_check(settings))
    if settings.rerank:
        checks.append(_reranker_check(settings))
    for rec in sidecar.all_records():  # before their records go: why a sidecar is gone
        crash = sidecar.crash_of(rec.id)
        if crash is not None:
            checks.append(_crash_check(f"sidecar {rec.id}", crash))
    for gone in sidecar.clean_stale():
        checks.append(Check("warn", f"sidecar {gone}", "stale record removed (process gone)"))
    for rec in sidecar.all_records():
        st = sidecar.status(rec)
        if st == "ready":
            on = f" ({', '.join(x for x in (rec.device, rec.backend) if x)})" if rec.device else ""
            checks.append(Check("ok", f"sidecar {rec.id}", f"pid {rec.pid} on {rec.url}{on}"))
        else:
            checks.append(Check("fail", f"sidecar {rec.id}", f"pid {rec.pid} is {st}",
                                f"hydra-rag sidecars stop {rec.id}"))
    if root is not None:
        checks.extend(check_index(root))
        if not Store(root).exists():
            timed = {eid for eid in chosen | {settings.foreign} if eid}
            checks.append(first_index_check(root, settings, timed))
    return checks


def first_index_check(root: Path, settings: Settings, timed: set[str]) -> Check:
    """What a first index of `root` would take with each installed embedder (those not in
    `timed`, timed by the checks above, are timed now: the ONNX ones too)."""
    from hydra_rag.checks.first_index import first_index
    from hydra_rag.index.report import duration

    try:
        est = first_index(root, settings, timed=timed)
    except HydraError as exc:
        return Check("warn", "first index", str(exc))
    configured = settings.embedder_for("code")
    each = ", ".join(f"{r['id']}{' (configured)' if r['id'] == configured else ''} "
                     f"{duration(r['seconds'])}" for r in est.embedders)
    detail = (f"{est.files:,} files, {est.total_chunks:,} chunks ({est.tokens:,} tokens) to "
              f"embed: {each or 'no installed embedder has a speed known here'}; names, exact "
              f"strings and words are searchable after phase one (reading and chunking took "
              f"{est.read_s:g} s)")
    fast = est.embedders[0]["id"] if est.embedders else configured
    fix = (f"hydra-rag rag setup --embedder {fast} (faster here; then hydra-rag index {root})"
           if fast != configured else f"hydra-rag index {root}")
    return Check("ok", "first index", detail, fix)


def ocr_check(settings: Settings) -> Check:
    """Whether scanned pages can be read (hydra_rag.documents.ocr), and in which languages."""
    from hydra_rag.documents import ocr

    engine, why = ocr.for_settings(settings)
    if engine is not None:
        return Check("ok", "ocr", f"{engine.program}, languages {engine.languages}")
    if not ocr.wanted(settings.ocr_languages):
        return Check("ok", "ocr", why)
    fix, _, detail = why.rpartition(": ") if "apt-get" in why or "ocr_command" in why \
        else ("", "", why)
    return Check("warn", "ocr", f"{fix or 'scanned pages are skipped'}", detail)


def build_check() -> Check:
    """llama-cpp-python: built by hydra-rag for instructions this machine executes?"""
    from hydra_rag.llamacpp import build, probe

    name = "llama.cpp"
    version = build.installed_version()
    if not version:
        return Check("fail", name, "llama-cpp-python is not installed", build.rebuild_command())
    stamp = build.read_stamp()
    fix = build.rebuild_command()
    if stamp is None:
        return Check("warn", name, f"llama-cpp-python {version} was not built by hydra-rag: a "
                     "plain pip install compiles for every instruction the processor claims "
                     "(-march=native), and crashes where a claim is false (AMX in some virtual "
                     "machines)", fix)
    if stamp.files != build.lib_files():
        return Check("warn", name, "llama-cpp-python's libraries were replaced since hydra-rag "
                     "built them", fix)
    on = [a[len("-DGGML_"):-len("=ON")] for a in stamp.cmake_args
          if a.startswith("-DGGML_") and a.endswith("=ON")]
    what = f"llama-cpp-python {stamp.version}, built for {', '.join(on) or 'native flags'}"
    if stamp.cpu_signature != probe.cpu_signature():
        if not probe.is_x86_64() or probe.compiler() is None:
            return Check("warn", name, f"{what} on another processor ({stamp.cpu})", fix)
        runs = {p.flag: p for p in probe.probe()}
        bad = [f"{f} ({runs[f].why})" for f in on if f in runs and not runs[f].runs]
        if bad:
            return Check("fail", name, f"{what} on another processor ({stamp.cpu}); this one "
                         f"does not execute {', '.join(bad)}", fix)
        what += f" on another processor ({stamp.cpu}), all of which run here"
    return Check("ok", name, f"{what}; GPU backend: {stamp.gpu or 'none'}")


def _self_test(check: Check, spec: sidecar.SidecarSpec, entry: Any = None,
               role: str = "") -> Check:
    """`check` (a model file that is fine) with the result of testing the model in a child;
    with an `entry`, its speed is timed too and kept for `models recommend`."""
    try:
        info = sidecar.self_test(spec, speed=entry is not None)
    except SidecarCrash as exc:
        return _crash_check(check.name, exc)
    except HydraError as exc:
        return Check("fail", check.name, str(exc), check.fix)
    backend = {"onnx": "ONNX Runtime"}.get(info.get("backend", ""), "llama.cpp")
    speed = ""
    if entry is not None and (info.get("speed") or {}).get("tokens_per_s"):
        from hydra_rag.models.speeds import busy_note, rate, record

        record(entry, role, info)
        busy = busy_note(info)
        speed = f", {rate(float(info['speed']['tokens_per_s']))} tokens/s" + (
            f"; {busy}, so this is slower than it runs idle" if busy else "")
    return replace(check, detail=f"{check.detail}; self-test passed on {info.get('device')} "
                                 f"({backend}{speed})")


def fit_check() -> Check:
    """Which chat models and embedders run here at a usable speed, by the speeds measured
    (the self-tests above time them) and the memory available."""
    from hydra_rag.hub import recommend as rec

    try:
        fits = rec.assess(rec.this_machine())
    except HydraError as exc:
        return Check("warn", "models that fit", str(exc), "hydra-rag models recommend")
    if not any(f.basis for f in fits):
        return Check("warn", "models that fit", "no model's speed measured here yet",
                     "hydra-rag models recommend")
    parts, missing = [], []
    for role, label in (("chat", "chat models"), ("embed", "embedders")):
        usable = sorted((f for f in fits if f.role == role and f.usable), key=lambda f: f.size or 0)
        names = ", ".join(f"{f.id}{'' if f.installed else ' (not installed)'}" for f in usable)
        parts.append(f"{label}: {names or 'none'}")
        missing += [] if usable else [role]
    busy = next((f.note for f in fits if f.basis == "measured" and f.note), "")
    detail = "usable here: " + "; ".join(parts) + (f" (timed when {busy})" if busy else "")
    if missing:  # nothing to answer with (or to index with) at a usable speed
        fix = "hydra-rag models recommend" + (
            " (or hydra-rag models pull smollm2-135m)" if "chat" in missing else "")
        return Check("warn", "models that fit", detail, fix)
    return Check("ok", "models that fit", detail, "hydra-rag models recommend")


def _crash_check(name: str, exc: SidecarCrash) -> Check:
    """A crash: the message and where its log is (the frames are in the log); the rebuild
    command when the signal is one a build for the wrong instructions ends with."""
    from hydra_rag.llamacpp.build import rebuild_command
    from hydra_rag.llamacpp.crash import BUILD_SIGNALS

    fix = rebuild_command() if exc.signal in BUILD_SIGNALS else ""
    return Check("fail", name, "\n".join(str(exc).splitlines()[:2]), fix)


def _chat_check(settings: Settings) -> Check:
    """The chat model `ask` and `chat` use by default (a bundle's model): known, installed,
    loadable, and it answers one token."""
    from hydra_rag.catalog import get_model, load_bundles
    from hydra_rag.models.chat import sidecar_spec

    name = settings.default_model
    try:
        bundle = load_bundles().get(name)
        model = get_model(bundle.base if bundle is not None else name)
    except HydraError as exc:
        return Check("fail", f"chat model {name}", str(exc), "hydra-rag models list")
    label = f"chat model {model.id}"
    path = model.model_path()
    if model.url or path is None:
        return Check("ok", label, f"served from {model.url}")
    pull = f"hydra-rag models pull {model.id}"
    check = _file_check(label, path, pull, f"{pull} --force")
    if check.status != "ok":
        return check
    return _self_test(check, sidecar_spec(model, settings), model, "chat")


def _reranker_check(settings: Settings) -> Check:
    """The reranker `rerank: true` will use: known, installed, loadable, runs."""
    from hydra_rag.catalog import get_reranker
    from hydra_rag.search.rerank import sidecar_spec

    rid = settings.reranker
    name = f"reranker {rid}"
    try:
        rr = get_reranker(rid)
    except HydraError as exc:
        return Check("fail", name, str(exc), "hydra-rag rerankers list")
    path = rr.model_path()
    if path is None:
        return Check("ok", name, f"served from {rr.url}")
    if not rr.sources:  # registered from a file: only adding it again helps
        add = f"hydra-rag rerankers add {rid} FILE.gguf"
        check = _file_check(name, path, add, add)
    else:
        pull = f"hydra-rag rerankers pull {rid}"
        check = _file_check(name, path, pull, f"{pull} --force")
    return _self_test(check, sidecar_spec(rr, settings)) if check.status == "ok" else check


def _file_check(name: str, path: Path, missing_fix: str, broken_fix: str) -> Check:
    """A model file: present, and a GGUF llama.cpp can parse (or an ONNX model of ours)."""
    if not path.is_file():
        return Check("fail", name, f"model file missing: {path}", missing_fix)
    why = _gguf_readable(path)
    if why:
        return Check("fail", name, f"{path} is not loadable: {why}", broken_fix)
    return Check("ok", name, f"{path} ({path.stat().st_size / (1 << 20):.0f} MiB)")


def check_index(root: Path) -> list[Check]:
    """Tables against files.db, FTS coverage, and the embedder match."""
    store = Store(root)
    fix_full = f"hydra-rag index {root} --full"
    if not store.exists():
        return [Check("fail", "index", f"no index in {root}", f"hydra-rag index {root}")]
    out: list[Check] = []
    try:
        meta = store.read_meta()
        files = store.read_files()
    except HydraError as exc:
        return [Check("fail", "index", str(exc), f"hydra-rag index {root}")]
    if store.journal_path.exists():
        out.append(Check("warn", "index", "an index run was interrupted",
                         f"hydra-rag index {root} (repairs it)"))
    if meta.get("chunker_version") != CHUNKER_VERSION:
        out.append(Check("warn", "index", f"chunked by chunker version "
                         f"{meta.get('chunker_version')}, this release has {CHUNKER_VERSION} "
                         "(chunks that follow headings and know their section); the next index "
                         "run rebuilds it", f"hydra-rag index {root}"))
    settings = load_settings()
    for t in TABLES:
        language = ((meta.get("lexical") or {}).get(t) or {}).get("language")
        want = table_embedder(settings, t, language).id
        have = meta.get("tables", {}).get(t, {}).get("embedder")
        if have and have != want:
            out.append(Check("fail", f"table {t}", f"built with {have}, configured {want}",
                             fix_full))
        try:
            counts = store.id_counts(t)
        except HydraError as exc:
            out.append(Check("fail", f"table {t}", str(exc), fix_full))
            continue
        known = {c for e in files.values() if e.kind == t for c in e.chunks}
        rows = set(counts)
        problems = []
        if rows - known:
            problems.append(f"{len(rows - known)} orphan chunks")
        if known - rows:
            problems.append(f"{len(known - rows)} chunks recorded but missing")
        dup = sum(1 for n in counts.values() if n > 1)
        if dup:
            problems.append(f"{dup} duplicated chunks")
        unindexed = store.fts_unindexed(t)
        if unindexed:
            problems.append(f"full-text index misses {unindexed} rows")
        vec = store.vector_index(t)
        if vec is not None and vec["unindexed"]:
            problems.append(f"vector index misses {vec['unindexed']} rows (searched exactly "
                            "meanwhile)")
        if problems:
            out.append(Check("fail", f"table {t}", "; ".join(problems),
                             f"hydra-rag index {root} --repair"))
        else:
            search = (f"vector index {vec['type']} over {vec['indexed']} rows" if vec
                      else f"exact vector search (an index past {ANN_ROWS:,} rows)")
            out.append(Check("ok", f"table {t}", f"{len(rows)} chunks, full-text index "
                             f"current, {search}"))
    return out
