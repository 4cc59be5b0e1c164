"""Follow-ups keep their subject: the query searched for a question that leans on an earlier
one (pure)."""

from __future__ import annotations

import pytest

from hydra_rag.answer.followup import is_follow_up, search_query


@pytest.mark.parametrize("earlier, question, query", [
    (["What does send_from_directory do?"], "Where is it defined?",
     "send_from_directory Where is it defined?"),
    (["What does send_from_directory do?", "Where is it defined?"], "What arguments does it take?",
     "send_from_directory What arguments does it take?"),
    (["How does Session.send work?"], "What does it return when the file is missing?",
     "Session.send What does it return when the file is missing?"),
    (["How does the adapter pool connections?"], "what about the timeout?",
     "adapter pool connections what about the timeout?"),
    (["How do I parse JSON?"], "And in Go?", "parse JSON And in Go?"),
    # A question with a subject of its own is searched as typed.
    (["What does send_from_directory do?"], "How are retries configured in the adapter?",
     "How are retries configured in the adapter?"),
    (["What does send_from_directory do?"], "Where is safe_join defined?", "Where is safe_join defined?"),
    ([], "Where is it defined?", "Where is it defined?"),
])
def test_search_query(earlier: list[str], question: str, query: str) -> None:
    assert search_query(question, earlier)[0] == query


def test_the_carried_subject_is_reported() -> None:
    assert search_query("Where is it defined?", ["Explain `Console.print`"]) == (
        "Console.print Where is it defined?", "Console.print")
    assert search_query("Explain Console.print", ["anything"]) == ("Explain Console.print", "")


def test_is_follow_up() -> None:
    assert is_follow_up("and this one?")
    assert not is_follow_up("How does the chunker split long lines?")
