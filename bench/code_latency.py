"""How long a code search takes, warm, on one index of about 20,000 chunks: the six projects of
bench/code_search.py, copied COPIES times into one folder (each copy under its own name, so
every chunk is embedded), searched with the 108 questions of the code-search set.

    python bench/code_latency.py [--copies 3]

Per query, in one process whose tables are open (the warm process's case): `search` (chunks,
k=10) and `search --files` (files, k=10), with the ranking signals on (the default) and all
off (the reference, same run); p50 and p95 over the questions, each searched once before it is
timed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import code_corpora
from code_search import SIGNALS, index, load

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "code-20k"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    subprocess.run([sys.executable, "-m", "hydra_rag", "rag", "setup"], check=True,
                   capture_output=True)
    if not (WORK / ".git").exists():  # this checkout's .gitignore would hide the files
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(WORK)], check=True)
    for name in code_corpora.PROJECTS:
        src = code_corpora.fetch(name)
        for i in range(1, args.copies + 1):
            dest = WORK / f"{name}-{i}"
            if not dest.exists():
                shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".hydra-index"))
    report = index(WORK)
    chunks = sum(report["chunks_total"].values())
    print(f"one index of {chunks} chunks ({args.copies} copies of six projects); index run "
          f"{report['wall_s']:.0f} s", flush=True)
    from hydra_rag.config import load_settings
    from hydra_rag.search.retrieve import Searcher

    questions = [q["text"] for name in code_corpora.PROJECTS for q in load(name)]
    print(f"{len(questions)} questions; ms per search, warm (p50 / p95)")
    for label, settings in (("signals on (default)", load_settings()),
                            ("signals off", replace(load_settings(),
                                                    **dict.fromkeys(SIGNALS, False)))):
        searcher = Searcher(WORK, settings)
        for what, run in (("search -k 10", searcher.search),
                          ("search --files -k 10", searcher.files)):
            times = []
            for q in questions:
                run(q, 10)  # warm: the query's embedding is not cached, the tables are open
                t0 = time.perf_counter()
                run(q, 10)
                times.append((time.perf_counter() - t0) * 1000)
            times.sort()
            p95 = times[int(0.95 * (len(times) - 1))]
            print(f"  {label:22} {what:22} {statistics.median(times):6.0f} / {p95:6.0f}",
                  flush=True)
        searcher.close()


if __name__ == "__main__":
    main()
