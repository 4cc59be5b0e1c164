"""Two phases in one index (issue 47): how soon a folder answers, and how well, as its vectors
arrive — against today's one-phase `index`, in one run, on the same folder.

For each folder (a real project, not in this repository) the bench indexes two copies: one in
one phase (the setting vectors_later off: every chunk embedded before the run ends), one in two
(on). It asks three kinds of queries, drawn from the folder itself with a fixed seed:

- names: a definition's name (one defined in a single file); right when the first hit is
  that file (Hit@1);
- exact strings: a distinctive line of a file (30+ characters, found in no other file); Hit@1;
- questions in words: for a project of the code-search set (bench/code_corpora.py, the
  folder named as it), its questions with their graded files (bench/code_search/NAME.jsonl);
  else a Python docstring's first sentence, the file that holds it relevant; nDCG@10 over
  distinct files, with BM25 alone on the finished one-phase index as the floor phase one must
  reach.

It prints, per folder: chunks; seconds from the start of `index` to the first search that
answers each kind (one phase: the whole run; two phases: phase one, then each kind searched);
quality with 0%, 10%, 50% and 100% of the vectors stored (two phases) and at the end of the
one-phase run; and the embedding rate of each (chunks/s). `--load` keeps one core busy with a
spinning process throughout. Evaluation time is taken out of the two-phase timings.

    .venv/bin/python bench/two_phase.py /tmp/corpora/rich-13.9.4 [--load] [--queries 40]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hydra_rag.config import load_settings  # noqa: E402
from hydra_rag.index import Progress, index_folder  # noqa: E402
from hydra_rag.read.grammars import language_of  # noqa: E402
from hydra_rag.read.symbols import parse  # noqa: E402
from hydra_rag.search.retrieve import Searcher  # noqa: E402

HERE = Path(__file__).resolve().parent
SOURCE = {".py", ".js", ".ts", ".go", ".rs", ".c", ".h", ".cpp", ".hpp", ".java", ".md", ".rst"}
_DOC = re.compile(r'"""\s*([A-Z][^."\n]{15,120}[.\n])')


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in SOURCE
                  and ".hydra-index" not in p.parts)


def queries(root: Path, n: int, seed: int = 7) -> dict[str, list[tuple[str, str]]]:
    """(query, relevant file) per kind, drawn from the folder."""
    rng = random.Random(seed)
    texts = {p.relative_to(root).as_posix(): p.read_text(errors="replace") for p in _files(root)}
    defined: dict[str, set[str]] = {}
    for rel, text in texts.items():
        lang = language_of(rel, text[:200])
        if lang:
            for d in parse(text, lang)[0]:
                if len(d.name) >= 6:
                    defined.setdefault(d.name, set()).add(rel)
    names = sorted((name, next(iter(rels))) for name, rels in defined.items() if len(rels) == 1)
    lines: dict[str, list[str]] = {}
    for rel, text in texts.items():
        for line in text.splitlines():
            s = line.strip()
            if 30 <= len(s) <= 100 and not s.startswith(("#", "//", "import", "from")):
                lines.setdefault(s, []).append(rel)
    exact = sorted((s, rels[0]) for s, rels in lines.items() if len(set(rels)) == 1)
    words = sorted((m.group(1).strip().rstrip("."), rel) for rel, text in texts.items()
                   for m in _DOC.finditer(text))
    words = [(q, rel) for q, rel in words if q.count(" ") >= 3]
    out = {kind: rng.sample(pool, min(n, len(pool)))
           for kind, pool in (("names", names), ("exact", exact), ("words", words))}
    asked = HERE / "code_search" / f"{root.name}.jsonl"
    if asked.is_file():  # real questions, with the files a maintainer would point to
        GRADED[root.name] = {r["text"]: r["relevant"] for r in map(json.loads, asked.open())}
        out["words"] = [(q, "") for q in GRADED[root.name]]
    return out


GRADED: dict[str, dict[str, dict[str, int]]] = {}  # folder → question → {file: grade}


def _ndcg(files: list[str], graded: dict[str, int]) -> float:
    dcg = sum(graded.get(f, 0) / math.log2(i + 2) for i, f in enumerate(files[:10]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(graded.values(), reverse=True)[:10]))
    return dcg / ideal if ideal else 0.0


def evaluate(root: Path, qs: dict[str, list[tuple[str, str]]],
             methods: tuple[str, ...] = ("vector", "bm25")) -> dict[str, float]:
    searcher = Searcher(root, load_settings())
    out = {}
    graded = GRADED.get(root.name, {})
    try:
        for kind, pairs in qs.items():
            score = 0.0
            for q, rel in pairs:
                files = list(dict.fromkeys(h.path for h in searcher.search(q, 30,
                                                                           methods=methods)))
                if kind == "words":
                    score += _ndcg(files, graded.get(q, {rel: 1}))
                else:
                    score += float(bool(files) and files[0] == rel)
            out[kind] = score / max(1, len(pairs))
    finally:
        searcher.close()
    return out


def _spin() -> None:
    while True:
        pass


def one_phase(root: Path, qs: dict[str, list[tuple[str, str]]]) -> dict[str, object]:
    os.environ["HYDRA_RAG_VECTORS_LATER"] = "0"
    t0 = time.monotonic()
    rep = index_folder(root, load_settings())
    elapsed = time.monotonic() - t0
    return {"chunks": sum(rep.chunks_total.values()), "ready_s": elapsed,
            "rate": rep.chunks_embedded / elapsed, "final": evaluate(root, qs),
            "bm25": evaluate(root, qs, ("bm25",))}


def two_phase(root: Path, qs: dict[str, list[tuple[str, str]]]) -> dict[str, object]:
    os.environ["HYDRA_RAG_VECTORS_LATER"] = "1"
    at: dict[str, dict[str, float]] = {}
    paused = [0.0]  # evaluation time, taken out of the timings
    marks = {"10%": 0.1, "50%": 0.5}
    state: dict[str, float] = {}

    def watch(p: Progress) -> None:
        if p.stage != "vectors":
            return
        t = time.monotonic()
        if p.message and "0%" not in at:
            state["phase_two"] = t
            state["ready_s"] = t - t0 - paused[0]
            at["0%"] = evaluate(root, qs)
        elif p.bytes_total:
            for mark, share in list(marks.items()):
                if p.bytes_done >= share * p.bytes_total:
                    at[mark] = evaluate(root, qs)
                    del marks[mark]
        paused[0] += time.monotonic() - t

    t0 = time.monotonic()
    rep = index_folder(root, load_settings(), progress=watch)
    elapsed = time.monotonic() - t0 - paused[0]
    at["100%"] = evaluate(root, qs)
    phase_two = elapsed - state.get("ready_s", elapsed)
    return {"chunks": sum(rep.chunks_total.values()), "ready_s": state.get("ready_s", elapsed),
            "elapsed_s": elapsed, "rate": rep.chunks_embedded / max(phase_two, 1e-6), "at": at,
            "bm25": evaluate(root, qs, ("bm25",))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--queries", type=int, default=40, help="queries per kind")
    ap.add_argument("--load", action="store_true", help="keep one core busy throughout")
    ap.add_argument("--two-only", action="store_true",
                    help="no one-phase reference (at 20,000 chunks it is another half hour on "
                    "2 cores); BM25 alone is then taken on the finished two-phase index")
    args = ap.parse_args()
    spinner = None
    if args.load:
        spinner = multiprocessing.Process(target=_spin, daemon=True)
        spinner.start()
    print(f"cores: {os.cpu_count()}; {'one core kept busy' if args.load else 'idle'}")
    try:
        for folder in args.folders:
            qs = queries(folder, args.queries)
            with tempfile.TemporaryDirectory() as tmp:
                copies = {}
                for name in ("two",) if args.two_only else ("one", "two"):
                    copies[name] = Path(tmp) / name / folder.name
                    shutil.copytree(folder, copies[name],
                                    ignore=shutil.ignore_patterns(".hydra-index"))
                one = None if args.two_only else one_phase(copies["one"], qs)
                two = two_phase(copies["two"], qs)
            counts = ", ".join(f"{k} {len(v)}" for k, v in qs.items())
            print(f"\n{folder.name}: {two['chunks']:,} chunks; queries: {counts}")
            ref = f"one phase {one['ready_s']:.1f} s; " if one else ""
            print(f"  searchable after: {ref}two phases "
                  f"{two['ready_s']:.1f} s (all vectors after {two['elapsed_s']:.1f} s)")
            ref = f"one phase {one['rate']:.1f} chunks/s; " if one else ""
            print(f"  embedding rate: {ref}phase two {two['rate']:.1f} chunks/s")
            print(f"  {'':18} {'names Hit@1':>12} {'exact Hit@1':>12} {'words nDCG@10':>14}")
            rows = [(f"two, {k} vectors", v) for k, v in two["at"].items()]  # type: ignore[union-attr]
            rows += [("one phase, end", one["final"]), ("BM25 alone, end", one["bm25"])] if one \
                else [("BM25 alone, end", two["bm25"])]
            for label, q in rows:
                print(f"  {label:18} {q['names']:12.3f} {q['exact']:12.3f} {q['words']:14.3f}")
    finally:
        if spinner is not None:
            spinner.terminate()


if __name__ == "__main__":
    main()
