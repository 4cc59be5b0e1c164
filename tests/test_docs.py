"""What the README says of the build, the Makefile says the same (issue 46: the Makefile said
"about 5 minutes" for the llama.cpp build where the README gave the measured 11–19)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _ranges(text: str) -> set[str]:
    """Every "N–M minutes" (or "N-M", "about N minutes") in `text`, as "N-M" or "N"."""
    found = re.findall(r"(?:about )?(\d+)(?:\s*[–-]\s*(\d+))? minutes", text)
    return {f"{a}-{b}" if b else a for a, b in found}


def test_the_makefile_gives_the_readme_s_build_time() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    said = re.search(r"\*\*How long.*?compiling llama\.cpp", readme, re.S)
    assert said is not None, "README: the 'How long' paragraph is gone"
    measured = _ranges(said.group(0))
    assert measured, said.group(0)
    build = re.search(r"llama\.cpp is compiled.*?\n(?!\s*#)", make, re.S)
    assert build is not None, "Makefile: the comment on the llama.cpp build is gone"
    assert _ranges(build.group(0)) == measured, build.group(0)
