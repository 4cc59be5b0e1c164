"""Follow-ups that keep their subject (pure): "where is it defined?" after "what does
send_from_directory do?" is searched as "send_from_directory where is it defined?".

A question that points back (it, this, they, …) and names nothing of its own, or that has at
most one content word, is a follow-up: the subject of the latest earlier question that had one
— the names it holds (identifiers, dotted paths, backticked spans), else its content words —
is put before it (an earlier follow-up is passed over: its subject came from before it). A
question that names its own subject is searched as it is, with the question before it as a
second, lighter query. No model call: a rule that costs nothing per turn and that a small
chat model cannot get wrong (BENCHMARKS.md "Follow-ups" has the figures).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hydra_rag.search.evidence import STOPWORDS
from hydra_rag.search.fuse import literal_terms

# Words that point back to something named earlier.
POINTERS = frozenset("""
it its it's itself this that these those they them their theirs he him his she her there
one ones same former latter such
""".split())  # noqa: SIM905 (a list of words reads better as text)
_WORD = re.compile(r"[^\W_]+(?:'[a-z]+)?", re.UNICODE)
SUBJECT_WORDS = 6  # content words carried when the earlier question names no identifier


def content_words(text: str) -> list[str]:
    """The words of a text that carry a topic, as typed, once each."""
    words = [w for w in _WORD.findall(text)
             if w.lower() not in STOPWORDS and w.lower() not in POINTERS and len(w) > 1]
    return list(dict.fromkeys(words))


def is_follow_up(question: str) -> bool:
    """Does the question lean on an earlier one for its subject?"""
    if literal_terms(question):
        return False  # it names its own subject
    words = {w.lower() for w in _WORD.findall(question)}
    content = content_words(question)
    return bool(words & POINTERS) and len(content) <= 3 or len(content) <= 1


def subject(text: str) -> str:
    """What an earlier question was about: its names, else its content words."""
    names = literal_terms(text)
    if names:
        return " ".join(names)
    return " ".join(content_words(text)[:SUBJECT_WORDS])


def search_query(question: str, earlier: Sequence[str]) -> tuple[str, str]:
    """The query to search for `question` after the user's `earlier` questions (oldest first),
    and the subject carried into it ("" when none was)."""
    if not earlier or not is_follow_up(question):
        return question, ""
    for previous in reversed(earlier):
        if is_follow_up(previous):
            continue  # its own subject came from before it
        carried = subject(previous)
        if carried:
            return f"{carried} {question}", carried
    return question, ""


def plan(question: str, earlier: Sequence[str], mode: str = "carry") -> tuple[str, str, str | None]:
    """How a chat turn is searched: (query, the subject carried into it, a second query
    searched along with it). Mode "off": the question as typed, with the one before it."""
    query, carried = search_query(question, earlier) if mode == "carry" else (question, "")
    also = f"{earlier[-1]} {question}" if earlier and not carried else None
    return query, carried, also

