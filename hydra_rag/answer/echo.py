"""What a small model repeats of its prompt's scaffolding, taken out of its answer as it streams
(pure).

The context block is fenced by `BEGIN-CONTEXT-<nonce>` and `END-CONTEXT-<nonce>` (prompt.py):
a document cannot forge them, but a small model copies them into its answer, sometimes with
the nonce garbled. They are never part of an answer: every such marker (with any nonce or none)
is removed from the streamed text. The filter works a line at a time and shows a line's text as
soon as no marker can be starting in it; a marker between words leaves one space, a marker at
either end of a line leaves nothing, and a line that held only markers goes with its newline.
"""

from __future__ import annotations

import re

_MARKER = re.compile(r"\b(?:BEGIN|END)-CONTEXT(?:-[0-9A-Za-z]+)?\b[ \t]*")
_WORDS = ("BEGIN-CONTEXT-", "END-CONTEXT-")
_TAIL = re.compile(r"[0-9A-Za-z-]*\Z")  # the word being written at the end of the line
_WHOLE = re.compile(r"(?:BEGIN|END)-CONTEXT-[0-9A-Za-z]*\Z")


def _may_start_marker(word: str) -> bool:
    """Whether `word` (or its part after a hyphen) may be a marker still being written."""
    starts = [0, *(i + 1 for i, c in enumerate(word) if c == "-")]
    return any(any(w.startswith(word[i:]) for w in _WORDS) or _WHOLE.match(word[i:])
               for i in starts if word[i:])


def _clean(line: str) -> str:
    """One line without its markers: one space between words, nothing where a marker began
    the line's text, followed a space, or ended it."""
    out, at = [], 0
    for m in _MARKER.finditer(line):
        out.append(line[at:m.start()])
        before = "".join(out)
        if before.strip() and not before[-1].isspace() and m.end() < len(line):
            out.append(" ")
        at = m.end()
    out.append(line[at:])
    return "".join(out)


def _safe(line: str) -> int:
    """How much of an unfinished line can be cleaned now: up to a word that may be the start
    of a marker, and before a marker that nothing follows yet (it may end the line), with the
    spaces before either."""
    tail = _TAIL.search(line)
    assert tail is not None
    end = tail.start() if _may_start_marker(tail.group()) else len(line)
    for m in _MARKER.finditer(line, 0, end):
        if m.end() >= end:
            end = m.start()
    if end < len(line):  # the space before a marker waits too: the marker may end the line
        end = len(line[:end].rstrip(" \t"))
    return end if line[:end].strip() else 0  # a line's indentation waits for its text


class EchoFilter:
    """Feed it the streamed pieces; it returns what can be shown now, markers taken out."""

    def __init__(self) -> None:
        self._line = ""  # the current line as it arrived
        self._shown = 0  # how much of the current line's cleaned text was shown
        self.text = ""  # everything shown, cleaned
        self.removed = False

    def feed(self, piece: str) -> str:
        out = []
        *done, self._line = (self._line + piece).split("\n")
        for line in done:
            out.append(self._finish(line))
        if done:
            self._shown = 0
        out.append(self._show(_clean(self._line[:_safe(self._line)])))
        return self._out("".join(out))

    def close(self) -> str:
        line, self._line = self._line, ""
        return self._out(self._finish(line, newline=False))

    def _finish(self, line: str, newline: bool = True) -> str:
        cleaned = _clean(line)
        if cleaned != line:
            self.removed = True
        if line.strip() and not cleaned.strip() and not self._shown:
            return ""  # a line of markers alone goes, newline and all
        text = self._show(cleaned.rstrip(" \t") if cleaned != line else cleaned)
        self._shown = 0
        return text + ("\n" if newline else "")

    def _show(self, cleaned: str) -> str:
        new, self._shown = cleaned[self._shown:], max(self._shown, len(cleaned))
        return new

    def _out(self, text: str) -> str:
        self.text += text
        return text


def clean(text: str) -> str:
    """A whole answer with the markers taken out."""
    f = EchoFilter()
    f.feed(text)
    f.close()
    return f.text
