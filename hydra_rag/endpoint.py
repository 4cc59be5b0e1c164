"""One client for the JSON routes of an OpenAI-compatible /v1 API (a sidecar's or a remote
one): the embedder and the reranker both talk through it."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from urllib.parse import urlsplit

from hydra_rag.errors import HydraError, SidecarCrash, SidecarError
from hydra_rag.sidecar import crash_of, log_tail, read_record


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

    def _crashed(self) -> None:
        """A sidecar that died by a signal is reported as the crash it was: starting it again
        would only crash again (or, if the crash comes later than its self-test, lose the
        log that says why)."""
        crash = crash_of(self.sidecar_id) if self.sidecar_id else None
        if crash is not None:
            raise crash

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
                self._crashed()
                if attempt == 1:
                    continue
                if attempt == 3 or self.restart is None:
                    raise self.error(self.explain(f"cannot reach {name}: {exc}")) from None
                reason = exc
            # The sidecar is gone: start it again (or find the one another process started).
            try:
                self.base_url = self.restart()
            except SidecarCrash:
                raise  # the new one crashed starting: that, not "cannot reach", is the news
            except HydraError as exc:
                raise self.error(f"cannot reach {name}: {reason}; starting it again failed: "
                                 f"{exc}") from None
            for cached in ("_conn", "_v1"):
                self.__dict__.pop(cached, None)
        if resp.status != 200:
            raise self.error(self.explain(
                f"{name} answered HTTP {resp.status}: {raw[:300].decode(errors='replace')}"))
        return raw
