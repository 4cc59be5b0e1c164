"""Which chat models and embedders this machine runs at a usable speed, and how to get them.

Speed is measured, not looked up: a short self-test (hydra_rag.models.sidecar_server --speed)
of an installed model gives its tokens per second here, kept in `speeds.json` in the state
folder (doctor's self-tests add to it). A model not measured here is estimated from the
measured one nearest in size: writing a token reads every weight once, so a chat model's rate
scales with the inverse of its file size, and an embedder's work with its size too. An estimate
says which measurement it came from. A model fits when its weights, a context cache and the
runtime fit the memory available now.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra_rag.hub.describe import split_parts
from hydra_rag.hub.refs import needs
from hydra_rag.hub.register import Entry, entries_of
from hydra_rag.locks import write_atomic
from hydra_rag.paths import state_dir

Say = Callable[[str], None]
# Usable: a chat model writes at least as fast as people read (~5 tokens/s); an embedder
# indexes 10,000 chunks of 300 tokens within an hour (~830 tokens/s).
CHAT_USABLE = 5.0
EMBED_USABLE = 830.0
# SciFact's chunks averaged 333 tokens of MiniLM's (BENCHMARKS.md, issue 32).
CHUNKS, CHUNK_TOKENS = 10_000, 333


def speeds_path() -> Path:
    return state_dir() / "speeds.json"


def recorded() -> dict[str, dict[str, Any]]:
    """Measured speeds by model id: {"role", "size", "tokens_per_s", "device", "when"}."""
    try:
        doc = json.loads(speeds_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, dict)} if isinstance(doc, dict) else {}


def record(entry: Entry, role: str, info: dict[str, Any]) -> None:
    """Keep a self-test's measured speed (info["speed"]) for `entry`."""
    speed = info.get("speed") or {}
    if not speed.get("tokens_per_s"):
        return
    doc = recorded()
    doc[entry.id] = {"role": role, "size": size_of(entry) or 0, "backend": entry.backend,
                     "device": info.get("device", ""),
                     "tokens_per_s": speed["tokens_per_s"],
                     "prompt_tokens_per_s": speed.get("prompt_tokens_per_s"),
                     "when": time.strftime("%Y-%m-%d %H:%M")}
    write_atomic(speeds_path(), json.dumps(doc, indent=1))


def size_of(entry: Entry) -> int | None:
    """Bytes on disk (every part), or the catalog's download size; None when unknown."""
    path = entry.model_path()
    if path is not None and path.is_file():
        return sum(p.stat().st_size for p in split_parts(path) if p.is_file())
    return entry.size_mb << 20 if entry.size_mb else None


def measure(entry: Entry, role: str) -> dict[str, Any]:
    """Self-test `entry` with timing, record it and return what the self-test saw."""
    from hydra_rag.config import load_settings
    from hydra_rag.models.sidecar import self_test

    settings = load_settings()
    if role == "chat":
        from hydra_rag.models.chat import sidecar_spec as chat_spec

        spec = chat_spec(entry, settings)  # type: ignore[arg-type]
    else:
        from hydra_rag.models.embed import sidecar_spec as embed_spec

        spec = embed_spec(entry, settings)  # type: ignore[arg-type]
    info = self_test(spec, speed=True)
    record(entry, role, info)
    return info


@dataclass(frozen=True)
class Machine:
    memory_mb: int  # total
    available_mb: int
    cores: int
    gpu: str  # "" when llama.cpp here has no GPU backend or sees none


def this_machine() -> Machine:
    from hydra_rag.models.install import machine

    total = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) // 1024
    except OSError:
        pass
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


def _estimate(size: int | None, role: str, backend: str, speeds: dict[str, dict[str, Any]]
              ) -> tuple[float | None, str]:
    """A rate for a model of `size` bytes from the measurement of the same role and backend
    nearest in size."""
    if not size:
        return None, ""
    same = [(k, v) for k, v in speeds.items() if v.get("role") == role and v.get("size")
            and v.get("backend", "llama.cpp") == backend]
    if not same:
        return None, ""
    ref_id, ref = min(same, key=lambda kv: abs(kv[1]["size"] - size))
    return float(ref["tokens_per_s"]) * ref["size"] / size, ref_id


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
                basis = "measured"
            else:
                tps, ref = _estimate(size, role, e.backend, speeds)
                basis = f"estimated from {ref}" if ref else ""
            usable = fits and tps is not None and tps >= usable_at
            installed = e.installed()
            out.append(Fit(e.id, role, size, installed, fits, tps, basis, usable,
                           "" if installed else f"hydra-rag {verb} pull {e.id}"))
    return out


def to_measure(role: str) -> Entry | None:
    """The installed model of a role to time: the largest that fits (an estimate from a
    larger model is the closer one for the models people pull)."""
    machine = this_machine()
    best: tuple[int, Entry] | None = None
    for e in entries_of(role):
        size = size_of(e)
        if e.url or not e.installed() or not size or e.backend == "onnx":
            continue
        if machine.available_mb and needs(size) > machine.available_mb << 20:
            continue
        if best is None or size > best[0]:
            best = (size, e)
    return best[1] if best else None


def embed_rate(emb: Any) -> tuple[float, str] | None:
    """An embedder's tokens per second here, and what that rests on; None when nothing was
    measured to go on (or it is remote)."""
    if getattr(emb, "url", None):
        return None
    speeds = recorded()
    got = speeds.get(emb.id)
    if got and got.get("role") == "embed":
        return float(got["tokens_per_s"]), "measured here"
    tps, ref = _estimate(size_of(emb), "embed", emb.backend, speeds)
    return (tps, f"estimated from {ref}") if tps else None


def embed_estimate(chunks: dict[str, int], embedders: dict[str, Any]) -> str:
    """"; about 12 min to embed 3,400 chunks (…)" for a rebuild that embeds `chunks` per
    table with `embedders` per table; "" when no rate is known."""
    total, why = 0.0, []
    for table, n in chunks.items():
        emb = embedders.get(table)
        if not n or emb is None:
            continue
        rate = embed_rate(emb)
        if rate is None:
            return ""
        total += n * CHUNK_TOKENS / rate[0]
        why.append(f"{emb.id}: {rate[0]:,.0f} tokens/s, {rate[1]}")
    if not why:
        return ""
    n = sum(chunks.values())
    took = f"{total / 60:,.0f} min" if total >= 90 else f"{max(total, 1):.0f} s"
    return f"; about {took} to embed {n:,} chunks ({'; '.join(sorted(set(why)))})"
