"""A conversation's next turn evaluates only what is new: after an answer, the chat sidecar
evaluates the turns so far (Chat.warm_next), so llama.cpp reuses them as the next prompt's
prefix. Observed in the real sidecar's own log, which says how many prompt tokens each request
evaluated."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from conftest import run_cli
from hydra_rag.answer.chat import Chat
from hydra_rag.catalog import get_model
from hydra_rag.config import load_settings
from hydra_rag.models.sidecar import prompt_evaluations, read_record


def _evaluated(model: str) -> list[int]:
    assert read_record(model) is not None
    return prompt_evaluations(model)


def _second_turn(root: Path, warm: bool) -> tuple[int, int, int]:
    """(prompt tokens, tokens the sidecar evaluated for it, tokens of the turn before)."""
    # (the default model's prompts carry no earlier turns: its catalog entry says turns: 0)
    settings = replace(load_settings(), chat_warm=warm, chat_turns=4)
    chat = Chat(get_model("smollm2-135m"), [root], settings, new=True, save=False, top_k=3,
                params={"max_tokens": 24, "temperature": 0.0})
    try:
        chat.ask("Which header carries the API key?")
        thread = chat.warm_next()
        assert (thread is not None) == warm
        if thread is not None:
            thread.join(60)
        before = len(_evaluated("smollm2-135m"))
        result = chat.ask("And how is a monthly invoice summed?")
        evaluated = _evaluated("smollm2-135m")[before:]
        first = chat.history[0]
        turn = chat.count(first.user) + chat.count(first.answer)
        return result.usage["prompt_tokens"], sum(evaluated), turn
    finally:
        chat.close()


def test_earlier_turns_as_the_model_or_the_setting_says(home: Path, corpus: Path) -> None:
    assert run_cli("index", str(corpus)).returncode == 0
    chat = Chat(get_model("smollm2-135m"), [corpus], load_settings(), new=True, save=False,
                top_k=3, params={"max_tokens": 8, "temperature": 0.0})
    try:
        notes = []
        for q in ("Which header carries the API key?", "How is a monthly invoice summed?",
                  "Where are tomatoes staked?"):
            notes += [n for n in chat.ask(q).notes if "earlier turn(s) were not sent" in n]
        # said once a chat, from the second turn on
        assert len(notes) == 1 and "its catalog entry: turns: 0" in notes[0], notes
        roles = [m["role"] for m in chat.prompt("And then?", []).messages]
        assert roles == ["system", "user"]  # smollm2-135m: turns: 0
        assert chat.warm_next() is None  # nothing to evaluate ahead beyond the system prompt
        chat.settings = replace(chat.settings, chat_turns=1)
        sent = chat.prompt("And then?", []).messages
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
        assert sent[1]["content"] == "Where are tomatoes staked?"
        chat.settings = replace(chat.settings, chat_turns=8)
        assert len(chat.prompt("And then?", []).messages) == 8
    finally:
        chat.close()


def test_the_next_turn_reuses_the_conversation_so_far(home: Path, corpus: Path) -> None:
    assert run_cli("index", str(corpus)).returncode == 0
    total, evaluated, _ = _second_turn(corpus, warm=False)
    reused_cold = total - evaluated
    total, evaluated, turn = _second_turn(corpus, warm=True)
    reused_warm = total - evaluated
    # Without it, only the system prompt is reused: the turn before is evaluated again. With
    # it, that turn (its question and answer) is reused too.
    assert turn > 10 and reused_cold > 50, (reused_cold, turn)
    assert reused_warm >= reused_cold + turn, (reused_cold, reused_warm, turn)


def test_a_catalog_entry_says_how_many_turns() -> None:
    import yaml

    from hydra_rag.catalog.parse import parse_catalog
    from hydra_rag.errors import ConfigError

    def model(**extra: object) -> str:
        return yaml.safe_dump({"models": [{"id": "m", "file": "m.gguf", **extra}]})

    assert parse_catalog(model(turns=2), "c.yaml").models["m"].turns == 2
    assert parse_catalog(model(), "c.yaml").models["m"].turns == -1  # all, as before
    assert get_model("smollm2-135m").turns == 0
    with pytest.raises(ConfigError, match="field 'turns' must be -1 \\(all\\) or a number"):
        parse_catalog(model(turns=-2), "c.yaml")
