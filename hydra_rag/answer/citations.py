"""Citation checks (pure): does every [n] exist, does every quoted passage really stand in the
chunk it cites, and are there claims with no citation at all?"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from hydra_rag.answer.prompt import Source

_CITE = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")
_QUOTE = re.compile(r"\"([^\"]*)\"|“([^”]*)”")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_DONT_KNOW = re.compile(r"\b(i\s+don'?t\s+know|not\s+in\s+the\s+context|no\s+information)\b", re.I)


@dataclass
class CitationReport:
    """What the check found; `ok` when nothing is wrong."""

    cited: list[int] = field(default_factory=list)
    invalid: list[int] = field(default_factory=list)
    quotes_not_found: list[str] = field(default_factory=list)
    uncited: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.invalid or self.quotes_not_found or self.uncited)

    def problems(self) -> list[str]:
        out = []
        if self.invalid:
            out.append("cites sources that do not exist: "
                       + ", ".join(f"[{n}]" for n in self.invalid))
        for q in self.quotes_not_found:
            out.append(f"the answer quotes \"{q}\", but the source it cites does not contain "
                       "those words")
        if self.uncited:
            out.append(f"{len(self.uncited)} sentence(s) cite no source, e.g. "
                       f"\"{self.uncited[0][:80]}\"")
        return out

    def to_json(self) -> dict[str, list]:
        return {"cited": self.cited, "invalid": self.invalid,
                "quotes_not_found": self.quotes_not_found, "uncited": self.uncited}


def _numbers(group: str) -> list[int]:
    return [int(x) for x in re.split(r"\s*[,;]\s*", group)]


def fold(s: str) -> str:
    """Text as quotes are compared: whitespace runs as one space, case folded."""
    return " ".join(s.split()).casefold()


def check_citations(answer: str, sources: Sequence[Source]) -> CitationReport:
    """Check an answer against the sources it was given (numbered from 1)."""
    by_n = {s.n: s for s in sources}
    rep = CitationReport()
    for m in _CITE.finditer(answer):
        for n in _numbers(m.group(1)):
            if n not in rep.cited:
                rep.cited.append(n)
            if n not in by_n and n not in rep.invalid:
                rep.invalid.append(n)
    for sentence in (s.strip() for s in _SENTENCE.split(answer)):
        if not sentence:
            continue
        cites = [n for m in _CITE.finditer(sentence) for n in _numbers(m.group(1))]
        # A quote is checked against the sources its sentence cites. Without a citation there
        # is no source to look in (the sentence is reported as uncited instead), and `""`
        # (code, an empty string) quotes nothing.
        targets = [by_n[n] for n in cites if n in by_n]
        for qm in _QUOTE.finditer(sentence) if targets else ():
            quote = (qm.group(1) if qm.group(1) is not None else qm.group(2)).strip()
            if quote and not any(fold(quote) in fold(f"{t.section}\n{t.text}")
                                 for t in targets):  # the model was shown both
                rep.quotes_not_found.append(quote)
        words = re.findall(r"\w+", _CITE.sub("", sentence))
        if not cites and len(words) >= 4 and not _DONT_KNOW.search(sentence):
            rep.uncited.append(sentence)
    return rep
