"""Answering: retrieve on every turn, build the prompt, stream from the chat-model sidecar,
list the sources and check the citations; sessions keep the user's own words."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from hydra_rag.answer import follow, sessions
from hydra_rag.answer.budget import by_lines, entry_cost, fit
from hydra_rag.answer.citations import CitationReport, check_citations
from hydra_rag.answer.echo import EchoFilter
from hydra_rag.answer.followup import REWRITE_PARAMS, parse_rewrite, plan, rewrite_messages
from hydra_rag.answer.prompt import Prompt, Source, Turn, build_prompt
from hydra_rag.catalog import ChatModel
from hydra_rag.config import Settings
from hydra_rag.errors import HydraError
from hydra_rag.models.chat import connect_chat, stream_chat
from hydra_rag.models.sidecar import read_record, touch
from hydra_rag.paths import store_names
from hydra_rag.read.symbols import scope_of
from hydra_rag.search.definitions import named_in, wanted
from hydra_rag.search.evidence import weak
from hydra_rag.search.fuse import literal_terms

# Tokens kept free beyond the answer's max_tokens, for template tokens the count misses.
MARGIN = 32
KEEPALIVE_SECONDS = 60.0
# The share of context_tokens the definitions a passage leans on (follow) may take together.
FOLLOW_SHARE = 0.5
# The smallest shipped chat model, the default and what the demo and the tests run: too weak to
# trust (BENCHMARKS.md "Answers"), so the first answer from it says how to get a better one.
SMALLEST = ("smollm2-135m",)


def larger_model_hint(model_id: str) -> str:
    """The hint after an answer from the smallest default model ("" for any other)."""
    if model_id not in SMALLEST:
        return ""
    return (f"hint: {model_id} is the smallest model, there for the demo and the tests, and its "
            "answers are often wrong; a larger one answers better: `hydra-rag models recommend` "
            "says which run at a usable speed here, `hydra-rag models pull ID` gets one")


# The request that evaluates a conversation for its next turn: one token, nothing random.
WARM_PARAMS = {"max_tokens": 1, "temperature": 0.0}

@dataclass
class TurnResult:
    """Everything about one turn (what `ask --json` prints)."""

    question: str
    answer: str
    sources: list[Source]
    citations: CitationReport
    retrieval: dict[str, Any]
    usage: dict[str, int]
    prompt: Prompt | None = None
    no_context: bool = False
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)
    multi: bool = False  # the chat spans several folders: sources name theirs
    finish: str = ""  # the model's finish_reason: "stop", or "length" when cut at max_tokens
    # Seconds: retrieval (search and fitting the context), to the first token, the whole turn
    timings: dict[str, float] = field(default_factory=dict)
    # For the person reading, on stderr, once a chat (never in --json): a larger model answers
    # better (`larger_model_hint`).
    hint: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "sources": [s.to_json() for s in self.sources],
            "citations": self.citations.to_json(),
            "retrieval": self.retrieval,
            "usage": self.usage,
            "timings": self.timings,
            "no_context": self.no_context,
        }


class Chat:
    """A conversation with one model over zero or more indexed folders."""

    def __init__(self, model: ChatModel, roots: list[Path], settings: Settings, *,
                 session: str | None = None, new: bool = False, system: str | None = None,
                 params: dict[str, Any] | None = None, top_k: int = 5, use_rag: bool = True,
                 save: bool = True, federated: bool = False, bundle: str | None = None) -> None:
        from hydra_rag.models.embed import Tokenizer

        self.model = model
        self.roots = roots
        self.settings = settings
        self.system = system
        self.params = {**model.params, **(params or {})}
        self.top_k = top_k
        self.use_rag = use_rag and bool(roots)
        # How the front end in use turns retrieval off ("/rag off", "--no-rag"), for the answer
        # that finds nothing relevant; "" where it has no such switch (MCP, HTTP).
        self.rag_off_hint = ""
        self.save_enabled = save
        self.searcher: Any = None
        self.warnings: list[str] = []
        if roots:
            from hydra_rag.search.retrieve import Searcher

            self.searcher = Searcher(roots, settings, skip_broken=federated)
        self.sidecar = connect_chat(model, settings)
        path = model.model_path()
        # A `url:` model without a local GGUF: count conservatively (a token per 3 bytes).
        self.count: Callable[[str], int] = (
            Tokenizer(str(path)).count if path is not None and path.is_file()
            else lambda text: len(text.encode("utf-8")) // 3 + 1)
        self.name = session or sessions.default_name(model.id, roots)
        doc = None if new else sessions.load(self.name)
        self.doc: dict[str, Any] = doc or {
            "name": self.name, "model": model.id, **({"bundle": bundle} if bundle else {}),
            "stores": [str(r) for r in roots],
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "turns": []}
        self.last: TurnResult | None = None
        self.hinted = False  # the larger model's hint is given once a chat
        self.said_turns = False  # that earlier turns are left out, said once a chat
        # Questions asked before this chat (an MCP client's conversation): searched with, like
        # the history's, but not sent to the model, having no answers.
        self.earlier: list[str] = []
        self._stop = threading.Event()
        threading.Thread(target=self._keepalive, daemon=True, name="hydra-keepalive").start()

    def _keepalive(self) -> None:
        """An open chat keeps its sidecars warm: no cold start because the user paused."""
        while not self._stop.wait(KEEPALIVE_SECONDS):
            ids = [self.model.id] + (self.searcher.sidecar_ids if self.searcher else [])
            for sid in ids:
                rec = read_record(sid)
                if rec is not None:
                    touch(rec)

    def close(self) -> None:
        self._stop.set()
        if self.searcher is not None:
            self.searcher.close()  # its loop's thread, now, not when it is collected

    @property
    def history(self) -> list[Turn]:
        return [Turn(t["user"], t["answer"]) for t in self.doc["turns"] if t.get("answer")]

    def reset(self) -> None:
        self.doc["turns"] = []
        self.last = None

    def budget(self) -> int:
        max_tokens = int(self.params.get("max_tokens", 512))
        return self.model.context - max_tokens - MARGIN

    def retrieve(self, question: str) -> tuple[list[Source], dict[str, Any], bool]:
        """Sources for a question, best first, each narrowed to the context budget. A
        follow-up that leans on an earlier question ("where is it defined?") is searched with
        that question's subject; another one also with the question before it."""
        assert self.searcher is not None
        earlier = [*self.earlier, *(t.user for t in self.history)]
        query, carried, also = plan(question, earlier, self.settings.follow_up)
        rewritten = None
        if self.settings.follow_up == "rewrite" and earlier and not literal_terms(question):
            rewritten = self.rewrite(question, earlier)
            if rewritten is not None:  # the rule's query searched with it, lighter
                query, carried, also = rewritten, "", query if query != rewritten else None
        pool = self.settings.context_pool
        if pool > self.top_k:  # the passages: the best of more hits, by their lines too
            hits = self.searcher.search(query, pool, also=also)
            # (a reranker, where one read them, has ranked them already: its order stands)
            hits = (hits[:self.top_k] if any(h.rerank is not None for h in hits)
                    else by_lines(hits, query, self.top_k, also))
        else:
            hits = self.searcher.search(query, self.top_k, also=also)
        self.warnings = list(self.searcher.warnings)
        # The model is not asked to answer from passages that do not bear on the question
        # (hydra_rag.search.evidence.weak): with none left, the folder has nothing on it.
        # A follow-up counts with the question before it, as it was searched.
        relevant = [h for h in hits
                    if not weak(h, query) or (also is not None and not weak(h, also))]
        names = store_names(self.roots)
        whole = [Source(i, h.store, h.path, h.line_start, h.line_end, h.text, h.section,
                        names.get(h.store, ""), h.page_start, h.page_end, h.page_unit)
                 for i, h in enumerate(relevant, start=1)]
        named = [any(n in ("name", "definition") for n in h.ranks) for h in relevant]
        sources = self._fit(whole, query, named)
        info = {"query": query, "question": question, "carried": carried, "also": also,
                **({"rewritten": rewritten} if rewritten is not None else {}),
                "context_tokens": self.settings.context_tokens, "hits": [
                    {"store": h.store, "path": h.path, "line_start": h.line_start,
                     "line_end": h.line_end, "score": round(h.score, 6), "ranks": h.ranks,
                     "similarity": None if h.similarity is None else round(h.similarity, 4)}
                    for h in hits]}
        return sources, info, bool(relevant)

    def _fit(self, whole: list[Source], query: str, named: list[bool]) -> list[Source]:
        """The passages cut to the context budget (budget.fit), each followed by the short
        definitions of the values it names (follow), which take their tokens from the same
        budget: the passages are cut again to what those leave."""
        budget, s = self.settings.context_tokens, self.settings
        stores = {str(store.root): store for store, _ in self.searcher.stores}
        scopes, defining, titles = (self._scopes(whole, stores, query)
                                    if s.context_scope and budget > 0 else ([], [], []))

        def cut(tokens: int) -> list[Source]:
            return fit(whole, query, self.count, tokens, s.context_lead, s.context_heads, named,
                       scopes, defining, titles)

        sources = cut(budget)
        if not s.context_follow or not sources:
            return sources
        lookup, lines, made, calls = follow.reading(stores)

        def followed(sent: list[Source]) -> list[tuple[int, Source]]:
            return follow.follow(sent, query, lookup, lines, made=made, calls=calls)

        def within(found: list[tuple[int, Source]], limit: float
                   ) -> tuple[list[tuple[int, Source]], int]:
            kept, spent = [], 0
            for i, x in found:  # in their order, each that still fits (a long one is skipped)
                cost = entry_cost(x, self.count)
                if spent + cost <= limit:
                    kept.append((i, x))
                    spent += cost
            return kept, spent

        extra = followed(sources)
        if extra and budget > 0:
            # The definitions take at most FOLLOW_SHARE of the budget: the passages that
            # name them keep the rest (a 400-character regular expression is no short value).
            extra, cost = within(extra, budget * FOLLOW_SHARE)
            if not extra:
                return sources
            fewer = cut(budget - cost)
            if not fewer:  # a budget too small to share: the passages alone
                return sources
            # The same definitions, for the passages still sent (and within what was set aside)
            sources, (extra, _) = fewer, within(followed(fewer), cost)
        return follow.interleave(sources, extra)

    @staticmethod
    def _scopes(whole: list[Source], stores: dict[str, Any], query: str
                ) -> tuple[list[list[tuple[int, int]]], list[set[tuple[int, int]]],
                           list[Callable[[int, int], str] | None]]:
        """For each passage, the line spans of the definitions in its file (the symbol
        table's), each file read once; of those, the spans of definitions of a name the
        question names; and the section of a span of the file's lines (scope_of; None for a
        file without definitions: a document's window keeps its chunk's section)."""
        w = wanted(query)
        names = {n.name for n in named_in(query)} | ({w.name} if w is not None else set())
        spans: dict[tuple[str, str], list[tuple[int, int]]] = {}
        defining: dict[tuple[str, str], set[tuple[int, int]]] = {}
        titles: dict[tuple[str, str], Callable[[int, int], str] | None] = {}
        for src in whole:
            key = (src.store, src.path)
            if key not in spans:
                store = stores.get(src.store)
                outline = [] if store is None else store.file_list.outline(src.path)
                spans[key] = [(e.line_start, e.line_end) for e in outline]
                defining[key] = {(e.line_start, e.line_end) for e in outline if e.name in names}
                titles[key] = partial(scope_of, outline) if outline else None
        keys = [(src.store, src.path) for src in whole]
        return [spans[k] for k in keys], [defining[k] for k in keys], [titles[k] for k in keys]

    def rewrite(self, question: str, earlier: list[str]) -> str | None:
        """The chat model's rewrite of a follow-up into a question that stands alone, or None
        where its reply is no use (the rule's query is searched then)."""
        self.sidecar = connect_chat(self.model, self.settings)
        text, _ = stream_chat(self.sidecar, rewrite_messages(question, earlier),
                              dict(REWRITE_PARAMS), lambda _piece: None)
        return parse_rewrite(text, question)

    def prompt(self, question: str, sources: list[Source]) -> Prompt:
        """The messages of a turn: system prompt and persona, the earlier turns, then the
        passages and the question. What stays the same from turn to turn comes first, so that
        llama.cpp reuses its evaluation of that prefix from the turn before."""
        return build_prompt(question, sources, self.turns_sent(), self.count, self.budget(),
                            system=self.system, use_context=self.use_rag)

    def turn_limit(self) -> int:
        """How many earlier turns a prompt may carry: `chat_turns`, or where that is -1 the
        model's catalog entry (`turns`; -1: all, as the context allows)."""
        return self.settings.chat_turns if self.settings.chat_turns >= 0 else self.model.turns

    def turns_sent(self) -> list[Turn]:
        """The earlier turns a prompt carries: the latest `turn_limit()` of them."""
        n, history = self.turn_limit(), self.history
        return history if n < 0 else history[len(history) - n:] if n else []

    def ask(self, question: str, on_token: Callable[[str], None] = lambda _t: None,
            more: bool = False) -> TurnResult:
        """One turn: retrieve, prompt, stream, check, save. `more`: another turn may follow
        (a conversation), so the turns so far are evaluated for it meanwhile (warm_next)."""
        question = question.strip()
        if not question:
            raise HydraError("the question is empty")
        start = time.perf_counter()
        sources: list[Source] = []
        retrieval: dict[str, Any] = {"query": question, "hits": []}
        if self.use_rag:
            sources, retrieval, found = self.retrieve(question)
            if not found:
                names = ", ".join(map(str, self.roots))
                answer = (f"{names} has nothing on this question: the closest passages are "
                          "about something else, and I do not answer from them. Rephrase it"
                          + (f", or {self.rag_off_hint}." if self.rag_off_hint else "."))
                result = TurnResult(question, answer, [], CitationReport(), retrieval,
                                    {"prompt_tokens": 0, "completion_tokens": 0}, no_context=True)
                took = round(time.perf_counter() - start, 3)
                result.timings = {"retrieval_s": took, "total_s": took}
                self._record(result)
                return result
        retrieved = time.perf_counter()
        prompt = self.prompt(question, sources)
        # A health check per turn (milliseconds): a sidecar that died is started again.
        self.sidecar = connect_chat(self.model, self.settings)
        first: list[float] = []
        echo = EchoFilter()  # the prompt's markers, when the model repeats them

        def heard(piece: str) -> None:
            if not first:
                first.append(time.perf_counter())
            shown = echo.feed(piece)
            if shown:
                on_token(shown)

        try:
            _, finish = stream_chat(self.sidecar, prompt.messages, self.params, heard)
            interrupted = False
        except KeyboardInterrupt:
            finish, interrupted = "interrupted", True
        rest = echo.close()
        if rest:
            on_token(rest)
        answer = "" if interrupted else echo.text
        cites = check_citations(answer, prompt.sources) if self.use_rag else CitationReport()
        usage = {"prompt_tokens": prompt.tokens,
                 "completion_tokens": self.count(answer) - 1 if answer else 0}
        result = TurnResult(question, answer, prompt.sources, cites, retrieval, usage, prompt,
                            interrupted=interrupted, multi=len(self.roots) > 1,
                            finish=finish)
        end = time.perf_counter()
        result.timings = {"retrieval_s": round(retrieved - start, 3),
                          **({"first_token_s": round(first[0] - start, 3)} if first else {}),
                          "total_s": round(end - start, 3)}
        result.notes += self.warnings  # folders skipped, a folder being rebuilt
        left_out = len(self.history) - len(self.turns_sent())
        if left_out > 0 and not self.said_turns:
            self.said_turns = True
            n = self.turn_limit()
            result.notes.append(
                f"{left_out} earlier turn(s) were not sent to the model: "
                + (f"{self.model.id} answers better without them (its catalog entry: turns: "
                   f"{n})" if self.settings.chat_turns < 0 else f"chat_turns is {n}")
                + "; follow-ups are still searched with the question before")
        if prompt.dropped_sources or prompt.dropped_turns:
            result.notes.append(f"to fit the model's context, {prompt.dropped_sources} passage(s) "
                                f"and {prompt.dropped_turns} earlier turn(s) were left out")
        if echo.removed:
            result.notes.append("the model repeated the prompt's context markers; they were "
                                "taken out of the answer")
        if finish == "length":
            result.notes.append("the answer was cut at max_tokens")
        if not answer.strip() and not interrupted:
            result.notes.append("the model gave an empty answer; ask again or rephrase")
        if not self.hinted and not interrupted:
            result.hint = larger_model_hint(self.model.id)
            self.hinted = bool(result.hint)
        self._record(result)
        if more and not interrupted:
            self.warm_next()
        return result

    def warm_next(self) -> threading.Thread | None:
        """Have the chat sidecar evaluate the conversation so far (system prompt and the turns
        the next prompt carries) in the background, while the answer is read. llama.cpp keeps
        the evaluation of the last prompt and reuses its longest common prefix; the last
        prompt held this turn's passages before its question, and the next one holds the
        question alone, so without this the next turn evaluates this turn again (~100 tokens
        with the default model; the turns before it are reused either way). Setting
        `chat_warm`; one token generated; a failure is silent: the next turn only evaluates
        more. Only for the local sidecar of a model that carries earlier turns, not where a
        follow-up's rewrite (`follow_up: rewrite`) evaluates another prompt in between."""
        sidecar = self.sidecar
        turns = self.turns_sent()
        if (not self.settings.chat_warm or sidecar is None or sidecar.more or self.model.url
                or self.settings.follow_up == "rewrite" or not turns):
            return None
        messages = build_prompt("", [], turns, self.count, self.budget(),
                                system=self.system, use_context=self.use_rag).messages[:-1]

        def run() -> None:
            with contextlib.suppress(Exception):
                stream_chat(sidecar, messages, dict(WARM_PARAMS), lambda _piece: None)

        thread = threading.Thread(target=run, name="hydra-rag-warm-turn", daemon=True)
        thread.start()
        return thread

    def _record(self, result: TurnResult) -> None:
        self.last = result
        self.doc["turns"].append({
            "user": result.question,  # the user's own words, never the augmented prompt
            "answer": result.answer,
            "sources": [{"n": s.n, "store": s.store, "path": s.path,
                         "line_start": s.line_start, "line_end": s.line_end,
                         **({"page_start": s.page_start, "page_end": s.page_end,
                             "page_unit": s.page_unit} if s.page_unit else {})}
                        for s in result.sources],
            "interrupted": result.interrupted,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        })
        if self.save_enabled:
            try:
                sessions.save(self.doc)
            except OSError as exc:  # the answer stands; the saved session is as it was
                from hydra_rag.errors import fault

                what, todo = fault(exc) or (f"{exc.strerror or exc}".lower(), "")
                result.notes.append(f"this turn was not saved to the session ({what}"
                                    f"{'; ' + todo if todo else ''}); the session keeps "
                                    "the turns saved before")
