"""Follow-ups keep their subject: the query searched for a question that leans on an earlier
one (pure)."""

from __future__ import annotations

import pytest

from hydra_rag.answer.followup import is_follow_up, parse_rewrite, rewrite_messages, search_query


@pytest.mark.parametrize("earlier, question, query", [
    (["What does send_from_directory do?"], "Where is it defined?",
     "send_from_directory Where is it defined?"),
    (["What does send_from_directory do?", "Where is it defined?"], "What arguments does it take?",
     "send_from_directory What arguments does it take?"),
    (["How does Session.send work?"], "What does it return when the file is missing?",
     "Session.send What does it return when the file is missing?"),
    (["How does the adapter pool connections?"], "what about the timeout?",
     "adapter pool connections what about the timeout?"),
    (["How do I parse JSON?"], "And in Go?", "JSON parse And in Go?"),
    # the name first, then the words ("where is it defined" needs the name)
    (["What does the Segment class represent?"], "Where is it defined?",
     "Segment class represent Where is it defined?"),
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


def test_rewrite_messages_list_the_latest_questions() -> None:
    msgs = rewrite_messages("Where is it defined?", ["a?", "b?", "c?", "What does f do?"])
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[-1]["content"] == ("Earlier questions:\n- b?\n- c?\n- What does f do?\n"
                                   "Last question: Where is it defined?")


@pytest.mark.parametrize("reply, parsed", [
    ("Where is send_from_directory defined?", "Where is send_from_directory defined?"),
    ('  \nRewritten question: "Where is send_from_directory defined?"\nmore',
     "Where is send_from_directory defined?"),
    ("- Where is send_from_directory defined?", "Where is send_from_directory defined?"),
    ("", None),
    ("where is it defined", None),  # not rewritten
    ("   \n  ", None),
    ("Where is merge_cookies called?", None),  # the worked example echoed
    ("?!", None),  # no word with a topic
    ("retry " * 300, None),  # far longer than a question
])
def test_parse_rewrite(reply: str, parsed: str | None) -> None:
    assert parse_rewrite(reply, "Where is it defined?") == parsed
