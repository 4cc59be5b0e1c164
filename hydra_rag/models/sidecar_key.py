"""The sidecar key: a secret that only this user's hydra-rag knows, which every sidecar demands
(`Authorization: Bearer <key>`, checked by sidecar_guard).

A sidecar listens on 127.0.0.1, which every account on the machine can reach: without the key
any local user could use the owner's embedder and chat model. The key lives in the state
folder as `sidecar.key`, mode 600; a sidecar is told the file's path (`--key-file`), never the
key, since a command line is readable by every user in /proc/PID/cmdline.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from hydra_rag.errors import SidecarError
from hydra_rag.paths import dirs, kept_secret, read_secret

FILE = "sidecar.key"
# Local addresses (as /proc/net/tcp{,6} write them) whose listeners get connections to
# 127.0.0.1: itself, 0.0.0.0, :: and ::ffff:127.0.0.1.
_REACHED = {"0100007F", "00000000", "0" * 32, "0000000000000000FFFF00000100007F"}


def key_path() -> Path:
    """Where this user's sidecar key is kept."""
    return dirs().state / FILE


def _fix(path: Path) -> str:
    return f"run `rm {path}` and `hydra-rag sidecars stop --all` (a new key is made on the next run)"


def read_key(path: Path) -> str:
    """The key in `path`, refused unless the file is this user's own and no one else's to read
    (a key others could read no longer keeps the sidecars private)."""
    return read_secret(path, "the sidecar key", _fix(path), SidecarError)


def ensure_key() -> Path:
    """The key file, made now if there is none (mode 600 from the start)."""
    key()
    return key_path()


def key() -> str:
    """This user's sidecar key (made if there is none)."""
    path = key_path()
    return kept_secret(path, "the sidecar key", _fix(path), SidecarError)


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
