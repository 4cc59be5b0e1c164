"""Speeds measured on this machine: each model's tokens per second from a timed self-test
(hydra_rag.models.sidecar_server --speed), kept in `speeds.json` in the state folder by
`rag setup`, `doctor` and `models recommend`; and the estimates made from them, such as how
long a rebuild's re-embedding should take.

A model not measured is estimated from the measured one of the same role and backend nearest
in size: writing a token reads every weight once, so a chat model's rate scales with the
inverse of its file size, and an embedder's work with its size too. An estimate says which
measurement it came from."""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path
from typing import Any

from hydra_rag.locks import write_atomic
from hydra_rag.models.gguf import split_parts
from hydra_rag.paths import state_dir

# SciFact's chunks averaged 333 tokens of MiniLM's (BENCHMARKS.md, issue 32).
CHUNKS, CHUNK_TOKENS = 10_000, 333


# Other processes using this much of the machine (in cores) while a model was timed make its
# rate that of a busy machine: a chat model decoded 3 tokens/s beside a busy core and 41 alone
# (BENCHMARKS.md, issue 45). Said beside every rate measured so.
BUSY_CORES = 0.5


class CpuWatch:
    """How much CPU other processes used while a child was timed: the machine's busy time
    (/proc/stat) less this process's and its children's, over the wall time, in cores; and
    the load average at the end. Linux only (elsewhere it sees nothing)."""

    def __enter__(self) -> CpuWatch:
        self.start = (time.monotonic(), _busy_seconds(), _own_seconds())
        return self

    def __exit__(self, *_: object) -> None:
        wall = time.monotonic() - self.start[0]
        busy, own = _busy_seconds(), _own_seconds()
        others = (busy - self.start[1]) - (own - self.start[2])
        self.others = max(others / wall, 0.0) if wall > 0 and busy and self.start[1] else 0.0
        try:
            self.load = os.getloadavg()[0]
        except OSError:
            self.load = 0.0

    def report(self) -> dict[str, float]:
        """{"others_cores", "cores", "load"}: what a speed record keeps."""
        return {"others_cores": round(self.others, 2), "cores": float(os.cpu_count() or 1),
                "load": round(self.load, 2)}


def _busy_seconds() -> float:
    """CPU seconds all cores spent busy since boot (0.0 where /proc/stat cannot be read)."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return 0.0
    ticks = [int(x) for x in first[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle, iowait
    steal_guest = sum(ticks[7:])  # steal (another machine's), guest (counted in user too)
    return (sum(ticks) - idle - steal_guest) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    """CPU seconds this process and its finished children used."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def busy_note(rec: dict[str, Any] | None) -> str:
    """"the machine was busy: …" for a speed record measured while other processes used the
    CPU, else ""."""
    busy = (rec or {}).get("busy") or {}
    others = float(busy.get("others_cores") or 0)
    if others < BUSY_CORES:
        return ""
    cores = float(busy.get("cores") or 0)
    of = f" of {cores:g}" if cores else ""
    load = f", load average {float(busy['load']):.1f}" if busy.get("load") else ""
    return f"the machine was busy: other processes used {others:.1f}{of} cores{load}"


def rate(tps: float) -> str:
    """Tokens per second for a person: a decimal below 10 (0.4, not 0), none above."""
    if tps < 0.05:
        return "<0.1"
    return f"{tps:.1f}" if tps < 10 else f"{tps:,.0f}"


def speeds_path() -> Path:
    return state_dir() / "speeds.json"


def recorded() -> dict[str, dict[str, Any]]:
    """Measured speeds by model id: {"role", "size", "tokens_per_s", "device", "when"}."""
    try:
        doc = json.loads(speeds_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, dict)} if isinstance(doc, dict) else {}


def record(entry: Any, role: str, info: dict[str, Any]) -> None:
    """Keep a self-test's measured speed (info["speed"]) for `entry`."""
    speed = info.get("speed") or {}
    if not speed.get("tokens_per_s"):
        return
    doc = recorded()
    doc[entry.id] = {"role": role, "size": size_of(entry) or 0, "backend": entry.backend,
                     "work": work(entry, role),
                     "device": info.get("device", ""),
                     "tokens_per_s": speed["tokens_per_s"],
                     "prompt_tokens_per_s": speed.get("prompt_tokens_per_s"),
                     **({"busy": info["busy"]} if info.get("busy") else {}),
                     "when": time.strftime("%Y-%m-%d %H:%M")}
    write_atomic(speeds_path(), json.dumps(doc, indent=1))


def size_of(entry: Any) -> int | None:
    """Bytes on disk (every part), or the catalog's download size; None when unknown."""
    path = entry.model_path()
    if path is not None and path.is_file():
        return sum(p.stat().st_size for p in split_parts(path) if p.is_file())
    return entry.size_mb << 20 if entry.size_mb else None


def _layers(entry: Any) -> int:
    """An embedder's layer count: its catalog entry's, else its GGUF's (0: not known)."""
    from hydra_rag.models.gguf import metadata_value

    if getattr(entry, "layers", 0):
        return int(entry.layers)
    path = entry.model_path()
    if path is None or not path.is_file() or path.suffix.lower() == ".onnx":
        return 0
    arch = metadata_value(path, "general.architecture")
    n = metadata_value(path, f"{arch}.block_count") if isinstance(arch, str) else None
    return n if isinstance(n, int) else 0


def work(entry: Any, role: str) -> float:
    """What a model's rate is inversely proportional to. A chat model writing a token reads
    every weight once: its bytes. An embedder reading a passage computes: its layers times its
    width squared, when they are known (a large vocabulary adds bytes but no work), else its
    bytes. 0 when nothing is known."""
    dims = int(getattr(entry, "dims", 0) or 0)
    if role == "embed" and dims and (layers := _layers(entry)):
        return float(layers * dims ** 2)
    return float(size_of(entry) or 0)


def estimate(entry: Any, role: str, speeds: dict[str, dict[str, Any]]
             ) -> tuple[float | None, str]:
    """A rate for `entry` from the measurement of the same role and backend nearest in
    size, scaled by `work`; (None, "") when there is none to go by."""
    size, mine = size_of(entry), work(entry, role)
    if not mine:
        return None, ""
    usable = [(k, v) for k, v in speeds.items() if v.get("role") == role and v.get("size")
              and v.get("work")]
    # Another backend's rate where this one was never timed (an ONNX Runtime embedder beside
    # llama.cpp's): the same work at that backend's rate, which the basis says.
    same = [kv for kv in usable if kv[1].get("backend", "llama.cpp") == entry.backend] or usable
    if not same:
        return None, ""
    # Nearest in size; an embedder not installed whose size is not known, nearest in work.
    ref_id, ref = min(same, key=lambda kv: abs(kv[1]["size"] - size) if size else
                      abs(kv[1]["work"] - mine))
    if (ref["work"] == ref["size"]) != (mine == size):  # the two measured in different terms
        return None, ""
    return float(ref["tokens_per_s"]) * ref["work"] / mine, ref_id


def embed_rate(emb: Any) -> tuple[float, str] | None:
    """An embedder's tokens per second here, and what that rests on; None when nothing was
    measured to go on (or it is remote)."""
    if getattr(emb, "url", None):
        return None
    speeds = recorded()
    got = speeds.get(emb.id)
    if got and got.get("role") == "embed":
        return float(got["tokens_per_s"]), "measured here"
    tps, ref = estimate(emb, "embed", speeds)
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
