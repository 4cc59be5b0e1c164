"""The extraction worker: a child process that turns documents into text under a memory bound
(RLIMIT_AS), so that a hostile file can only take this process down, never the index run.

Requests are JSON lines on stdin ({"path", "format", "max_chars", "cpu_s", and for OCR "ocr",
"ocr_why", "page_timeout"}); each answer is an 8-byte big-endian length and a JSON object
({"ok": Extracted} or {"skip", "detail"}) on the file descriptor stdout had at start, after
as many empty frames (length 0) as pages were read by OCR meanwhile. Libraries that print are
sent to stderr.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path
from typing import Any


def _answer(req: dict[str, Any], memory_mb: int) -> dict[str, Any]:
    from hydra_rag.documents import Skip
    from hydra_rag.documents.extract import extract_file

    try:
        ex = extract_file(Path(req["path"]), req["format"], int(req["max_chars"]),
                          str(req.get("ocr", "")), str(req.get("ocr_why", "")),
                          float(req.get("page_timeout", 60.0)))
        return {"ok": ex.to_json()}
    except Skip as s:
        return {"skip": s.reason, "detail": s.detail}
    except MemoryError:
        return {"skip": "too_large", "detail": f"needs more than {memory_mb} MiB of memory"}
    except RecursionError:
        return {"skip": "corrupt", "detail": "nested too deeply"}
    except Exception as exc:  # noqa: BLE001 - a library's failure on a broken file
        return {"skip": "corrupt", "detail": f"{type(exc).__name__}: {exc}"[:300]}


def main() -> None:
    memory_mb = int(sys.argv[1])
    if memory_mb > 0:
        limit = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file behind
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever a library prints goes to stderr, not into the answers

    def still_at_work() -> None:  # a page read by OCR: an empty frame (length 0)
        out.write(bytes(8))
        out.flush()

    from hydra_rag.documents import ocr

    ocr.on_page = still_at_work
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        req = json.loads(line)
        # A CPU bound too, should the parent be gone and its wall-clock bound with it.
        use = resource.getrusage(resource.RUSAGE_SELF)
        budget = int(use.ru_utime + use.ru_stime + float(req.get("cpu_s", 600))) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (budget, resource.RLIM_INFINITY))
        data = json.dumps(_answer(req, memory_mb)).encode()
        out.write(len(data).to_bytes(8, "big") + data)
        out.flush()


if __name__ == "__main__":
    main()
