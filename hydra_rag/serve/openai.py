"""The OpenAI-compatible chat: `/v1/models` and `/v1/chat/completions` over a Scope.

A bundle alias as `model` retrieves from the bundle's folders, exactly as `chat ALIAS`; a
plain model from the scope, or from the folders named in an extra `rag` field. Earlier turns
come from the request's messages (the client's history holds the un-augmented text, as a
session does); a `system` message replaces the persona. The answer's text carries its [n]
citations and a "Sources:" list; the response (the last chunk, when streaming) also carries
`sources`, `citations`, `verdict` and `problems`.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from hydra_rag.documents import locate
from hydra_rag.errors import UsageError
from hydra_rag.serve.scope import Scope, turn_json

MAX_MESSAGES = 200


class Cancelled(Exception):
    """The client went away: the answer is not wanted any more."""


def models(scope: Scope) -> dict[str, Any]:
    """The chat models that can answer here — installed, or served elsewhere by the `url:` of
    their entry — and the bundle aliases over them and over served folders, as OpenAI lists
    models; setting `default_model` first. A catalog entry not pulled is not offered: a
    client would pick it and fail."""
    from hydra_rag.api import model_or_default
    from hydra_rag.catalog import load_catalog

    cat = load_catalog()
    now = int(time.time())
    ready = [m.id for m in cat.models.values() if m.url or m.installed()]
    data = [{"id": m, "object": "model", "created": now, "owned_by": "hydra-rag"}
            for m in ready]
    data += [{"id": b.id, "object": "model", "created": now, "owned_by": "hydra-rag",
              "hydra_bundle": True, "base": b.base} for b in cat.bundles.values()
             if b.base in ready and scope.serves_bundle(b)]
    default = model_or_default(None)
    data.sort(key=lambda m: m["id"] != default)  # stable: the catalog's order otherwise
    return {"object": "list", "data": data}


def parse(body: Any) -> dict[str, Any]:
    """The request's model, question, history, system text, sampling and folders; a clear
    UsageError for anything else."""
    if not isinstance(body, dict):
        raise UsageError("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or len(messages) > MAX_MESSAGES:
        raise UsageError(f"messages must be a list of 1 to {MAX_MESSAGES} messages")
    system: str | None = None
    turns: list[dict[str, str]] = []
    pending: str | None = None
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant"):
            raise UsageError("each message needs a role: system, user or assistant")
        content = _text(m.get("content"))
        if m["role"] == "system":
            system = content if system is None else f"{system}\n\n{content}"
        elif m["role"] == "user":
            if pending is not None:  # two user messages in a row: one turn of both
                content = f"{pending}\n\n{content}"
            pending = content
        elif pending is not None:
            turns.append({"user": pending, "answer": content})
            pending = None
    if pending is None or not pending.strip():
        raise UsageError("the last message must be the user's question")
    rag = body.get("rag")
    if rag is not None and (not isinstance(rag, list) or not all(isinstance(x, str) for x in rag)):
        raise UsageError("rag must be a list of folder paths or names")
    params = {}
    for key, kind in (("temperature", (int, float)), ("top_p", (int, float)),
                      ("max_tokens", int), ("seed", int)):
        if body.get(key) is not None:
            if not isinstance(body[key], kind) or isinstance(body[key], bool):
                raise UsageError(f"{key} must be a number")
            params[key] = body[key]
    if body.get("max_completion_tokens") is not None and "max_tokens" not in params:
        value = body["max_completion_tokens"]
        if not isinstance(value, int) or isinstance(value, bool):
            raise UsageError("max_completion_tokens must be a number")
        params["max_tokens"] = value
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise UsageError("model must be a string")
    session = body.get("session")
    if session is not None and (not isinstance(session, str)
                                or not re.fullmatch(r"[\w.+@-]{1,120}", session)):
        raise UsageError("session must be a name of letters, digits and . _ + @ -")
    return {"model": model or None, "question": pending, "turns": turns, "system": system,
            "params": params, "rag": rag, "stream": bool(body.get("stream")),
            "k": body.get("top_k") if isinstance(body.get("top_k"), int) else None,
            "session": session}


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and p.get("type") == "text")
    raise UsageError("a message's content must be text")


def answer(scope: Scope, req: dict[str, Any], on_token: Callable[[str], None],
           cancelled: threading.Event) -> dict[str, Any]:
    """Run one turn (blocking): the chat of the request's model, its history, the question."""
    from hydra_rag.catalog import load_bundles

    name = req["model"]
    if name in load_bundles():  # a bundle: its own folders, as `chat ALIAS`
        if req["rag"]:
            raise UsageError(f"{name!r} is a bundle with folders of its own; `rag` is for models")
        chat = scope.open_chat(name, True, req["k"])
    else:
        chat = scope.open_chat(name, False, req["k"], req["rag"])
    try:
        chat.doc["turns"] = [dict(t) for t in req["turns"]]
        if req["system"] is not None:
            chat.system = req["system"]
        chat.params.update(req["params"])
        if req["session"]:  # the web page's chats are saved, as `chat --session NAME`
            chat.name = chat.doc["name"] = req["session"]
            chat.save_enabled = True

        def token(piece: str) -> None:
            if cancelled.is_set():
                raise Cancelled()
            on_token(piece)

        result = chat.ask(req["question"], token)
    finally:
        chat.close()
    return {"model": chat.model.id if name is None else name, **turn_json(result)}


def footer(doc: dict[str, Any]) -> str:
    """The sources under the answer's text, for clients that show only the text."""
    if not doc["sources"]:
        return ""
    lines = ["", "", "Sources:"]
    for s in doc["sources"]:
        where = f"{s['store_name']}:{s['path']}" if s.get("store_name") else s["path"]
        section = f" § {s['section']}" if s.get("section") else ""
        place = locate(where, s["line_start"], s["line_end"], s.get("page_unit") or "",
                       s.get("page_start") or 0, s.get("page_end") or 0)
        lines.append(f"[{s['n']}] {place}{section}")
    return "\n".join(lines)


def completion(doc: dict[str, Any]) -> dict[str, Any]:
    """A whole (not streamed) chat.completion."""
    usage = doc.get("usage") or {}
    text = doc["answer"] + footer(doc)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion",
        "created": int(time.time()), "model": doc["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": doc.get("finish_reason", "stop")}],
        "usage": {"prompt_tokens": usage.get("prompt_tokens", 0),
                  "completion_tokens": usage.get("completion_tokens", 0),
                  "total_tokens": usage.get("prompt_tokens", 0)
                  + usage.get("completion_tokens", 0)},
        **_extra(doc),
    }


def chunk(cid: str, model: str, delta: dict[str, Any], finish: str | None = None,
          extra: dict[str, Any] | None = None) -> str:
    """One server-sent event of a streamed chat.completion.chunk."""
    body = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **(extra or {})}
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def _extra(doc: dict[str, Any]) -> dict[str, Any]:
    return {"sources": doc["sources"], "citations": doc["citations"],
            "verdict": doc["verdict"], "problems": doc["problems"],
            "no_context": doc["no_context"], "timings": doc.get("timings") or {}}


def last_chunks(cid: str, doc: dict[str, Any]) -> list[str]:
    """The footer, then the final chunk carrying finish_reason, usage and the sources."""
    out = []
    tail = footer(doc)
    if doc["no_context"]:
        tail = doc["answer"] + tail  # nothing was streamed: the refusal is the answer
    if tail:
        out.append(chunk(cid, doc["model"], {"content": tail}))
    usage = doc.get("usage") or {}
    out.append(chunk(cid, doc["model"], {}, doc.get("finish_reason", "stop"), {
        "usage": {"prompt_tokens": usage.get("prompt_tokens", 0),
                  "completion_tokens": usage.get("completion_tokens", 0),
                  "total_tokens": usage.get("prompt_tokens", 0)
                  + usage.get("completion_tokens", 0)}, **_extra(doc)}))
    out.append("data: [DONE]\n\n")
    return out
