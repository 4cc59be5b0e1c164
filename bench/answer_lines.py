"""Does the line that answers reach the model? Questions over real projects, each with the file
and line that answer it.

    python bench/answer_lines.py [--only httpx,cobra] [--variants default,before]
                                 [--answers] [--load] [--model smollm2-135m]

The projects are those of bench/code_corpora.py (httpx, cobra, zod, spdlog: fetched from PyPI,
npm and Debian at pinned versions, nobody here wrote them), each indexed with the real CLI. The
questions (bench/answers/lines.jsonl) were written by reading their code, 12 per project: each
names the file, the line that answers (and a string of it, checked), a pattern a right answer
matches, and whether it names a symbol of the project.

Part 1, the prompt (no generation): each question is a first turn of `Chat` with the default
settings (one `variants` entry may change them); for each variant, the share of questions whose
answering line is in a passage sent, whose file is sent, and (for a question that names a
symbol) whose symbol's definition is sent; and the median prompt tokens.

Part 2 (`--answers`): the default variant's turns answered by the chat model, temperature 0:
time to the first token (median), the answer right by its pattern. With `--load`, the same
again with one core kept busy by another process (a Python loop), reported beside.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import code_corpora

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "answers" / "lines.jsonl"
PROJECTS = ("httpx", "cobra", "zod", "spdlog")

# Settings each variant changes from the default (the default: none). A variant names a
# setting that exists in the tree measured; `before` turns off what issue 45 added.
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "before": {"context_heads": False, "context_lead": 0.0},
    "-heads": {"context_heads": False},
    "-lead": {"context_lead": 0.0},
    "lead.6": {"context_lead": 0.6},
    "lead.7": {"context_lead": 0.7},
    "whole": {"context_tokens": 0},
    "ctx600": {"context_tokens": 600},
    "ctx800": {"context_tokens": 800},
    "-follow": {"context_follow": False},
    "-scope": {"context_scope": False},
    "-pool": {"context_pool": 0},
    "ctx1000": {"context_tokens": 1000},
    "ctx1200": {"context_tokens": 1200},
    "ctx1400": {"context_tokens": 1400},
}


def load(only: list[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {p: [] for p in only}
    for line in QUESTIONS.read_text(encoding="utf-8").splitlines():
        if line.strip():
            q = json.loads(line)
            if q["project"] in out:
                out[q["project"]].append(q)
    return out


def check(root: Path, q: dict[str, Any]) -> None:
    lines = (root / q["file"]).read_text(encoding="utf-8", errors="replace").splitlines()
    if q["evidence"] not in lines[q["line"] - 1]:
        raise SystemExit(f"{q['project']}: {q['file']}:{q['line']} does not hold {q['evidence']!r}")


def covers(sources: list[Any], path: str, line: int) -> bool:
    return any(s.path == path and s.line_start <= line <= s.line_end for s in sources)


def definitions_of(chat: Any, question: str) -> list[tuple[str, int]]:
    """Where the symbols a question names are defined (as the index's symbol table says)."""
    from hydra_rag.search import definitions

    out = []
    for w in definitions.named_in(question):
        defs = definitions.defined([s for s, _ in chat.searcher.stores], w)
        if 0 < len(defs) <= definitions.NAMED_MAX:
            out += [(e.path, e.name_line) for _, e in defs]
    return out


def prompt_part(chats: dict[str, Any], sets: dict[str, list[dict[str, Any]]],
                variants: list[str], show: bool) -> None:
    print("\n## 1. What the model is sent (first turns, no generation)")
    print("| variant | answering line sent | file sent | named symbol's definition sent | "
          "median prompt tokens | max |")
    print("|---|---|---|---|---|---|")
    for v in variants:
        line = file = named = n_named = 0
        tokens: list[int] = []
        per: dict[str, list[int]] = {}
        misses = []
        for project, qs in sets.items():
            chat = chats[project]
            base = chat.settings
            chat.settings = replace(base, **VARIANTS[v])
            try:
                for q in qs:
                    sources, _, found = chat.retrieve(q["question"])
                    prompt = chat.prompt(q["question"], sources if found else [])
                    sent = prompt.sources
                    tokens.append(prompt.tokens)
                    hit = covers(sent, q["file"], q["line"])
                    line += hit
                    per.setdefault(project, []).append(hit)
                    file += any(s.path == q["file"] for s in sent)
                    if q.get("names"):
                        defs = definitions_of(chat, q["question"])
                        if defs:
                            n_named += 1
                            named += any(covers(sent, p, n) for p, n in defs)
                    if not hit:
                        misses.append((project, q, [s.label for s in sent]))
            finally:
                chat.settings = base
        n = len(tokens)
        print(f"| {v} | {line / n:.2f} ({line}/{n}) | {file / n:.2f} | "
              f"{named}/{n_named} | {statistics.median(tokens):.0f} | {max(tokens)} |")
        print("  per project: " + ", ".join(f"{p} {sum(h)}/{len(h)}" for p, h in per.items()))
        if show:
            for project, q, labels in misses:
                print(f"  miss {project}: {q['question']} → {q['file']}:{q['line']}; "
                      f"sent {', '.join(labels)}")


def _busy(stop: Any) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def answer_part(chats: dict[str, Any], sets: dict[str, list[dict[str, Any]]],
                loads: list[bool], variants: list[str]) -> None:
    print("\n## 2. Answers (temperature 0)")
    print("| variant | load | median prompt tokens | median first token s | p90 first token s | "
          "median total s | answer right |")
    print("|---|---|---|---|---|---|---|")
    for busy, v in [(b, v) for b in loads for v in variants]:
        stop = multiprocessing.Event()
        worker = multiprocessing.Process(target=_busy, args=(stop,), daemon=True)
        if busy:
            worker.start()
        try:
            tokens, first, total, right, n = [], [], [], 0, 0
            for project, qs in sets.items():
                chat = chats[project]
                base = chat.settings
                for q in qs:
                    chat.reset()
                    chat.settings = replace(base, **VARIANTS[v])
                    try:
                        r = chat.ask(q["question"])
                    finally:
                        chat.settings = base
                    n += 1
                    tokens.append(r.usage["prompt_tokens"])
                    first.append(r.timings.get("first_token_s", r.timings["total_s"]))
                    total.append(r.timings["total_s"])
                    right += bool(re.search(q["answer"], r.answer, re.I))
        finally:
            stop.set()
            if busy:
                worker.join()
        first.sort()
        print(f"| {v} | {'one core busy' if busy else 'idle'} | {statistics.median(tokens):.0f} | "
              f"{statistics.median(first):.2f} | {first[int(0.9 * (len(first) - 1))]:.2f} | "
              f"{statistics.median(total):.2f} | {right / n:.2f} ({right}/{n}) |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(PROJECTS))
    ap.add_argument("--variants", default="default,before")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--answers", action="store_true", help="part 2: answers with the model")
    ap.add_argument("--load", action="store_true", help="part 2 also with one core busy")
    ap.add_argument("--answer-variants", default="default",
                    help="the variants part 2 answers with, each in turn")
    ap.add_argument("--misses", action="store_true", help="list what was sent for each miss")
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    only = args.only.split(",")
    sets = load(only)
    roots = {}
    for project in only:
        root = code_corpora.fetch(project)
        for q in sets[project]:
            check(root, q)
        subprocess.run([sys.executable, "-m", "hydra_rag", "index", str(root)], check=True,
                       capture_output=True)
        roots[project] = root
    subprocess.run([sys.executable, "-m", "hydra_rag", "models", "pull", args.model],
                   check=True, capture_output=True)

    from hydra_rag.answer.chat import Chat
    from hydra_rag.catalog import get_model
    from hydra_rag.config import load_settings

    settings = load_settings()
    print(f"{sum(map(len, sets.values()))} questions over {', '.join(only)} · model "
          f"{args.model} · top {args.k} · context_tokens {settings.context_tokens}")
    chats = {p: Chat(get_model(args.model), [r], settings, new=True, save=False, top_k=args.k,
                     params={"max_tokens": args.max_tokens, "temperature": 0.0})
             for p, r in roots.items()}
    try:
        prompt_part(chats, sets, args.variants.split(","), args.misses)
        if args.answers:
            answer_part(chats, sets, [False, True] if args.load else [False],
                        args.answer_variants.split(","))
    finally:
        for c in chats.values():
            c.close()


if __name__ == "__main__":
    main()
