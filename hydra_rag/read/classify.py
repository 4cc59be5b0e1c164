"""Classify a file as `code` or `prose`: extension first, then a shebang, then the base name."""

from __future__ import annotations

from pathlib import PurePosixPath

CODE, PROSE = "code", "prose"

# Whole names whose extension alone would mislead (CMakeLists.txt is build code, not prose).
_EXACT = {
    "cmakelists.txt": CODE,
    "requirements.txt": CODE,
    "constraints.txt": CODE,
    "robots.txt": CODE,
}

_PROSE_EXT = {
    ".md", ".markdown", ".mdx", ".rst", ".txt", ".text", ".adoc", ".asciidoc", ".org",
    ".tex", ".ltx", ".bib", ".textile", ".wiki", ".mediawiki", ".pod", ".rdoc", ".nfo",
    ".csv", ".tsv", ".eml", ".srt", ".vtt", ".man",
}

_CODE_EXT = {
    # general purpose
    ".py", ".pyi", ".pyx", ".pxd", ".ipynb", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh",
    ".hxx", ".inl", ".m", ".mm", ".cs", ".java", ".kt", ".kts", ".scala", ".sc", ".groovy",
    ".gradle", ".clj", ".cljs", ".cljc", ".edn", ".go", ".rs", ".zig", ".nim", ".d", ".swift",
    ".dart", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx", ".vue", ".svelte",
    ".astro", ".rb", ".rake", ".gemspec", ".php", ".pl", ".pm", ".t", ".lua", ".r", ".jl",
    ".ex", ".exs", ".erl", ".hrl", ".hs", ".lhs", ".ml", ".mli", ".fs", ".fsi", ".fsx",
    ".elm", ".purs", ".sml", ".scm", ".ss", ".rkt", ".lisp", ".lsp", ".el", ".f", ".f90",
    ".f95", ".f03", ".for", ".ada", ".adb", ".ads", ".pas", ".pp", ".cob", ".cbl", ".v",
    ".sv", ".svh", ".vhd", ".vhdl", ".sol", ".cu", ".cuh", ".cl", ".glsl", ".hlsl", ".wgsl",
    ".metal", ".asm", ".s", ".tcl", ".awk", ".sed", ".vim", ".coffee", ".hx", ".cr", ".odin",
    ".proto", ".thrift", ".graphql", ".gql", ".sql", ".prisma",
    # shells and build
    ".sh", ".bash", ".zsh", ".fish", ".ksh", ".ps1", ".psm1", ".bat", ".cmd", ".mk", ".cmake",
    ".bazel", ".bzl", ".nix", ".dockerfile", ".make", ".ninja", ".meson",
    # markup, styles and configuration read like code
    ".html", ".htm", ".xhtml", ".xml", ".xsd", ".xsl", ".svg", ".css", ".scss", ".sass",
    ".less", ".styl", ".json", ".jsonc", ".json5", ".yaml", ".yml", ".toml", ".ini", ".cfg",
    ".conf", ".properties", ".tf", ".tfvars", ".hcl", ".j2", ".jinja",
    ".jinja2", ".tmpl", ".tpl", ".hbs", ".mustache", ".ejs", ".erb", ".haml", ".pug",
    ".liquid", ".twig", ".lock",
}

# Extension-less names (compared case-insensitively, before the first dot).
_CODE_NAMES = {
    "makefile", "gnumakefile", "dockerfile", "containerfile", "jenkinsfile", "vagrantfile",
    "rakefile", "gemfile", "podfile", "procfile", "brewfile", "justfile", "cmakelists",
    "build", "workspace", "sconstruct", "sconscript", "meson", "go.mod", "go.sum", "go.work",
    "pipfile", "cargo", "tiltfile", "snakefile", "caddyfile",
}
_PROSE_NAMES = {
    "readme", "license", "licence", "copying", "changelog", "changes", "history", "news",
    "authors", "contributors", "notice", "todo", "contributing", "code_of_conduct", "security",
    "install", "thanks", "credits", "faq", "maintainers", "patents",
}

_SHEBANG_CODE = {
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "python", "pypy", "perl", "ruby", "node",
    "nodejs", "deno", "bun", "lua", "luajit", "php", "tclsh", "wish", "awk", "gawk", "sed",
    "make", "rscript", "julia", "groovy", "scala", "kotlin", "elixir", "escript", "guile",
    "racket", "sbcl", "pwsh", "osascript", "swift", "runghc", "stack", "crystal", "nim", "v",
}


def interpreter(head: str) -> str:
    """The program a `#!` line runs, without path or version: `#!/usr/bin/env -S python3.11 -u`
    → `python`; "" if `head` has no such line."""
    if not head.startswith("#!"):
        return ""
    words = head[2:].split("\n", 1)[0].split()
    prog = words[0].rsplit("/", 1)[-1] if words else ""
    if prog == "env":  # env's own options and VAR=value settings come before the program
        rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        prog = rest[0].rsplit("/", 1)[-1] if rest else ""
    return prog.lower().rstrip("0123456789.-")


def classify(rel_path: str, head: str = "") -> str:
    """`code` or `prose` for a path relative to the root; `head` is the file's first line(s)."""
    name = PurePosixPath(rel_path).name
    lower = name.lower()
    if lower in _EXACT:
        return _EXACT[lower]
    if lower in ("go.mod", "go.sum", "go.work"):
        return CODE
    suffix = PurePosixPath(lower).suffix
    if suffix in _PROSE_EXT:
        return PROSE
    if suffix in _CODE_EXT:
        return CODE
    # A script says what it is in its first line: `install` with `#!/bin/sh` is code, though
    # `INSTALL` is a prose name.
    if interpreter(head) in _SHEBANG_CODE:
        return CODE
    base = lower.split(".", 1)[0]
    if base in _CODE_NAMES:
        return CODE
    if base in _PROSE_NAMES:
        return PROSE
    return PROSE
