"""`index --background`: phase one in the caller's process, phase two (the vectors) in a
detached child that outlives it — a plain `hydra-rag index` of the folder, which finds nothing
changed and the chunks that wait for their vector (hydra_rag.index.vectors). Its output goes to
a log in the state folder; `status` shows how far it is."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

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
    return child.pid, log
