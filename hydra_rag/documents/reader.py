"""Reading a document for the index: from the cache when its bytes were read before, else
through the sandbox (and into the cache)."""

from __future__ import annotations

from pathlib import Path

from hydra_rag.documents import OCR_FORMATS, Extracted, Skip
from hydra_rag.documents.cache import Cache, content_key
from hydra_rag.documents.extract import is_page
from hydra_rag.documents.ocr import Ocr
from hydra_rag.documents.sandbox import Sandbox


class Reader:
    def __init__(self, timeout: float, memory_mb: int, index_dir: Path | None,
                 write: bool = True, ocr: Ocr | None = None, ocr_why: str = "") -> None:
        self.ocr = ocr  # how pages without text are read (None: they are not, for `ocr_why`)
        self.sandbox = Sandbox(timeout, memory_mb, ocr_spec=ocr.spec if ocr else "",
                               ocr_why=ocr_why)
        self.cache = Cache(index_dir) if index_dir is not None else None
        self.write = write
        self.extracted = 0  # documents extracted (not found in the cache) by this reader
        self.failed: dict[str, Skip] = {}  # content key → why it yields no text

    @property
    def ocr_tag(self) -> str:
        """The OCR languages texts are read with ("" for none): an index records it, and
        reads its PDFs and images again when it changes."""
        return self.ocr.languages if self.ocr else ""

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
        # A text OCR may have read is kept per OCR language.
        variant = f"{key}~ocr-{self.ocr_tag}" if self.ocr and fmt in OCR_FORMATS else key
        if self.cache is not None:
            cached = self.cache.get(variant)
            if cached is not None:
                return cached, key
        try:
            ex = self.sandbox.extract(path, fmt)
        except Skip as s:
            self.failed[key] = s
            raise
        self.extracted += 1
        if self.cache is not None and self.write:
            self.cache.put(variant, ex)
        return ex, key

    def prune(self, keep: set[str]) -> int:
        """Drop cached texts of documents no longer indexed (documents skipped later keep
        none)."""
        return self.cache.prune(keep) if self.cache is not None and self.write else 0

    def close(self) -> None:
        self.sandbox.close()
