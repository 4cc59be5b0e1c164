"""One error family: every message says what went wrong and, where it can, what to run next;
and what the machine did (a full disk…), told from a bug."""

from __future__ import annotations

import errno
import re


class HydraError(Exception):
    """Base of every error the library raises on purpose; the CLI prints it as one red line."""


class UsageError(HydraError):
    """Options that cannot go together, or an argument of the wrong shape: the CLI exits 2."""


class ConfigError(HydraError):
    """A catalog, config file or setting is invalid."""


class ModelError(HydraError):
    """A model is unknown, missing, or cannot be installed."""


class Unreachable(ModelError):
    """A model's source could not be reached at all (no network, a closed port, a name that
    does not resolve): `tried` names the source, `reason` says what the system answered."""

    def __init__(self, message: str, tried: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.tried = tried
        self.reason = reason


class SidecarError(HydraError):
    """A sidecar process failed to start, died, or does not answer."""


class SidecarCrash(SidecarError):
    """A llama.cpp process died by a signal (an illegal instruction, a memory fault, ...)."""

    def __init__(self, message: str, signal: str = "") -> None:
        super().__init__(message)
        self.signal = signal  # "SIGILL", ...


class EmbedError(HydraError):
    """An embeddings endpoint refused or failed a request."""


class IndexError_(HydraError):
    """An index is missing, corrupt, locked, or does not match the chosen embedder."""


class MetaCorrupt(IndexError_):
    """An index's meta.yaml cannot be read. `problem` says what is wrong without the advice
    (an index run repairs it from the tables, and says so)."""

    def __init__(self, path: object, why: str, root: object) -> None:
        self.problem = f"{path} is corrupt ({why})"
        super().__init__(f"{self.problem} — rebuild it with `hydra-rag index {root} --full`")


class IndexLocked(IndexError_):
    """Another process is indexing the same folder."""


class IndexFault(IndexError_):
    """The machine stopped a run (a full disk, a read-only folder, memory exhausted): what
    happened, what the index kept, what to do."""


def yaml_problem(exc: Exception) -> str:
    """A YAML parser error in one line: what is wrong and where ("mapping values are not
    allowed here, line 3 column 7"), not the parser's multi-line trace."""
    problem = getattr(exc, "problem", None) or next(iter(str(exc).splitlines()), "") \
        or type(exc).__name__
    mark = getattr(exc, "problem_mark", None)
    where = f", line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def unreadable(path: object, exc: OSError | UnicodeDecodeError) -> HydraError:
    """`cannot read PATH: why`, in the system's words and without Python's `[Errno N]`; a
    folder where a file was asked for is a usage error (exit 2), as a file for a folder is."""
    if isinstance(exc, IsADirectoryError):
        return UsageError(f"{path}: a folder, not a file")
    if isinstance(exc, UnicodeDecodeError):
        return HydraError(f"cannot read {path}: not UTF-8 text (byte {exc.start})")
    return HydraError(f"cannot read {path}: {(exc.strerror or str(exc)).lower()}")


# -- what the machine did ------------------------------------------------------------------
# A full disk, a read-only or removed folder, memory exhausted, an I/O error, said in one line.
# Python's own errors carry an errno; LanceDB's come from Rust as a RuntimeError or OSError
# whose text ends in `(os error 28)` and a source location. Either way the user needs what
# happened and where, not the trace: `fault` names it, or says None for what is not the
# machine's doing (a bug, which `unexpected` words as one line that points at --debug).

_OS_ERROR = re.compile(r"\(os error (\d+)\)")
_WORDS = {  # what each errno means to a user, and what to do about it
    errno.ENOSPC: ("the disk is full", "free some space"),
    errno.EDQUOT: ("the disk quota is used up", "free some space"),
    errno.EROFS: ("the file system is read-only", "make it writable"),
    errno.EACCES: ("permission denied", "check the folder's owner and permissions"),
    errno.EPERM: ("operation not permitted", "check the folder's owner and permissions"),
    errno.ENOMEM: ("out of memory", "close other programs or index fewer files at once"),
    errno.EIO: ("an input/output error (a failing disk?)", "check the disk"),
    errno.ENOENT: ("a file or folder was removed while in use", "run the command again"),
    errno.ESTALE: ("a network file system went away", "remount it"),
}
_TEXTS = (  # the same, said in a message without an errno
    ("no space left on device", errno.ENOSPC),
    ("database or disk is full", errno.ENOSPC),  # SQLite's SQLITE_FULL (files.db)
    ("disk quota exceeded", errno.EDQUOT),
    ("read-only file system", errno.EROFS),
    ("permission denied", errno.EACCES),
    ("cannot allocate memory", errno.ENOMEM),
    ("out of memory", errno.ENOMEM),
)


def fault_errno(exc: BaseException) -> int | None:
    """The errno behind `exc` (or an exception it was raised from), if it is the machine's."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, MemoryError):
            return errno.ENOMEM
        code = getattr(cur, "errno", None) if isinstance(cur, OSError) else None
        if code in _WORDS:
            return code
        text = str(cur)
        if isinstance(cur, (OSError, RuntimeError, ValueError)) \
                or type(cur).__module__ == "sqlite3":
            m = _OS_ERROR.search(text)
            if m and int(m.group(1)) in _WORDS:
                return int(m.group(1))
            low = text.lower()
            for words, code in _TEXTS:
                if words in low:
                    return code
        cur = cur.__cause__ or cur.__context__
    return None


def fault(exc: BaseException, where: object = None) -> tuple[str, str] | None:
    """(what happened, what to do) when `exc` is the machine's doing; `where` (a folder) is
    named in it when given, else the file the error names."""
    code = fault_errno(exc)
    if code is None:
        return None
    what, todo = _WORDS[code]
    place = where if where is not None else getattr(exc, "filename", None)
    if place is not None and code != errno.ENOMEM:
        what = f"{what} ({place})"
    return what, todo


def unexpected(exc: BaseException) -> str:
    """A failure no rule foresaw, in one line: its kind and first line, and how to see more."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    first = _OS_ERROR.sub("", first).strip()
    if len(first) > 200:
        first = first[:197] + "…"
    kind = type(exc).__name__
    return (f"unexpected {kind}{': ' + first if first else ''} "
            "(`hydra-rag --debug …` shows the traceback)")
