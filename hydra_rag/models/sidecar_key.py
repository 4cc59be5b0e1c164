"""The sidecar key: a secret that only this user's hydra-rag knows, which every sidecar demands
(`Authorization: Bearer <key>`, checked by sidecar_guard).

A sidecar listens on 127.0.0.1, which every account on the machine can reach: without the key
any local user could use the owner's embedder and chat model. The key lives in the state
folder as `sidecar.key`, mode 600; a sidecar is told the file's path (`--key-file`), never the
key, since a command line is readable by every user in /proc/PID/cmdline.
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from hydra_rag.errors import SidecarError
from hydra_rag.paths import dirs, state_dir

FILE = "sidecar.key"
# Local addresses (as /proc/net/tcp{,6} write them) whose listeners get connections to
# 127.0.0.1: itself, 0.0.0.0, :: and ::ffff:127.0.0.1.
_REACHED = {"0100007F", "00000000", "0" * 32, "0000000000000000FFFF00000100007F"}


def key_path() -> Path:
    """Where this user's sidecar key is kept."""
    return dirs().state / FILE


def read_key(path: Path) -> str:
    """The key in `path`, refused unless the file is this user's own and no one else's to read
    (a key others could read no longer keeps the sidecars private)."""
    fix = f"run `rm {path}` and `hydra-rag sidecars stop --all` (a new key is made on the next run)"
    try:
        # O_NOFOLLOW: a link put in its place cannot make us read (and send) another file.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise SidecarError(f"cannot read the sidecar key {path} ({exc.strerror}) — {fix}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SidecarError(f"the sidecar key {path} is not a plain file — {fix}")
        if st.st_uid != os.getuid():
            raise SidecarError(f"the sidecar key {path} belongs to user id {st.st_uid}, not to "
                               f"you — {fix}")
        if st.st_mode & 0o077:
            raise SidecarError(f"the sidecar key {path} is readable by others (mode "
                               f"{stat.S_IMODE(st.st_mode):o}, wanted 600) — {fix}")
        key = os.read(fd, 4096).decode("ascii", errors="replace").strip()
    finally:
        os.close(fd)
    if len(key) < 32 or not (key.isascii() and key.isprintable()) or " " in key:
        raise SidecarError(f"the sidecar key {path} does not hold a usable key — {fix}")
    return key


def ensure_key() -> Path:
    """The key file, made now if there is none (mode 600 from the start: written whole under
    a temporary name, then linked in place, so no process ever reads half a key)."""
    path = key_path()
    try:
        read_key(path)
        return path
    except FileNotFoundError:
        pass
    state_dir()  # made private here too: a library caller may never have run the CLI
    tmp = path.with_name(f".{FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (secrets.token_urlsafe(32) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails if another process made one first: theirs is the key
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    read_key(path)
    return path


def key() -> str:
    """This user's sidecar key (made if there is none)."""
    return read_key(ensure_key())


def headers() -> dict[str, str]:
    """The header every request to a sidecar carries."""
    return {"Authorization": f"Bearer {key()}"}


def listener_is_mine(port: int) -> bool:
    """Is what listens on this loopback port this user's? The key goes nowhere else: a sidecar
    takes seconds to load before it listens, and one that stopped leaves its port free, and
    another account could listen there in time to be sent the key. True where the kernel's
    socket tables cannot be read (not Linux): nothing to check against there."""
    owners = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if len(f) < 8 or f[3] != "0A":  # 0A: listening
                continue
            addr, _, hex_port = f[1].partition(":")
            if int(hex_port, 16) == port and addr in _REACHED:
                owners.add(int(f[7]))
    if not Path("/proc/net/tcp").exists():
        return True
    return owners == {os.getuid()}


@dataclass(frozen=True)
class SidecarKey:
    """How a client authenticates to one of our sidecars, as KeyEnv does to a remote endpoint:
    the key is read when a request is about to be sent and goes only into its header."""

    owner: str  # as messages name it: "sidecar 'minilm-l6'"

    def headers(self) -> dict[str, str]:
        """The Authorization header with this user's sidecar key."""
        return headers()

    def reach(self, url: str) -> None:
        """Before a request to `url` carries the key: refuse, as a connection that failed (so
        that the client starts its sidecar again), when another user listens on its port."""
        port = urlsplit(url).port
        if port is not None and not listener_is_mine(port):
            raise ConnectionRefusedError(f"port {port} is not this user's sidecar's any more")

    def refused(self, url: str, status: int) -> SidecarError:
        """The error for a sidecar that refused our key: it was started with another one."""
        return SidecarError(f"{self.owner} at {url} refused this user's sidecar key (HTTP "
                            f"{status}) — run `hydra-rag sidecars stop --all` and run again")

    def scrub(self, text: str) -> str:
        """`text` without the key, should a sidecar echo it."""
        try:
            return text.replace(read_key(key_path()), "<sidecar key>")
        except (OSError, SidecarError):
            return text
