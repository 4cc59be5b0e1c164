"""Chat-turn latency: time to first token and decoding rate of a turn with retrieval, next to
the very same prompt sent straight to the chat sidecar, in the same run.

    python bench/chat_latency.py [--folder DIR] [--model smollm2-135m]

The difference between the two time-to-first-token figures is what retrieval (query embedding,
vector + BM25 search, fusion) and prompt building cost. Defaults to indexing this repository.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTIONS = [
    "How does a sidecar pick its port?",
    "What happens when an index run is killed?",
    "Which files are never indexed?",
    "How are vector and keyword results fused?",
    "Where is the chunk size defined?",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", type=Path, default=HERE.parent)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    for cmd in (["rag", "setup"], ["models", "pull", args.model], ["index", str(args.folder)]):
        subprocess.run([sys.executable, "-m", "hydra_rag", *cmd], check=True,
                       capture_output=True)

    from hydra_rag.answer.chat import Chat
    from hydra_rag.catalog import get_model
    from hydra_rag.config import load_settings
    from hydra_rag.models.chat import stream_chat

    params = {"max_tokens": args.max_tokens, "temperature": 0.0}
    chat = Chat(get_model(args.model), [args.folder.resolve()], load_settings(), new=True,
                params=params, save=False)
    flush = [{"role": "system", "content": "Reply with one word."},
             {"role": "user", "content": "Say ok."}]

    def timed(fn) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        first: list[float] = []
        pieces: list[str] = []

        def on_token(p: str) -> None:
            if not first:
                first.append(time.perf_counter())
            pieces.append(p)

        fn(on_token)
        end = time.perf_counter()
        if not pieces:  # the model stopped at once: no first token, no decoding rate
            return end - t0, float("nan"), 0
        n = chat.count("".join(pieces)) - 1
        return first[0] - t0, n / max(end - first[0], 1e-9), n

    rag, straight = [], []
    chat.ask(QUESTIONS[0])  # warm-up: sidecars up, caches filled
    for q in QUESTIONS:
        stream_chat(chat.sidecar, flush, {"max_tokens": 2}, lambda _p: None)
        chat.reset()
        rag.append(timed(lambda cb, q=q: chat.ask(q, cb)))
        assert chat.last is not None and chat.last.prompt is not None
        messages = chat.last.prompt.messages
        prompt_tokens = chat.last.prompt.tokens
        stream_chat(chat.sidecar, flush, {"max_tokens": 2}, lambda _p: None)
        straight.append(timed(lambda cb, m=messages: stream_chat(chat.sidecar, m, params, cb)))
        print(f"{q[:45]:45}  prompt {prompt_tokens:5} tok   ttft rag {rag[-1][0]:.2f}s / "
              f"straight {straight[-1][0]:.2f}s   decode {rag[-1][1]:.0f} / {straight[-1][1]:.0f} tok/s")
    chat.close()
    med = statistics.median
    print(f"median time to first token: with retrieval {med(r[0] for r in rag):.2f}s, "
          f"same prompt straight {med(s[0] for s in straight):.2f}s, overhead "
          f"{med(r[0] - s[0] for r, s in zip(rag, straight, strict=True)):.2f}s")
    rate_r = [r[1] for r in rag if r[2]]
    rate_s = [s[1] for s in straight if s[2]]
    print(f"median decoding: with retrieval {med(rate_r):.0f} tok/s, "
          f"straight {med(rate_s):.0f} tok/s (answers with at least one token)")


if __name__ == "__main__":
    main()
