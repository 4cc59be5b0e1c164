"""The caller's side of the warm process (hydra_rag.warm): hand a quick command over, copy
back what it prints; start a warm process after a quick command ran without one. Only the
standard library is imported here, for the `hydra-rag` entry point (hydra_rag.__main__)."""

from __future__ import annotations

import json
import os
import socket
import sys

from hydra_rag.warm import COMMANDS, code_stamp, environment_key, private_dir, socket_dir, wire
from hydra_rag.warm import socket_path as _socket_path


def forward(argv: list[str]) -> tuple[int | None, str]:
    """Run the command in the warm process: its exit status, or None (and why, "" when there
    is no warm process) when it must run here."""
    path = _socket_path()
    if not private_dir(socket_dir(), create=False) or not path.exists():
        return None, ""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2.0)  # to connect and be accepted; a command may then take its time
        sock.connect(str(path))
        sock.sendall(json.dumps(_request(argv)).encode() + b"\n")
        first = wire.receive(sock)
        if first is None or first[0] != wire.ACCEPTED:
            reason = first[1].decode(errors="replace") if first else ""
            return None, reason
        sock.settimeout(None)
        return _copy(sock), ""
    except OSError:
        return None, ""  # gone, stale or busy past the timeout: run here
    finally:
        sock.close()


def _request(argv: list[str]) -> dict[str, object]:
    # The width rich would find here: COLUMNS (read there from `environ`), else the first
    # terminal among stdin, stdout and stderr.
    width = None
    for fd in () if os.environ.get("COLUMNS", "").isdigit() else (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
            break
        except OSError:
            continue
    return {
        "argv": argv,
        "cwd": os.getcwd(),
        "environ": dict(os.environ),
        "environment": environment_key(os.environ),
        "code": code_stamp(),
        "out_tty": os.isatty(1),
        "err_tty": os.isatty(2),
        "width": width,
        "encoding": getattr(sys.stdout, "encoding", None) or "utf-8",
    }


def _copy(sock: socket.socket) -> int:
    """Copy the command's output to ours until its exit status arrives."""
    while True:
        frame = wire.receive(sock)
        if frame is None:
            os.write(2, b"error: the warm hydra-rag process stopped during the command; "
                        b"run it again\n")
            return 1
        kind, data = frame
        if kind == wire.EXIT:
            return int(data)
        fd = 1 if kind == wire.OUT else 2
        try:
            _write_all(fd, data)
        except BrokenPipeError:
            # The reader went away (`| head -1`): end quietly with status 0, as ripgrep does.
            return 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _off() -> bool:
    """Whether HYDRA_RAG_WARM_MINUTES says never (read here without loading the settings)."""
    return os.environ.get("HYDRA_RAG_WARM_MINUTES", "").strip() in ("0", "0.0")


def wanted(argv: list[str]) -> bool:
    """Whether this command line is one a warm process runs (and may be started for)."""
    return bool(argv) and argv[0] in COMMANDS and "--debug" not in argv and not _off()


def starts(argv: list[str]) -> bool:
    """Whether this command line, not itself a quick one, starts a warm process when it
    succeeds: `index`, since searches follow it."""
    return bool(argv) and argv[0] == "index" and "--help" not in argv and not _off()


def start_quietly(environ: dict[str, str]) -> None:
    """Start a warm process for the next quick command, unless settings say not to."""
    try:
        from hydra_rag.config import load_settings
        from hydra_rag.warm.server import start

        minutes = load_settings().warm_minutes
        if minutes > 0:
            start(minutes, environ)
    except Exception:  # a warm process is a speed-up: never a reason for a command to fail
        pass
