"""Chat turns over real projects: the context budget against whole chunks, follow-ups that keep
their subject, and what the chat model answers.

    python bench/answers.py [--model smollm2-135m] [--budgets 0,300,450,600,800]
                            [--answer-budgets 0,600] [--no-model] [--follow-ups-only]
    python bench/answers.py --scifact 200 [--scifact-docs 600] [--budgets 0,600,1000]

The corpus is the source of `requests` and `flask` as installed beside hydra-rag (copied into
bench/.work/answers/corpus/): real projects nobody here wrote. The questions were written by
reading that source; each names the file holding its answer, a string of the line that holds
it (the evidence) and a pattern a right answer matches.

1. Follow-ups (retrieval only): for each pair of questions, the rank of the file holding the
   answer when the second is searched alone, with the first (`follow_up: off`), and with the
   first one's subject carried into it (`follow_up: carry`).
1b. (with the model) The same follow-ups rewritten by the chat model (`follow_up: rewrite`):
   its rewrite, the rank, and the time the rewrite adds.
2. Context budget (no model): for each budget, the median prompt tokens of a first turn and the
   share of questions whose evidence line reaches the model.
3. Answers (with the model, for --answer-budgets): prompt tokens, time to first token and to
   the whole answer, the right file among the sources, the answer right by its pattern.
4. A conversation of two turns (the second a follow-up): time to first token of each; the
   second reuses llama.cpp's evaluation of the prompt they share.
5. (--scifact N, no model) SciFact claims over abstracts laid out as long reports (as
   bench/retrieval_quality.py's `reports` set, --scifact-docs abstracts): for each budget, the
   share of claims for which the passages sent to the model hold lines of an abstract judged
   to support or refute the claim, and the median prompt tokens.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "answers"

# (question, file, evidence in that file, pattern of a right answer)
QUESTIONS = [
    ("What is the default maximum number of redirects a requests session follows?",
     "requests/models.py", "DEFAULT_REDIRECT_LIMIT: int = 30", r"\b30\b"),
    ("Which HTTP status codes does requests treat as redirects?",
     "requests/models.py", "codes.temporary_redirect,  # 307", r"30[1278]"),
    ("What is the default connection pool size of HTTPAdapter?",
     "requests/adapters.py", "DEFAULT_POOLSIZE = 10", r"\b10\b"),
    ("How many retries does HTTPAdapter make by default?",
     "requests/adapters.py", "DEFAULT_RETRIES = 0", r"\b(0|zero|no retr|none)\b"),
    ("What User-Agent header does requests send by default?",
     "requests/utils.py", 'def default_user_agent(name: str = "python-requests")',
     r"python-requests"),
    ("Which encoding does requests assume for a text response whose Content-Type has no charset?",
     "requests/utils.py", 'return "ISO-8859-1"', r"ISO-8859-1|latin-?1"),
    ("Which environment variables point requests to a CA bundle?",
     "requests/sessions.py", 'os.environ.get("REQUESTS_CA_BUNDLE")', r"REQUESTS_CA_BUNDLE"),
    ("Does requests.head follow redirects by default?",
     "requests/api.py", 'kwargs.setdefault("allow_redirects", False)', r"\b(no|not|false)\b"),
    ("What exception is raised when no connection adapter matches a URL's scheme?",
     "requests/sessions.py", "No connection adapters were found", r"InvalidSchema"),
    ("What does Response.ok return for a status code of 404?",
     "requests/models.py", "Returns True if :attr:`status_code` is less than 400",
     r"\bfalse\b"),
    ("What chunk size does Response.iter_lines use by default?",
     "requests/models.py", "ITER_CHUNK_SIZE: int = 512", r"\b512\b"),
    ("Which exception does a session raise when it exceeds its redirect limit?",
     "requests/sessions.py", "Exceeded {self.max_redirects} redirects.", r"TooManyRedirects"),
    ("Which header does HTTPBasicAuth set on a request?",
     "requests/auth.py", 'r.headers["Authorization"] = _basic_auth_str', r"Authorization"),
    ("Which class does requests use to store cookies?",
     "requests/cookies.py", "class RequestsCookieJar(", r"RequestsCookieJar"),
    ("What does flask's send_from_directory do?",
     "flask/helpers.py", "Send a file from within a directory", r"director"),
    ("Which prefix does Config.from_prefixed_env use by default?",
     "flask/config.py", 'self, prefix: str = "FLASK"', r"FLASK"),
    ("What is the default name of flask's session cookie?",
     "flask/app.py", '"SESSION_COOKIE_NAME": "session"', r"\bsession\b"),
    ("What is the default of SEND_FILE_MAX_AGE_DEFAULT in flask?",
     "flask/app.py", '"SEND_FILE_MAX_AGE_DEFAULT": None', r"\bNone\b|no max|not set"),
]

# (first question, follow-up, the file holding the follow-up's answer)
FOLLOW_UPS = [
    ("What does send_from_directory do?", "Where is it defined?", "flask/helpers.py"),
    ("What does should_bypass_proxies check?", "Where is it defined?", "requests/utils.py"),
    ("What is url_for used for?", "Where is it defined?", "flask/helpers.py"),
    ("What does raise_for_status do?", "Where is it defined?", "requests/models.py"),
    ("What is HTTPAdapter?", "What is its default pool size?", "requests/adapters.py"),
    ("How does flask load configuration from environment variables?",
     "Which prefix does it use?", "flask/config.py"),
    ("What does get_encoding_from_headers return?", "And where is it defined?",
     "requests/utils.py"),
    ("How does requests handle cookies?", "Which class stores them?", "requests/cookies.py"),
    ("What does make_response do in flask?", "Where is that function defined?",
     "flask/helpers.py"),
    ("What is RequestsCookieJar?", "What methods does it have?", "requests/cookies.py"),
    ("How does HTTPDigestAuth work?", "Where is it implemented?", "requests/auth.py"),
    ("What does Session.merge_environment_settings do?", "Which variables does it read?",
     "requests/sessions.py"),
]


def corpus() -> Path:
    """The sources of requests and flask as installed, copied once."""
    import flask
    import requests

    root = WORK / "corpus"
    if not (WORK / ".git").exists():
        # Its own repository: otherwise this checkout's .gitignore (bench/.work/) hides it.
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(WORK)], check=True)
    for mod in (requests, flask):
        src = Path(mod.__file__).parent
        dst = root / src.name
        if not dst.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def rank_of(hits: list, path: str) -> int | None:  # type: ignore[type-arg]
    for i, h in enumerate(hits, start=1):
        if (h["path"] if isinstance(h, dict) else h.path) == path:
            return i
    return None


def follow_ups(searcher, k: int) -> None:  # type: ignore[no-untyped-def]
    from hydra_rag.answer.followup import plan

    print(f"\n## 1. Follow-ups ({len(FOLLOW_UPS)} pairs): rank of the file holding the answer, "
          f"top {k}")
    print("| follow-up | alone | with the question before (off) | subject carried (carry) |")
    print("|---|---|---|---|")
    tally = {"alone": [], "off": [], "carry": []}
    for first, second, path in FOLLOW_UPS:
        row = []
        for name, mode in (("alone", None), ("off", "off"), ("carry", "carry")):
            if mode is None:
                hits = searcher.search(second, k)
            else:
                query, _, also = plan(second, [first], mode)
                hits = searcher.search(query, k, also=also)
            r = rank_of(hits, path)
            tally[name].append(r)
            row.append("–" if r is None else str(r))
        print(f"| {first} → {second} | " + " | ".join(row) + " |")
    summarise(tally)


def summarise(tally: dict) -> None:  # type: ignore[type-arg]
    for name, ranks in tally.items():
        first = sum(r == 1 for r in ranks) / len(ranks)
        top3 = sum(r is not None and r <= 3 for r in ranks) / len(ranks)
        print(f"{name:7} first: {first:.2f}  top 3: {top3:.2f}")


def rewrites(chat) -> None:  # type: ignore[no-untyped-def]
    """`follow_up: rewrite`: the chat model rewrites each follow-up (as Chat.retrieve does)."""
    print(f"\n## 1b. Follow-ups rewritten by {chat.model.id} (`follow_up: rewrite`)")
    print("| follow-up | the model's rewrite (– : no use, the rule's query searched) | rank | "
          "rewrite s |")
    print("|---|---|---|---|")
    base = chat.settings
    chat.settings = replace(base, follow_up="rewrite")
    ranks, took = [], []
    for first, second, path in FOLLOW_UPS:
        chat.reset()
        chat.earlier = [first]
        t0 = time.perf_counter()
        _, info, _ = chat.retrieve(second)
        took.append(time.perf_counter() - t0)
        r = rank_of(info["hits"], path)
        ranks.append(r)
        print(f"| {second} | {info.get('rewritten') or '–'} | {'–' if r is None else r} | "
              f"{took[-1]:.2f} |")
    summarise({"rewrite": ranks})
    print(f"median retrieval with the rewrite: {statistics.median(took):.2f} s")
    chat.settings = base
    chat.earlier = []


def budgets(chat, values: list[int]) -> None:  # type: ignore[no-untyped-def]
    print(f"\n## 2. Context budget ({len(QUESTIONS)} questions, first turns, no model)")
    print("| context_tokens | median prompt tokens | max | evidence reaches the model | "
          "right file among sources |")
    print("|---|---|---|---|---|")
    base = chat.settings
    for b in values:
        chat.settings = replace(base, context_tokens=b)
        tokens, reached, files = [], 0, 0
        for q, path, evidence, _ in QUESTIONS:
            sources, _, found = chat.retrieve(q)
            prompt = chat.prompt(q, sources if found else [])
            tokens.append(prompt.tokens)
            reached += any(s.path == path and evidence in s.text for s in prompt.sources)
            files += any(s.path == path for s in prompt.sources)
        n = len(QUESTIONS)
        print(f"| {b or 'whole chunks'} | {statistics.median(tokens):.0f} | {max(tokens)} | "
              f"{reached / n:.2f} | {files / n:.2f} |")
    chat.settings = base


def answers(chat, values: list[int]) -> None:  # type: ignore[no-untyped-def]
    print(f"\n## 3. Answers of {chat.model.id} ({len(QUESTIONS)} questions, each a first turn)")
    print("| context_tokens | median prompt tokens | median first token s | median total s | "
          "right file among sources | answer right |")
    print("|---|---|---|---|---|---|")
    base = chat.settings
    for b in values:
        chat.settings = replace(base, context_tokens=b)
        tokens, ttft, total, files, right = [], [], [], 0, 0
        for q, path, _, pattern in QUESTIONS:
            chat.reset()
            r = chat.ask(q)
            tokens.append(r.usage["prompt_tokens"])
            ttft.append(r.timings.get("first_token_s", r.timings["total_s"]))
            total.append(r.timings["total_s"])
            files += any(s.path == path for s in r.sources)
            right += bool(re.search(pattern, r.answer, re.I))
        n = len(QUESTIONS)
        print(f"| {b or 'whole chunks'} | {statistics.median(tokens):.0f} | "
              f"{statistics.median(ttft):.2f} | {statistics.median(total):.2f} | "
              f"{files / n:.2f} | {right / n:.2f} |")
    chat.settings = base
    chat.reset()


def conversation(chat, pairs: int) -> None:  # type: ignore[no-untyped-def]
    print(f"\n## 4. Two-turn conversations ({pairs}): time to first token, s")
    print("| first turn: prompt tokens, first token s | follow-up: prompt tokens, first token s |")
    print("|---|---|")
    for first, second, _ in FOLLOW_UPS[:pairs]:
        chat.reset()
        a = chat.ask(first)
        b = chat.ask(second)
        print(f"| {a.usage['prompt_tokens']}, {a.timings.get('first_token_s', 0):.2f} | "
              f"{b.usage['prompt_tokens']}, {b.timings.get('first_token_s', 0):.2f} |")
    chat.reset()


def scifact(model: str, n_claims: int, n_docs: int, values: list[int], k: int) -> None:
    """Part 5: does the abstract that answers a claim reach the model under each budget?"""
    import retrieval_quality as rq  # this folder's

    from hydra_rag.answer.chat import Chat
    from hydra_rag.catalog import get_model
    from hydra_rag.config import load_settings

    claims, qrels = rq.load("reports", n_claims)
    keep = {d for q in claims for d in qrels[q["_id"]]}
    folder, locate = rq.write_corpus("reports", keep, n_docs)
    rq.index(folder)
    print(f"\n## 5. SciFact claims ({len(claims)}) over {len(list(folder.glob('*.md')))} reports "
          f"of abstracts, top {k}: an answering abstract's lines among the passages sent")
    print("| context_tokens | median prompt tokens | an answering abstract reaches the model |")
    print("|---|---|---|")
    settings = load_settings()
    chat = Chat(get_model(model), [folder], settings, new=True, save=False, top_k=k)
    try:
        for b in values:
            chat.settings = replace(settings, context_tokens=b)
            tokens, reached = [], 0
            for q in claims:
                sources, _, found = chat.retrieve(q["text"])
                prompt = chat.prompt(q["text"], sources if found else [])
                tokens.append(prompt.tokens)
                shown = {d for s in prompt.sources
                         for d in locate(s.path, s.line_start, s.line_end)}
                reached += bool(shown & set(qrels[q["_id"]]))
            print(f"| {b or 'whole chunks'} | {statistics.median(tokens):.0f} | "
                  f"{reached / len(claims):.2f} |")
    finally:
        chat.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--budgets", default="0,300,450,600,800,1000")
    ap.add_argument("--answer-budgets", default="0,600")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--conversations", type=int, default=4)
    ap.add_argument("--no-model", action="store_true", help="parts 1 and 2 only")
    ap.add_argument("--follow-ups-only", action="store_true", help="parts 1 and 1b only")
    ap.add_argument("--scifact", type=int, default=0, metavar="N",
                    help="part 5 only, with N claims")
    ap.add_argument("--scifact-docs", type=int, default=600)
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    root = corpus()
    for cmd in (["rag", "setup"], ["models", "pull", args.model], ["index", str(root)]):
        subprocess.run([sys.executable, "-m", "hydra_rag", *cmd], check=True, capture_output=True)

    from hydra_rag.answer.chat import Chat
    from hydra_rag.catalog import get_model
    from hydra_rag.config import load_settings
    from hydra_rag.search.retrieve import Searcher

    if args.scifact:
        scifact(args.model, args.scifact, args.scifact_docs,
                [int(x) for x in args.budgets.split(",")], args.k)
        return
    settings = load_settings()
    print(f"corpus: {root} · model {args.model} · top {args.k} · "
          f"default context_tokens {settings.context_tokens}")
    follow_ups(Searcher([root], settings), args.k)
    chat = Chat(get_model(args.model), [root], settings, new=True, save=False, top_k=args.k,
                params={"max_tokens": args.max_tokens, "temperature": 0.0})
    try:
        if args.follow_ups_only:
            rewrites(chat)
            return
        budgets(chat, [int(x) for x in args.budgets.split(",")])
        if not args.no_model:
            t0 = time.perf_counter()
            rewrites(chat)
            answers(chat, [int(x) for x in args.answer_budgets.split(",")])
            conversation(chat, args.conversations)
            print(f"\n(model parts took {time.perf_counter() - t0:.0f} s)")
    finally:
        chat.close()


if __name__ == "__main__":
    main()
