"""Federated search: 20 folders holding N chunks in total next to one folder holding the same
N chunks, in the same run — latency and whether the top results are the same.

    python bench/federation.py [--docs 600] [--shards 20] [--queries 100]

Documents are SciFact abstracts from ../shared/data/scifact (one Markdown file each): every
abstract judged relevant to one of the queries, then the first others up to --docs; queries are
the first judged SciFact claims, so nDCG@10 can be reported for both setups. Work files go to
bench/.work/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data" / "scifact"
WORK = HERE / ".work" / "federation"


def write_corpus(n_docs: int, shards: int, keep: set[str]) -> tuple[Path, list[Path]]:
    docs = []
    with (DATA / "corpus.jsonl").open() as f:
        for line in f:
            d = json.loads(line)
            if d["_id"] in keep or len(docs) < n_docs:
                docs.append(d)
    single = WORK / "single"
    parts = [WORK / f"shard{i:02}" for i in range(shards)]
    if not (WORK / ".git").exists():
        # Its own repository: otherwise this checkout's .gitignore (bench/.work/) hides it.
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(WORK)], check=True)
    for i, d in enumerate(docs):
        text = f"# {d['title']}\n\n{d['text']}\n"
        for folder in (single, parts[i % shards]):
            p = folder / f"{d['_id']}.md"
            if not p.exists():
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text, encoding="utf-8")
    return single, parts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=600)
    ap.add_argument("--shards", type=int, default=20)
    ap.add_argument("--queries", type=int, default=100)
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    subprocess.run([sys.executable, "-m", "hydra_rag", "rag", "setup"], check=True,
                   capture_output=True)
    from retrieval_quality import load  # this folder: the same judged SciFact claims

    items, qrels = load("scifact", args.queries)
    keep = {d for q in items for d in qrels[q["_id"]]}
    WORK.mkdir(parents=True, exist_ok=True)
    stamp = WORK / "corpus.json"
    wanted = {"docs": args.docs, "shards": args.shards, "queries": args.queries}
    if not stamp.exists() or json.loads(stamp.read_text()) != wanted:
        # another corpus: start from scratch (the folders and their indexes)
        import shutil

        for old in WORK.glob("s*"):
            shutil.rmtree(old)
        stamp.write_text(json.dumps(wanted))
    single, parts = write_corpus(args.docs, args.shards, keep)
    for folder in [single, *parts]:
        subprocess.run([sys.executable, "-m", "hydra_rag", "index", str(folder)], check=True,
                       capture_output=True)

    from hydra_rag.config import load_settings
    from hydra_rag.search.retrieve import Searcher

    settings = load_settings()
    one = Searcher(single, settings)
    many = Searcher(parts, settings, skip_broken=True)
    from hydra_rag.checks.metrics import ndcg_at

    queries = [q["text"] for q in items]
    one.search(queries[0], 10)  # warm: sidecar up, tables opened
    many.search(queries[0], 10)
    t_one, t_many, same_top1, overlap = [], [], 0, []
    ndcg_one, ndcg_many = [], []
    for item, q in zip(items, queries, strict=True):
        t0 = time.perf_counter()
        a = one.search(q, 10)
        t_one.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        b = many.search(q, 10)
        t_many.append(time.perf_counter() - t0)
        ida, idb = [h.path for h in a], [h.path for h in b]
        rel = qrels[item["_id"]]
        ndcg_one.append(ndcg_at([Path(x).stem for x in dict.fromkeys(ida)], rel, 10))
        ndcg_many.append(ndcg_at([Path(x).stem for x in dict.fromkeys(idb)], rel, 10))
        same_top1 += ida[:1] == idb[:1]
        overlap.append(len(set(ida) & set(idb)) / max(len(ida), 1))
    files = json.loads((single / ".hydra-index" / "files.json").read_text())["files"]
    n_chunks = sum(len(e["chunks"]) for e in files.values())
    med = statistics.median
    print(f"corpus: {len(files)} SciFact abstracts, {n_chunks} chunks; {len(parts)} folders vs 1; "
          f"{len(queries)} queries, top-10")
    print(f"median search latency: 1 folder {med(t_one) * 1000:.0f} ms, {len(parts)} folders "
          f"{med(t_many) * 1000:.0f} ms, ratio {med(t_many) / med(t_one):.2f}x")
    print(f"same top-1: {same_top1}/{len(queries)}; mean top-10 overlap "
          f"{statistics.mean(overlap):.2f}; nDCG@10 1 folder {statistics.mean(ndcg_one):.3f}, "
          f"{len(parts)} folders {statistics.mean(ndcg_many):.3f}")


if __name__ == "__main__":
    main()
