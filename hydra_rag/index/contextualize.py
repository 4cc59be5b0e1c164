"""Contextual retrieval (`index --contextualize`): for each chunk, the chat model writes one or
two sentences that situate it in its whole file. They are put before the chunk in the text that
is embedded and in the full-text column; the stored text, shown to the user and given to the
chat model, stays the original.

Contexts are kept in `.hydra-index/contexts.json`, keyed by model, file and chunk text: an
unchanged chunk never pays twice, even after a rebuild. Turning the option on or off (or
changing the model) re-embeds the folder, since every vector changes.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from hydra_rag.config import Settings
from hydra_rag.errors import HydraError
from hydra_rag.locks import write_atomic

# Characters of the file shown to the model around the chunk (a small model evaluates prompts at
# a few hundred tokens a second on a CPU: the excerpt is the cost).
HEAD_CHARS = 1200
AROUND_CHARS = 1200
MAX_CONTEXT_CHARS = 400

_SYSTEM = ("You write short retrieval notes. Given an excerpt of a file and one passage from it, "
           "say in one or two plain sentences what the passage is about and where it sits in "
           "the file (its subject, the section or function it belongs to). Do not repeat the "
           "passage. Reply with the sentences only.")


def _excerpt(document: str, chunk: str, line_start: int) -> str:
    """The file's beginning and the text around the chunk, within a fixed budget."""
    lines = document.splitlines(keepends=True)
    start = sum(len(x) for x in lines[: max(line_start - 1, 0)])
    head = document[:HEAD_CHARS]
    lo = max(start - AROUND_CHARS // 2, len(head))
    around = document[lo:start + len(chunk) + AROUND_CHARS // 2] if lo < len(document) else ""
    return head + ("\n[…]\n" + around if around else "")


def _clean(text: str) -> str:
    text = " ".join(text.split())
    sentences = re.split(r"(?<=[.!?])\s+", text)
    return " ".join(sentences[:2])[:MAX_CONTEXT_CHARS].strip()


class Contextualizer:
    """Writes (and remembers) the situating sentences of chunks with one chat model."""

    def __init__(self, model_id: str, settings: Settings, cache_path: Path) -> None:
        from hydra_rag.catalog import get_model

        self.model = get_model(model_id)
        path = self.model.model_path()
        if not self.model.url and (path is None or not path.is_file()):
            raise HydraError(f"model {model_id!r} is not installed — run "
                             f"`hydra-rag models pull {model_id}` (needed by --contextualize)")
        self.settings = settings
        self.cache_path = cache_path
        self.cache: dict[str, str] = {}
        self.written = 0  # contexts the model wrote in this run (not from the cache)
        self._target: Any = None
        if cache_path.is_file():
            try:
                raw = json.loads(cache_path.read_text(encoding="utf-8"))
                self.cache = {str(k): str(v) for k, v in raw.get("contexts", {}).items()}
            except (ValueError, AttributeError, UnicodeDecodeError):
                self.cache = {}  # a damaged cache only costs time: the contexts are rewritten

    def key(self, rel: str, text: str) -> str:
        h = hashlib.sha256(f"{self.model.id}\0{rel}\0".encode() + text.encode("utf-8"))
        return h.hexdigest()[:32]

    def cached(self, rel: str, text: str) -> str | None:
        return self.cache.get(self.key(rel, text))

    def context(self, rel: str, document: str, text: str, line_start: int) -> str:
        key = self.key(rel, text)
        if key in self.cache:
            return self.cache[key]
        from hydra_rag.models.chat import connect_chat, stream_chat

        if self._target is None:
            self._target = connect_chat(self.model, self.settings)
        user = (f"File: {rel}\n<file>\n{_excerpt(document, text, line_start)}\n</file>\n\n"
                f"Passage (lines {line_start}-):\n<passage>\n{text}\n</passage>")
        messages = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]
        try:
            answer, _ = stream_chat(self._target, messages,
                                    {"temperature": 0, "max_tokens": 80}, lambda _t: None)
        except KeyboardInterrupt:
            raise
        except HydraError as exc:
            raise HydraError(f"contextualizing {rel}: {exc}") from None
        self.cache[key] = _clean(answer)
        self.written += 1
        return self.cache[key]

    def save(self) -> None:
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        # The owner's alone, even in a shared index: it keeps the sentences written for files
        # that have left (a private one too), and searches never read it.
        write_atomic(self.cache_path, json.dumps({"model": self.model.id, "contexts": self.cache},
                                                 ensure_ascii=False, separators=(",", ":")),
                     mode=0o600)
