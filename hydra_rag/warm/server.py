"""The warm process (see hydra_rag.warm): its socket, its loop and how it is started and
stopped. What it runs is given to `Server` by the command line (hydra_rag.cli.warm, started
as `python -m hydra_rag.cli.warm --minutes M`), which sits above this stage."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra_rag.paths import dirs, state_dir
from hydra_rag.warm import code_stamp, environment_key, private_dir, socket_dir, socket_path, wire

_RUN = threading.Lock()  # one command at a time: each sets the working folder and sys.stdout


def start(minutes: float, environ: dict[str, str] | None = None) -> bool:
    """Start a warm process in the background unless one answers already; whether one was
    started. It outlives this process and stops itself after `minutes` without a command."""
    path = socket_path()
    if _answers(path):
        return False
    log = state_dir() / "warm.log"
    with open(log, "ab") as err:
        subprocess.Popen(
            [sys.executable, "-P", "-m", "hydra_rag.cli.warm", "--minutes", str(minutes)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, cwd="/",
            start_new_session=True, close_fds=True, env=environ)
    return True


def stop() -> bool:
    """Stop this home's warm process; whether one was running."""
    path = socket_path()
    pid = _pid_of(path)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return False
    for _ in range(50):
        if not path.exists():
            break
        time.sleep(0.05)
    return True


def running() -> int | None:
    """The pid of this home's warm process, if one answers."""
    return _pid_of(socket_path())


def _answers(path: Path) -> bool:
    return _pid_of(path) is not None


def _pid_of(path: Path) -> int | None:
    if not private_dir(socket_dir(), create=False) or not path.exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(1.0)
        sock.connect(str(path))
        pid, uid = _peer(sock)
        return pid if uid == os.getuid() else None
    except OSError:
        return None
    finally:
        sock.close()


def _peer(sock: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _ = struct.unpack("3i", creds)
    return pid, uid


class _Stream(io.TextIOBase):
    """A command's stdout or stderr: text encoded as the caller's terminal or pipe expects and
    sent as frames; a caller that went away is a closed pipe."""

    def __init__(self, sock: socket.socket, kind: bytes, tty: bool, encoding: str) -> None:
        self._sock, self._kind, self._tty, self._encoding = sock, kind, tty, encoding

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding

    def isatty(self) -> bool:
        return self._tty

    def writable(self) -> bool:
        return True

    def write(self, s: str | bytes) -> int:  # click writes bytes where it finds no buffer
        if s:
            data = s if isinstance(s, bytes) else s.encode(self._encoding, errors="replace")
            try:
                wire.send(self._sock, self._kind, data)
            except OSError:
                raise BrokenPipeError("the caller went away") from None
        return len(s)

    def fileno(self) -> int:
        raise io.UnsupportedOperation("a warm command's output has no file descriptor")


# Runs one command line: (argv, stdout, stderr, terminal width, the caller's environment) →
# its exit status.
Command = Callable[[list[str], "_Stream", "_Stream", "int | None", dict[str, str]], int]


class Server:
    def __init__(self, minutes: float, command: Command, prepare: Callable[[], None]) -> None:
        self.command, self.prepare = command, prepare
        self.idle = minutes * 60
        self.last = time.monotonic()
        self.environment = environment_key(os.environ)
        self.code = code_stamp()
        self.stopping = threading.Event()
        self.busy = 0

    def serve(self) -> None:
        from hydra_rag.locks import file_lock

        path = socket_path()
        if not private_dir(socket_dir(), create=True):
            print(f"warm: {socket_dir()} is not a private folder of this user's", file=sys.stderr)
            return
        with file_lock(dirs().state / "warm.lock", wait=5.0) as held:
            if not held or _answers(path):
                return  # another warm process is starting or answering
            self.prepare()
            path.unlink(missing_ok=True)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            os.chmod(path, 0o600)
            listener.listen(16)
        ino = os.stat(path).st_ino
        signal.signal(signal.SIGTERM, lambda *_: self.stopping.set())
        listener.settimeout(1.0)
        try:
            while not self.stopping.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    if not self.busy and time.monotonic() - self.last > self.idle:
                        break
                    if not path.exists() or os.stat(path).st_ino != ino:
                        break  # our socket was removed or replaced
                    continue
                self.last = time.monotonic()
                threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        finally:
            listener.close()
            try:
                if os.stat(path).st_ino == ino:
                    path.unlink()
            except OSError:
                pass

    def _handle(self, conn: socket.socket) -> None:
        try:
            if _peer(conn)[1] != os.getuid():
                return  # another account: not a word
            conn.settimeout(5.0)
            request = json.loads(_line(conn))
            reason = self._refusal(request)
            if reason:
                wire.send(conn, wire.REFUSED, reason.encode())
                return
            wire.send(conn, wire.ACCEPTED)
            conn.settimeout(None)
            self.busy += 1
            try:
                with _RUN:
                    rc = self._run(request, conn)
            finally:
                self.busy -= 1
                self.last = time.monotonic()
            wire.send(conn, wire.EXIT, str(rc).encode())
        except (OSError, ValueError, KeyError, TypeError):
            pass  # the caller went away or spoke nonsense: it runs the command itself
        finally:
            conn.close()

    def _run(self, request: dict[str, Any], conn: socket.socket) -> int:
        """One command as a fresh process would run it, in the caller's working folder,
        printing into the caller's streams."""
        encoding = str(request.get("encoding") or "utf-8")
        out = _Stream(conn, wire.OUT, bool(request.get("out_tty")), encoding)
        err = _Stream(conn, wire.ERR, bool(request.get("err_tty")), encoding)
        old = os.getcwd(), sys.stdout, sys.stderr
        os.chdir(request["cwd"])
        sys.stdout, sys.stderr = out, err
        try:
            width = request.get("width")
            return self.command([str(a) for a in request["argv"]], out, err,
                                int(width) if width else None,
                                dict(request.get("environ") or {}))
        except Exception:  # a bug: shown to the caller as a fresh process would show it
            traceback.print_exc(file=err)
            return 1
        finally:
            os.chdir(old[0])
            sys.stdout, sys.stderr = old[1], old[2]

    def _refusal(self, request: dict[str, Any]) -> str:
        if request.get("code") != self.code:
            self.stopping.set()  # hydra-rag changed: the next command starts a new one
            return "code"
        if request.get("environment") != self.environment:
            return "environment"
        if not os.path.isdir(str(request.get("cwd"))):
            return "cwd"
        return ""


def _line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            raise ValueError("no request")
        data += chunk
        if len(data) > 4 << 20:
            raise ValueError("request too long")
    return data
