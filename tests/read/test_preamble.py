"""A code chunk's licence header and imports are left out of what the embedder reads; what the
file says of itself (a module docstring, a package comment) and its code are not."""

from __future__ import annotations

from hydra_rag.index.prepare import embed_input
from hydra_rag.read.preamble import without_preamble

GO = """\
// Copyright 2013-2022 The Cobra Authors
//
// Licensed under the Apache License, Version 2.0 (the "License");

package cobra

import (
\t"fmt"
\t"os"
)

const (
\t// ShellCompRequestCmd is the name of the hidden command.
\tShellCompRequestCmd = "__complete"
)
"""

PYTHON = '''\
#!/usr/bin/env python3
"""Configuration: timeouts, limits and proxies."""
from __future__ import annotations

import typing
from ._models import (
    Headers,
    Request,
)

DEFAULT_LIMITS = Limits(max_connections=100, max_keepalive_connections=20)
'''

C = """\
/*
 * Copyright(c) 2015-present, Gabi Melman & spdlog contributors.
 * Distributed under the MIT License (http://opensource.org/licenses/MIT)
 */
#pragma once
#include <chrono>

// The levels a logger writes, lowest first.
enum class level { trace, debug };
"""


def test_a_licence_header_and_imports_are_left_out() -> None:
    assert without_preamble(GO) == (
        'const (\n\t// ShellCompRequestCmd is the name of the hidden command.\n'
        '\tShellCompRequestCmd = "__complete"\n)')


def test_a_module_docstring_stays_and_a_multi_line_import_goes_whole() -> None:
    assert without_preamble(PYTHON) == (
        '"""Configuration: timeouts, limits and proxies."""\n'
        'DEFAULT_LIMITS = Limits(max_connections=100, max_keepalive_connections=20)')


def test_a_block_comment_licence_goes_and_a_comment_on_the_code_stays() -> None:
    assert without_preamble(C) == (
        "// The levels a logger writes, lowest first.\nenum class level { trace, debug };")


def test_a_text_of_nothing_but_imports_is_kept_as_it_is() -> None:
    text = "import os\nimport sys\n"
    assert without_preamble(text) == text


def test_code_that_starts_at_once_is_unchanged() -> None:
    text = "def send(request):\n    import ssl\n    return request\n"
    assert without_preamble(text) == text


def test_a_comment_that_is_no_licence_stays() -> None:
    text = "// Package cobra is a commander for modern Go CLI interactions.\npackage cobra\n\nvar x = 1"
    assert without_preamble(text) == (
        "// Package cobra is a commander for modern Go CLI interactions.\nvar x = 1")


def test_only_code_is_embedded_without_its_preamble() -> None:
    def fits(_: str) -> bool:
        return True

    assert "Apache" not in embed_input("code", "completions.go", "ShellCompRequestCmd", GO, fits)
    prose = "Copyright 2020\n\nimport this\n\nThe rest."
    assert embed_input("prose", "notes.md", "", prose, fits).endswith(prose)
