"""Embedding speed of installed embedders on the same texts, in-process (llama-cpp-python, the
sidecar's settings: flash attention, n_ctx = n_batch = 512, batches of 16 texts), so that the
model is all that differs.

    python bench/embedder_speed.py [--embedders minilm-l6,multilingual-e5-small] [--set man-de]
                                   [--texts 200]

The texts are the first chunks of a retrieval_quality.py set as the chunker cuts them (each
model gets the document prefix its catalog entry asks for). Prints texts/s and, by each
model's own tokenizer, tokens/s; the first embedder listed is the reference.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def texts_of(name: str, n: int) -> list[str]:
    import retrieval_quality as rq

    from hydra_rag.read.chunk import chunk_text, markup_of

    path = rq.SETS[name][0] / "corpus.jsonl"
    if name.startswith("man-") and not path.exists():
        rq.manpages.build(name.removeprefix("man-"))
    out: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            text = f"# {d['title']}\n\n{d['text']}\n" if d["title"] else d["text"]
            out += [c.text for c in chunk_text(text, markup=markup_of("x.md"))]
            if len(out) >= n:
                break
    return out[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--embedders", default="minilm-l6,multilingual-e5-small")
    ap.add_argument("--set", default="man-de")
    ap.add_argument("--texts", type=int, default=200)
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    import llama_cpp

    from hydra_rag.catalog import get_embedder
    from hydra_rag.models.embed import quiet_llama

    quiet_llama()
    texts = texts_of(args.set, args.texts)
    ref = None
    for eid in args.embedders.split(","):
        emb = get_embedder(eid)
        path = emb.model_path()
        if path is None or not path.is_file():
            raise SystemExit(f"{eid} is not installed: hydra-rag rag setup --embedder {eid}")
        llm = llama_cpp.Llama(str(path), embedding=True, n_ctx=512, n_batch=512, n_ubatch=512,
                              flash_attn=True, verbose=False)
        unigram = llm.metadata.get("tokenizer.ggml.model") == "t5"  # as embed.Tokenizer does
        batch = []
        for t in texts:
            t = emb.document_prefix + (" ".join(t.split()) if unigram else t)
            ids = llm.tokenize(t.encode(), add_bos=True, special=False)
            if len(ids) > 512:  # the chunker's token guard would have cut it for this model
                t = llm.detokenize(ids[1:500]).decode(errors="ignore")
            batch.append(t)
        tokens = sum(len(llm.tokenize(t.encode(), add_bos=True, special=False)) for t in batch)
        llm.embed(batch[:4])  # warm up
        t0 = time.perf_counter()
        for i in range(0, len(batch), 16):
            llm.embed(batch[i : i + 16])
        dt = time.perf_counter() - t0
        rate = len(batch) / dt
        ref = ref or rate
        print(f"{eid:24} {len(batch)} texts in {dt:.1f}s: {rate:.1f} texts/s, "
              f"{tokens / dt:,.0f} tokens/s ({tokens} tokens), {ref / rate:.2f}x the time of "
              f"the first", flush=True)
        del llm


if __name__ == "__main__":
    main()
