"""The prompt's markers, echoed by a model, never reach the answer (pure)."""

from __future__ import annotations

import pytest

from hydra_rag.answer.echo import EchoFilter, clean


def stream(pieces: list[str]) -> tuple[str, str, bool]:
    """What is shown as the pieces arrive, joined; the filter's text; whether it removed any."""
    f = EchoFilter()
    shown = "".join(f.feed(p) for p in pieces) + f.close()
    return shown, f.text, f.removed


@pytest.mark.parametrize(("answer", "expected"), [
    ("The pool holds 10 connections [1].", "The pool holds 10 connections [1]."),
    ("END-CONTEXT-9f3a01bc\nThe pool holds 10 [1].", "The pool holds 10 [1]."),
    ("The pool holds 10 [1].\nEND-CONTEXT-9f3a01bc", "The pool holds 10 [1].\n"),
    ("BEGIN-CONTEXT-zz12 The answer is 3 [2].", "The answer is 3 [2]."),
    ("It is 3 END-CONTEXT-1f2 and 4 [1].", "It is 3 and 4 [1]."),
    ("END-CONTEXT", ""),
    # Words that only look like the start of one stay.
    ("BEGINNERS read ENDPOINTS and the END of it.", "BEGINNERS read ENDPOINTS and the END of it."),
    ("Line one\n\nLine two", "Line one\n\nLine two"),
])
def test_markers_are_removed_however_the_answer_is_cut(answer: str, expected: str) -> None:
    assert clean(answer) == expected
    for size in (1, 2, 3, 5, 8):  # any way a stream may cut it into pieces
        pieces = [answer[i:i + size] for i in range(0, len(answer), size)]
        shown, text, removed = stream(pieces)
        assert shown == text == expected, (size, pieces)
        assert removed == (expected != answer)


def test_ordinary_text_is_shown_as_it_arrives() -> None:
    f = EchoFilter()
    assert f.feed("The default ") == "The default "
    assert f.feed("is 30 ") == "is 30 "
    # A word that may be the start of a marker waits for the next piece, then is shown.
    assert f.feed("END") == ""
    assert f.feed("S here.") == "ENDS here."
    assert f.close() == ""


@pytest.mark.parametrize(("pieces", "expected"), [
    # Pieces cut at words, with the leading space a model's tokens carry.
    (["It is 3", " END", "-CONTEXT-1f2", " and 4 [1]."], "It is 3 and 4 [1]."),
    (["- item one", " END-CONTEXT-ab", "\n- item two"], "- item one\n- item two"),
    (["A [1]", " BEGIN", "-CONTEXT", "-9f", "\n", "B [2]."], "A [1]\nB [2]."),
    (["  ", "END-CONTEXT-a", "\n", "    indented"], "    indented"),
    (["See the-END", "-CONTEXT-x1 note"], "See the- note"),
])
def test_markers_split_across_pieces_leave_words_and_lines_as_they_were(
        pieces: list[str], expected: str) -> None:
    shown, text, removed = stream(pieces)
    assert shown == text == expected
    assert removed


def test_the_rest_of_a_line_is_shown_once_the_marker_is_past() -> None:
    f = EchoFilter()
    assert f.feed("It is 3 ") == "It is 3 "
    assert f.feed("END-CONTEXT-1f2") == ""
    assert f.feed(" and") == "and"  # the space before the marker is the one between words
    assert f.feed(" 4 [1].") == " 4 [1]."
    assert f.close() == ""
    assert f.text == "It is 3 and 4 [1]."
