"""Follow-ups that keep their subject (pure): "where is it defined?" after "what does
send_from_directory do?" is searched as "send_from_directory where is it defined?".

A question that points back (it, this, they, …) and names nothing of its own, or that has at
most one content word, is a follow-up: the subject of the latest earlier question that had one
— the names it holds (identifiers, dotted paths, backticked spans, capitalised words), then
its other content words — is put before it (an earlier follow-up is passed over: its subject
came from before it). A question that names its own subject is searched as it is, with the
question before it as a second, lighter query. No model call: a rule that costs nothing per
turn and that a small chat model cannot get wrong (BENCHMARKS.md "Follow-ups" has the
figures). `follow_up: rewrite` asks the chat model instead (rewrite_messages,
parse_rewrite), for a model strong enough.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hydra_rag.search.definitions import capitalised
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


def names_of(text: str) -> list[str]:
    """The names a question holds: identifiers, dotted paths, backticked spans, and its
    capitalised words ("the Segment class")."""
    return list(dict.fromkeys([*literal_terms(text), *capitalised(text)]))


def subject(text: str) -> str:
    """What an earlier question was about: its names first, then its other content words."""
    names = names_of(text)
    parts = {p.lower() for n in names for p in _WORD.findall(n)}
    rest = [w for w in content_words(text) if w.lower() not in parts]
    return " ".join([*names, *rest][:max(SUBJECT_WORDS, len(names))])


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
    """How a chat turn is searched without a model: (query, the subject carried into it, a
    second query searched along with it). Mode "off": the question as typed, with the one
    before it; "carry" (and "rewrite", where the model's rewrite is no use): the subject
    carried."""
    query, carried = search_query(question, earlier) if mode != "off" else (question, "")
    also = f"{earlier[-1]} {question}" if earlier and not carried else None
    return query, carried, also



# `follow_up: rewrite`: the chat model writes the follow-up as a question that stands alone.
REWRITE_INSTRUCTION = (
    "Rewrite the user's last question so that it stands alone: put in the name or subject it "
    "refers to from the earlier questions. Reply with the rewritten question only, on one line."
)
# One worked example, so that even a small model sees the form of the answer.
_EXAMPLE = ("Earlier questions:\n- What does merge_cookies do?\nLast question: where is it "
            "called?", "Where is merge_cookies called?")
REWRITE_PARAMS = {"max_tokens": 48, "temperature": 0.0}
_LEAD = re.compile(r"^\s*(?:rewritten(?: question)?|standalone(?: question)?|question|query)"
                   r"\s*:\s*", re.I)


def rewrite_messages(question: str, earlier: Sequence[str], keep: int = 3) -> list[dict[str, str]]:
    """The chat messages that ask a model to rewrite `question` after the `keep` latest of
    the `earlier` questions."""
    listed = "\n".join(f"- {q}" for q in earlier[-keep:])
    return [{"role": "system", "content": REWRITE_INSTRUCTION},
            {"role": "user", "content": _EXAMPLE[0]},
            {"role": "assistant", "content": _EXAMPLE[1]},
            {"role": "user", "content": f"Earlier questions:\n{listed}\nLast question: {question}"}]


def parse_rewrite(text: str, question: str) -> str | None:
    """The rewritten question from a model's reply, or None when the reply is no use: empty,
    the question unchanged, the worked example echoed, far longer than a question, or without
    a word that carries a topic."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = _LEAD.sub("", line.lstrip("-*• ")).strip().strip("\"'`“”").strip()
    if not line or line == _EXAMPLE[1] or "merge_cookies" in line and "merge_cookies" not in question:
        return None
    if line.casefold().rstrip("?. ") == question.strip().casefold().rstrip("?. "):
        return None  # not rewritten
    if len(line) > 4 * len(question) + 120 or not content_words(line):
        return None
    return line
