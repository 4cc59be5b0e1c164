"""Keeping a search to some files: `--glob PATTERN` (gitignore's syntax, as ripgrep's --glob:
`*.py`, `src/**/*.ts`, `!tests/`), `--lang L` (a language, by its files' suffixes) and
`--path FILE-OR-SUBFOLDER` of an indexed folder. Pure: which recorded paths of a folder a
search may return."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from hydra_rag.errors import UsageError
from hydra_rag.read.grammars import NAMES, SUFFIXES

# Languages by name, with their suffixes: those the symbol parser reads, and others people ask for.
_MORE = {
    "csharp": (".cs",), "kotlin": (".kt", ".kts"), "swift": (".swift",), "scala": (".scala",),
    "php": (".php",), "lua": (".lua",), "perl": (".pl", ".pm"), "r": (".r",),
    "haskell": (".hs",), "elixir": (".ex", ".exs"), "erlang": (".erl",), "dart": (".dart",),
    "zig": (".zig",), "sql": (".sql",), "html": (".html", ".htm"), "css": (".css", ".scss"),
    "json": (".json",), "yaml": (".yaml", ".yml"), "toml": (".toml",), "xml": (".xml",),
    "markdown": (".md", ".markdown", ".mdx"), "rst": (".rst",), "text": (".txt",),
    "pdf": (".pdf",), "docx": (".docx",), "vue": (".vue",), "svelte": (".svelte",),
}
ALIASES = {"py": "python", "js": "javascript", "ts": "typescript", "golang": "go",
           "rs": "rust", "c++": "cpp", "cxx": "cpp", "sh": "bash", "shell": "bash",
           "rb": "ruby", "md": "markdown", "cs": "csharp", "kt": "kotlin", "yml": "yaml"}


def _languages() -> dict[str, tuple[str, ...]]:
    langs: dict[str, list[str]] = {}
    for suffix, lang in SUFFIXES.items():
        langs.setdefault(lang, []).append(suffix)
    langs.setdefault("typescript", []).extend(langs.get("tsx", []))
    return {**{k: tuple(v) for k, v in langs.items()}, **_MORE}


LANGUAGES = _languages()


@dataclass(frozen=True)
class PathFilter:
    """The files a search is kept to: matching every glob given (a `!glob` excludes),
    written in one of the languages given, and, in a folder named in `within`, one of the
    files or under one of the subfolders named there."""

    globs: tuple[str, ...] = ()
    langs: tuple[str, ...] = ()
    # (folder, path relative to it): a file, a subfolder, or "" for the whole folder. A folder
    # not named here is searched whole.
    within: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, globs: Sequence[str] | None, langs: Sequence[str] | None,
           within: tuple[tuple[str, str], ...] = ()) -> PathFilter | None:
        """A filter from the command line's --glob, --lang and `within` (`api.within` of
        --path); None when none of them keeps anything out. An unknown language or an empty
        glob is a UsageError."""
        globs = [g.strip() for g in globs or ()]
        if any(not g or g == "!" for g in globs):
            raise UsageError("--glob needs a pattern (gitignore's syntax: *.py, src/**, !tests/)")
        names = []
        for lang in langs or ():
            name = ALIASES.get(lang.strip().lower(), lang.strip().lower())
            if name not in LANGUAGES:
                raise UsageError(f"unknown language {lang!r}; known: "
                                 + ", ".join(sorted(LANGUAGES)))
            names.append(name)
        if not any(rel for _, rel in within):
            within = ()  # whole folders only
        return cls(tuple(globs), tuple(names), within) if globs or names or within else None

    def match(self, path: str, root: str = "") -> bool:
        return self._within(root, path) and self._spec().match_file(path) and self._lang(path)

    def select(self, paths: Iterable[str], root: str = "") -> frozenset[str]:
        spec = self._spec()
        return frozenset(p for p in paths
                         if self._within(root, p) and spec.match_file(p) and self._lang(p))

    def _within(self, root: str, path: str) -> bool:
        rels = [rel for r, rel in self.within if r == root]
        return not rels or any(rel in ("", path) or path.startswith(rel + "/") for rel in rels)

    def _spec(self) -> Any:
        import pathspec

        lines = list(self.globs)
        if not lines or all(g.startswith("!") for g in lines):
            lines.insert(0, "*")  # only exclusions: everything else is in
        return pathspec.PathSpec.from_lines("gitignore", lines)

    def _lang(self, path: str) -> bool:
        if not self.langs:
            return True
        p = PurePosixPath(path)
        lang = SUFFIXES.get(p.suffix.lower()) or NAMES.get(p.name)
        suffix = p.suffix.lower()
        return any(lang == want or (want == "typescript" and lang == "tsx")
                   or suffix in LANGUAGES[want] for want in self.langs)

    def describe(self) -> str:
        parts = [*(f"--path {root}/{rel}" for root, rel in self.within if rel),
                 *(f"--glob {g}" for g in self.globs), *(f"--lang {lang}" for lang in self.langs)]
        return " ".join(parts)
