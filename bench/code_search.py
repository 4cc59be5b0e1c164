"""Code search over real projects: the right file first, for every kind of question.

Six projects in six languages that are not in this repository (bench/code_corpora.py fetches
them from PyPI, npm and Debian at pinned versions), each with 18 questions written by reading
its code, as its maintainers would answer them (bench/code_search/NAME.jsonl: 6 about how a
part works, 6 about where something is done, 6 names, bare or inside a question; graded 2 for
the file that holds the answer, 1 for files that hold an essential part). Each project is
indexed with the real CLI and searched in one process; scored as such benchmarks score every
tool, NDCG@10 over the ranked list of distinct files, and reported per language and per kind
of question, in one run:

- `bm25`: BM25 alone;
- `release`: the search of the release before this work (RELEASE, checked out beside this one
  with `git worktree`, its own index of a copy of each project, searched by its own CLI): the
  files of its hybrid search in the order of their first chunk, as its `search --files` gave;
- `today`: this release's index and hybrid search with every ranking signal off, files in the
  order of their first chunk;
- `default`: the default search's files (`search --files`: hydra_rag.search.files);
- `-kind`, `-aside`, `-paths`, `-names`: the default with one signal off; `+central`,
  `+map`: with one that is off by default turned on; `chunks`: the default's chunk order,
  files in order of their first chunk (grouping off).

    python bench/code_search.py [--only httpx,cobra] [--variants default,today]

Timings are of a warm searcher (each query searched once before it is timed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import code_corpora
from retrieval_quality import paired

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "code_search"
SIGNALS = ("rank_kind", "rank_aside", "rank_paths", "rank_central", "rank_names", "rank_map",
           "rank_bodies")
RELEASE = "a921360"  # the last commit before issue 44's work
# One variant per signal: the default without it ("-paths"), or with it when it is off by
# default ("+central").
def _variants() -> list[str]:
    from hydra_rag.config import Settings

    return ["bm25", "release", "today", "default", "chunks",
            *(f"{'-' if getattr(Settings, s) else '+'}{s.removeprefix('rank_')}"
              for s in SIGNALS)]


VARIANTS = _variants()


def load(name: str) -> list[dict]:  # type: ignore[type-arg]
    with (QUESTIONS / f"{name}.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def index(folder: Path) -> dict:  # type: ignore[type-arg]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hydra_rag", "index", str(folder), "--json"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"hydra-rag index {folder} failed:\n{proc.stderr[-3000:]}")
    report = json.loads(proc.stdout)
    report["wall_s"] = time.perf_counter() - t0
    return report


def release(name: str, questions: list[dict]  # type: ignore[type-arg]
            ) -> tuple[list[list[str]], float]:
    """The files RELEASE's own search ranks for each question, from its own index of a copy of
    the project; and its index run's seconds."""
    tree = HERE / ".work" / f"release-{RELEASE}"
    if not tree.exists():
        subprocess.run(["git", "-C", str(HERE.parent), "worktree", "add", "--detach", str(tree),
                        RELEASE], check=True, capture_output=True)
    copy = code_corpora.WORK.with_name("code-release") / name
    if not (copy.parent / ".git").exists():  # this checkout's .gitignore would hide it
        copy.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(copy.parent)], check=True)
    if not copy.exists():
        import shutil

        shutil.copytree(code_corpora.WORK / name, copy,
                        ignore=shutil.ignore_patterns(".hydra-index"))
    env = {**os.environ, "PYTHONPATH": str(tree), "HYDRA_RAG_WARM_MINUTES": "0"}
    t0 = time.perf_counter()
    # Run from the release's tree: `python -m` puts the working folder first on the path.
    subprocess.run([sys.executable, "-m", "hydra_rag", "index", str(copy)], check=True,
                   capture_output=True, env=env, cwd=tree)
    took = time.perf_counter() - t0
    qfile = copy.parent / f"{name}.queries.jsonl"
    qfile.write_text("".join(json.dumps({"_id": q["_id"], "text": q["text"]}) + "\n"
                             for q in questions))
    proc = subprocess.run([sys.executable, "-m", "hydra_rag", "search", "--queries", str(qfile),
                           "--path", str(copy), "-k", "50"], check=True, capture_output=True,
                          text=True, env=env, cwd=tree)
    out = []
    if not proc.stdout.strip():
        sys.exit(f"{RELEASE}'s search of {copy} printed nothing:\n{proc.stderr[-2000:]}")
    for line in proc.stdout.splitlines():
        paths = [r["path"] for r in json.loads(line)["results"]]
        out.append(list(dict.fromkeys(paths))[:10])
    return out, took


def ranked_files(searcher, variant: str, text: str) -> list[str]:  # type: ignore[no-untyped-def]
    from hydra_rag.checks.metrics import distinct

    if variant == "bm25":
        return distinct([h.path for h in searcher.search(text, 100, methods=("bm25",))])[:10]
    if variant in ("today", "chunks"):
        return distinct([h.path for h in searcher.fused(text)])[:10]
    return [f.path for f in searcher.files(text, 10)]


def settings_for(variant: str):  # type: ignore[no-untyped-def]
    from hydra_rag.config import load_settings

    s = load_settings()
    if variant in ("bm25", "today", "release"):
        return replace(s, **dict.fromkeys(SIGNALS, False))
    if variant[0] in "-+":
        return replace(s, **{f"rank_{variant[1:]}": variant[0] == "+"})
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(code_corpora.PROJECTS))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    subprocess.run([sys.executable, "-m", "hydra_rag", "rag", "setup"], check=True,
                   capture_output=True)
    from hydra_rag.checks.metrics import ndcg_at
    from hydra_rag.search.retrieve import Searcher

    variants = args.variants.split(",")
    if not (code_corpora.WORK / ".git").exists():
        # Its own repository: this checkout's .gitignore (bench/.work/) would hide the files.
        code_corpora.WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(code_corpora.WORK)], check=True)
    scores: dict[tuple[str, str], list[float]] = {}  # (variant, project) → per query
    kinds: dict[tuple[str, str], list[float]] = {}  # (variant, kind) → per query
    times: dict[str, list[float]] = {}
    for name in args.only.split(","):
        lang = code_corpora.PROJECTS[name][0]
        folder = code_corpora.fetch(name)
        report = index(folder)
        chunks = sum(report["chunks_total"].values())
        questions = load(name)
        print(f"{name} ({lang}): {report['files_indexed'] + report.get('files_unchanged', 0)} "
              f"files, {chunks} chunks, {len(questions)} questions; index {report['wall_s']:.0f} s",
              flush=True)
        for variant in variants:
            if variant == "release":
                ranked_all, took = release(name, questions)
                got = [ndcg_at(r, q["relevant"], 10) for r, q in zip(ranked_all, questions,
                                                                       strict=True)]
                for q, g in zip(questions, got, strict=True):
                    kinds.setdefault((variant, q["kind"]), []).append(g)
                scores[(variant, name)] = got
                print(f"  {variant:9} NDCG@10 {statistics.mean(got):.3f}  (its index run "
                      f"{took:.0f} s)", flush=True)
                continue
            searcher = Searcher(folder, settings_for(variant))
            got = []
            for q in questions:
                ranked_files(searcher, variant, q["text"])  # warm
                t0 = time.perf_counter()
                ranked = ranked_files(searcher, variant, q["text"])
                times.setdefault(variant, []).append(time.perf_counter() - t0)
                got.append(ndcg_at(ranked, q["relevant"], 10))
                kinds.setdefault((variant, q["kind"]), []).append(got[-1])
            searcher.close()
            scores[(variant, name)] = got
            print(f"  {variant:9} NDCG@10 {statistics.mean(got):.3f}", flush=True)
    projects = args.only.split(",")
    print("\nNDCG@10 over distinct files, mean of projects; per language; per kind of question")
    head = f"{'':9} {'mean':>6} " + " ".join(f"{code_corpora.PROJECTS[p][0][:10]:>10}"
                                               for p in projects)
    all_kinds = sorted({k for _, k in kinds})
    print(head + " " + " ".join(f"{k[:12]:>12}" for k in all_kinds) + "  median ms")
    for v in variants:
        per = [statistics.mean(scores[(v, p)]) for p in projects]
        line = f"{v:9} {statistics.mean(per):6.3f} " + " ".join(f"{x:10.3f}" for x in per)
        line += " " + " ".join(f"{statistics.mean(kinds[(v, k)]):12.3f}" for k in all_kinds)
        ms = f"{statistics.median(times[v]) * 1000:9.0f}" if v in times else f"{'-':>9}"
        print(line + "  " + ms)
    if "default" in variants:
        base = [x for p in projects for x in scores[("default", p)]]
        for v in variants:
            if v == "default":
                continue
            other = [x for p in projects for x in scores[(v, p)]]
            d, lo, hi = paired(other, base)
            print(f"default - {v:9} {d:+.3f} NDCG@10 (95% paired bootstrap {lo:+.3f} to {hi:+.3f})")


if __name__ == "__main__":
    main()
