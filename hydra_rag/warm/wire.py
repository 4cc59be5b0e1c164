"""The warm process's wire: one JSON request line from the caller, then frames back.

A frame is a kind byte, a 4-byte big-endian length and that many bytes: `a` accepted (empty),
`o` bytes for stdout, `e` bytes for stderr, `x` the exit status (ASCII digits), `r` refused
(the reason, UTF-8: the caller runs the command itself).
"""

from __future__ import annotations

import socket
import struct

ACCEPTED, OUT, ERR, EXIT, REFUSED = b"a", b"o", b"e", b"x", b"r"
_HEAD = struct.Struct(">cI")


def send(sock: socket.socket, kind: bytes, data: bytes = b"") -> None:
    sock.sendall(_HEAD.pack(kind, len(data)) + data)


def receive(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """The next frame, or None when the other end closed the connection."""
    head = _exactly(sock, _HEAD.size)
    if head is None:
        return None
    kind, size = _HEAD.unpack(head)
    data = _exactly(sock, size) if size else b""
    return None if data is None else (kind, data)


def _exactly(sock: socket.socket, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)
