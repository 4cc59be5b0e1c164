"""Phase two's request size (issue 47): documents' chunks/s while another client asks a query
every 0.7 s, and that query's latency, at 64 and 8 chunks per request to the embedder sidecar.
The texts are 1,000-character pieces of a folder of code (BENCHMARKS.md used Django 5.1.4's
django/db).

    .venv/bin/python bench/phase_two_requests.py FOLDER
"""

from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hydra_rag.config import load_settings, table_embedder  # noqa: E402
from hydra_rag.models.embed import connect  # noqa: E402


def main() -> None:
    folder = Path(sys.argv[1])
    settings = load_settings()
    emb = table_embedder(settings, "code", "")
    docs, asker = connect(emb, settings), connect(emb, settings)
    texts = []
    for f in sorted(folder.rglob("*.py")):
        t = f.read_text(errors="replace")
        texts += [t[i : i + 1000] for i in range(0, len(t), 1000)]
    random.Random(1).shuffle(texts)
    texts = [t for t in texts if docs.fits(t)][:192]
    docs.embed_documents(texts[:8])
    asker.embed_query("warm")
    for size in (64, 8, 64, 8):
        docs.batch = size
        waits: list[float] = []
        stop = threading.Event()

        def ask(waits: list[float] = waits, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                t = time.monotonic()
                asker.embed_query("how are bulk inserts batched")
                waits.append(time.monotonic() - t)
                time.sleep(0.7)

        th = threading.Thread(target=ask, daemon=True)
        th.start()
        t0 = time.monotonic()
        docs.embed_documents(texts)
        took = time.monotonic() - t0
        stop.set()
        th.join(30)
        waits.sort()
        print(f"request of {size}: {len(texts) / took:.1f} chunks/s; query latency median "
              f"{waits[len(waits) // 2]:.2f} s, max {waits[-1]:.2f} s (n={len(waits)})",
              flush=True)


if __name__ == "__main__":
    main()
