"""The sidecar process: llama-cpp-python's OpenAI-compatible server, bound to loopback,
that exits by itself after an idle time. Started by `hydra_rag.models.sidecar`, not by users.

A reranker runs in a small app of our own (llama-cpp-python's server has no rerank route):
`POST /v1/rerank {"query", "documents"}` scores each (query, document) pair with a
cross-encoder GGUF through llama.cpp's rank pooling, and `GET /v1/models` answers the health
check like the other sidecars.

Before it serves, a sidecar tests its model (one embedding, one token or one score): a build of
llama.cpp for instructions this machine does not execute dies right there, by a signal its
starter reports as a crash. `--self-test` stops after that test and prints what it saw.

It serves only its owner's hydra-rag: every request must carry the key in `--key-file`
(sidecar_key), come from no web page and name a loopback Host (sidecar_guard).
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import json
import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from hydra_rag.errors import SidecarError
from hydra_rag.models.convert_bert import SEGMENT_B_KEY, SEGMENT_B_MARK
from hydra_rag.models.sidecar_guard import Guard, strip_cors
from hydra_rag.models.sidecar_key import read_key


class RerankRequest(BaseModel):
    query: str
    documents: list[str]
    model: str | None = None


def _forget(record: str) -> None:
    """Remove our record, unless another process has replaced it since."""
    if not record:
        return
    import json

    try:
        if json.loads(Path(record).read_text()).get("pid") == os.getpid():
            Path(record).unlink(missing_ok=True)
    except (OSError, ValueError):
        pass


def _tokens(llm: Any, text: str, add_bos: bool) -> list[int]:
    text = text.replace(SEGMENT_B_MARK, "")  # never reach the second-segment copies by text
    return llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=False)


def _pairs(llm: Any, query: str, documents: list[str], n_ctx: int) -> list[list[int]]:
    """[CLS] query [SEP] document [SEP] token ids (BERT), or <s> query </s></s> document </s>
    (RoBERTa-style tokenizers), the document cut to fit the context; a query may take at most
    half of it. The document's ids are moved to the second-segment copies when the GGUF has
    them (convert_bert._fold_segments)."""
    meta = llm.metadata
    shift = int(meta.get(SEGMENT_B_KEY, 0))
    sep = llm._model.token_sep()
    if sep < 0:
        sep = llm.token_eos()
    if sep < 0:
        raise ValueError("the reranker's vocabulary has neither a separator nor an end token")
    q = _tokens(llm, query, add_bos=True)
    if not q or q[-1] != sep:
        q.append(sep)
    if len(q) > n_ctx // 2:
        q = q[: n_ctx // 2 - 1] + [sep]
    if meta.get("tokenizer.ggml.model", "bert") != "bert":
        q.append(sep)
    room = n_ctx - len(q) - 1
    return [q + [t + shift for t in _tokens(llm, d, add_bos=False)[:room] + [sep]]
            for d in documents]


def rank_scores(llm: Any, query: str, documents: list[str], n_ctx: int) -> list[float]:
    """One relevance logit per document, as many pairs per decode as fit the batch."""
    import llama_cpp

    # A pair must fit one batch as well as the context.
    pairs = _pairs(llm, query, documents, min(n_ctx, llm.n_batch))
    scores: list[float] = []
    i = 0
    while i < len(pairs):
        llm._batch.reset()
        used = seqs = 0
        while (i < len(pairs) and seqs < llm.context_params.n_seq_max
               and used + len(pairs[i]) <= llm.n_batch):
            llm._batch.add_sequence(pairs[i], seqs, True)
            used += len(pairs[i])
            seqs += 1
            i += 1
        llm._ctx.kv_cache_clear()
        llm._ctx.decode(llm._batch)
        scores += [float(llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, s)[0])
                   for s in range(seqs)]
    return scores


SelfTest = Callable[[], None]
BACKENDS = ("llama.cpp", "onnx")


def _rerank_app(args: argparse.Namespace, threads: int, gpu_layers: int) -> tuple[Any, SelfTest]:
    import llama_cpp
    from fastapi import FastAPI, HTTPException

    llm = llama_cpp.Llama(
        args.model, embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_RANK,
        n_ctx=args.n_ctx, n_batch=args.n_batch, n_ubatch=args.n_batch, n_gpu_layers=gpu_layers,
        n_threads=threads, n_threads_batch=threads, flash_attn=True, verbose=True,
    )
    if llm.pooling_type() != llama_cpp.LLAMA_POOLING_TYPE_RANK:
        raise SystemExit(f"{args.model} is not a reranker (no rank pooling)")
    # Never past the model's position table, whatever the catalog's max_tokens says.
    n_ctx = min(args.n_ctx, llm._model.n_ctx_train())
    lock = threading.Lock()
    app = FastAPI()

    def self_test() -> None:
        scores = rank_scores(llm, "self-test", ["self-test"], n_ctx)
        if not (len(scores) == 1 and math.isfinite(scores[0])):
            raise SystemExit(f"self-test: the reranker gave {scores!r} for one pair")

    @app.post("/v1/rerank")
    def rerank(req: RerankRequest) -> dict[str, Any]:
        if not req.query.strip():
            raise HTTPException(400, "the query is empty")
        with lock:  # one llama.cpp context: one request at a time
            scores = rank_scores(llm, req.query, req.documents, n_ctx)
        return {"model": args.alias,
                "results": [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]}

    return app, self_test


def main() -> None:
    # A crash in llama.cpp (SIGILL, SIGSEGV, ...) is named in the log, where the process that
    # started this one looks for it.
    faulthandler.enable()
    ap = argparse.ArgumentParser(prog="python -m hydra_rag.models.sidecar_server")
    ap.add_argument("--model", required=True)
    ap.add_argument("--alias", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--role", choices=("embed", "chat", "rerank"), required=True)
    ap.add_argument("--backend", choices=BACKENDS, default="llama.cpp",
                    help="what runs the model: llama.cpp, or ONNX Runtime (embedders only)")
    ap.add_argument("--idle", type=float, default=900.0, help="seconds without requests; 0 = never")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--n-ctx", type=int, default=512)
    ap.add_argument("--n-batch", type=int, default=512)
    ap.add_argument("--gpu-layers", type=int, default=-1,
                    help="layers on the GPU when llama.cpp has a GPU backend; -1 = all, 0 = none")
    ap.add_argument("--chat-format", default="")
    ap.add_argument("--record", default="", help="record file to remove on idle exit")
    ap.add_argument("--key-file", default="",
                    help="file holding the key every request must carry (mode 600)")
    ap.add_argument("--self-test", action="store_true",
                    help="load the model, test it, print what was seen as JSON and exit")
    ap.add_argument("--speed", action="store_true",
                    help="with --self-test: also time a short run (tokens per second)")
    args = ap.parse_args()
    if not args.self_test and not (args.port and args.key_file):
        ap.error("--port and --key-file are needed to serve")
    try:  # read before the model loads: a bad key file fails at once
        key = read_key(Path(args.key_file)) if not args.self_test else ""
    except (OSError, SidecarError) as exc:
        raise SystemExit(f"sidecar key: {exc}") from None

    # llama.cpp's OpenMP threads sleep while they wait instead of spinning: on a machine busy
    # with other work, spinning threads wait for each other: two embedded at half the speed of
    # one (BENCHMARKS.md, issue 32), and a chat model decoded 3 tokens/s instead of 40 (issue
    # 45). A user's own setting wins. Read when llama.cpp loads, below.
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    _scrub_environment()
    threads = args.threads or (os.cpu_count() or 1)
    decode = args.threads or decode_threads(threads)
    info: dict[str, Any] = {"threads": threads,
                            **({"decode_threads": decode} if args.role == "chat" else {})}
    if args.backend == "onnx":
        from hydra_rag.models import onnx_server

        app, self_test, onnx_speed = onnx_server.onnx_app(args, threads)
        info.update(device="CPU", backend="onnx")
        system_info, serving = onnx_server.system_info, "CPU, ONNX Runtime"
    else:
        import llama_cpp

        gpu_layers = offloaded_layers(args.gpu_layers)
        if args.role == "rerank":
            app, self_test = _rerank_app(args, threads, gpu_layers)
        else:
            app, self_test = _openai_app(args, threads, gpu_layers,
                                         decode if args.role == "chat" else threads)
        info.update(device=device(gpu_layers), gpu_layers=gpu_layers, backend="llama.cpp",
                    omp_wait_policy=os.environ.get("OMP_WAIT_POLICY", ""))

        def system_info() -> str:
            return llama_cpp.llama_print_system_info().decode()

        serving = info["device"]
    self_test()
    if args.self_test and args.speed and args.backend == "onnx":
        info["speed"] = onnx_speed(_SPEED_TEXT)
    elif args.self_test and args.speed and args.role != "rerank":
        info["speed"] = _speed(server_llm(), args.role)
    if args.self_test:
        print(json.dumps({**info, "system_info": system_info()}), flush=True)
        return
    print(f"self-test passed; serving {args.alias} on 127.0.0.1:{args.port} ({serving})",
          flush=True)
    _models_at_once(app, args.alias, info)
    _serve(app, args, key)


def _scrub_environment() -> None:
    """llama-cpp-python's server settings read every environment variable named like one of
    their fields, without a prefix and in any case (`CACHE`, `PORT`, `MODEL`, `VERBOSE`,
    `N_CTX`, ...), and `CONFIG_FILE` replaces them all: a user's shell could set any of them,
    and CACHE=/tmp/x made every sidecar fail. Only HYDRA_RAG_* configures hydra-rag: this
    process gets its settings as arguments, and those variables are removed before any
    settings object reads them."""
    from llama_cpp.server.settings import ConfigFileSettings, ModelSettings, ServerSettings

    names = {"config_file"}
    for cls in (ModelSettings, ServerSettings, ConfigFileSettings):
        for name, spec in cls.model_fields.items():
            names.add(name.lower())
            if isinstance(spec.alias, str):
                names.add(spec.alias.lower())
    for key in [k for k in os.environ if k.lower() in names]:
        del os.environ[key]


def offloaded_layers(wanted: int) -> int:
    """Layers to put on the GPU: `wanted` (-1 = all) when llama.cpp has a GPU backend, else 0."""
    import llama_cpp

    return wanted if wanted != 0 and llama_cpp.llama_supports_gpu_offload() else 0


def gpu_devices() -> list[str]:
    """The GPUs llama.cpp's backends see, as "CUDA0 (NVIDIA A10G)"."""
    import llama_cpp

    try:
        lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml.so"))
    except OSError:
        return []
    lib.ggml_backend_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
    lib.ggml_backend_dev_get.restype = ctypes.c_void_p
    for fn in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
        getattr(lib, fn).argtypes = [ctypes.c_void_p]
        getattr(lib, fn).restype = ctypes.c_char_p
    lib.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_dev_type.restype = ctypes.c_int
    gpu_types = (1, 2)  # GGML_BACKEND_DEVICE_TYPE_GPU, _IGPU
    out = []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        if lib.ggml_backend_dev_type(dev) in gpu_types:
            name = (lib.ggml_backend_dev_name(dev) or b"?").decode(errors="replace")
            desc = (lib.ggml_backend_dev_description(dev) or b"").decode(errors="replace")
            out.append(f"{name} ({desc})" if desc else name)
    return out


def device(gpu_layers: int) -> str:
    """Where the model runs: "CPU", or the GPU(s) and how many of its layers are there."""
    if gpu_layers == 0:
        return "CPU"
    layers = "all layers" if gpu_layers < 0 else f"{gpu_layers} layers"
    return f"GPU {', '.join(gpu_devices()) or '(unnamed)'}, {layers}"


def decode_threads(cores: int) -> int:
    """Threads that decode a chat model's answer, a token at a time: half the cores. Each token
    is a small step, and threads that wait for each other at every step cost more than they
    bring: on 2 cores one thread decoded SmolLM2 at 42 tokens/s idle and 41 with a core busy,
    two at 69 idle and 3 to 23 busy (BENCHMARKS.md, issue 45). The prompt, a batch of hundreds
    of tokens, is evaluated on every core."""
    return max(1, cores // 2)


def _openai_app(args: argparse.Namespace, threads: int, gpu_layers: int,
                decode: int = 0) -> tuple[Any, SelfTest]:
    from llama_cpp.server import app as server
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    model = ModelSettings(
        model=args.model,
        model_alias=args.alias,
        embedding=args.role == "embed",
        n_ctx=args.n_ctx,
        n_batch=args.n_batch,
        n_ubatch=args.n_batch,
        n_threads=decode or threads,
        n_threads_batch=threads,
        n_gpu_layers=gpu_layers,
        # Flash attention: 1.6x the embedding rate of plain attention on CPU.
        flash_attn=True,
        chat_format=args.chat_format or None,
        # llama.cpp's own messages go to the log (quiet, it kept nothing to tell a crash by).
        verbose=True,
    )
    # llama-cpp-python ends a streaming answer early whenever another request arrives
    # (`interrupt_requests`): a health check from any other command would cut the answer off.
    settings = ServerSettings(host="127.0.0.1", port=args.port or 1, interrupt_requests=False)
    app = server.create_app(server_settings=settings, model_settings=[model])
    assert server._llama_proxy is not None
    llm = server._llama_proxy()

    def self_test() -> None:
        if args.role == "embed":
            vec = llm.embed("self-test")
            if len(vec) != llm.n_embd() or not all(math.isfinite(x) for x in vec):
                raise SystemExit("self-test: the embedder gave no valid vector")
        else:
            llm.create_completion("Hello", max_tokens=1, temperature=0.0)

    return app, self_test


_SPEED_TEXT = " ".join(["Rivers carry water from the hills down to the sea, and towns grow "
                        "where they meet."] * 16)


def server_llm() -> Any:
    """The model the OpenAI-compatible app serves (loaded by then)."""
    from llama_cpp.server import app as server

    assert server._llama_proxy is not None
    return server._llama_proxy()


def _speed(llm: Any, role: str) -> dict[str, float]:
    """Tokens per second of a short run: an embedder embedding a ~250-token passage three
    times; a chat model reading a ~250-token prompt, then writing up to 32 tokens (greedy)."""
    if role == "embed":
        n = min(len(llm.tokenize(_SPEED_TEXT.encode())), llm.n_ctx())
        start = time.perf_counter()
        for _ in range(3):
            llm.embed(_SPEED_TEXT, truncate=True)
        return {"tokens_per_s": round(3 * n / (time.perf_counter() - start), 1)}
    text = _SPEED_TEXT + "\nCount from one to one hundred in words: one, two, three,"
    # Within a small context (a model run with --context 256), room is left to write.
    prompt = llm.tokenize(text.encode())[-max(llm.n_ctx() - 40, 16):]
    llm.reset()
    start = time.perf_counter()
    llm.create_completion(prompt, max_tokens=1, temperature=0.0)
    read = time.perf_counter() - start
    n_prompt = len(prompt)
    start = time.perf_counter()  # the prompt is cached now: this times the writing
    out = llm.create_completion(prompt, max_tokens=32, temperature=0.0)
    wrote = time.perf_counter() - start
    n = int(out["usage"]["completion_tokens"])
    return {"prompt_tokens_per_s": round(n_prompt / read, 1),
            "tokens_per_s": round(n / wrote, 1) if n else 0.0}


def _models_at_once(app: Any, alias: str, info: dict[str, Any]) -> None:
    """Answer GET /v1/models (the health check) without waiting for the model, in either app.
    llama-cpp-python's own route waits for the model lock, so during a long embedding batch or
    answer the sidecar looked dead to every other command, which then killed it. Ours is
    matched first, and says which device serves the model."""

    async def models() -> dict[str, Any]:
        return {"object": "list",
                "data": [{"id": alias, "object": "model", "owned_by": "me", "permissions": [],
                          **info}]}

    app.router.add_api_route("/v1/models", models, methods=["GET"])
    app.router.routes.insert(0, app.router.routes.pop())


def _serve(app: Any, args: argparse.Namespace, key: str) -> None:
    """Run the app on loopback, behind the guard; exit after `--idle` seconds without a
    request (one the guard refuses does not count: a stranger cannot keep it alive)."""
    import uvicorn

    state = {"last": time.monotonic(), "busy": 0}
    lock = threading.Lock()

    @app.middleware("http")
    async def _activity(request, call_next):
        with lock:
            state["busy"] += 1
            state["last"] = time.monotonic()
        try:
            return await call_next(request)
        finally:
            with lock:
                state["busy"] -= 1
                state["last"] = time.monotonic()

    strip_cors(app)
    config = uvicorn.Config(Guard(app, key, args.port), host="127.0.0.1", port=args.port,
                            log_level="warning")
    uv = uvicorn.Server(config)

    def _watchdog() -> None:
        while not uv.should_exit:
            time.sleep(1.0)
            with lock:
                idle = state["busy"] == 0 and time.monotonic() - state["last"] > args.idle
            if idle:
                print(f"idle for {args.idle:.0f}s, exiting", flush=True)
                _forget(args.record)
                uv.should_exit = True

    if args.idle > 0:
        threading.Thread(target=_watchdog, daemon=True).start()
    uv.run()


if __name__ == "__main__":
    main()
