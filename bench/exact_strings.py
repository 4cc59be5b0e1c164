"""Exact strings: does search find the file of a string copied verbatim from the source?

    python bench/exact_strings.py [--projects click==8.1.7,flask==3.1.2] [--per-kind 30]

The set is sampled from each project's indexed `.py` files (fixed seed): error messages and
other phrases in string literals, compound identifiers (`def`/`class` names), dotted names
(`a.b.c`), hyphenated names (`--no-color`, `X-Forwarded-For`), and questions about such a name
("what calls get_current_context"); each string is kept only if it occurs, case-sensitively, in
at most two indexed files. A query is a hit at k when one of the files holding the string is
among the first k results. Prints Hit@1 and Hit@3 by kind for the default hybrid search, for
`--mode bm25`, for grep (the files holding the string, most occurrences first) as the
reference, and for the default without its literal lists (`literal: false`), in one run.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

KINDS = ("message", "identifier", "dotted", "hyphenated", "question")
# A question about a name, as a developer types it: the name is there verbatim, the query is not.
QUESTIONS = ("where is {} defined", "what does {} do?", "how is {} used", "explain {}",
             "when is {} called", "what calls {}")
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,}(?![\w(])")
_HYPHEN = re.compile(r"(?<![\w-])-{0,2}[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+(?![\w-])")
_COMPOUND = re.compile(r"^_*[a-z]+(?:_[a-z0-9]+)+$|^_*[A-Za-z][a-z0-9]+(?:[A-Z][a-z0-9]+)+$")


def candidates(path: Path, text: str) -> dict[str, set[str]]:
    """Strings of each kind that stand verbatim in this file's text."""
    out: dict[str, set[str]] = defaultdict(set)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return out
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            s = node.value.strip()
            if "\n" not in s and 15 <= len(s) <= 80 and len(s.split()) >= 3 and s in text \
                    and "{" not in s and "%" not in s:
                out["message"].add(s)
            for m in _HYPHEN.finditer(node.value):
                if len(m.group()) >= 6:
                    out["hyphenated"].add(m.group())
        elif (isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
              and len(node.name) >= 8 and _COMPOUND.match(node.name)):
            out["identifier"].add(node.name)
    for m in _DOTTED.finditer(text):
        s = m.group()
        if not s.startswith(("self.", "cls.")) and len(s) >= 10:
            out["dotted"].add(s)
    return out


def sample(root: Path, files: list[str], per_kind: int, seed: int) -> list[dict[str, object]]:
    """Strings by kind, each in at most two of `files`, with the files that hold it."""
    texts = {rel: (root / rel).read_text(encoding="utf-8", errors="replace") for rel in files}
    found: dict[str, set[str]] = defaultdict(set)
    for rel in files:
        if rel.endswith(".py"):
            for kind, strings in candidates(root / rel, texts[rel]).items():
                found[kind] |= strings
    rng = random.Random(seed)
    out = []
    taken: set[str] = set()
    for kind in KINDS:
        names = ("identifier", "dotted", "hyphenated")
        pool = sorted(found[kind]) if kind != "question" else sorted(
            set().union(*(found[n] for n in names)) - taken)
        rng.shuffle(pool)
        kept = 0
        for s in pool:
            holders = {rel: t.count(s) for rel, t in texts.items() if s in t}
            if not 1 <= len(holders) <= 2:
                continue
            taken.add(s)
            query = rng.choice(QUESTIONS).format(s) if kind == "question" else s
            out.append({"kind": kind, "query": query, "files": holders})
            kept += 1
            if kept == per_kind:
                break
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--projects", default="click==8.1.7,flask==3.1.2")
    ap.add_argument("--per-kind", type=int, default=30)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    from index_throughput import fetch_sdist

    from hydra_rag.config import load_settings
    from hydra_rag.search.retrieve import Searcher
    from hydra_rag.store.index_dir import Store

    subprocess.run([sys.executable, "-m", "hydra_rag", "rag", "setup"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    methods = {"default": ("vector", "bm25"), "no-literal": ("vector", "bm25"),
               "bm25": ("bm25",), "grep": ()}
    # kind -> method -> [hits at 1, hits at 3, questions]
    score: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    misses: list[str] = []
    times: dict[str, list[float]] = defaultdict(list)
    for spec in args.projects.split(","):
        root = fetch_sdist(spec)
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "hydra_rag", "index", str(root)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        files = sorted(Store(root).read_files())
        qs = sample(root, files, args.per_kind, args.seed)
        print(f"{spec}: {len(files)} files indexed ({time.monotonic() - t0:.0f}s), "
              f"{len(qs)} strings", file=sys.stderr)
        searcher = Searcher(root, load_settings())
        # The default without its literal list, as the reference in the same run.
        plain = Searcher(root, replace(load_settings(), literal=False))
        for q in qs:
            holders: dict[str, int] = q["files"]  # type: ignore[assignment]
            query = str(q["query"])
            for name, lists in methods.items():
                if lists:
                    seen: list[str] = []
                    which = plain if name == "no-literal" else searcher
                    t0 = time.perf_counter()
                    hits = which.search(query, k=10, methods=lists)
                    times[name].append(time.perf_counter() - t0)
                    for h in hits:
                        if h.path not in seen:
                            seen.append(h.path)
                else:  # grep: the files holding it, most occurrences first
                    seen = sorted(holders, key=lambda f: -holders[f])
                s = score[str(q["kind"])][name]
                s[0] += any(f in holders for f in seen[:1])
                s[1] += any(f in holders for f in seen[:3])
                s[2] += 1
                if name == "default" and not any(f in holders for f in seen[:3]):
                    misses.append(f"{spec} {q['kind']}: {query!r} in {sorted(holders)}; "
                                  f"got {seen[:3]}")
        searcher.close()
        plain.close()
    print(f"\n{'kind':<11} {'n':>4}  " + "  ".join(f"{m + ' H@1':>12} {m + ' H@3':>12}"
                                                 for m in methods))
    total: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for kind in KINDS:
        row = score[kind]
        n = row["default"][2]
        if not n:
            continue
        cells = []
        for m in methods:
            h1, h3, cnt = row[m]
            cells.append(f"{h1 / cnt:>12.3f} {h3 / cnt:>12.3f}")
            total[m] = [a + b for a, b in zip(total[m], row[m], strict=True)]
        print(f"{kind:<11} {n:>4}  " + "  ".join(cells))
    n = total["default"][2]
    print(f"{'all':<11} {n:>4}  " + "  ".join(
        f"{total[m][0] / n:>12.3f} {total[m][1] / n:>12.3f}" for m in methods))
    print("median search time: " + ", ".join(
        f"{m} {statistics.median(v) * 1000:.1f} ms" for m, v in times.items()))
    print("\ndefault misses at 3 (first 15):")
    for line in misses[:15]:
        print("  " + line)
    if os.environ.get("EXACT_STRINGS_JSON"):
        Path(os.environ["EXACT_STRINGS_JSON"]).write_text(json.dumps(score, indent=1))


if __name__ == "__main__":
    main()
