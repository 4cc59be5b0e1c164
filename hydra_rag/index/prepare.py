"""A changed file made ready to embed: its chunks as table rows (stable ids, the hash that
lets an unchanged text keep its vector, the analysed text for the full-text index) and the text
the embedder reads for each; and the thread that reads and chunks ahead of the embedder."""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hydra_rag.read.chunk import SECTION_SEP, chunk_text, heading, with_context
from hydra_rag.read.grammars import language_of
from hydra_rag.read.preamble import without_preamble
from hydra_rag.read.source import Source, read_source
from hydra_rag.read.symbols import Reference, Symbol, chunk_spans, parse, scope_of
from hydra_rag.read.walk import Candidate, mostly_long_lines

if TYPE_CHECKING:
    from hydra_rag.documents.reader import Reader
    from hydra_rag.store.lexical import Analysis


def chunk_id(rel: str, line_start: int, line_end: int, text: str, section: str = "") -> str:
    """Stable id of a chunk: the same text under the same headings at the same place of the
    same file, the same id (a renamed heading makes new rows for the chunks under it)."""
    h = hashlib.sha256(f"{rel}\0{line_start}\0{line_end}\0{section}\0".encode()
                       + text.encode("utf-8"))
    return h.hexdigest()[:32]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class Prepared:
    """A file read and chunked, ready to embed; `kind` None means skipped for `skip`."""

    cand: Candidate
    kind: str | None
    rows: list[dict[str, Any]]
    skip: str = ""
    document: str = ""  # the whole file, kept only when chunks are contextualized
    inputs: list[str] = field(default_factory=list)  # what is embedded, a text per row
    long_lines: bool = False  # mostly minified code or data on long lines (warned of)
    doc: dict[str, Any] | None = None  # a document's extraction record (see FileEntry.doc)
    digest: str = ""  # the content's hash (FileEntry.digest)
    detail: str = ""  # what made a skipped document unreadable (FileEntry.error)
    # A code file's definitions and references (hydra_rag.read.symbols); none for others
    symbols: tuple[list[Symbol], list[Reference]] = field(default_factory=lambda: ([], []))


def read_and_prepare(root: Path, cand: Candidate, reader: Reader | None,
                     fits: Callable[[str], Callable[[str], bool]],
                     analysis: Mapping[str, Analysis], keep_document: bool = False
                     ) -> tuple[Prepared, list[int]]:
    """Read, classify and chunk one file (no index state is touched: a reader thread or a Ray
    task runs it): the file prepared, or skipped with why, and the pages of a document that
    could not be read. `fits(kind)` is that table's embedder's "does this text fit"."""
    src = read_source(root, cand, reader)
    if src.text is None:
        return Prepared(cand, None, [], src.skip, detail=src.detail), []
    return (prepare(cand, src, fits(src.kind), analysis[src.kind].document,
                    keep_document=keep_document), list(src.unread or ()))


def in_batches(prepared: Iterable[Prepared], size: int) -> Iterator[list[Prepared]]:
    """Prepared files in batches of about `size` chunks: big appends for LanceDB (many tiny
    appends make a slow table), small enough that an interrupted run keeps most of its work."""
    batch: list[Prepared] = []
    pending = 0
    for p in prepared:
        batch.append(p)
        pending += len(p.rows)
        if pending >= size:
            yield batch
            batch, pending = [], 0
    if batch:
        yield batch


_T = TypeVar("_T")


def read_ahead(items: Iterator[_T], depth: int = 2) -> Iterator[_T]:
    """Run a generator in a thread, `depth` items ahead, so reading and chunking the next
    batch overlaps with embedding this one (the HTTP wait releases the GIL)."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    end = object()
    closed = threading.Event()  # the consumer stopped early: the producer stops too

    def put(item: Any) -> bool:
        while not closed.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(end)
        except BaseException as exc:  # handed to the consumer, raised there
            put(exc)

    thread = threading.Thread(target=produce, daemon=True, name="hydra-read-ahead")
    thread.start()
    try:
        while True:
            item = q.get()
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        closed.set()
        # Ended early (a stopped run): let the reader finish the file in hand before the run
        # closes the document reader and prunes the extraction cache under it.
        thread.join(timeout=10)


def prepare(cand: Candidate, src: Source, fits: Callable[[str], bool],
            analyse: Callable[[str], str], keep_document: bool = False) -> Prepared:
    """Chunk a file's text (`src`, read) into rows, with the text the embedder reads for each
    (its section first, as far as `fits`); `keep_document` keeps the whole text (for chunk
    contexts)."""
    assert src.text is not None and src.kind
    text, kind = src.text, src.kind
    rows, inputs = [], []
    ids: set[str] = set()
    symbols = symbols_of(cand.rel, text, kind)
    spans = chunk_spans(symbols[0])
    for ch in chunk_text(text, fits=fits, markup=src.markup, defs=spans):
        section = ch.section or scope_of(symbols[0], ch.line_start, ch.line_end)
        head = heading(kind, cand.rel, section)
        embedded = embed_input(kind, cand.rel, section, ch.text, fits)
        cid = chunk_id(cand.rel, ch.line_start, ch.line_end, ch.text, section)
        while cid in ids:  # equal pieces cut from one long line
            cid = text_hash(cid)
        ids.add(cid)
        rows.append({
            "id": cid,
            "path": cand.rel, "kind": kind,
            "line_start": ch.line_start, "line_end": ch.line_end,
            "hash": text_hash(embedded), "text": ch.text, "section": section,
            "lex": analyse(with_context(head, ch.text)),
        })
        inputs.append(embedded)
    return Prepared(cand, kind, rows, document=text if keep_document else "", inputs=inputs,
                    long_lines=src.doc is None and mostly_long_lines(text), doc=src.doc,
                    digest=src.digest, symbols=symbols)


def symbols_of(rel: str, text: str, kind: str) -> tuple[list[Symbol], list[Reference]]:
    """A code file's definitions and references, when a grammar reads its language."""
    lang = language_of(rel, text[:200]) if kind == "code" else None
    return parse(text, lang) if lang else ([], [])


def embed_input(kind: str, path: str, section: str, text: str,
                fits: Callable[[str], bool]) -> str:
    """The text the embedder reads for a chunk, from what its row stores (so that a chunk
    stored before its vector is embedded as one read now would be); a code chunk without the
    licence and imports it starts with (hydra_rag.read.preamble)."""
    if kind == "code":
        text = without_preamble(text)
    return with_section(heading(kind, path, section), text, fits)


def with_section(section: str, text: str, fits: Callable[[str], bool]) -> str:
    """The text the embedder reads for a chunk: its section first, cut to its innermost title
    or left out when the chunk is too close to the embedder's limit to take it whole."""
    for head in (section, section.rsplit(SECTION_SEP, 1)[-1]):
        if head and fits(with_context(head, text)):
            return with_context(head, text)
    return text
