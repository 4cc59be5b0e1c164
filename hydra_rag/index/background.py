"""`index --background`: phase one in the caller's process, phase two (the vectors) in a
detached child that outlives it — a plain `hydra-rag index` of the folder, which finds nothing
changed and the chunks that wait for their vector (hydra_rag.index.vectors). Its output goes to
a log in the state folder; `status` shows how far it is, and `sidecars list` shows every such
child (`running`) from the records it leaves beside its log."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hydra_rag.paths import INDEX_DIR, state_dir

PID_FILE = "background.pid"  # in .hydra-index: the child embedding the folder's chunks


def log_path(root: Path) -> Path:
    """Where the child embedding `root` writes what it says."""
    key = hashlib.blake2b(str(root).encode(), digest_size=6).hexdigest()
    return state_dir() / "background" / f"index-{root.name or 'root'}-{key}.log"


def embed_in_background(root: Path) -> tuple[int, Path]:
    """Start the child that embeds what waits in `root`'s index; its pid and its log."""
    log = log_path(root)
    log.parent.mkdir(mode=0o700, exist_ok=True)
    with open(log, "ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "hydra_rag", "index", str(root), "--wait", "60"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C or a closed terminal does not stop it
            env={**os.environ, "HYDRA_RAG_WARM_MINUTES": "0"})
    # Until the child holds the folder's lock, `status` knows it by this (index/status.py).
    try:
        (root / INDEX_DIR / PID_FILE).write_text(f"{child.pid}\n")
    except OSError:
        pass
    try:  # for `sidecars list`: every folder being embedded, wherever it is
        log.with_suffix(".json").write_text(json.dumps(
            {"pid": child.pid, "root": str(root), "log": str(log),
             "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}))
    except OSError:
        pass
    return child.pid, log


def alive(pid: int, ours: bool = True) -> bool:
    """Is `pid` a live process, and (`ours`) one running hydra_rag — not a pid the system
    gave to another program since? (A lock's holder may be any program that imports the
    library: `ours=False` for it.)"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not ours:
        return True
    try:  # a pid the system gave to another process since: not ours unless it runs hydra_rag
        return b"hydra_rag" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: trust the signal


def left(meta: dict[str, Any]) -> dict[str, Any]:
    """Phase two as meta.yaml records it: chunks still without a vector, the rate the run
    measured, and the time left at that rate while a run embeds them."""
    from hydra_rag.store.vectors import recorded

    pending = sum(recorded(meta).values())
    rate = float(meta.get("vectors_rate") or 0) or None
    return {"pending": pending, "rate": rate,
            "left_s": round(pending / rate) if rate and pending else None}


def running() -> list[dict[str, Any]]:
    """The children embedding a folder now: pid, root, log, started, and the folder's chunks
    still without a vector, its rate and the time left (meta.yaml, as `status` reads it).
    Records of children that have ended are removed."""
    from hydra_rag.store.index_dir import Store

    rows = []
    for rec in sorted((state_dir() / "background").glob("index-*.json")):
        try:
            doc = json.loads(rec.read_text())
            pid, root = int(doc["pid"]), Path(doc["root"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # another process's half-written record, or not one of ours
        if not alive(pid):
            rec.unlink(missing_ok=True)
            continue
        try:
            meta = Store(root).read_meta()
        except Exception:  # noqa: BLE001 - a folder being rebuilt or gone: shown without counts
            meta = {}
        rows.append({"pid": pid, "root": str(root), "log": doc.get("log"),
                     "started": doc.get("started"), **left(meta)})
    return rows
