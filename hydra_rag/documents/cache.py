"""Extracted texts kept in `.hydra-index/extracted/`, one gzip'd JSON file per document content
(a SHA-256 of its bytes and the extractor version): a re-index, a rebuild, a touched or renamed
document never extracts the same bytes twice."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path

from hydra_rag.documents import EXTRACTOR_VERSION, Extracted

DIR = "extracted"


def content_key(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return f"{h.hexdigest()[:40]}-v{EXTRACTOR_VERSION}"


class Cache:
    def __init__(self, index_dir: Path) -> None:
        self.dir = index_dir / DIR

    def _path(self, key: str) -> Path:
        return self.dir / f"{key}.json.gz"

    def get(self, key: str) -> Extracted | None:
        try:
            with gzip.open(self._path(key), "rt", encoding="utf-8") as f:
                return Extracted.from_json(json.load(f))
        except (OSError, ValueError, KeyError, EOFError):
            return None  # absent, or damaged: extracted again

    def put(self, key: str, ex: Extracted) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self._path(key).with_suffix(f".tmp{os.getpid()}")
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=3) as f:
            json.dump(ex.to_json(), f)
        os.replace(tmp, self._path(key))

    def prune(self, keep: set[str]) -> int:
        """Remove cached texts no document uses any more; returns how many."""
        removed = 0
        try:
            entries = list(os.scandir(self.dir))
        except OSError:
            return 0
        for e in entries:
            key = e.name.split(".", 1)[0].split("~", 1)[0]  # a variant: key~ocr-eng
            if key not in keep or ".tmp" in e.name:  # a write a crash interrupted
                try:
                    os.unlink(e.path)
                    removed += 1
                except OSError:
                    pass
        return removed
