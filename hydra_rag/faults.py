"""What the machine did, in one line: a full disk, a read-only or removed folder, memory
exhausted, an I/O error (pure).

Python's own errors carry an errno; LanceDB's come from Rust as a RuntimeError or OSError whose
text ends in `(os error 28)` and a source location. Either way the user needs what happened and
where, not the trace: `fault` names it, or says None for what is not the machine's doing (a
bug, which `unexpected` words as one line that points at --debug).
"""

from __future__ import annotations

import errno
import re

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
        if isinstance(cur, (OSError, RuntimeError, ValueError)):
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
