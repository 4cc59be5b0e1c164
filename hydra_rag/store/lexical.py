"""Lexical analysis for the full-text (BM25) index: what the `lex` column holds and how a query
is written so that it meets it.

LanceDB's full-text index tokenizes, lowercases, folds accents and — for the languages its
stemmer knows — stems and drops stop words. Two things it cannot do are done here, before the
text reaches it, on both the chunk and the query:

- identifiers: `getUserName`, `get_user_name` and `HTTPServer` also yield their parts (`get user
  name`, `http server`) and snake_case its joined form (`getusername`), so that "user name"
  finds `getUserName` and `getUserName` finds `get_user_name`; the whole identifier stays.
- languages without a stemmer there (Czech, Polish, Slovak…): every word longer than
  PREFIX_STEM letters is cut to its first PREFIX_STEM letters (`momentem` → `momen`), a crude
  stem that measurably beats whole words for inflected languages.
Chinese, Japanese and Korean have no spaces between words: their tables use character bigrams.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from typing import Any

from hydra_rag.errors import HydraError

# 2: plural acronyms (APIs) stay whole; 3: words keep combining marks; 4: identifiers in any
# script are split (getÜberName, ИмяПользователя, 数据_处理), not only ASCII ones
LEXICAL_VERSION = 4
PREFIX_STEM = 5

# ISO 639-1 → the name LanceDB's stemmer and stop-word lists know.
STEMMED = {
    "ar": "Arabic", "da": "Danish", "nl": "Dutch", "en": "English", "fi": "Finnish",
    "fr": "French", "de": "German", "el": "Greek", "hu": "Hungarian", "it": "Italian",
    "no": "Norwegian", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "es": "Spanish",
    "sv": "Swedish", "ta": "Tamil", "tr": "Turkish",
}
BIGRAMS = {"zh", "ja", "ko"}

# An identifier in any script: a letter or underscore, then letters, digits, underscores.
_IDENT = re.compile(r"[^\W\d]\w*")


# What _part() and _word() match in ASCII text (no letters without case, no combining marks
# there), compiled in microseconds where theirs take 0.2 s: a search of an ASCII query needs
# only these.
_ASCII_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z]{2,})|[A-Z]+s(?![a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_ASCII_WORD = re.compile(r"\w+")


@cache
def _part() -> re.Pattern[str]:
    """The pieces of one camel-case word in any script: upper-case runs, capitalised words,
    lower-case runs, digits, and runs of letters that have no case (CJK, Arabic, ...). Python's
    re has no Unicode property classes, so they are built from the Basic Multilingual Plane
    once per process; a combining mark stays with its letter."""
    ranges: dict[str, list[str]] = {"U": [], "L": [], "O": [], "M": []}
    kind_of = {"Lu": "U", "Lt": "U", "Ll": "L", "Lo": "O", "Lm": "O", "Mn": "M", "Mc": "M",
               "Me": "M"}
    start, kind = 0, ""
    for c in range(0x10001):  # one past the end, to close the last run
        k = kind_of.get(unicodedata.category(chr(c)), "") if c < 0x10000 else ""
        if k != kind:
            if kind:
                ranges[kind].append(f"\\u{start:04x}-\\u{c - 1:04x}")
            start, kind = c, k
    m = "".join(ranges["M"])
    upper, lower, other = ("[" + "".join(ranges[k]) + "]" for k in "ULO")
    low = f"(?:{lower}|[{m}])"
    return re.compile(f"{upper}+(?={upper}{low}{{2,}})|{upper}+s(?!{low})|{upper}?{low}+"
                      f"|{upper}+|[0-9]+|(?:{other}|[{m}])+")


@cache
def _word() -> re.Pattern[str]:
    """A word: letters, digits, underscores and the combining marks inside words. Python's \\w
    leaves out combining marks (Mn/Mc), which would cut Tamil, Hindi or vocalised Arabic words
    into pieces the index never saw. The marks of the Basic Multilingual Plane, once per
    process (~20 ms)."""
    marks: list[str] = []
    start = prev = -2
    for c in range(0x300, 0x10000):
        if unicodedata.category(chr(c))[0] != "M":
            continue
        if c != prev + 1:
            if start >= 0:
                marks.append(f"\\u{start:04x}-\\u{prev:04x}")
            start = c
        prev = c
    marks.append(f"\\u{start:04x}-\\u{prev:04x}")
    return re.compile(r"(?:\w|[" + "".join(marks) + "])+")


@dataclass(frozen=True)
class Analysis:
    """How one table's text is analysed: its language (ISO 639-1) and the resulting mode."""

    language: str = "en"

    @property
    def mode(self) -> str:
        if self.language in STEMMED:
            return "stem"
        if self.language in BIGRAMS:
            return "bigram"
        return "prefix"

    def fts_options(self) -> dict[str, Any]:
        """Keyword arguments for LanceDB's create_fts_index."""
        if self.mode == "stem":
            return {"language": STEMMED[self.language], "stem": True, "remove_stop_words": True}
        if self.mode == "bigram":
            return {"base_tokenizer": "ngram", "ngram_min_length": 2, "ngram_max_length": 2,
                    "stem": False, "remove_stop_words": False}
        return {"stem": False, "remove_stop_words": False}

    def document(self, text: str) -> str:
        """The `lex` column for a chunk's text."""
        return self._apply(text)

    def query(self, text: str) -> str:
        """A query, analysed like the documents and freed of full-text query syntax."""
        text = self._apply(text)
        return " ".join((_ASCII_WORD if text.isascii() else _word()).findall(text))

    def _apply(self, text: str) -> str:
        extra = identifier_terms(text)
        out = text if not extra else f"{text}\n{extra}"
        if self.mode == "prefix":
            out = prefix_stems(out)
        return out

    def to_meta(self) -> dict[str, Any]:
        return {"language": self.language, "mode": self.mode, "version": LEXICAL_VERSION}


def split_identifier(word: str) -> list[str]:
    """`getUserName` → [get, user, name]; `HTTPServer2` → [http, server, 2]; `a_b` → [a, b]."""
    part = _ASCII_PART if word.isascii() else _part()
    return [p.lower() for piece in word.split("_") for p in part.findall(piece)]


def identifier_terms(text: str) -> str:
    """The extra terms of every compound identifier in `text`: its parts, and for names with
    underscores the joined form too. Empty when there is no compound identifier."""
    extra: list[str] = []
    for m in _IDENT.finditer(text):
        word = m.group()
        parts = split_identifier(word)
        if len(parts) < 2:
            continue
        extra += parts
        if "_" in word.strip("_"):
            extra.append("".join(parts))
    return " ".join(extra)


def prefix_stems(text: str) -> str:
    """Every word cut to its first PREFIX_STEM characters (`momentem` → `momen`)."""
    return _word().sub(lambda m: m.group()[:PREFIX_STEM], text)


def parse_language(value: str) -> str:
    """A --language value: an ISO 639-1 code (`cs`) or a language name (`Czech`)."""
    v = value.strip().lower()
    if len(v) == 2 and v.isalpha():
        return v
    names = {name.lower(): code for code, name in STEMMED.items()}
    names.update({"czech": "cs", "polish": "pl", "slovak": "sk", "croatian": "hr",
                  "serbian": "sr", "slovenian": "sl", "ukrainian": "uk", "bulgarian": "bg",
                  "chinese": "zh", "japanese": "ja", "korean": "ko", "latvian": "lv",
                  "lithuanian": "lt", "estonian": "et", "indonesian": "id", "vietnamese": "vi"})
    if v in names:
        return names[v]
    raise HydraError(f"unknown language {value!r}: give an ISO 639-1 code such as `en`, `de`, "
                     f"`cs` or a name such as German")


def detect_language(samples: list[str]) -> str:
    """The dominant language of some prose samples (py3langid); English when unsure."""
    text = "\n".join(samples)[:20_000]
    if len(_word().findall(text)) < 20:
        return "en"
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    global _IDENTIFIER
    if _IDENTIFIER is None:
        _IDENTIFIER = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    code, prob = _IDENTIFIER.classify(text)
    return str(code) if prob >= MIN_LANGUAGE_CONFIDENCE else "en"


MIN_LANGUAGE_CONFIDENCE = 0.8
_IDENTIFIER: Any = None
