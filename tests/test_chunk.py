"""The chunker: lines kept whole, exact line ranges, bounded sizes, overlap, long-line cuts."""

from __future__ import annotations

import random

import pytest

from hydra_rag.chunk import HARD, OVERLAP, TARGET, chunk_text


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _check_ranges(text: str, chunks) -> None:
    lines = _lines(text)
    for ch in chunks:
        assert 1 <= ch.line_start <= ch.line_end <= len(lines)
        span = "".join(lines[ch.line_start - 1 : ch.line_end])
        assert ch.text in span
        # Whole lines, except where a chunk starts or ends inside an over-long line.
        if len(lines[ch.line_start - 1]) <= HARD and len(lines[ch.line_end - 1]) <= HARD:
            assert ch.text == span


def _python_source(n_funcs: int) -> str:
    parts = []
    for i in range(n_funcs):
        body = "\n".join(f"    value_{j} = compute_{i}(argument_{j}) + {j}" for j in range(6))
        parts.append(f"def function_number_{i}(argument_0, argument_1):\n{body}\n    return value_0\n")
    return "\n\n".join(parts)


def test_short_text_is_one_chunk() -> None:
    chunks = chunk_text("line one\nline two\n")
    assert [(c.line_start, c.line_end, c.text) for c in chunks] == [(1, 2, "line one\nline two\n")]


def test_empty_and_blank_text_give_no_chunks() -> None:
    assert chunk_text("") == []
    assert chunk_text("\n\n   \n") == []


def test_ranges_sizes_and_coverage_on_code() -> None:
    text = _python_source(40)
    chunks = chunk_text(text)
    _check_ranges(text, chunks)
    assert len(chunks) > 5
    assert all(len(c.text) <= TARGET for c in chunks)
    covered = set()
    for c in chunks:
        covered.update(range(c.line_start, c.line_end + 1))
    assert covered == set(range(1, len(_lines(text)) + 1)) - {
        i + 1 for i, ln in enumerate(_lines(text)) if not ln.strip()
    } | covered  # every non-blank line is in some chunk
    nonblank = {i + 1 for i, ln in enumerate(_lines(text)) if ln.strip()}
    assert nonblank <= covered


def test_chunks_end_at_definition_boundaries() -> None:
    text = _python_source(40)
    lines = _lines(text)
    for c in chunk_text(text)[:-1]:
        nxt = lines[c.line_end] if c.line_end < len(lines) else ""
        # The next line after a chunk starts a definition or is blank: no cut signature.
        assert nxt.startswith("def ") or not nxt.strip() or not lines[c.line_end - 1].strip()


def test_overlap_is_whole_lines_and_bounded() -> None:
    text = "".join(f"sentence number {i} of a long plain text file\n" for i in range(300))
    chunks = chunk_text(text)
    _check_ranges(text, chunks)
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.line_start <= a.line_end + 1  # contiguous or overlapping
        shared = a.line_end - b.line_start + 1
        if shared > 0:
            overlap_chars = sum(len(ln) for ln in _lines(text)[b.line_start - 1 : a.line_end])
            assert 0 < overlap_chars <= OVERLAP


def test_single_long_line_is_cut_below_the_hard_limit() -> None:
    minified = "{" + ",".join(f'"key{i}":"value {i}"' for i in range(20000)) + "}"
    text = "first line\n" + minified + "\nlast line\n"
    chunks = chunk_text(text)
    assert len(chunks) > 100
    assert max(len(c.text) for c in chunks) <= max(TARGET, HARD)
    assert {c.line_start for c in chunks if c.line_start == c.line_end} >= {2}
    assert "".join(c.text for c in chunks if c.line_start == 2 == c.line_end).startswith('{"key0"')
    _check_ranges(text, chunks)


def test_fits_callback_forces_smaller_chunks() -> None:
    text = _python_source(10)
    chunks = chunk_text(text, fits=lambda s: len(s) <= 300)
    assert chunks and all(len(c.text) <= 300 for c in chunks)
    _check_ranges(text, chunks)


def test_fits_callback_cuts_a_line_that_alone_is_too_long() -> None:
    text = "x" * 1000 + "\n"
    chunks = chunk_text(text, fits=lambda s: len(s) <= 100)
    assert all(len(c.text) <= 100 for c in chunks)
    # Pieces are disjoint and in order; only the whitespace-only tail (the newline) is dropped.
    assert "".join(c.text for c in chunks) == "x" * 1000


@pytest.mark.parametrize("seed", range(5))
def test_random_texts_keep_invariants(seed: int) -> None:
    rnd = random.Random(seed)
    lines = []
    for _ in range(rnd.randint(1, 400)):
        n = rnd.choice([0, 5, 40, 80, 200, 900, 4000])
        lines.append("é" * (n // 3) + "a" * (n - n // 3) + "\n")
    text = "".join(lines)
    chunks = chunk_text(text)
    _check_ranges(text, chunks)
    assert all(len(c.text) <= max(TARGET, HARD) for c in chunks)
