"""What a code file's first lines say of it, for the embedder (pure): not much. A licence
header, the package line and the imports fill a file's first chunk, and a small embedder
averages them into its vector with whatever the chunk defines; a question about the constants
or the first function of the file then meets a vector about licences and imports. The full-text
index still holds every line: an import or a licence is found there by its words."""

from __future__ import annotations

import re

# A line that opens or continues a comment (not a C preprocessor line).
_COMMENT = re.compile(r"^(?://|/\*|\*|--(?:\s|$)|#(?!\s*(?:include|import|pragma|define|"
                      r"if|ifdef|ifndef|endif|else|elif|undef)\b)|;;)")
_LICENCE = re.compile(r"copyright|licen[cs]e|spdx|all rights reserved|\(c\)", re.I)
# A line that only says where names come from: imports, includes, package and module lines.
_IMPORT = re.compile(
    r"^(?:import\b|from\s+[\w.]+\s+import\b|package\s+[\w.]+\s*;?\s*$|#\s*include\b|"
    r"#\s*pragma\s+once\b|#\s*import\b|using\s+(?:namespace\s+|static\s+)?[\w:.]+\s*;|"
    r"(?:pub\s+)?use\s+[\w:]+|extern\s+crate\b|(?:pub\s+)?mod\s+\w+\s*;|"
    r"(?:const|let|var)\s+[\w{},\s]+=\s*require\(|[\"']use strict[\"'];?\s*$|"
    r"export\s+(?:\*|\{[^}]*\}?)\s*(?:as\s+\w+\s+)?from\b|export\s+\*|require\s*\()")
_DOCSTRING = re.compile(r'^[rRuUbB]?("""|\'\'\')')
_OPEN, _CLOSE = "([{", ")]}"


def _depth(line: str) -> int:
    return sum(line.count(c) for c in _OPEN) - sum(line.count(c) for c in _CLOSE)


def without_preamble(text: str) -> str:
    """`text` without the lines it starts with that only license or import: blank lines, a
    shebang, a comment block that speaks of copyright or a licence, package, import, include
    and `use` lines (a statement over several lines whole). Other comments and a module's
    docstring stay, as does everything from the first other line on. A text that is nothing
    but its preamble is returned as it is."""
    lines = text.splitlines()
    kept: list[str] = []
    i, n = 0, len(lines)
    while i < n:
        s = lines[i].strip()
        if not s or (i == 0 and s.startswith("#!")):
            i += 1
        elif _COMMENT.match(s):
            j = i + 1
            if s.startswith("/*") and "*/" not in s[2:]:  # to the line that closes it
                j = next((k + 1 for k in range(i + 1, n) if "*/" in lines[k]), n)
            while j < n and lines[j].strip() and _COMMENT.match(lines[j].strip()):
                j += 1
            if not _LICENCE.search("\n".join(lines[i:j])):
                kept += lines[i:j]
            i = j
        elif doc := _DOCSTRING.match(s):
            quote = doc.group(1)
            j = i + 1 if s.count(quote) >= 2 else next(
                (k + 1 for k in range(i + 1, n) if quote in lines[k]), n)
            kept += lines[i:j]
            i = j
        elif _IMPORT.match(s):
            depth, j = _depth(s), i + 1
            while depth > 0 and j < n:
                depth += _depth(lines[j])
                j += 1
            i = j
        else:
            break
    if i == 0 or i >= n or not any(x.strip() for x in lines[i:]):
        return text
    return "\n".join([*kept, *lines[i:]])
