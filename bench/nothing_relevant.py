""""Nothing relevant": does the chat refuse questions a folder has nothing on, and still answer
the ones it has?

    python bench/nothing_relevant.py [--sets scifact,cosqa] [--queries 300]
                                     [--embedder ID --docs N] [--thresholds 0.3,0.35]

For each folder of bench/retrieval_quality.py (indexed there with the defaults), on-topic
questions are its own set's queries and off-topic ones are the other set's queries plus
OFF_TOPIC, general questions no such folder answers. A question is answered when one of its
first 5 hits is not weak (hydra_rag.search.evidence.weak); the chat answers from those only. Prints,
for a range of cosine thresholds (`min_similarity`) and for the embedder's own, the share of
on-topic questions answered and of off-topic ones refused, and the same for the rule before
(any BM25 match, or cosine >= 0.2). `--embedder ID` indexes a copy of each folder with that
embedder instead (`--docs N`: the judged documents of the chosen queries and others up to N,
for a slow embedder).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

OFF_TOPIC = [
    "what is the capital of Mongolia?", "who won the 1998 football world cup?",
    "how do I bake sourdough bread?", "what is the boiling point of water on Everest?",
    "recommend a good hiking trail in the Alps", "how many moons does Jupiter have?",
    "what year did the Berlin wall fall?", "translate good morning into Japanese",
    "what is the best way to learn the violin?", "who painted the Mona Lisa?",
    "how tall is the Eiffel tower?", "what should I cook for dinner tonight?",
    "what is the population of Brazil?", "how do tides work?",
    "when was the printing press invented?", "what is the plot of Hamlet?",
    "how do I change a flat bicycle tire?", "which planet is closest to the sun?",
    "what is the exchange rate of the euro to the yen?", "how do bees make honey?",
    "what language is spoken in Brazil?", "who wrote War and Peace?",
    "what is the speed of sound in air?", "how long does it take to boil an egg?",
    "what are the rules of cricket?", "how do I grow tomatoes on a balcony?",
    "what is the tallest mountain in Africa?", "why is the sky blue?",
    "who discovered penicillin?", "how many players are in a rugby team?",
]
THRESHOLDS = (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85)
COVERAGE = (0.5, 2 / 3, 1.0)  # share of the query's words a BM25 hit must hold


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="scifact,cosqa")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--embedder", default="")
    ap.add_argument("--docs", type=int, default=0)
    ap.add_argument("--thresholds", default=",".join(map(str, THRESHOLDS)),
                    help="cosines to try, comma-separated")
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    import retrieval_quality as rq

    from hydra_rag.catalog import get_embedder
    from hydra_rag.config import load_settings
    from hydra_rag.search.evidence import MIN_COVERAGE, weak
    from hydra_rag.search.retrieve import Searcher
    from hydra_rag.store.index_dir import Store

    names = args.sets.split(",")
    loaded = {n: rq.load(n, args.queries) for n in names}
    queries = {n: [q["text"] for q in qs] for n, (qs, _) in loaded.items()}
    if args.embedder:
        subprocess.run([sys.executable, "-m", "hydra_rag", "rag", "setup", "--embedder",
                        args.embedder], check=True, capture_output=True)
    for name in names:
        qs, qrels = loaded[name]
        keep = {d for q in qs for d in qrels[q["_id"]]} if args.docs else None
        folder, _ = rq.write_corpus(name, keep, args.docs)
        if args.embedder:
            copy = folder.with_name(f"{folder.name}-{args.embedder}")
            if not copy.exists():
                shutil.copytree(folder, copy, ignore=shutil.ignore_patterns(".hydra-index"))
            folder = copy
            rq.index(folder, "--embedder", args.embedder)
        else:
            rq.index(folder)
        meta = Store(folder).read_meta()
        eid = next(iter(meta["tables"].values()))["embedder"]
        own = get_embedder(eid).min_similarity
        searcher = Searcher(folder, load_settings())
        groups = {"on-topic": queries[name],
                  "off-topic": [q for other in names if other != name for q in queries[other]]
                  + OFF_TOPIC, "general": OFF_TOPIC}
        print(f"\n{name} ({eid}, min_similarity {own}): share answered")
        print(f"{'rule':<34}" + "".join(f"{g} (n={len(qs)})".rjust(22) for g, qs in groups.items()))
        hits = {g: [(q, searcher.search(q, 5)) for q in qs] for g, qs in groups.items()}
        searcher.close()
        tried = [float(t) for t in args.thresholds.split(",")]
        rules = {f"cosine >= {t}, words {c:.2f}": (t, c) for c in COVERAGE for t in tried}
        rules[f"embedder's ({own}, {MIN_COVERAGE:.2f})"] = (own, MIN_COVERAGE)
        for label, (t, c) in rules.items():
            cells = []
            for g in groups:
                answered = sum(any(not weak(h, q, t, c) for h in hs) for q, hs in hits[g])
                cells.append(f"{answered / len(hits[g]):22.3f}")
            print(f"{label:<34}" + "".join(cells))
        cells = []
        for g in groups:
            answered = sum(any(any(n.startswith(("bm25", "literal", "term:")) for n in h.ranks)
                               or (h.similarity or 0) >= 0.2 for h in hs) for _, hs in hits[g])
            cells.append(f"{answered / len(hits[g]):22.3f}")
        print(f"{'before (bm25 or >= 0.2)':<34}" + "".join(cells))


if __name__ == "__main__":
    main()
