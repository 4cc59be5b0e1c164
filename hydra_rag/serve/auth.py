"""Who may talk to `hydra-rag serve`: the token (kept in the state folder, or given), the Host
and Origin checks, the browser's login by URL and cookie, and the body limit — all before any
route.

A token by default, as Jupyter does: 127.0.0.1 is shared by every account of the machine, so
without one any other local user could search and read the owner's files through the server.
"""

from __future__ import annotations

import hmac
import ipaddress
from pathlib import Path
from urllib.parse import urlencode

from starlette.requests import Request, cookie_parser
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Send
from starlette.types import Scope as AsgiScope

from hydra_rag.errors import HydraError, UsageError
from hydra_rag.paths import dirs, kept_secret

MAX_BODY = 1 << 20  # bytes of a request body
LOOPBACK = ("127.0.0.1", "localhost", "::1")
TOKEN_FILE = "serve.token"
NEEDS_TOKEN = "missing or wrong token: send Authorization: Bearer <token>"


# -- the token -------------------------------------------------------------------------------


def token_path() -> Path:
    return dirs().state / TOKEN_FILE


def stored_token() -> str:
    """The token kept in the state folder, made on first use; the same on every run, so that
    clients configured once keep working. Refused if other accounts could have read it."""
    path = token_path()
    fix = f"remove it (`rm {path}`) and start serve again for a new one"
    try:
        return kept_secret(path, "the token file", fix, shortest=16)
    except OSError as exc:
        raise HydraError(f"cannot write the token file {path} ({exc.strerror or exc}) — give "
                         "--token, or make its folder writable") from None


def choose_token(given: str | None, no_token: bool, host: str) -> str | None:
    """The token a server on `host` requires: the one given, none if turned off (loopback
    only), else the stored one."""
    if no_token and given:
        raise UsageError("give --token or --no-token, not both")
    if no_token:
        if not is_loopback(host):
            raise UsageError(f"--no-token is for loopback only: --host {host} opens the server "
                             "to the network — drop --no-token")
        return None
    return given or stored_token()


# -- the host --------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(host: str, port: int) -> set[str] | None:
    """Host header values this server answers to: its own names, with and without the port.
    None on a wildcard address (0.0.0.0, ::): clients name the machine as they reached it,
    and the token, which a rebinding page does not have, keeps strangers out."""
    try:
        if ipaddress.ip_address(host.strip("[]")).is_unspecified:
            return None
    except ValueError:
        pass
    names = {host, *LOOPBACK} if is_loopback(host) else {host}
    out = set()
    for name in names:
        shown = f"[{name}]" if ":" in name else name
        out |= {shown, f"{shown}:{port}"}
    return out


def login_url(host: str, port: int, token: str | None) -> str:
    """The address to open in a browser: with `?token=`, it logs the browser in."""
    try:
        if ipaddress.ip_address(host.strip("[]")).is_unspecified:
            host = "127.0.0.1"  # the browser of this machine
    except ValueError:
        pass
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?{urlencode({'token': token})}" if token else "")


# -- the browser's login ---------------------------------------------------------------------


def cookie_name(port: int) -> str:
    # Cookies are not kept apart by port: two servers on one machine need two names.
    return f"hydra-rag-token-{port}"


def login(request: Request, token: str | None, port: int) -> Response | None:
    """The page asked for with `?token=`: a redirect to the same page without it, setting
    the cookie that carries the token from then on (the right token only). None otherwise."""
    given = request.query_params.get("token")
    if given is None:
        return None
    rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
    to = request.url.path + (f"?{urlencode(rest)}" if rest else "")
    # 303: the next request is a plain GET, and the token leaves the address bar and history.
    out = RedirectResponse(to, status_code=303, headers={"Cache-Control": "no-store"})
    if token is not None and _same(given, token):
        out.set_cookie(cookie_name(port), token, httponly=True, samesite="strict", path="/")
    return out


# -- the guard -------------------------------------------------------------------------------


class Guard:
    """Host, Origin and token checks and a body limit, before any route (MCP included)."""

    def __init__(self, app: ASGIApp, hosts: set[str] | None, token: str | None,
                 port: int) -> None:
        self.app, self.hosts, self.token, self.cookie = app, hosts, token, cookie_name(port)
        # A page's Origin names its port unless it is 80: `http://localhost` is a page on
        # port 80, another program's, not this server's page.
        self.origins = None if hosts is None else {
            h for h in hosts if port == 80 or h.endswith(f":{port}")}

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        problem = self._problem(scope, headers)
        if problem:
            status, message = problem
            await JSONResponse({"error": {"message": message, "type": "forbidden"}},
                               status_code=status)(scope, receive, send)
            return
        if int(headers.get("content-length") or 0) > MAX_BODY:
            await _too_large(scope, receive, send)
            return
        # Read whole before any route (MCP's too), so that none meets an oversize body midway.
        body, after = await _read_body(receive)
        if body is None:
            await _too_large(scope, receive, send)
            return
        await self.app(scope, _replay(body, after, receive), send)

    def _problem(self, scope: AsgiScope, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        if self.hosts is not None and host not in self.hosts:
            return 421, f"unknown Host {host!r}: this server answers to {sorted(self.hosts)[0]}"
        origin = headers.get("origin")
        # "null" is a sandboxed frame or a data: page of any site: foreign like the site.
        if origin:
            netloc = origin.split("://", 1)[-1].rstrip("/")
            if netloc != host and (self.origins is None or netloc not in self.origins):
                return 403, f"requests from the web page at {origin} are refused"
        if (self.token is not None and not _public(scope["path"])
                and not (self._bearer(headers) or self._cookie(headers))):
            return 401, NEEDS_TOKEN
        return None

    def _bearer(self, headers: dict[str, str]) -> bool:
        # The scheme's name is case-insensitive (RFC 9110: `bearer` is `Bearer`).
        scheme, _, given = headers.get("authorization", "").strip().partition(" ")
        return scheme.lower() == "bearer" and _same(given.strip(), self.token or "")

    def _cookie(self, headers: dict[str, str]) -> bool:
        # Only the page's own requests: a page on another port of this machine is the same
        # *site*, so SameSite lets the cookie go with its requests; the browser's
        # Sec-Fetch-Site tells them apart (absent from clients that are not browsers).
        if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return False
        # Starlette's parser, not http.cookies: SimpleCookie drops every cookie of a header
        # when any one (another local app's) is not to its liking.
        given = cookie_parser(headers.get("cookie", "")).get(self.cookie)
        return given is not None and _same(given, self.token or "")


def _same(given: str, token: str) -> bool:
    """Constant-time, so that timing does not tell how much of a guess was right."""
    return hmac.compare_digest(given.encode(), token.encode())


def _public(path: str) -> bool:
    """The page itself (not its data) loads without the token; it logs in or asks for it."""
    return path in ("/", "/favicon.ico")


async def _read_body(receive: Receive) -> tuple[bytes | None, list[Message]]:
    """The request's body (None past MAX_BODY, sent without Content-Length) and any message
    that came after it (a disconnect)."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts), [message]
        parts.append(message.get("body", b""))
        size += len(parts[-1])
        if size > MAX_BODY:
            return None, []
        if not message.get("more_body", False):
            return b"".join(parts), []


def _replay(body: bytes, after: list[Message], receive: Receive) -> Receive:
    """`receive` for the app: the body read, then what follows it."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}, *after]

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


async def _too_large(scope: AsgiScope, receive: Receive, send: Send) -> None:
    await JSONResponse({"error": {"message": f"the body is over {MAX_BODY} bytes",
                                  "type": "too_large"}}, status_code=413)(scope, receive, send)
