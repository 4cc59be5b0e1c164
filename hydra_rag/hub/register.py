"""Models by name into the user's catalog: `pull` from the Hugging Face hub, and `register`
for a GGUF already on disk (pulled, or found in another tool's folder by hydra_rag.hub.found).

A model is registered only once llama.cpp has loaded and run it, in a child process, as its
sidecar would (a file of an architecture this llama.cpp does not know, or damaged past its
header, is refused); the entry records where it came from (`via`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra_rag.catalog import (
    CHAT_PORTS,
    EMBED_PORTS,
    RERANK_PORTS,
    ChatModel,
    Embedder,
    Reranker,
    add_user_entry,
    load_catalog,
    parse_embedder,
    parse_model,
    parse_reranker,
    user_entry,
)
from hydra_rag.errors import ConfigError, ModelError, SidecarError, Unreachable, UsageError
from hydra_rag.hub.describe import (
    ROLE_NAMES,
    Described,
    describe,
    entry_for,
    readable_id,
    suggest_id,
)
from hydra_rag.hub.found import Found
from hydra_rag.models.hf.refs import HubRef, candidates, choose, parse_ref, quant_of
from hydra_rag.paths import dirs

Say = Callable[[str], None]
# The catalog section of each role, which is also its command (`hydra-rag models …`).
SECTIONS = {"chat": "models", "embed": "embedders", "rerank": "rerankers"}
_PORTS = {"chat": CHAT_PORTS, "embed": EMBED_PORTS, "rerank": RERANK_PORTS}
Entry = ChatModel | Embedder | Reranker
_PARSE: dict[str, Callable[[str, int, Any], Entry]] = {
    "chat": parse_model, "embed": parse_embedder, "rerank": parse_reranker}


@dataclass(frozen=True)
class Registered:
    entry: Entry
    described: Described
    replaced: bool  # an entry of the same id was there before


def free_port(role: str, entry_id: str) -> int:
    """The first port of the role's range no other entry of that kind prefers (else the
    first: a sidecar moves on to a free port when its preferred one is taken)."""
    ports = _PORTS[role]
    used = {e.port for e in entries_of(role) if e.id != entry_id}
    return next((p for p in ports if p not in used), ports.start)


def entries_of(role: str) -> list[Entry]:
    """The catalog's entries of a role."""
    cat = load_catalog()
    if role == "chat":
        return list(cat.models.values())
    if role == "embed":
        return list(cat.embedders.values())
    return list(cat.rerankers.values())


def _owner(entry_id: str) -> tuple[str, Entry] | None:
    cat = load_catalog()
    for role, entries in (("chat", cat.models), ("embed", cat.embedders),
                          ("rerank", cat.rerankers)):
        if entry_id in entries:
            return role, entries[entry_id]
    return None


def free_id(base: str, via: str, path: Path) -> str:
    """`base`, or `base-2`, `base-3`…: the first id no entry of another model holds (an entry
    for this same file or origin keeps its id)."""
    n = 1
    while True:
        cand = base if n == 1 else f"{base}-{n}"
        held = _owner(cand)
        if held is None or _same(held[1], via, path):
            return cand
        n += 1


def _same(entry: Entry, via: str, path: Path) -> bool:
    p = entry.model_path()
    return bool(entry.via and entry.via == via) or (
        p is not None and entry.origin != "shipped catalog.yaml"
        and p.expanduser().resolve() == path.resolve())


def register(d: Described, role: str, model_id: str, via: str, say: Say,
             overrides: dict[str, Any] | None = None, test: bool = True) -> Registered:
    """Write the entry for `d` into the user's catalog, once llama.cpp has run it (`test`)."""
    if d.role != role:
        raise ModelError(f"{d.path} is {ROLE_NAMES[d.role]}, not {ROLE_NAMES[role]} "
                         f"(architecture {d.architecture}, pooling {d.pooling or 'none'}): use "
                         f"`hydra-rag {SECTIONS[d.role]} …`")
    held = _owner(model_id)
    if held is not None and not _same(held[1], via, d.path):
        where = "shipped with hydra-rag" if held[1].origin == "shipped catalog.yaml" else \
            f"in {held[1].origin}"
        raise ModelError(f"the id {model_id!r} is taken by {ROLE_NAMES[held[0]]} {where}: "
                         "give another with --id")
    entry = entry_for(d, model_id, free_port(role, model_id), via, overrides)
    before = user_entry(SECTIONS[role], model_id) if held is not None else None
    if before is not None:
        # The same model again (pulled again, imported again): what the user set in its entry
        # (prefixes, languages, parameters, a context) stays; the file and its origin are new.
        entry = {**entry, **before, "path": entry["path"], "via": via,
                 **{k: v for k, v in (overrides or {}).items() if v is not None}}
        entry.pop("file", None)
    parsed: Entry = _PARSE[role]("(new entry)", 0, entry)
    if test:
        _self_test(parsed, role, say)
    add_user_entry(SECTIONS[role], entry)
    return Registered(parsed, d, held is not None)


def spec_for(entry: Entry, role: str) -> Any:
    """How the entry's sidecar runs (hydra_rag.models.sidecar.SidecarSpec), by role."""
    from hydra_rag.config import load_settings

    settings = load_settings()
    if role == "chat":
        from hydra_rag.models.chat import sidecar_spec as chat_spec

        return chat_spec(entry, settings)  # type: ignore[arg-type]
    if role == "embed":
        from hydra_rag.models.embed import sidecar_spec as embed_spec

        return embed_spec(entry, settings)  # type: ignore[arg-type]
    from hydra_rag.search.rerank import sidecar_spec as rerank_spec

    return rerank_spec(entry, settings)  # type: ignore[arg-type]


def _self_test(entry: Entry, role: str, say: Say) -> None:
    from hydra_rag.models.sidecar import self_test

    say(f"{entry.id}: loading it in llama.cpp once (self-test)")
    try:
        info = self_test(spec_for(entry, role))
    except SidecarError as exc:
        path = entry.model_path()
        raise ModelError(f"llama.cpp could not load or run {path}, so it was not registered "
                         f"(the file is kept):\n{exc}") from None
    say(f"{entry.id}: self-test passed on {info.get('device', 'CPU')}")


def _catalog_match(ref: HubRef, role: str) -> Entry | None:
    """A catalog entry of the role whose `hf:` source is this repository (and file or
    quantisation, when `ref` names one): pulling it installs that entry, which carries what
    a GGUF does not say (prefixes, languages)."""
    for e in entries_of(role):
        for src in e.sources:
            if not src.hf:
                continue
            sref = parse_ref(f"hf:{src.hf}")
            if sref.repo.lower() != ref.repo.lower() or (ref.revision or None) != src.revision:
                continue
            if ref.file and ref.file != sref.file:
                continue
            if ref.quant and ref.quant.upper() != quant_of(sref.file or ""):
                continue
            return e
    return None


def pull(name: str, role: str, say: Say, model_id: str | None = None,
         overrides: dict[str, Any] | None = None, force: bool = False) -> Registered:
    """Fetch `hf:OWNER/REPO[@REV][:QUANT|/FILE]` and register it as a model of `role`
    (`force`: download again, even what is here or in the Hugging Face cache)."""
    from hydra_rag.models.hf import download as hub
    from hydra_rag.models.install import install_model, machine

    ref = parse_ref(name)
    known = _catalog_match(ref, role) if model_id is None else None
    if known is not None:
        if overrides:
            raise UsageError(f"hf:{ref.repo} is the catalog's {known.id}, which says how to run "
                             f"it: pull it as `{known.id}`, or give --id NEW to register the "
                             "file as another entry with these options")
        say(f"hf:{ref.repo} is the catalog's {known.id}: installing that entry")
        path = install_model(known, say, force=force)
        _self_test(known, role, say)
        return Registered(known, describe(path), False)
    try:
        repo = hub.resolve(ref)
    except Unreachable as exc:
        from hydra_rag.models.install import offline_advice

        raise Unreachable(f"{exc}; {offline_advice(role, model_id or suggest_id(ref.repo))}",
                          exc.tried, exc.reason) from None
    avail_mb, _ = machine()
    cand = choose(candidates(repo.sizes()), ref, role, avail_mb << 20 if ref.quant is None else 0)
    if ref.quant is None and ref.file is None and cand.quant:
        say(f"hf:{repo.id}: taking {cand.quant} ({cand.first}); name another with :QUANT")
    if repo.gated:
        say(f"hf:{repo.id} is gated: its terms apply to the copy you pull")
    # A pinned revision is a folder of its own: its files may differ from main's.
    pin = f"@{ref.revision}" if ref.revision else ""
    dest_dir = dirs().models / "hf" / (repo.id.replace("/", "--") + pin.replace("/", "-"))
    paths = hub.fetch(repo, cand, dest_dir, say, force=force)
    d = describe(paths[0])
    via = f"hf:{repo.id}{pin}/{cand.first}"
    base = suggest_id(cand.first)
    if base.startswith(("model", "ggml-model")):  # a file named for nothing: the repository
        base = suggest_id(repo.id) + (f"-{cand.quant.lower()}" if cand.quant else "")
    mid = model_id or free_id(base, via, d.path)
    return register(d, role, mid, via, say, overrides)


@dataclass(frozen=True)
class Imported:
    """What `models import` did with one model it found."""

    found: Found
    role: str = ""
    entry_id: str = ""
    size: int = 0
    state: str = ""  # registered, known (already registered), skipped
    why: str = ""


def registered_paths() -> dict[Path, str]:
    """Every catalog entry's model file (resolved) → its id."""
    out: dict[Path, str] = {}
    for role in SECTIONS:
        for e in entries_of(role):
            p = e.model_path()
            if p is not None:
                out[p.expanduser().resolve()] = e.id
    return out


def import_found(found: list[Found], say: Say, dry_run: bool = False,
                 test: bool = False, model_id: str | None = None) -> list[Imported]:
    """Register each model found (in place, never copied) that is not registered yet, under a
    short id made from its name (`model_id` for the one model to register). A file that is an
    installed model's file (the same path, or the same size and SHA-256) is not registered
    again: its row names that model."""
    known = registered_paths()
    same = _Twins(known)
    fresh = [f for f in found if not f.note and f.path.resolve() not in known]
    if model_id is not None and len(fresh) != 1:
        raise UsageError(f"--id names one model, and {len(fresh)} would be registered: narrow "
                         "them with --from (`--dry-run` lists them)")
    out = []
    for f in found:
        if f.note:
            out.append(Imported(f, state="skipped", why=f.note))
            continue
        if f.path.resolve() in known:
            out.append(Imported(f, state="known", entry_id=known[f.path.resolve()]))
            continue
        try:
            d = describe(f.path)
        except ModelError as exc:
            out.append(Imported(f, state="skipped", why=str(exc)))
            continue
        twin = same.of(d)
        if twin is not None:
            out.append(Imported(f, d.role, known[twin], d.size, "known",
                                f"the same file (size and SHA-256) as {twin}"))
            continue
        mid = model_id or free_id(_import_id(f), f.via, d.path)
        overrides: dict[str, Any] = {}
        if d.role == "chat":
            if f.params:
                overrides["params"] = f.params
            if f.context >= 256:
                overrides["context"] = f.context
        if not dry_run:
            try:
                register(d, d.role, mid, f.via, say, overrides, test)
            except (ModelError, ConfigError) as exc:
                out.append(Imported(f, d.role, mid, d.size, "skipped", str(exc)))
                continue
            known[d.path.resolve()] = mid
            same.add(d.path.resolve())
        out.append(Imported(f, d.role, mid, d.size, "registered"))
    return out


def _import_id(f: Found) -> str:
    """A short readable id for a model found: from its name, without the quantisation; a
    file named for nothing (model-f16.gguf) takes its repository's name."""
    base = readable_id(f.id_hint)
    parts = f.name.split("/")
    if base.startswith(("model", "ggml-model")) and f.source != "ollama" and len(parts) > 2:
        base = readable_id(parts[1])
    return base


class _Twins:
    """Installed models' files by size, hashed only when a file found has the same size."""

    def __init__(self, known: dict[Path, str]) -> None:
        self.by_size: dict[int, list[Path]] = {}
        self.hashes: dict[Path, str] = {}
        for path in known:
            self.add(path)

    def add(self, path: Path) -> None:
        if path.is_file():
            self.by_size.setdefault(path.stat().st_size, []).append(path)

    def _hash(self, path: Path) -> str:
        from hydra_rag.models.install import sha256_of

        if path not in self.hashes:
            self.hashes[path] = sha256_of(path)
        return self.hashes[path]

    def of(self, d: Described) -> Path | None:
        """The installed file `d` is a copy of (a model in one file), or None."""
        if len(d.parts) != 1:
            return None
        path = d.path.resolve()
        try:
            twins = [p for p in self.by_size.get(path.stat().st_size, []) if p != path]
            return next((p for p in twins if self._hash(p) == self._hash(path)), None)
        except OSError:
            return None
