"""The chat-model client: a healthy endpoint for a chat model (its sidecar, started on demand,
or the OpenAI-compatible server its `url:` names) and a streamed completion from it. Used by
answering (chat turns) and by indexing (contextual retrieval's situating sentences)."""

from __future__ import annotations

import http.client
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hydra_rag.catalog import CHAT_PORTS, ChatModel
from hydra_rag.config import Settings
from hydra_rag.errors import HydraError, SidecarCrash, SidecarError
from hydra_rag.models.endpoint import REFUSED, Auth, KeyEnv
from hydra_rag.models.sidecar import (
    SidecarSpec,
    crash_of,
    ensure,
    log_tail,
    pid_is_sidecar,
    read_record,
)
from hydra_rag.models.sidecar_key import SidecarKey


@dataclass(frozen=True)
class ChatTarget:
    """Where chat completions go: our sidecar, or any OpenAI-compatible server (`url:`)."""

    base_url: str  # up to and including /v1
    model_name: str
    log: str = ""  # the sidecar's log, quoted when it fails
    auth: Auth | None = None  # a `url:` endpoint's key, or our sidecars'
    more: tuple[str, ...] = ()  # other servers of the model (`urls:`), tried when one fails

    def describe(self) -> str:
        return f"{self.model_name!r} at {self.base_url}"

    def servers(self) -> list[ChatTarget]:
        """This target and one per other server, starting at the next one in turn, so that
        turns spread over the servers and a turn whose server fails has the others to try."""
        urls = [self.base_url, *self.more]
        start = next(_TURNS) % len(urls)
        return [ChatTarget(u, self.model_name, self.log, self.auth)
                for u in urls[start:] + urls[:start]]


_TURNS = itertools.count()


def _v1(url: str) -> str:
    base = url.rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


def sidecar_spec(model: ChatModel, settings: Settings) -> SidecarSpec:
    """How a chat model's local sidecar runs (it must have a model file)."""
    path = model.model_path()
    assert path is not None
    return SidecarSpec(
        id=model.id, role="chat", model_path=str(path), port=model.port,
        # A 2048-token batch evaluated a 2,100-token RAG prompt 12% faster than 512 on 2 cores.
        port_range=(CHAT_PORTS.start, CHAT_PORTS.stop - 1), n_ctx=model.context, n_batch=2048,
        threads=settings.threads, idle_seconds=settings.sidecar_idle_minutes * 60,
        chat_format=model.chat_format,
        gpu_layers=settings.gpu_layers,
    )


def connect_chat(model: ChatModel, settings: Settings) -> ChatTarget:
    """A healthy endpoint serving `model`: its `url:` if it has one, else its sidecar."""
    if model.url:
        auth = KeyEnv.of("chat model", model)
        auth.headers()  # a missing key is named now, before a turn retrieves anything
        urls = [_v1(u) for u in (model.urls or (model.url,))]
        return ChatTarget(urls[0], model.id, auth=auth, more=tuple(urls[1:]))
    path = model.model_path()
    assert path is not None
    if not path.is_file():
        raise HydraError(f"model {model.id!r} is not installed — run `hydra-rag models pull {model.id}`")
    rec = ensure(sidecar_spec(model, settings), timeout=settings.sidecar_start_timeout)
    return ChatTarget(f"{rec.url}/v1", rec.id, rec.log, SidecarKey(f"chat sidecar {rec.id!r}"))


def stream_chat(target: ChatTarget, messages: list[dict[str, str]], params: dict[str, Any],
                on_token: Callable[[str], None]) -> tuple[str, str]:
    """Stream a chat completion; returns (text, finish_reason). Ctrl-C stops it cleanly. With
    several servers, a turn goes to the next in turn, and to the others if it fails before its
    first token (after that, a failure is the turn's: its answer cannot be resumed elsewhere)."""
    if not target.more:
        return _stream_one(target, messages, params, on_token)
    failures: list[str] = []
    started = [False]

    def heard(piece: str) -> None:
        started[0] = True
        on_token(piece)

    for server in target.servers():
        try:
            return _stream_one(server, messages, params, heard)
        except SidecarError as exc:
            if started[0]:
                raise
            failures.append(str(exc).splitlines()[0])
    raise SidecarError("every server of chat model "
                       f"{target.model_name!r} failed: " + "; ".join(failures))


def _raise_if_gone(target: ChatTarget) -> None:
    """A sidecar that died during a turn: by a signal its log reports (what it means, and the
    log's lines where it died), or without a word (kill -9, the OOM killer), said in one line
    with its log: the log's tail is then llama.cpp's loading report, a screen of model
    metadata that says nothing of the death."""
    crash = crash_of(target.model_name)
    if crash is not None:
        raise crash from None
    rec = read_record(target.model_name)
    if rec is None or not pid_is_sidecar(rec.pid, rec.id):
        raise SidecarCrash(f"chat model {target.model_name!r} crashed during the answer: its "
                           "process is gone and left no report (killed from outside: out of "
                           f"memory, or by a user); log {target.log}; the next turn starts it "
                           "again", "SIGKILL") from None


def _stream_one(target: ChatTarget, messages: list[dict[str, str]], params: dict[str, Any],
                on_token: Callable[[str], None]) -> tuple[str, str]:
    parts_url = urlsplit(target.base_url)
    cls = (http.client.HTTPSConnection if parts_url.scheme == "https"
           else http.client.HTTPConnection)
    conn = cls(parts_url.hostname or "127.0.0.1", parts_url.port, timeout=600)
    body = json.dumps({"model": target.model_name, "messages": messages, "stream": True,
                       **params})
    headers = {"Content-Type": "application/json",
               **(target.auth.headers() if target.auth else {})}
    try:
        if isinstance(target.auth, SidecarKey):
            target.auth.reach(target.base_url)
        conn.request("POST", parts_url.path + "/chat/completions", body=body, headers=headers)
        resp = conn.getresponse()
        if resp.status in REFUSED and target.auth is not None:
            raise target.auth.refused(target.base_url, resp.status)
        if resp.status != 200:
            detail = resp.read()[:400].decode(errors="replace")
            if target.auth is not None:
                detail = target.auth.scrub(detail)
            raise SidecarError(f"chat model {target.describe()} answered HTTP {resp.status}: "
                               f"{detail}")
        parts: list[str] = []
        finish = ""
        done = False
        for raw in resp:
            line = raw.decode("utf-8", errors="replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            try:
                choice = json.loads(data)["choices"][0]
            except (ValueError, KeyError, IndexError):
                continue
            piece = (choice.get("delta") or {}).get("content") or ""
            if piece:
                parts.append(piece)
                on_token(piece)
            finish = choice.get("finish_reason") or finish
        if not done:
            raise OSError("the stream ended before [DONE]")
        return "".join(parts), finish
    except (OSError, http.client.HTTPException) as exc:
        if target.log:
            _raise_if_gone(target)
        where = f"; log {target.log}:\n{log_tail(Path(target.log))}" if target.log else ""
        raise SidecarError(f"chat model {target.describe()} stopped answering ({exc}){where}"
                           ) from None
    finally:
        conn.close()
