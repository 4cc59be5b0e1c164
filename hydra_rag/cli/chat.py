"""`hydra-rag chat` and `hydra-rag ask`: a conversation, or one question, over indexed folders."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from hydra_rag import api
from hydra_rag.cli.base import (
    RERANK,
    RERANK_TOP,
    app,
    print_json,
    say,
)
from hydra_rag.errors import ModelError, UsageError


def _warn(message: str) -> None:
    say(f"warning: {message}")


_RAG = Annotated[list[Path] | None, typer.Option(
    "--rag", help="Indexed folder to retrieve from (repeatable; default: the nearest index).")]
_NO_RAG = Annotated[bool, typer.Option("--no-rag", help="No retrieval: the bare model.")]
_RAG_ALL = Annotated[bool, typer.Option("--rag-all", help="Retrieve from every registered folder.")]
_RAG_TAG = Annotated[list[str] | None, typer.Option(
    "--rag-tag", help="Retrieve from the registered folders with this tag (repeatable).")]
_TOPK = Annotated[int | None, typer.Option("--top-k", min=1, max=50,
                                            help="Passages per turn (default 5).")]
_SYSTEM = Annotated[str | None, typer.Option("--system", help="System prompt text.")]
_SYSTEM_FILE = Annotated[Path | None, typer.Option("--system-file", help="System prompt file.")]
_TEMP = Annotated[float | None, typer.Option("--temperature", help="Sampling temperature.")]
_MAXTOK = Annotated[int | None, typer.Option("--max-tokens", min=1, help="Answer length cap.")]


def _stdin_text() -> str:
    """All of standard input, as text (bytes that are not UTF-8 replaced, as the REPL reads
    them)."""
    return sys.stdin.buffer.read().decode("utf-8", errors="replace").strip()


@app.command()
def chat(
    model: Annotated[str | None, typer.Argument(
        help="Chat model id or bundle alias (`hydra-rag list`; default: setting "
             "`default_model`).")] = None,
    rag: _RAG = None,
    rag_all: _RAG_ALL = False,
    rag_tag: _RAG_TAG = None,
    top_k: _TOPK = None,
    no_rag: _NO_RAG = False,
    session: Annotated[str | None, typer.Option("--session", help="Session name.")] = None,
    new: Annotated[bool, typer.Option("--new", help="Start the session afresh.")] = False,
    system: _SYSTEM = None,
    system_file: _SYSTEM_FILE = None,
    temperature: _TEMP = None,
    max_tokens: _MAXTOK = None,
    show_context: Annotated[bool, typer.Option(
        "--show-context", help="Print the query searched and the prompt sent with each turn.")] = False,
    rerank: RERANK = None,
    rerank_top: RERANK_TOP = None,
) -> None:
    """Chat with retrieval on every turn; answers cite \\[n] sources, checked in code."""
    from hydra_rag.answer.repl import Repl

    c = api.open_chat(model, rag, no_rag, top_k, session, new, system, system_file,
                      temperature, max_tokens, rag_all=rag_all, rag_tag=rag_tag, rerank=rerank,
                      rerank_top=rerank_top, warn=_warn)
    try:
        repl = Repl(c, show_context=show_context)
        if sys.stdin.isatty():
            repl.run_terminal()
        else:
            import io

            stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
            repl.run_piped(stdin)
    finally:
        c.close()


@app.command()
def ask(
    words: Annotated[list[str] | None, typer.Argument(
        metavar="[MODEL] QUESTION",
        help="The question, after a chat model id or bundle alias if you name one (default: "
             "setting `default_model`); `-` or none: read it from standard input.")] = None,
    rag: _RAG = None,
    rag_all: _RAG_ALL = False,
    rag_tag: _RAG_TAG = None,
    top_k: _TOPK = None,
    no_rag: _NO_RAG = False,
    system: _SYSTEM = None,
    system_file: _SYSTEM_FILE = None,
    temperature: _TEMP = None,
    max_tokens: _MAXTOK = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    rerank: RERANK = None,
    rerank_top: RERANK_TOP = None,
    show_context: Annotated[bool, typer.Option(
        "--show-context", help="Print the query searched and the prompt sent.")] = False,
) -> None:
    """One question, one answer (with sources and the citation check). The question may come
    on standard input: `echo QUESTION | hydra-rag ask`, or `-` in its place."""
    from hydra_rag.answer.repl import render_checks, render_context, render_sources

    words = list(words or [])
    if len(words) > 2:
        raise typer.BadParameter("give the question as one argument (in quotes), after the "
                                 "model if you name one", param_hint="[MODEL] QUESTION")
    if not words and sys.stdin.isatty():
        raise UsageError("give a question: `hydra-rag ask \"QUESTION\"`, or on standard input "
                         "(`echo QUESTION | hydra-rag ask`)")
    if not words or words[-1] == "-":
        words[-1:] = [_stdin_text()]
    model, question = (None, words[0]) if len(words) == 1 else (words[0], words[1])
    if model is not None:
        from hydra_rag.catalog import get_model, load_bundles

        if model not in load_bundles():
            try:
                get_model(model)
            except ModelError as exc:  # "hello world" unquoted: say how to ask it
                raise ModelError(f"{exc}; a question of several words goes in quotes: "
                                 f"`hydra-rag ask \"{' '.join(words)}\"`") from None
    if not question.strip():  # before any model or sidecar is started
        raise UsageError("the question is empty")
    c = api.open_chat(model, rag, no_rag, top_k, None, True, system, system_file, temperature,
                      max_tokens, save=False, rag_all=rag_all, rag_tag=rag_tag, rerank=rerank,
                      rerank_top=rerank_top, warn=_warn)
    c.rag_off_hint = "ask again with --no-rag"
    try:
        stream = not as_json

        def on_token(piece: str) -> None:
            if stream:
                sys.stdout.write(piece)
                sys.stdout.flush()

        result = c.ask(question, on_token)
    finally:
        c.close()
    if as_json:
        doc = result.to_json()
        if show_context:
            doc["prompt"] = result.prompt.messages if result.prompt else []
        print_json(doc)
        return
    if result.no_context:
        sys.stdout.write(result.answer)
    sys.stdout.write("\n")
    for line in render_sources(result) + render_checks(result):
        print(line)
    if show_context:
        print(render_context(result))
    if result.hint:  # after the answer: stdout first
        sys.stdout.flush()
        say(result.hint)
