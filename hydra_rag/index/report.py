"""What an index run reports: progress as it goes, the summary at the end (and the notes it adds
to it), a dry run's list, and the interruption that says what was kept."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hydra_rag.documents import cite
from hydra_rag.read.walk import LONG_LINE


def duration(seconds: float) -> str:
    """About how long: `40 s`, `3 min`, `1 h 20 min`."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    return f"about {minutes} min" if minutes < 90 else f"about {minutes // 60} h {minutes % 60} min"


@dataclass
class Progress:
    """One progress report: what stage, how far (files and bytes), and chunks embedded."""

    stage: str
    files_done: int = 0
    files_total: int = 0
    bytes_done: int = 0
    bytes_total: int = 0
    chunks_done: int = 0
    message: str = ""
    # How far by bytes, counting the files of the batch being embedded in proportion to its
    # chunks embedded: a batch of many files moves it while files_done waits for the store.
    bytes_estimate: int = 0
    stored_only: bool = False  # phase one of two: files stored, their chunks embedded after


ProgressFn = Callable[[Progress], None]


class IndexInterrupted(KeyboardInterrupt):
    """An index run stopped by Ctrl-C (or SIGTERM); the message says what was kept and what
    the next run does. A KeyboardInterrupt still, so that it is never taken for an error."""


@dataclass
class IndexReport:
    """The summary of one `index` run (what `--json` prints)."""

    root: str
    files_seen: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_touched: int = 0  # of the unchanged: a new mtime or size, the same content (not read again)
    files_removed: int = 0
    files_skipped: dict[str, int] = field(default_factory=dict)
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_reused: int = 0
    chunks_embedded: int = 0  # chunks whose vector the embedder computed (the rest were reused)
    # Two phases (setting vectors_later): chunks stored without a vector in phase one, the
    # seconds until the folder was searchable, and chunks still without one at the end.
    chunks_waiting: int = 0
    searchable_s: float = 0.0
    vectors_pending: int = 0
    chunks_total: dict[str, int] = field(default_factory=dict)
    embedders: dict[str, str] = field(default_factory=dict)
    rebuilt: bool = False
    rebuild_reason: str = ""
    repaired: list[str] = field(default_factory=list)
    languages: dict[str, str] = field(default_factory=dict)  # table → language of its analysis
    contextualized_by: str = ""  # the chat model that writes chunk contexts ("" = off)
    contexts_written: int = 0  # contexts the model wrote in this run (the rest came from cache)
    notes: list[str] = field(default_factory=list)
    # files indexed though mostly minified code or data on long lines (a note warns of them)
    long_lines: list[str] = field(default_factory=list)
    # documents skipped for their content, with what was wrong ("encrypted: password-protected")
    document_problems: dict[str, str] = field(default_factory=dict)
    # documents indexed with pages left unread (no text layer, no OCR): path → page numbers
    unread_pages: dict[str, list[int]] = field(default_factory=dict)
    files_left: int = 0  # changed files a stopped run left for the next one (see index_folder)
    documents_extracted: int = 0  # documents read by the extractor (the rest came from its cache)
    elapsed_s: float = 0.0
    # The folders the walk went through (relative, "" the root): what `watch` listens to.
    dirs: set[str] = field(default_factory=set, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "dirs"}


@dataclass
class DryRunReport:
    """What an `index` run would index, and per reason what it would skip."""

    root: str
    files: list[tuple[str, str]]  # (path, kind)
    skipped: dict[str, list[str]]
    long_lines: list[str] = field(default_factory=list)  # files an index run would warn about
    document_problems: dict[str, str] = field(default_factory=dict)  # path → "reason: detail"


def unread_note(unread: dict[str, list[int]], why: str) -> str:
    """What a run says of documents it indexed with scanned pages it could not read."""
    shown = [f"{rel} ({_page_list(pages)})" for rel, pages in list(unread.items())[:5]]
    more = f" and {len(unread) - 5} more" if len(unread) > 5 else ""
    n = len(unread)
    return (f"{n} document{'s' * (n > 1)} with pages without a text layer, not read: "
            f"{', '.join(shown)}{more}; {why}")


def _page_list(pages: list[int]) -> str:
    """`p. 3`, `pp. 3–5` for a run of pages (as a citation reads), else `pp. 2, 5, 9`."""
    if pages[-1] - pages[0] == len(pages) - 1:
        return cite("page", pages[0], pages[-1])
    return "pp. " + ", ".join(map(str, pages[:6])) + (", …" if len(pages) > 6 else "")


def long_lines_note(paths: list[str]) -> str:
    n = len(paths)
    return (f"{n} indexed file{'s are' if n > 1 else ' is'} mostly minified code or data on lines "
            f"over {LONG_LINE:,} characters, cut mid-line into chunks that search poorly: "
            + ", ".join(paths[:5]) + (" …" if n > 5 else "")
            + " (--exclude or a .hydraignore leaves them out)")
