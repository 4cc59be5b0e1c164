"""The sidecar's gate: an ASGI middleware around the whole app (llama-cpp-python's routes, our
/v1/models and the rerank app alike) that lets through only this user's hydra-rag.

- Host must name loopback (127.0.0.1, localhost, [::1], with or without the port): a web page
  that rebinds its own name to 127.0.0.1 sends its name as Host, and is refused with 421.
- No browser: a request with an Origin header (browsers send one on every cross-origin
  request; hydra-rag never does) or an OPTIONS preflight is refused with 403, with no
  Access-Control-* header to let a page read the answer.
- The key: `Authorization: Bearer <sidecar key>` (sidecar_key), else 401, so other accounts
  on the machine cannot use the owner's models.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def strip_cors(app: Any) -> None:
    """Remove the CORSMiddleware llama-cpp-python adds (`Access-Control-Allow-Origin: *` lets
    any page in the owner's browser read the answers). Starlette builds its middleware stack
    on the first request, so this works on an app that has not served yet."""
    app.user_middleware = [m for m in app.user_middleware
                           if getattr(m.cls, "__name__", "") != "CORSMiddleware"]


class Guard:
    """Refuses every request but a key-bearing, browserless one to a loopback Host."""

    def __init__(self, app: App, key: str, port: int) -> None:
        self.app = app
        self.key = key.encode()
        self.hosts = {h for name in LOOPBACK for h in (name, f"{name}:{port}")}

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why this request is refused (status, reason), or None to let it through."""
        headers: dict[str, list[bytes]] = {}
        for name, value in scope.get("headers", ()):
            headers.setdefault(name.decode("latin-1").lower(), []).append(value)
        host = b"".join(headers.get("host", [])).decode("latin-1").lower()
        if host not in self.hosts:
            return 421, "a sidecar answers only to Host 127.0.0.1 or localhost"
        if "origin" in headers or scope.get("method") == "OPTIONS":
            return 403, "a sidecar answers no web page"
        auth = headers.get("authorization", [])
        scheme, _, token = (auth[0].decode("latin-1") if len(auth) == 1 else "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(),
                                                                 self.key):
            return 401, "a sidecar answers only its owner's hydra-rag (no or another key)"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan: no request to check
            await self.app(scope, receive, send)
            return
        refused = self.refusal(scope)
        if refused is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":  # closing before accepting answers HTTP 403
            await send({"type": "websocket.close", "code": 1008})
            return
        status, reason = refused
        body = json.dumps({"detail": reason}).encode()
        headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
