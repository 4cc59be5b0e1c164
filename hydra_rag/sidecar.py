"""Sidecars: one long-lived llama.cpp server process per model, on loopback, reused by every
command, found again through a record in the state folder, stopped after an idle time.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from urllib.parse import urlsplit

from hydra_rag.errors import HydraError, SidecarError
from hydra_rag.locks import file_lock, write_atomic
from hydra_rag.paths import dirs

LOG_TAIL_LINES = 15


@dataclass(frozen=True)
class SidecarSpec:
    """What to run: a model file under an id, in a role, preferring a port within a range."""

    id: str
    role: str  # "embed" or "chat"
    model_path: str
    port: int
    port_range: tuple[int, int]
    n_ctx: int = 512
    n_batch: int = 512
    threads: int = 0
    idle_seconds: float = 900.0
    chat_format: str = ""


@dataclass(frozen=True)
class SidecarRecord:
    """What runs: written once the sidecar answered its health check."""

    id: str
    role: str
    model_path: str
    port: int
    pid: int
    started: float
    log: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _record_path(sidecar_id: str) -> Path:
    return dirs().sidecars / f"{sidecar_id}.json"


def _log_path(sidecar_id: str) -> Path:
    return dirs().sidecars / f"{sidecar_id}.log"


def read_record(sidecar_id: str) -> SidecarRecord | None:
    """The record of a sidecar, or None if there is none or it is unreadable."""
    try:
        raw = json.loads(_record_path(sidecar_id).read_text())
        return SidecarRecord(**raw)
    except (OSError, ValueError, TypeError):
        return None


def all_records() -> list[SidecarRecord]:
    out = []
    folder = dirs().sidecars
    if folder.is_dir():
        for p in sorted(folder.glob("*.json")):
            rec = read_record(p.stem)
            if rec is not None:
                out.append(rec)
    return out


def pid_is_sidecar(pid: int, sidecar_id: str) -> bool:
    """True if `pid` is alive and really is our sidecar for this id (pids get reused)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"hydra_rag.sidecar_server" in cmd and sidecar_id.encode() in cmd


def health(port: int, sidecar_id: str, timeout: float = 2.0) -> bool:
    """GET /v1/models answers and serves the model under our id."""
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/v1/models", timeout=timeout
        ) as resp:
            body = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return any(m.get("id") == sidecar_id for m in body.get("data", []))


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a sidecar log, for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = [ln for ln in text.splitlines() if ln.strip()][-lines:]
    return "\n".join("    " + ln for ln in tail) or "(empty log)"


@dataclass
class JsonEndpoint:
    """JSON POSTs to the /v1 API at `base_url` (a sidecar's, or a remote one) over one kept-alive
    connection, retried once when the connection was dropped. If it still cannot be reached,
    `restart` (when given) brings the sidecar back and returns its URL, and the request is sent
    once more there: an index run survives a sidecar that crashed or was stopped under it.
    Errors are raised as `error`, name the endpoint as `name` (default: the URL) and end with
    the sidecar's log tail."""

    base_url: str
    sidecar_id: str | None = None
    name: str = ""
    error: type[HydraError] = SidecarError
    restart: Callable[[], str] | None = None

    @cached_property
    def _conn(self) -> http.client.HTTPConnection:
        parts = urlsplit(self.base_url)
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        return cls(parts.hostname or "127.0.0.1", parts.port, timeout=600)

    @cached_property
    def _v1(self) -> str:
        path = urlsplit(self.base_url).path.rstrip("/")
        return path if path.endswith("/v1") else path + "/v1"

    def explain(self, msg: str) -> str:
        """`msg`, followed by the tail of the sidecar's log when there is one."""
        if self.sidecar_id:
            rec = read_record(self.sidecar_id)
            if rec is not None:
                return f"{msg}\nsidecar log {rec.log}:\n{log_tail(Path(rec.log))}"
        return msg

    def post(self, route: str, payload: dict[str, object]) -> bytes:
        """The body of a 200 answer to POST /v1/<route>."""
        name = self.name or self.base_url
        body = json.dumps(payload)
        for attempt in (1, 2, 3):
            try:
                self._conn.request("POST", f"{self._v1}/{route}", body=body,
                                   headers={"Content-Type": "application/json"})
                resp = self._conn.getresponse()
                raw = resp.read()
                break
            except TimeoutError:
                # It got the request and is still at it: sending it again would only queue a
                # second copy behind the first.
                self._conn.close()
                raise self.error(self.explain(
                    f"{name} did not answer within {self._conn.timeout:g}s")) from None
            except (OSError, http.client.HTTPException) as exc:
                self._conn.close()
                if attempt == 1:
                    continue
                if attempt == 3 or self.restart is None:
                    raise self.error(self.explain(f"cannot reach {name}: {exc}")) from None
                reason = exc
            # The sidecar is gone: start it again (or find the one another process started).
            try:
                self.base_url = self.restart()
            except HydraError as exc:
                raise self.error(f"cannot reach {name}: {reason}; starting it again failed: "
                                 f"{exc}") from None
            for cached in ("_conn", "_v1"):
                self.__dict__.pop(cached, None)
        if resp.status != 200:
            raise self.error(self.explain(
                f"{name} answered HTTP {resp.status}: {raw[:300].decode(errors='replace')}"))
        return raw


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _candidate_ports(spec: SidecarSpec) -> list[int]:
    lo, hi = spec.port_range
    ordered = [spec.port] + [p for p in range(lo, hi + 1) if p != spec.port]
    return [p for p in ordered if lo <= p <= hi]


def _kill(pid: int, grace: float = 5.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        # Reap it if it is our child, so it does not linger as a zombie.
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def ensure(spec: SidecarSpec, timeout: float = 120.0) -> SidecarRecord:
    """Return a healthy sidecar for `spec`, reusing a running one or starting it."""
    if not Path(spec.model_path).is_file():
        raise SidecarError(
            f"model file for {spec.id!r} is missing: {spec.model_path}"
            f" — run `hydra-rag rag setup` (or `hydra-rag embedders add`)"
        )
    lock = dirs().sidecars / f"{spec.id}.lock"
    # The holder may give a slow sidecar `timeout` seconds, then start one in `timeout` more.
    with file_lock(lock, wait=2 * timeout + 30) as held:
        if not held:
            raise SidecarError(f"timed out waiting for another process starting {spec.id!r}")
        rec = read_record(spec.id)
        if rec is not None:
            alive = pid_is_sidecar(rec.pid, spec.id)
            if alive and rec.model_path == spec.model_path and _answers(rec, timeout):
                return rec
            if alive:
                _kill(rec.pid)
            _record_path(spec.id).unlink(missing_ok=True)
        return _start(spec, timeout)


def restarter(spec: SidecarSpec, timeout: float) -> Callable[[], str]:
    """For a client of this sidecar: bring it back if it is gone; its URL."""
    return lambda: ensure(spec, timeout).url


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0):
            return True
    except OSError:
        return False


def _answers(rec: SidecarRecord, patience: float) -> bool:
    """Is this running sidecar healthy? One that accepts connections but is slow to answer may
    be busy (a sidecar started by an older hydra-rag answers its health check only between
    requests, and on two cores a long batch can starve any process): it gets `patience` seconds
    before it is judged hung, since killing it would break what it serves another command."""
    if health(rec.port, rec.id):
        return True
    return _listening(rec.port) and health(rec.port, rec.id, timeout=patience)


def _start(spec: SidecarSpec, timeout: float) -> SidecarRecord:
    log = _log_path(spec.id)
    log.parent.mkdir(parents=True, exist_ok=True)
    tried = []
    for port in _candidate_ports(spec):
        if not port_free(port):
            tried.append(port)
            continue
        cmd = [
            sys.executable, "-m", "hydra_rag.sidecar_server",
            "--model", spec.model_path, "--alias", spec.id, "--role", spec.role,
            "--port", str(port), "--idle", str(spec.idle_seconds),
            "--threads", str(spec.threads), "--n-ctx", str(spec.n_ctx),
            "--n-batch", str(spec.n_batch), "--record", str(_record_path(spec.id)),
        ]
        if spec.chat_format and spec.chat_format != "gguf":
            cmd += ["--chat-format", spec.chat_format]
        with log.open("w") as logf:
            proc = subprocess.Popen(
                cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # outlives the command that started it
            )
        rec = SidecarRecord(
            spec.id, spec.role, spec.model_path, port, proc.pid, time.time(), str(log)
        )
        write_atomic(_record_path(spec.id), json.dumps(asdict(rec)))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = proc.poll()
            if code is not None:
                _record_path(spec.id).unlink(missing_ok=True)
                text = log.read_text(errors="replace") if log.exists() else ""
                if "address already in use" in text.lower():
                    tried.append(port)
                    break
                raise SidecarError(
                    f"sidecar {spec.id!r} exited with code {code} while starting; "
                    f"log {log}:\n{log_tail(log)}"
                )
            if health(port, spec.id, timeout=1.0):
                return rec
            time.sleep(0.2)
        else:
            _kill(proc.pid)
            _record_path(spec.id).unlink(missing_ok=True)
            raise SidecarError(
                f"sidecar {spec.id!r} did not become healthy within {timeout:.0f}s; "
                f"log {log}:\n{log_tail(log)}"
            )
    lo, hi = spec.port_range
    raise SidecarError(
        f"no free port for {spec.id!r} in {lo}-{hi} (taken: {', '.join(map(str, tried))});"
        " stop something with `hydra-rag sidecars stop --all`"
    )


def touch(rec: SidecarRecord) -> bool:
    """A cheap request that counts as activity, so an open chat keeps its sidecars warm."""
    return health(rec.port, rec.id, timeout=5.0)


def status(rec: SidecarRecord) -> str:
    """`ready`, `unhealthy` (running but not answering) or `dead` (stale record)."""
    if not pid_is_sidecar(rec.pid, rec.id):
        return "dead"
    return "ready" if health(rec.port, rec.id) else "unhealthy"


def stop(sidecar_id: str) -> bool:
    """Stop one sidecar; True if a process was stopped."""
    rec = read_record(sidecar_id)
    if rec is None:
        return False
    stopped = False
    if pid_is_sidecar(rec.pid, rec.id):
        _kill(rec.pid)
        stopped = True
    _record_path(sidecar_id).unlink(missing_ok=True)
    return stopped


def clean_stale() -> list[str]:
    """Remove records of sidecars that are gone; returns their ids."""
    gone = []
    for rec in all_records():
        if not pid_is_sidecar(rec.pid, rec.id):
            _record_path(rec.id).unlink(missing_ok=True)
            gone.append(rec.id)
    return gone
