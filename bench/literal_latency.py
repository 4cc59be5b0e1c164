"""What the literal list costs a search: median latency with it and without it, with the table
in memory (the default for up to 20,000 chunks) and read through LanceDB (`search_cache_mb: 0`,
what a larger table gets), on an indexed folder.

    python bench/literal_latency.py [FOLDER] [--queries 200]

FOLDER defaults to the SciFact folder bench/retrieval_quality.py indexes; the queries are its
claims (plain language: no literal match, the scan is pure cost) and, as many, strings copied
from its abstracts (one literal match each).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
DATA = HERE.parent.parent / "shared" / "data" / "scifact"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", nargs="?", default=str(HERE / ".work" / "quality" / "scifact"))
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    from hydra_rag.config import load_settings
    from hydra_rag.search.retrieve import Searcher
    from hydra_rag.store.index_dir import Store

    root = Path(args.folder)
    rng = random.Random(5)
    with (DATA / "queries.jsonl").open() as f:
        claims = [json.loads(line)["text"] for line in f][: args.queries]
    files = sorted(Store(root).read_files())
    copied = []
    for rel in rng.sample(files, args.queries):
        words = (root / rel).read_text(encoding="utf-8").split()
        i = rng.randrange(max(1, len(words) - 6))
        copied.append(" ".join(words[i:i + 6]))
    chunks = sum(len(e.chunks) for e in Store(root).read_files().values())
    print(f"{root.name}: {chunks} chunks; {len(claims)} claims, {len(copied)} copied strings")
    base = load_settings()
    for cache in (base.search_cache_mb, 0):
        for literal in (False, True):
            s = Searcher(root, replace(base, search_cache_mb=cache, literal=literal))
            s.search(claims[0], k=10)  # warm: tables opened, cached, sidecar up
            row = []
            for name, qs in (("claims", claims), ("copied", copied)):
                times = []
                for q in qs:
                    t0 = time.perf_counter()
                    s.search(q, k=10)
                    times.append(time.perf_counter() - t0)
                row.append(f"{name} {statistics.median(times) * 1000:6.1f} ms")
            s.close()
            where = "in memory" if cache else "LanceDB  "
            print(f"{where} literal {'on ' if literal else 'off'}: " + ", ".join(row))


if __name__ == "__main__":
    main()
