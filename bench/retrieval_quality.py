"""Retrieval quality on the BEIR-layout sets in ../shared/data: each corpus written as a folder
(one file per document), indexed with the real CLI, then searched dense-only, BM25-only and
hybrid in the same run; file-level nDCG@10, Recall@10 and MRR@10.

Sets: `scifact`, `cosqa` (../shared/data); `reports` (SciFact abstracts as sections of long
Markdown reports; passage-level: a hit counts for the abstracts its lines overlap); `man-de`,
`man-fr`, `man-ru`… (known-item search in this machine's translated manual pages, see
manpages.py).

    python bench/retrieval_quality.py [--sets scifact,cosqa] [--queries N] [--docs N]
                                      [--contextualize] [--rerank N] [--rerank-top 20]
                                      [--embedder ID]

`--docs N` keeps every judged document of the chosen queries plus the first others up to N (a
quicker, easier variant; the default is the whole corpus). `--contextualize` also indexes a copy
of each folder with `index --contextualize` (the default chat model writes a context per chunk:
seconds per chunk on a CPU, so use it with --docs) and evaluates that too. `--rerank N` also reranks the
top `--rerank-top` fused candidates of the first N queries with the configured reranker (seconds
per query on a CPU) and compares with the plain hybrid on those same N queries. `--embedder ID`
also indexes a copy of each folder with that embedder (`index --embedder ID`) and evaluates it.
Work files go to bench/.work/quality/.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import manpages

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data"
WORK = HERE / ".work" / "quality"
# name → (data folder, judgements file, file suffix: Markdown for prose, .py for code)
SETS = {"scifact": (DATA / "scifact", "qrels/train.tsv", ".md"),
        "cosqa": (DATA / "cosqa", "qrels/dev.tsv", ".py"),
        "reports": (DATA / "scifact", "qrels/train.tsv", ".md")}
# man-de, man-fr, man-ru…: this machine's translated manual pages (see manpages.py)
for _lang in ("de", "fr", "ru", "es", "pl", "cs"):
    SETS[f"man-{_lang}"] = (manpages.OUT / f"man-{_lang}", "qrels/test.tsv", ".md")
# "reports": long reports made of SciFact abstracts, REPORT_SIZE to a file, each under its
# own "## title" with its text wrapped at WRAP columns; a hit counts for the abstracts its
# line range overlaps, so the unit is the passage, not the file.
REPORT_SIZE = 20
WRAP = 100
# name → (search methods, fusion); "hybrid" is the default.
MODES = {"dense": (("vector",), "score"), "bm25": (("bm25",), "score"),
         "hybrid-rrf": (("vector", "bm25"), "rrf"),
         # the default without its literal list: the reference for what that list costs or gains
         "no-literal": (("vector", "bm25"), "score-noliteral"),
         "hybrid": (("vector", "bm25"), "score")}


def load(name: str, n_queries: int) -> tuple[list[dict[str, str]], dict[str, dict[str, float]]]:
    qrels: dict[str, dict[str, float]] = {}
    data, judged, _ = SETS[name]
    if name.startswith("man-") and not (data / judged).exists():
        manpages.build(name.removeprefix("man-"))
    lines = (data / judged).read_text().splitlines()[1:]
    for line in lines:
        qid, doc, grade = line.split("\t")
        qrels.setdefault(qid, {})[doc] = float(grade)
    queries = []
    with (data / "queries.jsonl").open() as f:
        for line in f:
            q = json.loads(line)
            if q["_id"] in qrels:
                queries.append(q)
    return queries[:n_queries], qrels


def _documents(name: str, keep: set[str] | None, n_docs: int) -> list[dict[str, str]]:
    docs: list[dict[str, str]] = []
    with (SETS[name][0] / "corpus.jsonl").open() as f:
        for line in f:
            d = json.loads(line)
            if keep is not None and d["_id"] not in keep and len(docs) >= n_docs:
                continue
            docs.append(d)
    return docs


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


Locate = Callable[[str, int, int], list[str]]


def write_corpus(name: str, keep: set[str] | None, n_docs: int) -> tuple[Path, Locate]:
    """Write the set as a folder; return it and the function that maps a hit (path, first and
    last line) to the documents it shows."""
    suffix = SETS[name][2]
    folder = WORK / (name if keep is None else f"{name}-{n_docs}")
    if not (WORK / ".git").exists():
        # Its own repository: otherwise this checkout's .gitignore (bench/.work/) hides it.
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(WORK)], check=True)
    folder.mkdir(parents=True, exist_ok=True)
    docs = _documents(name, keep, n_docs)
    if name != "reports":
        for d in docs:
            text = d["text"] if suffix == ".py" or not d["title"] else f"# {d['title']}\n\n{d['text']}\n"
            _write(folder / f"{d['_id']}{suffix}", text if text.endswith("\n") else text + "\n")
        return folder, lambda path, first, last: [Path(path).stem]
    # Spread the judged abstracts over the reports (a fixed shuffle), so a report is a mix.
    random.Random(7).shuffle(docs)
    spans: dict[str, list[tuple[int, int, str]]] = {}
    for i in range(0, len(docs), REPORT_SIZE):
        rel = f"report-{i // REPORT_SIZE + 1:03d}.md"
        lines = [f"# Report {i // REPORT_SIZE + 1}", ""]
        for d in docs[i : i + REPORT_SIZE]:
            first = len(lines) + 1
            lines += [f"## {d['title'].strip()}", ""]
            lines += textwrap.wrap(d["text"], WRAP) + [""]
            spans.setdefault(rel, []).append((first, len(lines), d["_id"]))
        _write(folder / rel, "\n".join(lines) + "\n")

    def locate(path: str, first: int, last: int) -> list[str]:
        return [doc for a, b, doc in spans.get(path, []) if a <= last and first <= b]

    return folder, locate


def index(folder: Path, *flags: str) -> dict[str, object]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hydra_rag", "index", str(folder), "--json",
                           *flags], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"hydra-rag index {folder} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    report = json.loads(proc.stdout)
    report["wall_s"] = time.perf_counter() - t0
    return report


def evaluate(folder: Path, locate: Locate, queries: list[dict[str, str]],
             qrels: dict[str, dict[str, float]],
             methods: tuple[str, ...], fusion: str, rerank_top: int = 0) -> dict[str, float]:
    from hydra_rag.checks.metrics import distinct, ndcg_at, recall_at, reciprocal_rank
    from hydra_rag.config import load_settings
    from hydra_rag.search.retrieve import Searcher

    settings = replace(load_settings(), fusion=fusion.removesuffix("-noliteral"),
                       literal=not fusion.endswith("-noliteral"), rerank=bool(rerank_top),
                       rerank_top=rerank_top or 20)
    searcher = Searcher(folder, settings)
    ndcg, recall, mrr, times = [], [], [], []
    for q in queries:
        t0 = time.perf_counter()
        hits = searcher.search(q["text"], 50, methods=methods)
        times.append(time.perf_counter() - t0)
        ranked = distinct([d for h in hits for d in locate(h.path, h.line_start, h.line_end)])[:10]
        rel = qrels[q["_id"]]
        ndcg.append(ndcg_at(ranked, rel, 10))
        recall.append(recall_at(ranked, rel, 10))
        mrr.append(reciprocal_rank(ranked, rel, 10))
    searcher.close()
    mean = statistics.mean
    return {"ndcg@10": mean(ndcg), "recall@10": mean(recall), "mrr@10": mean(mrr),
            "median_ms": statistics.median(times) * 1000, "per_query": ndcg}


def paired(a: list[float], b: list[float], rounds: int = 2000) -> tuple[float, float, float]:
    """Mean of b - a over the same queries, and its 95% interval by a paired bootstrap (how
    far the difference could move with another sample of queries: the noise it is told from)."""
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    rng = random.Random(11)
    means = sorted(statistics.mean(rng.choices(diffs, k=len(diffs))) for _ in range(rounds))
    return statistics.mean(diffs), means[int(0.025 * rounds)], means[int(0.975 * rounds)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="scifact,cosqa")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--docs", type=int, default=0, help="0: the whole corpus")
    ap.add_argument("--contextualize", action="store_true")
    ap.add_argument("--rerank", type=int, default=0, metavar="N",
                    help="also rerank the first N queries (0: not at all)")
    ap.add_argument("--rerank-top", type=int, default=20)
    ap.add_argument("--embedder", default="", help="also index and evaluate with this embedder")
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    subprocess.run([sys.executable, "-m", "hydra_rag", "rag", "setup"], check=True,
                   capture_output=True)
    if args.rerank:
        subprocess.run([sys.executable, "-m", "hydra_rag", "rerankers", "pull"], check=True,
                       capture_output=True)
    if args.embedder:
        subprocess.run([sys.executable, "-m", "hydra_rag", "rag", "setup", "--embedder",
                        args.embedder], check=True, capture_output=True)
    rows = []
    for name in args.sets.split(","):
        queries, qrels = load(name, args.queries)
        keep = None
        if args.docs:
            keep = {d for q in queries for d in qrels[q["_id"]]}
        folder, locate = write_corpus(name, keep, args.docs)
        variants: list[tuple[Path, tuple[str, ...]]] = [(folder, ())]
        extra = [("ctx", ("--contextualize",))] if args.contextualize else []
        if args.embedder:
            extra.append((args.embedder, ("--embedder", args.embedder)))
        for suffix, flags in extra:
            copy = folder.with_name(f"{folder.name}-{suffix}")
            if not copy.exists():
                shutil.copytree(folder, copy, ignore=shutil.ignore_patterns(".hydra-index"))
            variants.append((copy, flags))
        for where, flags in variants:
            report = index(where, *flags)
            chunks = sum(report["chunks_total"].values())  # type: ignore[attr-defined]
            print(f"{where.name}: {len(list(where.glob('*' + SETS[name][2])))} files, "
                  f"{chunks} chunks, {len(queries)} queries; index run {report['wall_s']:.1f}s "
                  f"({report['files_indexed']} files indexed now"
                  + (f", {report['contexts_written']} contexts written"
                     if "--contextualize" in flags else "") + ")",
                  flush=True)
            key = " ".join((name, *flags))
            for mode, (methods, fusion) in MODES.items():
                m = evaluate(where, locate, queries, qrels, methods, fusion)
                rows.append((key, mode, m))
                print(f"  {mode:10} nDCG@10 {m['ndcg@10']:.3f}  Recall@10 {m['recall@10']:.3f}  "
                      f"MRR@10 {m['mrr@10']:.3f}  median {m['median_ms']:.0f} ms", flush=True)
            got = {mode: m["ndcg@10"] for n, mode, m in rows if n == key}
            print(f"  hybrid - best single: {got['hybrid'] - max(got['dense'], got['bm25']):+.3f} "
                  "(goal +0.030)", flush=True)
            if args.embedder and "--embedder" in flags:
                per = {(n, mode): m["per_query"] for n, mode, m in rows}
                for mode in ("dense", "hybrid"):
                    d, lo, hi = paired(per[(name, mode)], per[(key, mode)])
                    print(f"  {mode} against the default embedder: {d:+.4f} nDCG@10 "
                          f"(95% paired bootstrap interval {lo:+.4f} to {hi:+.4f})", flush=True)
            if args.rerank:
                sub = queries[: args.rerank]
                for mode, top in (("hybrid", 0), (f"+rerank@{args.rerank_top}", args.rerank_top)):
                    m = evaluate(where, locate, sub, qrels, ("vector", "bm25"), "score", top)
                    rows.append((key, f"{mode} ({len(sub)} q)", m))
                    print(f"  {mode:10} nDCG@10 {m['ndcg@10']:.3f}  Recall@10 "
                          f"{m['recall@10']:.3f}  MRR@10 {m['mrr@10']:.3f}  median "
                          f"{m['median_ms']:.0f} ms  (first {len(sub)} queries)", flush=True)


if __name__ == "__main__":
    main()
