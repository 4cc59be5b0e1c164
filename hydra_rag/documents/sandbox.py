"""The parent's side of extraction: one worker process (see worker.py), a wall-clock bound per
document, and a new worker after one is killed or dies. A file that hangs the parser costs
`timeout` seconds and becomes a `timed_out` skip; one that crashes it, a `corrupt` skip."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from hydra_rag.documents import Extracted, Skip


class Sandbox:
    def __init__(self, timeout: float = 60.0, memory_mb: int = 2048, max_chars: int = 32 << 20,
                 ocr_spec: str = "", ocr_why: str = "", max_pages_s: float = 3600.0):
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.max_chars = max_chars
        self.ocr_spec = ocr_spec  # hydra_rag.documents.ocr.Ocr.spec, or "" (and why not)
        self.ocr_why = ocr_why
        # A document read by OCR gets `timeout` per page, up to this in all.
        self.max_pages_s = max(timeout, max_pages_s)
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # -I: isolated, so that no module of the folder being indexed (a `docx.py` beside the
        # documents) can shadow a library in the worker; it runs in / and is sent absolute paths.
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-m", "hydra_rag.documents.worker", str(self.memory_mb)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            cwd="/", start_new_session=True)  # Ctrl-C reaches the parent, which stops the worker
        return self._proc

    def _read(self, stream: IO[bytes], n: int, deadline: float) -> bytes:
        fd = stream.fileno()
        parts, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, min(n - got, 1 << 20))
            if not chunk:
                raise EOFError
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def _kill(self) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None

    def extract(self, path: Path, fmt: str) -> Extracted:
        """The document's text, or Skip."""
        with self._lock:
            proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
            assert proc.stdin is not None and proc.stdout is not None
            cpu_s = (self.max_pages_s if self.ocr_spec else self.timeout) + 5
            req = json.dumps({"path": str(path.absolute()), "format": fmt,
                              "max_chars": self.max_chars, "cpu_s": cpu_s, "ocr": self.ocr_spec,
                              "ocr_why": self.ocr_why, "page_timeout": self.timeout})
            began = time.monotonic()
            deadline = began + self.timeout
            try:
                proc.stdin.write(req.encode() + b"\n")
                proc.stdin.flush()
                while not (size := int.from_bytes(self._read(proc.stdout, 8, deadline), "big")):
                    # A page read by OCR: the bound starts again for the next, within the cap.
                    deadline = min(time.monotonic() + self.timeout, began + self.max_pages_s)
                answer = json.loads(self._read(proc.stdout, size, deadline + 30))
            except TimeoutError:
                self._kill()
                raise Skip("timed_out", f"still reading after {self.timeout:g} s") from None
            except (EOFError, BrokenPipeError, OSError, ValueError):
                code = self._kill()
                how = f"signal {-code}" if code is not None and code < 0 else f"exit {code}"
                raise Skip("corrupt", f"the extractor died on it ({how})") from None
            except BaseException:  # Ctrl-C: the worker is busy with this document, stop it
                self._kill()
                raise
        if "ok" in answer:
            return Extracted.from_json(answer["ok"])
        raise Skip(answer.get("skip") or "corrupt", answer.get("detail") or "")

    def close(self) -> None:
        """Stop the worker. Never waits for an extraction in progress (an interrupted run must
        not sit out a document's time bound): the worker is killed under it."""
        proc = self._proc
        if proc is None:
            return
        if self._lock.acquire(blocking=False):
            try:
                if proc.poll() is None and proc.stdin is not None:
                    try:
                        proc.stdin.close()  # the worker's loop ends
                        proc.wait(timeout=2)
                    except (OSError, subprocess.TimeoutExpired):
                        pass
                self._kill()
            finally:
                self._lock.release()
        else:
            self._kill()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
