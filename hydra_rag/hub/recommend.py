"""Which chat models and embedders this machine runs at a usable speed, and how to get them.

Speed is measured, not looked up: a short timed self-test of an installed model gives its tokens
per second here (hydra_rag.models.speeds keeps them, and estimates the models not measured from
the nearest measured one). A model fits when its weights, a context cache and the runtime fit
the memory available now.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from hydra_rag.hub.register import Entry, entries_of, spec_for
from hydra_rag.models.hf.refs import needs
from hydra_rag.models.speeds import busy_note, estimate, rate, record, recorded, size_of

# Usable: a chat model writes at least as fast as people read (~5 tokens/s); an embedder
# indexes 10,000 chunks of 333 tokens within an hour (~925 tokens/s).
CHAT_USABLE = 5.0
EMBED_USABLE = 925.0


def measure(entry: Entry, role: str) -> dict[str, Any]:
    """Self-test `entry` with timing, record it and return what the self-test saw."""
    from hydra_rag.models.sidecar import self_test

    info = self_test(spec_for(entry, role), speed=True)
    record(entry, role, info)
    return info


@dataclass(frozen=True)
class Machine:
    memory_mb: int  # total
    available_mb: int
    cores: int
    gpu: str  # "" when llama.cpp here has no GPU backend or sees none


def this_machine() -> Machine:
    from hydra_rag.models.install import machine, meminfo_mb

    total = meminfo_mb("MemTotal")
    avail, gpu_seen = machine()
    gpu = ""
    if gpu_seen:
        try:
            from hydra_rag.models.sidecar_server import gpu_devices

            gpu = ", ".join(gpu_devices())
        except (ImportError, OSError):
            gpu = ""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return Machine(total, avail, cores or 1, gpu)


@dataclass(frozen=True)
class Fit:
    """One model's verdict on this machine."""

    id: str
    role: str  # chat, embed
    size: int | None  # bytes
    installed: bool
    fits: bool  # in the memory available now
    tokens_per_s: float | None
    basis: str  # "measured", "estimated from ID", or "" (no measurement to go on)
    usable: bool
    get: str  # the command that gets it ("" when installed)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "size_mb": (self.size or 0) >> 20 or None}


def assess(machine: Machine, speeds: dict[str, dict[str, Any]] | None = None) -> list[Fit]:
    """Every local chat model and embedder in the catalog, judged for this machine."""
    speeds = recorded() if speeds is None else speeds
    out = []
    for role, usable_at, verb in (("chat", CHAT_USABLE, "models"),
                                  ("embed", EMBED_USABLE, "embedders")):
        for e in entries_of(role):
            if e.url:
                continue
            size = size_of(e)
            avail = machine.available_mb << 20
            need = (getattr(e, "memory_mb", 0) << 20) or needs(size or 0)
            fits = not avail or need <= avail
            if e.id in speeds and speeds[e.id].get("role") == role:
                tps: float | None = float(speeds[e.id]["tokens_per_s"])
                basis, note = "measured", busy_note(speeds[e.id])
            else:
                tps, ref = estimate(e, role, speeds)
                basis = f"estimated from {ref}" if ref else ""
                note = _how(e, role, speeds[ref]) if ref else ""
            usable = fits and tps is not None and tps >= usable_at
            installed = e.installed()
            out.append(Fit(e.id, role, size, installed, fits, tps, basis, usable,
                           "" if installed else f"hydra-rag {verb} pull {e.id}", note))
    return out


def _how(entry: Entry, role: str, ref: dict[str, Any]) -> str:
    """What an estimate rests on: the rate measured and what it was scaled by."""
    from hydra_rag.models.speeds import work

    mine = work(entry, role)
    by = ("file size: writing a token reads every weight once" if role == "chat" else
          "file size" if ref.get("work") == ref.get("size") else "layers × width²")
    scale = f"× {ref['work'] / mine:.3g} by {by}" if mine and ref["work"] != mine else \
        "the same work"
    names = {"onnx": "ONNX Runtime"}
    other = ref.get("backend", "llama.cpp")
    across = (f" on {names.get(other, other)}, not timed on "
              f"{names.get(entry.backend, entry.backend)} yet") if other != entry.backend else ""
    busy = busy_note(ref)
    return (f"its {rate(float(ref['tokens_per_s']))} tokens/s measured here{across}, "
            f"{scale}" + (f"; {busy}" if busy else ""))


def best_embedder(fits: list[Fit]) -> Fit | None:
    """The fastest usable embedder that knows the configured one's languages (the configured
    one on a tie): where another is faster here, it is the one to recommend."""
    from hydra_rag.catalog import load_embedders
    from hydra_rag.config import load_settings

    catalog = load_embedders()
    chosen = catalog.get(load_settings().embedder_for("code"))
    langs = set(chosen.languages) if chosen is not None else {"en"}
    ok = [f for f in fits if f.role == "embed" and f.usable and f.tokens_per_s and f.id in catalog
          and ("*" in catalog[f.id].languages or langs <= set(catalog[f.id].languages))]
    return max(ok, key=lambda f: (f.tokens_per_s or 0, chosen is not None and f.id == chosen.id),
               default=None)


def to_measure(role: str) -> list[Entry]:
    """The installed models of a role to time: for chat the largest that fits (an estimate
    from a larger model is the closer one for the models people pull); for embedders the
    configured one, what an index runs on, and the smallest installed one of each other
    backend (ONNX Runtime's), whose rate no llama.cpp measurement tells."""
    machine = this_machine()
    if role == "embed":
        from hydra_rag.catalog import load_embedders
        from hydra_rag.config import load_settings

        catalog = load_embedders()
        emb = catalog.get(load_settings().embedder_for("code"))
        out: list[Entry] = [emb] if emb is not None and emb.installed() and not emb.url else []
        others: dict[str, Entry] = {}
        for x in catalog.values():
            if x.url or not x.installed() or any(o.backend == x.backend for o in out):
                continue
            held = others.get(x.backend)
            if held is None or (size_of(x) or 0) < (size_of(held) or 0):
                others[x.backend] = x
        return out + list(others.values())
    best: tuple[int, Entry] | None = None
    for e in entries_of(role):
        size = size_of(e)
        if e.url or not e.installed() or not size or e.backend == "onnx":
            continue
        if machine.available_mb and needs(size) > machine.available_mb << 20:
            continue
        if best is None or size > best[0]:
            best = (size, e)
    return [best[1]] if best else []
