"""OCR: the text of pages that have none, through Tesseract (Debian's `tesseract-ocr`).

A PDF page without a text layer (a scan, a phone app's photo) is rendered by PDFium at 300 dpi
in grey and handed to `tesseract` on stdin; an image file the user included (PNG, JPEG, TIFF)
is handed over by path. Tesseract answers in hOCR, whose lines carry their measured size:
headings are told by it as in a PDF without an outline (heads.py). Tesseract runs as a child of
the extraction worker, so the worker's memory bound holds it too, with a time bound per page;
one OpenMP thread, because on a busy two-core machine its threads wait for each other (2.1 s a
page with one, 4.1 s with two, in one run here). Without the program, such pages are skipped
with a reason that says how to get it (`SCANNED_HINT`).

An OCR configuration travels as one string, `Ocr.spec` ("tesseract|eng+deu"; "" when OCR is
off or cannot run): the worker's request carries it, and the extraction cache keys the texts
of PDFs and images with it, so that other languages read the pages again.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from hydra_rag.documents.heads import LINE_END_HYPHEN, mark

DPI = 300
INSTALL = "apt-get install tesseract-ocr"
# What a user reads where pages could not be read for want of OCR.
SCANNED_HINT = f"OCR needs Tesseract: {INSTALL} (as root)"
OFF = ("", "off", "none", "no", "false")
_LANG = re.compile(r"^[A-Za-z0-9_]+$")
_LINES = ("ocr_line", "ocr_header", "ocr_caption", "ocr_textfloat")  # hOCR's kinds of line
_X_SIZE = re.compile(r"\bx_size ([\d.]+)")

# Called after each page read by OCR: the worker tells the parent it is still at work, so the
# time bound holds per page rather than for a whole scanned book.
on_page: Callable[[], None] | None = None


class OcrError(Exception):
    """OCR could not run on a page or an image: the message says why, `reason` is the
    document skip it makes (`timed_out` or `corrupt`)."""

    def __init__(self, message: str, reason: str = "corrupt") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Ocr:
    program: str  # the path of `tesseract`
    languages: str  # Tesseract's codes joined by +

    @property
    def spec(self) -> str:
        return f"{self.program}|{self.languages}"

    @classmethod
    def from_spec(cls, spec: str) -> Ocr | None:
        program, _, languages = spec.partition("|")
        return cls(program, languages) if program and languages else None


def wanted(languages: str) -> bool:
    return languages.strip().lower() not in OFF


def program(command: str = "tesseract") -> str | None:
    """The path of the Tesseract program `command` names, or None where there is none."""
    return shutil.which(command)


@cache
def installed_languages(prog: str) -> frozenset[str]:
    """The languages Tesseract has data for (`tesseract --list-langs`)."""
    try:
        proc = subprocess.run([prog, "--list-langs"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    lines = (proc.stdout + proc.stderr).splitlines()
    return frozenset(ln.strip() for ln in lines
                     if ln.strip() and not ln.startswith("List of") and _LANG.match(ln.strip()))


def configure(languages: str, command: str = "tesseract") -> tuple[Ocr | None, str]:
    """(the OCR to use, "") or (None, why not): off by setting, the program missing, or a
    language without its data (a clear message naming the package to install)."""
    if not wanted(languages):
        return None, "OCR is off (ocr_languages: off)"
    prog = program(command)
    if prog is None:
        return None, missing_program(command)
    codes = [c.strip() for c in languages.split("+") if c.strip()]
    bad = [c for c in codes if not _LANG.match(c)]
    if bad:
        return None, f"ocr_languages: {bad[0]!r} is not a Tesseract language code (eng, deu, …)"
    have = installed_languages(prog)
    missing = [c for c in codes if c not in have]
    if missing:
        pkgs = " ".join(f"tesseract-ocr-{c.lower().replace('_', '-')}" for c in missing)
        return None, (f"Tesseract has no data for {', '.join(missing)} (it has "
                      f"{', '.join(sorted(have - {'osd'})) or 'none'}): apt-get install {pkgs}")
    return Ocr(prog, "+".join(codes)), ""


def missing_program(command: str) -> str:
    """Why OCR cannot run when `command` (the setting `ocr_command`) names no program: the
    install line when it is the default, else the setting that names a program not there (and
    where Tesseract is, when it is installed under its own name)."""
    if command == "tesseract":
        return SCANNED_HINT
    found = program("tesseract")
    fix = (f"set it to {found} or remove the setting" if found else
           f"correct the setting, or remove it and {INSTALL} (as root)")
    return (f"the OCR program {command!r} (setting ocr_command) was not found: {fix}")


def for_settings(settings: Any) -> tuple[Ocr | None, str]:
    """`configure` with a run's settings (`ocr_languages`, `ocr_command`)."""
    return configure(settings.ocr_languages, settings.ocr_command)


def _run(ocr: Ocr, source: str, data: bytes | None, timeout: float) -> str:
    """Tesseract's hOCR of an image (a path, or "stdin" with `data`)."""
    cmd = [ocr.program, source, "stdout", "-l", ocr.languages, "--dpi", str(DPI), "hocr"]
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        proc = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise OcrError(f"OCR took longer than {timeout:g} s", "timed_out") from None
    except OSError as exc:
        raise OcrError(f"cannot run {ocr.program}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        said = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise OcrError(f"tesseract failed ({said[-1] if said else f'exit {proc.returncode}'})")
    if on_page is not None:
        on_page()
    return proc.stdout.decode("utf-8", "replace")


def pages_of(hocr: str) -> list[list[str]]:
    """Each page's printed lines in Tesseract's hOCR, marked with their size (heads.mark:
    the median x_size of the paragraph's lines, Tesseract's estimate of its letters' height,
    as points at DPI; OCR does not tell bold) so that headings are told by size as in a text
    layer; a blank line between paragraphs; a word hyphenated at a line's end marked for
    printed.rejoin."""
    try:
        root = ElementTree.fromstring(hocr.encode("utf-8"))
    except ElementTree.ParseError as exc:
        raise OcrError(f"tesseract's hOCR did not parse ({exc})") from None
    pages: list[list[str]] = []
    for page in _with_class(root, "ocr_page"):
        lines: list[str] = []
        for par in _with_class(page, "ocr_par"):
            sized: list[tuple[float, str]] = []
            for line in _with_class(par, *_LINES):
                words = ("".join(w.itertext()).strip() for w in _with_class(line, "ocrx_word"))
                text = " ".join(w for w in words if w)
                x_size = _X_SIZE.search(line.get("title", ""))
                if text:
                    sized.append((float(x_size.group(1)) * 72 / DPI if x_size else 0.0, text))
            if not sized:
                continue
            # A paragraph's lines are of one type: each measured anew varies by a pixel or
            # two, their median does not.
            size = statistics.median(sz for sz, _ in sized)
            if lines:
                lines.append("")
            lines += [mark(size, False, measured=True) + t
                      for t in _mark_hyphens([t for _, t in sized]) if t.strip()]
        pages.append(lines)
    return pages


def _with_class(el: ElementTree.Element, *classes: str) -> list[ElementTree.Element]:
    return [e for e in el.iter() if e.get("class") in classes]


def _mark_hyphens(lines: list[str]) -> list[str]:
    """A word hyphenated at a line's end ("repro-" then "duction") marked as the text layer
    marks it, for printed.rejoin to decide."""
    out = list(lines)
    for i in range(len(out) - 1):
        line, after = out[i].rstrip(), out[i + 1].lstrip()
        if len(line) > 1 and line[-1] in "-\u00ad" and line[-2].isalpha() and after[:1].islower():
            word, _, rest = after.partition(" ")
            out[i], out[i + 1] = line[:-1] + LINE_END_HYPHEN + word, rest
    return out


def read_gray(ocr: Ocr, width: int, height: int, stride: int, pixels: bytes,
              timeout: float) -> list[str]:
    """The lines Tesseract reads in a grey image (one byte a pixel, rows `stride` apart)."""
    rows = pixels if stride == width else b"".join(
        pixels[y * stride : y * stride + width] for y in range(height))
    found = pages_of(_run(ocr, "stdin", f"P5\n{width} {height}\n255\n".encode() + rows, timeout))
    return found[0] if found else []


def read_image(ocr: Ocr, path: Path, timeout: float) -> list[list[str]]:
    """The lines of each page of an image file (a TIFF may hold several)."""
    return pages_of(_run(ocr, str(path), None, timeout))
