"""Sidecars: one long-lived llama.cpp server process per model, on loopback, reused by every
command, found again through a record in the state folder, stopped after an idle time.

A sidecar tests its model before it serves; one that dies by a signal (a build of llama.cpp
for instructions this machine does not execute) is reported as a crash, with the command that
rebuilds llama.cpp, not as a server that cannot be reached.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hydra_rag.errors import SidecarCrash, SidecarError
from hydra_rag.locks import file_lock, write_atomic
from hydra_rag.models import sidecar_key
from hydra_rag.paths import dirs, sidecars_dir

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
    gpu_layers: int = -1  # on the GPU when llama.cpp has a GPU backend: -1 = all, 0 = none
    backend: str = "llama.cpp"  # or "onnx" (ONNX Runtime, embedders only)


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
    gpu_layers: int = -1  # as asked for
    device: str = ""  # where the model runs, as the sidecar said: "CPU", "GPU CUDA0 (...), ..."
    keyed: bool = False  # demands the sidecar key (one an older hydra-rag started does not)
    backend: str = ""  # what runs the model, as the sidecar said: "llama.cpp" or "onnx"

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
    # hydra_rag.sidecar_server: the server's module before the stage packages (issue 26); a
    # sidecar a running older version started is still ours to reuse or stop.
    return (any(m in cmd for m in (b"hydra_rag.models.sidecar_server", b"hydra_rag.sidecar_server"))
            and sidecar_id.encode() in cmd)


def served(port: int, sidecar_id: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """What GET /v1/models says of the model under our id (None if it does not answer so, or
    if what listens on the port is not this user's: it would be sent the key)."""
    if not sidecar_key.listener_is_mine(port):
        return None
    try:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models",
                                     headers=sidecar_key.headers())
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = json.loads(resp.read())
        return next((m for m in body.get("data", []) if m.get("id") == sidecar_id), None)
    except (urllib.error.URLError, OSError, ValueError, AttributeError):
        return None


def health(port: int, sidecar_id: str, timeout: float = 2.0) -> bool:
    """GET /v1/models answers and serves the model under our id."""
    return served(port, sidecar_id, timeout) is not None


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a sidecar log, for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = [ln for ln in text.splitlines() if ln.strip()][-lines:]
    return "\n".join("    " + ln for ln in tail) or "(empty log)"


def crash_of(sidecar_id: str) -> SidecarCrash | None:
    """If the sidecar of this id died by a signal, the error that says so."""
    from hydra_rag.llamacpp.crash import signal_in_log

    rec = read_record(sidecar_id)
    if rec is None or pid_is_sidecar(rec.pid, rec.id):
        return None
    try:
        text = Path(rec.log).read_text(errors="replace")
    except OSError:
        return None
    sig = signal_in_log(text)
    return (_crash(f"sidecar {sidecar_id!r}", sig, Path(rec.log), text, rec.backend)
            if sig else None)


def _crash(what: str, sig: str, log: Path, text: str, backend: str = "") -> SidecarCrash:
    """`what` died of `sig`: its meaning, the fix, and where in the log (`text`) it died."""
    from hydra_rag.llamacpp.crash import excerpt, explain

    if backend == "onnx":  # not llama.cpp: rebuilding it would change nothing
        why = (f"{what} crashed: {sig} in ONNX Runtime; embed with llama.cpp instead (the "
               f"default embedder, minilm-l6, or HYDRA_RAG_EMBEDDER=ID)\nlog {log}")
        return SidecarCrash(f"{why}\n{excerpt(text) or log_tail(log)}", "")
    return SidecarCrash(f"{explain(what, sig, str(log))}\n{excerpt(text) or log_tail(log)}", sig)


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
    lock = sidecars_dir() / f"{spec.id}.lock"  # the first thing a sidecar writes: private
    # The holder may give a slow sidecar `timeout` seconds, then start one in `timeout` more.
    with file_lock(lock, wait=2 * timeout + 30) as held:
        if not held:
            raise SidecarError(f"timed out waiting for another process starting {spec.id!r}")
        rec = read_record(spec.id)
        if rec is not None:
            alive = pid_is_sidecar(rec.pid, spec.id)
            # One an older hydra-rag started answers anyone: replaced by one that demands the key.
            same = (rec.model_path == spec.model_path and rec.gpu_layers == spec.gpu_layers
                    and rec.keyed)
            if alive and same and _answers(rec, timeout):
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


def _command(spec: SidecarSpec, *extra: str) -> list[str]:
    """The sidecar process's command line (its settings are all here, none in the environment)."""
    cmd = [
        sys.executable, "-P", "-m", "hydra_rag.models.sidecar_server",
        "--model", spec.model_path, "--alias", spec.id, "--role", spec.role,
        "--idle", str(spec.idle_seconds), "--threads", str(spec.threads),
        "--n-ctx", str(spec.n_ctx), "--n-batch", str(spec.n_batch),
        "--gpu-layers", str(spec.gpu_layers), "--backend", spec.backend, *extra,
    ]
    if spec.chat_format and spec.chat_format != "gguf":
        cmd += ["--chat-format", spec.chat_format]
    return cmd


def _died(what: str, code: int, log: Path, backend: str = "") -> SidecarError:
    """The error for a sidecar (or its self-test) that exited with `code` while starting."""
    from hydra_rag.llamacpp.crash import signal_in_log
    from hydra_rag.llamacpp.probe import signal_name

    text = log.read_text(errors="replace") if log.exists() else ""
    sig = signal_name(code) or signal_in_log(text)
    if sig:
        return _crash(what, sig, log, text, backend)
    return SidecarError(f"{what} exited with code {code} while starting; log {log}:\n"
                        f"{log_tail(log)}")


def self_test(spec: SidecarSpec, timeout: float = 300.0, speed: bool = False) -> dict[str, Any]:
    """Load the model in a child process and test it (one embedding, token or score) as a
    sidecar does before it serves: what it saw (device, llama.cpp's system info); with
    `speed`, also the tokens per second of a short run (`speed`). A crash raises
    SidecarCrash."""
    if not Path(spec.model_path).is_file():
        raise SidecarError(f"model file for {spec.id!r} is missing: {spec.model_path}")
    log = dirs().sidecars / f"{spec.id}.self-test.log"
    sidecars_dir()  # private, even for a library caller that never ran the CLI
    from hydra_rag.models.speeds import CpuWatch

    with log.open("w") as logf, CpuWatch() as watch:
        try:
            extra = ("--self-test", "--speed") if speed else ("--self-test",)
            proc = subprocess.run(_command(spec, *extra), stdout=subprocess.PIPE,
                                  stderr=logf, stdin=subprocess.DEVNULL, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SidecarError(f"self-test of {spec.id!r} did not finish within {timeout:.0f}s; "
                               f"log {log}:\n{log_tail(log)}") from None
    if proc.returncode != 0:
        raise _died(f"self-test of {spec.id!r}", proc.returncode, log, spec.backend)
    try:
        out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SidecarError(f"self-test of {spec.id!r} printed no report; log {log}") from None
    if speed:  # whether other processes shared the machine while it was timed
        out["busy"] = watch.report()
    return out


def _rotate(log: Path) -> None:
    """Keep the previous run's log (it may hold why that one died) as <id>.prev.log."""
    if log.exists():
        log.replace(log.with_suffix(".prev.log"))


def _start(spec: SidecarSpec, timeout: float) -> SidecarRecord:
    log = _log_path(spec.id)
    sidecars_dir()  # private, even for a library caller that never ran the CLI
    _rotate(log)
    key_file = sidecar_key.ensure_key()  # its path on the command line, never the key
    tried = []
    for port in _candidate_ports(spec):
        if not port_free(port):
            tried.append(port)
            continue
        cmd = _command(spec, "--port", str(port), "--record", str(_record_path(spec.id)),
                       "--key-file", str(key_file))
        with log.open("w") as logf:
            proc = subprocess.Popen(
                cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # outlives the command that started it
            )
        rec = SidecarRecord(spec.id, spec.role, spec.model_path, port, proc.pid, time.time(),
                            str(log), spec.gpu_layers, keyed=True)
        write_atomic(_record_path(spec.id), json.dumps(asdict(rec)))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = proc.poll()
            if code is not None:
                _record_path(spec.id).unlink(missing_ok=True)
                text = log.read_text(errors="replace") if log.exists() else ""
                if code > 0 and "address already in use" in text.lower():
                    tried.append(port)
                    break
                raise _died(f"sidecar {spec.id!r}", code, log, spec.backend)
            info = served(port, spec.id, timeout=1.0)
            if info is not None:
                rec = replace(rec, device=str(info.get("device", "")),
                              backend=str(info.get("backend", "")))
                write_atomic(_record_path(spec.id), json.dumps(asdict(rec)))
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


# llama.cpp's server logs, for each request, how many prompt tokens it evaluated (the prefix it
# reused from its cache not among them): "prompt eval time = 75.47 ms / 120 tokens (…)".
_EVALUATED = re.compile(r"prompt eval time =\s+[\d.]+ ms /\s+(\d+) tokens")


def prompt_evaluations(sidecar_id: str) -> list[int]:
    """The prompt tokens a running sidecar evaluated for each request so far, in order, as its
    log says (empty when it is not running or has logged none)."""
    rec = read_record(sidecar_id)
    if rec is None:
        return []
    try:
        text = Path(rec.log).read_text(errors="replace")
    except OSError:
        return []
    return [int(n) for n in _EVALUATED.findall(text)]
