"""Conversations: time to the first token of the later turns, with the turns so far evaluated
for the next one while an answer is read (setting `chat_warm`, Chat.warm_next) and without,
in the same run, idle and with one core kept busy. Those two carry every earlier turn in their
prompts (`chat_turns` 99); a third configuration is the default, where the model's catalog
entry says how many (SmolLM2-135M: none).

    python bench/chat_turns.py [--only httpx,cobra] [--turns 4] [--pause 3] [--load]
    python bench/chat_turns.py --answers [--keep all,1,0]
    python bench/chat_turns.py --follow-ups [--keep all,0]

Each conversation is a project's questions of bench/answers/lines.jsonl asked one after the
other in one chat (real retrieval over the project, the default model and settings,
temperature 0), `--turns` of them; between turns the reader takes `--pause` seconds, as a
person reading an answer would. Reported: median and p90 first-token time of turns 2 and
later, with the prompt tokens, and how many prompt tokens the chat sidecar evaluated (its own
log says). The two settings alternate conversation by conversation, so a slow spell of the
machine weighs on all.

`--answers`: do earlier turns help the answer? The same conversations, each later turn
answered with all earlier turns in its prompt, with the last one only, with none (`--keep`);
retrieval is the same in all (a follow-up is searched with its subject either way). Reported:
later turns whose answer matches the question's pattern (bench/answers/lines.jsonl), the
same turns asked as first turns of a fresh chat beside them. The questions of a conversation
are on different parts of one project: what earlier turns do to a question on a new topic.

`--follow-ups`: the other case, a second question that leans on the first ("Where is it
defined?"): bench/answers.py's pairs over requests and flask, the second answered with the
first turn in its prompt and without; right when the answer names the file that holds the
answer (its name without `.py`).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import answer_lines
import code_corpora

HERE = Path(__file__).resolve().parent
def evaluated(model: str) -> list[int]:
    from hydra_rag.models.sidecar import prompt_evaluations

    return prompt_evaluations(model)


def converse(chat: Any, questions: list[str], pause: float, model: str
             ) -> list[tuple[float, int, int]]:
    """(first-token s, prompt tokens, tokens evaluated) of each turn after the first."""
    chat.reset()
    out = []
    for i, q in enumerate(questions):
        before = len(evaluated(model))
        r = chat.ask(q, more=i < len(questions) - 1)
        if i and "first_token_s" in r.timings:
            out.append((r.timings["first_token_s"], r.usage["prompt_tokens"],
                        sum(evaluated(model)[before:])))
        time.sleep(pause)  # reading the answer
    return out


def turns(keep: str) -> int:
    """`chat_turns` for a --keep value ("all": more than a conversation here has)."""
    return 99 if keep == "all" else int(keep)


def answers(chats: dict[str, Any], convs: list[tuple[str, list[dict[str, Any]]]],
            keeps: list[str]) -> None:
    print("| earlier turns in the prompt | later turns | answer right |")
    print("|---|---|---|")
    for keep in keeps:
        right = n = 0
        for project, qs in convs:
            chat = chats[f"{project}:{keep}"]
            chat.reset()
            for i, q in enumerate(qs):
                r = chat.ask(q["question"], more=i < len(qs) - 1)
                if i:
                    n += 1
                    right += bool(re.search(q["answer"], r.answer, re.I))
        print(f"| {keep} | {n} | {right / n:.2f} ({right}/{n}) |")


def follow_up_answers(args: argparse.Namespace) -> None:
    import answers as pairs_bench

    from hydra_rag.answer.chat import Chat
    from hydra_rag.catalog import get_model
    from hydra_rag.config import load_settings

    root = pairs_bench.corpus()
    for cmd in (["index", str(root)], ["models", "pull", args.model]):
        subprocess.run([sys.executable, "-m", "hydra_rag", *cmd], check=True,
                       capture_output=True)
    settings = load_settings()
    print(f"{len(pairs_bench.FOLLOW_UPS)} follow-ups over requests and flask · model "
          f"{args.model} · temperature 0 · max_tokens {args.max_tokens}")
    print("| earlier turns in the prompt | follow-ups | answer names the file |")
    print("|---|---|---|")
    for keep in args.keep.split(","):
        chat = Chat(
            get_model(args.model), [root], replace(settings, chat_turns=turns(keep)), new=True,
            save=False,
            params={"max_tokens": args.max_tokens, "temperature": 0.0})
        right = 0
        try:
            for first, second, path in pairs_bench.FOLLOW_UPS:
                chat.reset()
                chat.ask(first, more=True)
                answer = chat.ask(second).answer
                right += Path(path).stem in answer
        finally:
            chat.close()
        n = len(pairs_bench.FOLLOW_UPS)
        print(f"| {keep} | {n} | {right / n:.2f} ({right}/{n}) |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(answer_lines.PROJECTS))
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--pause", type=float, default=3.0)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--load", action="store_true", help="also with one core kept busy")
    ap.add_argument("--answers", action="store_true", help="answers with and without turns")
    ap.add_argument("--keep", default="all,1,0", help="with --answers: earlier turns kept")
    ap.add_argument("--follow-ups", action="store_true", help="follow-ups with and without")
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    if args.follow_ups:
        follow_up_answers(args)
        return
    only = args.only.split(",")
    sets = answer_lines.load(only)
    roots = {}
    for project in only:
        roots[project] = code_corpora.fetch(project)
        subprocess.run([sys.executable, "-m", "hydra_rag", "index", str(roots[project])],
                       check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "hydra_rag", "models", "pull", args.model],
                   check=True, capture_output=True)

    from hydra_rag.answer.chat import Chat
    from hydra_rag.catalog import get_model
    from hydra_rag.config import load_settings

    settings = load_settings()
    groups = [(p, qs[i:i + args.turns])
              for p, qs in sets.items() for i in range(0, len(qs) - args.turns + 1, args.turns)]
    if args.answers:
        print(f"{len(groups)} conversations of {args.turns} turns · model {args.model} · "
              f"temperature 0 · max_tokens {args.max_tokens}")
        keeps = args.keep.split(",")
        chats = {f"{p}:{k}": Chat(
                     get_model(args.model), [r], replace(settings, chat_turns=turns(k)),
                     new=True, save=False,
                     params={"max_tokens": args.max_tokens, "temperature": 0.0})
                 for p, r in roots.items() for k in keeps}
        try:
            answers(chats, groups, keeps)
            # The later turns alone, each the first turn of a fresh chat
            right = n = 0
            for project, qs in groups:
                chat = chats[f"{project}:{keeps[0]}"]
                for q in qs[1:]:
                    chat.reset()
                    n += 1
                    right += bool(re.search(q["answer"], chat.ask(q["question"]).answer, re.I))
            print(f"| (asked first, fresh chat) | {n} | {right / n:.2f} ({right}/{n}) |")
        finally:
            for c in chats.values():
                c.close()
        return
    convs = [(p, [q["question"] for q in qs]) for p, qs in groups]
    print(f"{len(convs)} conversations of {args.turns} turns over {', '.join(only)} · model "
          f"{args.model} · pause {args.pause:g} s · {os.cpu_count()} cores")
    print("| load | configuration | turns | median prompt tokens | median evaluated | "
          "median first token s | p90 |")
    print("|---|---|---|---|---|---|---|")
    for busy in ([False, True] if args.load else [False]):
        stop = multiprocessing.Event()
        worker = multiprocessing.Process(target=answer_lines._busy, args=(stop,), daemon=True)
        if busy:
            worker.start()
        configs = {"all turns, chat_warm off": replace(settings, chat_warm=False, chat_turns=99),
                   "all turns, chat_warm on": replace(settings, chat_warm=True, chat_turns=99),
                   "default (the model's turns)": settings}
        got: dict[str, list[tuple[float, int, int]]] = {c: [] for c in configs}
        try:
            chats = {(p, c): Chat(get_model(args.model), [r], configs[c], new=True, save=False,
                                  params={"max_tokens": args.max_tokens, "temperature": 0.0})
                     for p, r in roots.items() for c in configs}
            for project, questions in convs:
                for c in configs:
                    got[c] += converse(chats[(project, c)], questions, args.pause, args.model)
            for chat in chats.values():
                chat.close()
        finally:
            stop.set()
            if busy:
                worker.join()
        for c, rows in got.items():
            first = sorted(r[0] for r in rows)
            print(f"| {'one core busy' if busy else 'idle'} | {c} | "
                  f"{len(rows)} | {statistics.median(r[1] for r in rows):.0f} | "
                  f"{statistics.median(r[2] for r in rows):.0f} | "
                  f"{statistics.median(first):.2f} | {first[int(0.9 * (len(first) - 1))]:.2f} |")


if __name__ == "__main__":
    main()
