"""`hydra-rag serve`: one Starlette app on uvicorn — MCP over streamable HTTP at /mcp, the
OpenAI-compatible /v1, /api for the web page and scripts, and the web chat at /.

Safe by default (serve/auth.py): loopback unless told otherwise, and a token on every data
route (the stored one unless another is given; turned off on loopback only); every route
checks Host and Origin (no DNS rebinding from a web page); request bodies are bounded;
listings show only what belongs to the served folders; chat turns wait their turn per model,
in arrival order; a client that disconnects stops its generation. Each request is logged in
one line (RequestLog) through the caller's `log`: never a header, a query string or a body,
which may carry the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Send
from starlette.types import Scope as AsgiScope

from hydra_rag.errors import HydraError, UsageError, fault, unexpected
from hydra_rag.serve import openai
from hydra_rag.serve.auth import Guard, allowed_hosts, is_loopback, login
from hydra_rag.serve.scope import Scope


def _retrieved(job: asyncio.Future[Any]) -> None:
    """Mark a turn's outcome as seen: a turn stopped because its client went away ends in
    openai.Cancelled, which nobody may await once the response is gone; asyncio would log it
    as a "Task exception was never retrieved", with a traceback."""
    if not job.cancelled():
        job.exception()


def _error(exc: Exception) -> JSONResponse:
    status = 400 if isinstance(exc, UsageError) else 422 if isinstance(exc, HydraError) else 500
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse({"error": {"message": str(exc), "type": kind}}, status_code=status)


def _failure(exc: Exception, path: str, log: Callable[[str], None] | None,
             debug: bool) -> JSONResponse:
    """What the machine did (a full disk, a removed folder: 503, it may pass) or an unforeseen
    error (500), in one line to the client and one in the log; the traceback only with
    `debug` (`hydra-rag --debug serve`)."""
    found = fault(exc)
    line = f"{found[0]}; {found[1]}" if found else unexpected(exc)
    if log is not None:
        log(f"error: {path}: {line}")
    if debug:
        import traceback

        traceback.print_exception(exc)
    return JSONResponse({"error": {"message": line, "type": "server_error"}},
                        status_code=503 if found else 500)


class RequestLog:
    """One line per HTTP request once it is answered: the time, method, path, status and how
    long it took (`12:04:31 GET /api/search 200 35 ms`) — refusals included, so that a user
    debugging a client sees a wrong token as a 401. Only the path: a query string (`/?token=`
    logs a browser in), a header (Authorization) or a body may carry the token."""

    def __init__(self, app: ASGIApp, log: Callable[[str], None]) -> None:
        self.app, self.log = app, log

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.monotonic()
        status = 500  # what the server answers when the app fails before it answers

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.log(request_line(scope["method"], scope["path"], status,
                                  time.monotonic() - start))


def request_line(method: str, path: str, status: int, seconds: float) -> str:
    """A request as the log shows it; what a path holds that a terminal would act on (control
    characters, escapes) is shown escaped."""
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in path)
    return f"{time.strftime('%H:%M:%S')} {method} {shown} {status} {seconds * 1000:.0f} ms"


async def _json(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except ValueError as exc:
        raise UsageError(f"the body is not JSON: {exc}") from None


def build(scope: Scope, host: str = "127.0.0.1", port: int = 8765,
          token: str | None = None, log: Callable[[str], None] | None = None,
          debug: bool = False) -> Starlette:
    """The whole app over `scope`; with `log`, a line for each request (RequestLog) and for
    each failure; `debug`: a failure's traceback on stderr too."""
    from mcp.server.transport_security import TransportSecuritySettings

    from hydra_rag.serve.mcp_tools import build as build_mcp

    hosts = allowed_hosts(host, port)
    mcp_server = build_mcp(scope)
    mcp_app = mcp_server.streamable_http_app(
        streamable_http_path="/mcp", host=host,
        # Guard checks Host and Origin first; on a wildcard address it alone can.
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=hosts is not None,
            allowed_hosts=sorted(hosts or ()),
            allowed_origins=sorted(f"http://{h}" for h in hosts or ())))
    turns: dict[str, asyncio.Lock] = {}  # model → one turn at a time, in arrival order

    def guarded(handler: Any, params: tuple[str, ...] | None = None) -> Any:
        """`handler` with errors as JSON; with `params`, a query parameter it does not take is
        a 400 that lists those it does, rather than ignored (`?start=` where `line_start=`
        was meant read the whole file)."""
        async def run(request: Request) -> Response:
            try:
                unknown = sorted(set(request.query_params) - set(params or ()))
                if params is not None and unknown:
                    raise UsageError(f"{request.url.path} takes no parameter {unknown[0]!r}; "
                                     f"it takes {', '.join(params) or 'none'}")
                result: Response = await handler(request)
                return result
            except (HydraError, ValueError) as exc:
                return _error(exc)
            except Exception as exc:
                return _failure(exc, request.url.path, log, debug)
        return run

    async def search(request: Request) -> Response:
        q = request.query_params
        try:
            k = int(q.get("k", "10"))
        except ValueError:
            raise UsageError("k must be a number") from None
        # `query` and `paths` as the MCP tool names them; `q` and `path` as the page sends them.
        if "query" in q and "q" in q or "paths" in q and "path" in q:
            raise UsageError("give `query` or `q`, `paths` or `path`: one name of each")
        doc = await asyncio.to_thread(scope.search, q.get("query", q.get("q", "")), k,
                                      q.getlist("paths") or q.getlist("path") or None, q.get("tag"),
                                      q.get("mode", "hybrid"), q.getlist("glob") or None,
                                      q.getlist("lang") or None, q.get("group_by", "chunk"))
        return JSONResponse(doc)

    async def get(request: Request) -> Response:
        q = request.query_params

        def number(name: str) -> int | None:
            raw = q.get(name)
            if raw is None or raw == "":
                return None
            if not raw.isdigit():
                raise UsageError(f"{name} must be a number")
            return int(raw)

        # line_start/line_end, as the MCP tool and every result's JSON name them; start/end
        # are what this took before, still read.
        start = number("line_start") if "line_start" in q else number("start")
        end = number("line_end") if "line_end" in q else number("end")
        doc = await asyncio.to_thread(scope.get, q.get("path", ""), start, end, number("page"))
        return JSONResponse(doc)

    async def definition(request: Request) -> Response:
        q = request.query_params
        return JSONResponse(await asyncio.to_thread(
            scope.definition, q.get("name", ""), q.getlist("path") or None, q.get("tag")))

    async def references(request: Request) -> Response:
        q = request.query_params
        return JSONResponse(await asyncio.to_thread(
            scope.references, q.get("name", ""), q.getlist("path") or None, q.get("tag")))

    async def outline(request: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(scope.outline,
                                                    request.query_params.get("path", "")))

    async def stores(request: Request) -> Response:
        return JSONResponse({"stores": await asyncio.to_thread(scope.stores)})

    async def status(request: Request) -> Response:
        q = request.query_params
        return JSONResponse({"folders": await asyncio.to_thread(
            scope.status, q.getlist("path") or None, q.get("tag") or None)})

    async def models(request: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(openai.models, scope))

    async def completions(request: Request) -> Response:
        req = openai.parse(await _json(request))
        lock = turns.setdefault(req["model"] or "", asyncio.Lock())
        if not req["stream"]:
            async with lock:
                cancelled = threading.Event()
                job = asyncio.ensure_future(asyncio.to_thread(
                    openai.answer, scope, req, lambda _t: None, cancelled))
                job.add_done_callback(_retrieved)
                # Not streamed, the answer still stops when its client goes away.
                while not job.done():
                    await asyncio.wait({job}, timeout=0.5)
                    if not job.done() and await request.is_disconnected():
                        cancelled.set()
                try:
                    doc = await job
                except openai.Cancelled:
                    return Response(status_code=499)  # nobody reads it
            return JSONResponse(openai.completion(doc))
        return StreamingResponse(_stream(req, lock), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def _stream(req: dict[str, Any], lock: asyncio.Lock) -> AsyncIterator[str]:
        from hydra_rag.api import model_or_default

        cid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        model = model_or_default(req["model"])
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[str | None] = asyncio.Queue()
        cancelled = threading.Event()
        async with lock:
            yield openai.chunk(cid, model, {"role": "assistant", "content": ""})
            def push(piece: str) -> None:
                loop.call_soon_threadsafe(pieces.put_nowait, piece)

            job = asyncio.ensure_future(asyncio.to_thread(openai.answer, scope, req, push,
                                                          cancelled))
            job.add_done_callback(_retrieved)
            job.add_done_callback(lambda _j: loop.call_soon_threadsafe(pieces.put_nowait, None))
            try:
                while (piece := await pieces.get()) is not None:
                    yield openai.chunk(cid, model, {"content": piece})
                doc = await job
            except (HydraError, openai.Cancelled) as exc:
                yield f"data: {json.dumps({'error': {'message': str(exc)}})}\n\n"
                return
            finally:  # the client went away (or the turn ended): stop generating
                cancelled.set()
                if not job.done():
                    with contextlib.suppress(BaseException):
                        await asyncio.wait_for(asyncio.shield(job), timeout=30)
            for event in openai.last_chunks(cid, {**doc, "model": doc["model"] or model}):
                yield event

    async def sessions(request: Request) -> Response:
        name = request.query_params.get("name")
        if name:
            doc = await asyncio.to_thread(scope.session, name)
            if doc is None:  # none, or one of folders this server does not serve: the same
                return JSONResponse({"error": {"message": f"no session {name!r} here",
                                               "type": "not_found"}}, status_code=404)
            return JSONResponse(doc)
        return JSONResponse({"sessions": await asyncio.to_thread(scope.sessions)})

    async def page(request: Request) -> Response:
        redirect = login(request, token, port)
        if redirect is not None:
            return redirect
        html = resources.files("hydra_rag.serve").joinpath("web/index.html").read_text("utf-8")
        return HTMLResponse(html, headers={"Content-Security-Policy": (
            "default-src 'self'; script-src 'self' 'unsafe-inline'; "
            "style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'")})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp_app.router.lifespan_context(mcp_app):
            yield
        scope.close()

    routes = [
        Route("/", page),
        Route("/favicon.ico", lambda _r: Response(status_code=204)),
        Route("/api/search", guarded(search, ("query", "q", "k", "paths", "path", "tag", "mode",
                                               "glob", "lang", "group_by"))),
        Route("/api/get", guarded(get, ("path", "line_start", "line_end", "page", "start", "end"))),
        Route("/api/definition", guarded(definition, ("name", "path", "tag"))),
        Route("/api/references", guarded(references, ("name", "path", "tag"))),
        Route("/api/outline", guarded(outline, ("path",))),
        Route("/api/stores", guarded(stores, ())),
        Route("/api/status", guarded(status, ("path", "tag"))),
        Route("/api/sessions", guarded(sessions, ("name",))),
        Route("/v1/models", guarded(models)),
        Route("/v1/chat/completions", guarded(completions), methods=["POST"]),
        Mount("", app=mcp_app),  # last: its one route is /mcp (no redirect to /mcp/)
    ]
    logged = [Middleware(RequestLog, log=log)] if log is not None else []
    return Starlette(routes=routes, lifespan=lifespan, middleware=[
        *logged, Middleware(Guard, hosts=hosts, token=token, port=port)])


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port`, or an error in one line that says what to do. Bound here,
    before anything is printed, rather than by uvicorn, which would log its own `ERROR:
    [Errno 98]` after the "serving" banner and exit 3."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # As uvicorn binds: a port left in TIME_WAIT by a server just stopped is free to take.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise HydraError(f"port {port} on {host} is in use — give another --port, or stop "
                             "the process that holds it") from None
        if exc.errno == errno.EACCES:
            raise HydraError(f"port {port} on {host} needs privileges — give a --port above "
                             "1023") from None
        raise HydraError(f"cannot listen on {host} port {port}: {exc.strerror or exc} — check "
                         "--host") from None
    sock.set_inheritable(True)
    return sock


def run(scope: Scope, host: str, port: int, token: str | None,
        sock: socket.socket | None = None, log: Callable[[str], None] | None = None,
        debug: bool = False) -> None:
    """Serve until interrupted, on `sock` if given (from `listen(host, port)`); `token` None:
    none asked for (loopback only, see auth.choose_token); `log` takes a line per request."""
    import uvicorn

    if not is_loopback(host) and not token:
        raise UsageError(f"--host {host} opens the server to the network: give --token (a "
                         "secret clients send as Authorization: Bearer TOKEN)")
    config = uvicorn.Config(build(scope, host, port, token, log, debug), host=host, port=port,
                            log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock or listen(host, port)])
