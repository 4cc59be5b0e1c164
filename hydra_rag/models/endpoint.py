"""One client for the JSON routes of an OpenAI-compatible /v1 API (a sidecar's or a remote
one): the embedder and the reranker both talk through it. A remote endpoint's bearer token
comes from the environment variable its entry names (`KeyEnv`); a sidecar's is this user's
sidecar key (`SidecarKey`), which goes to sidecars only."""

from __future__ import annotations

import http.client
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from hydra_rag.errors import ConfigError, HydraError, SidecarCrash, SidecarError
from hydra_rag.models.sidecar import crash_of, log_tail, read_record
from hydra_rag.models.sidecar_key import SidecarKey

if TYPE_CHECKING:
    from hydra_rag.catalog import ChatModel, Embedder, Reranker

REFUSED = (401, 403)


@dataclass(frozen=True)
class KeyEnv:
    """How a remote endpoint (`url:`) is authenticated: the bearer token in the environment
    variable `var` ("" when none is named). The key is read when a request is about to be sent
    and goes nowhere but that request's Authorization header: not into this record, a message,
    a log or a file, so whatever prints an entry or an error can show only the variable's
    name."""

    owner: str  # whose endpoint it is, as messages name it: "embedder 'team'"
    var: str = ""
    setting: str = "its api_key_env"  # where the user names the variable

    @classmethod
    def of(cls, what: str, entry: Embedder | ChatModel | Reranker) -> KeyEnv:
        """The key of a catalog entry's `url:` (`what`: embedder, chat model, reranker)."""
        return cls(f"{what} {entry.id!r}", entry.api_key_env or "")

    def headers(self) -> dict[str, str]:
        """The Authorization header, or a ConfigError if the named variable holds no key."""
        if not self.var:
            return {}
        key = os.environ.get(self.var, "").strip()
        if not key:
            raise ConfigError(f"{self.owner}: {self.setting} names ${self.var}, which is not set "
                              f"— export {self.var}=<the endpoint's key> and run again")
        if not (key.isascii() and key.isprintable()):
            raise ConfigError(f"{self.owner}: ${self.var} does not hold a usable key (it has a "
                              "line break, a control character or a non-ASCII one)")
        return {"Authorization": f"Bearer {key}"}

    def refused(self, url: str, status: int) -> ConfigError:
        """The error for a 401 or 403 from the endpoint at `url`: which key it refused, or that
        it wants one."""
        if self.var:
            return ConfigError(f"{self.owner} at {url}: the endpoint refused the key in "
                               f"${self.var} (HTTP {status}) — check its value")
        return ConfigError(f"{self.owner} at {url}: the endpoint needs a key (HTTP {status}) — "
                           f"put it in an environment variable and set {self.setting} to that "
                           "variable's name")

    def scrub(self, text: str) -> str:
        """`text` (an endpoint's answer, quoted in an error) with the key replaced by its
        variable's name, should the endpoint echo it."""
        key = os.environ.get(self.var, "").strip() if self.var else ""
        return text.replace(key, f"${self.var}") if key else text


Auth = KeyEnv | SidecarKey  # a remote endpoint's key, or our sidecars' key


@dataclass
class JsonEndpoint:
    """JSON POSTs to the /v1 API at `base_url` (a sidecar's, or a remote one) over one kept-alive
    connection, retried once when the connection was dropped. If it still cannot be reached,
    `restart` (when given) brings the sidecar back and returns its URL, and the request is sent
    once more there: an index run survives a sidecar that crashed or was stopped under it.
    Errors are raised as `error`, name the endpoint as `name` (default: the URL) and end with
    the sidecar's log tail. Each request carries its `auth` (a remote endpoint's key, or our
    sidecars'): a missing key is an error before anything is sent, a refused one (401, 403) an
    error of its own."""

    base_url: str
    sidecar_id: str | None = None
    name: str = ""
    error: type[HydraError] = SidecarError
    restart: Callable[[], str] | None = None
    auth: Auth | None = None

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
        headers = {"Content-Type": "application/json",
                   **(self.auth.headers() if self.auth else {})}
        for attempt in (1, 2, 3):
            try:
                if isinstance(self.auth, SidecarKey):
                    self.auth.reach(self.base_url)
                self._conn.request("POST", f"{self._v1}/{route}", body=body, headers=headers)
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
        if resp.status in REFUSED and self.auth is not None:
            raise self.auth.refused(self.base_url, resp.status)
        if resp.status != 200:
            detail = raw[:300].decode(errors="replace")
            raise self.error(self.explain(
                f"{name} answered HTTP {resp.status}: "
                f"{self.auth.scrub(detail) if self.auth else detail}"))
        return raw
