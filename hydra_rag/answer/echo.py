"""What a small model repeats of its prompt's scaffolding, taken out of its answer as it streams
(pure).

The context block is fenced by `BEGIN-CONTEXT-<nonce>` and `END-CONTEXT-<nonce>` (prompt.py):
a document cannot forge them, but a small model copies them into its answer, sometimes with
the nonce garbled. They are never part of an answer: every such marker (with any nonce or none)
is removed from the streamed text, holding back only the few characters that might be the
start of one until the next piece shows they are not.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_MARKER = re.compile(r"[ \t]*\b(?:BEGIN|END)-CONTEXT(?:-[0-9A-Za-z]+)?\b[ \t]*")
_WORDS = ("BEGIN-CONTEXT-", "END-CONTEXT-")
_TAIL = re.compile(r"[0-9A-Za-z-]*\Z")  # the word being written at the end of the buffer
_WHOLE = re.compile(r"(?:BEGIN|END)-CONTEXT-[0-9A-Za-z]*\Z")


def _may_start_marker(tail: str) -> bool:
    return bool(tail) and (any(w.startswith(tail) for w in _WORDS) or bool(_WHOLE.match(tail)))


def _between(width: int) -> Callable[[re.Match[str]], str]:
    """A marker's replacement: a space between words, nothing at either end of a line."""
    return lambda m: " " if m.start() and m.end() < width else ""


def _strip(text: str) -> str:
    """The text without markers: a line that held only markers goes, a marker between words
    leaves one space."""
    out = []
    for line in text.split("\n"):
        cleaned = _MARKER.sub(_between(len(line)), line)
        if cleaned.strip() or not line.strip():
            out.append(cleaned)
    return "\n".join(out)


class EchoFilter:
    """Feed it the streamed pieces; it returns what can be shown now, markers taken out."""

    def __init__(self) -> None:
        self._held = ""  # text not shown yet: the current line, up to where it is safe
        self.text = ""  # everything shown, cleaned
        self.removed = False

    def feed(self, piece: str) -> str:
        self._held += piece
        # Whole lines are final (a line of markers alone is dropped, not left blank).
        cut = self._held.rfind("\n") + 1
        tail = _TAIL.search(self._held[cut:])
        assert tail is not None
        if not _may_start_marker(tail.group()) and not _MARKER.search(self._held[cut:]):
            cut = len(self._held)
        return self._emit(cut)

    def close(self) -> str:
        return self._emit(len(self._held))

    def _emit(self, cut: int) -> str:
        ready, self._held = self._held[:cut], self._held[cut:]
        if not ready:
            return ""
        cleaned = _strip(ready)
        if cleaned != ready:
            self.removed = True
        self.text += cleaned
        return cleaned


def clean(text: str) -> str:
    """A whole answer with the markers taken out."""
    f = EchoFilter()
    f.feed(text)
    f.close()
    return f.text
