"""Reading a document for the index: from the cache when its bytes were read before, else
through the sandbox (and into the cache)."""

from __future__ import annotations

from pathlib import Path

from hydra_rag.documents import Extracted, Skip
from hydra_rag.documents.cache import Cache, content_key
from hydra_rag.documents.extract import is_page
from hydra_rag.documents.sandbox import Sandbox


class Reader:
    def __init__(self, timeout: float, memory_mb: int, index_dir: Path | None,
                 write: bool = True) -> None:
        self.sandbox = Sandbox(timeout, memory_mb)
        self.cache = Cache(index_dir) if index_dir is not None else None
        self.write = write
        self.extracted = 0  # documents extracted (not found in the cache) by this reader
        self.failed: dict[str, Skip] = {}  # content key → why it yields no text

    def wants(self, path: Path, fmt: str) -> bool:
        """Whether to read this file as a document: always, but for an HTML file that is a
        template or a fragment rather than a page (read as text, like code)."""
        if fmt != "html":
            return True
        try:
            data = path.read_bytes()
        except OSError:
            return True  # the document path reports it
        return is_page(data[:4096], data)

    def read(self, path: Path, fmt: str) -> tuple[Extracted, str]:
        """(text and anchors, content key); raises Skip."""
        try:
            key = content_key(path)
        except FileNotFoundError:
            raise Skip("vanished") from None
        except OSError:
            raise Skip("unreadable") from None
        if key in self.failed:  # read once in this run already (say, for the language)
            raise self.failed[key]
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                return cached, key
        try:
            ex = self.sandbox.extract(path, fmt)
        except Skip as s:
            self.failed[key] = s
            raise
        self.extracted += 1
        if self.cache is not None and self.write:
            self.cache.put(key, ex)
        return ex, key

    def prune(self, keep: set[str]) -> int:
        """Drop cached texts of documents no longer indexed (documents skipped later keep
        none)."""
        return self.cache.prune(keep) if self.cache is not None and self.write else 0

    def close(self) -> None:
        self.sandbox.close()
