"""The sidecar process: llama-cpp-python's OpenAI-compatible server, bound to loopback,
that exits by itself after an idle time. Started by `hydra_rag.sidecar`, not by users.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path


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


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m hydra_rag.sidecar_server")
    ap.add_argument("--model", required=True)
    ap.add_argument("--alias", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--role", choices=("embed", "chat"), required=True)
    ap.add_argument("--idle", type=float, default=900.0, help="seconds without requests; 0 = never")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--n-ctx", type=int, default=512)
    ap.add_argument("--n-batch", type=int, default=512)
    ap.add_argument("--chat-format", default="")
    ap.add_argument("--record", default="", help="record file to remove on idle exit")
    args = ap.parse_args()

    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    threads = args.threads or (os.cpu_count() or 1)
    model = ModelSettings(
        model=args.model,
        model_alias=args.alias,
        embedding=args.role == "embed",
        n_ctx=args.n_ctx,
        n_batch=args.n_batch,
        n_ubatch=args.n_batch,
        n_threads=threads,
        n_threads_batch=threads,
        # Flash attention: 1.6x the embedding rate of plain attention on CPU.
        flash_attn=True,
        chat_format=args.chat_format or None,
        verbose=False,
    )
    server = ServerSettings(host="127.0.0.1", port=args.port)
    app = create_app(server_settings=server, model_settings=[model])

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

    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")
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
