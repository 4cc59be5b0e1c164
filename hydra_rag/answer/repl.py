"""The chat REPL: line editing and history, multi-line input, streaming, slash commands.
With stdin not a terminal, each input line is one turn and everything goes to stdout."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from hydra_rag.answer.chat import Chat, TurnResult
from hydra_rag.errors import HydraError
from hydra_rag.paths import state_dir

HELP = """commands:
  /sources        sources of the last answer
  /context        the prompt sent for the last answer, and the query searched
  /time           how long the last answer took (retrieval, first token, whole)
  /rag on|off     retrieval on every turn, or not
  /k N            passages retrieved per turn
  /reset          forget the conversation (the saved session too, once you save)
  /save           save the session now (it is saved after every turn anyway)
  /help           this list
  /quit           leave (Ctrl-D works too)
end a line with \\ to continue on the next line; Ctrl-C stops an answer"""


def render_sources(result: TurnResult) -> list[str]:
    if result.no_context or not result.sources:
        return []
    lines = ["sources:"]
    for s in result.sources:
        lines.append(f"  [{s.n}] {s.where(result.multi)}"
                     + (f"  § {s.section}" if s.section else ""))
    return lines


def render_checks(result: TurnResult) -> list[str]:
    out = [f"note: {n}" for n in result.notes]
    out += [f"citation check: {p}" for p in result.citations.problems()]
    if result.interrupted:
        out.append("(answer interrupted)")
    return out


def render_context(result: TurnResult | None) -> str:
    """The query searched (with the subject a follow-up carried) and the prompt sent."""
    if result is None or result.prompt is None:
        return "(no prompt sent yet)"
    r = result.retrieval
    head = []
    if r.get("query"):
        carried = (f" (subject carried from earlier: {r['carried']})" if r.get("carried") else
                   " (the follow-up as the model rewrote it)" if r.get("rewritten") else "")
        head.append(f"--- searched: {r['query']}{carried} ---")
    head.append(f"--- {len(result.sources)} passage(s), {result.prompt.tokens} prompt tokens ---")
    return "\n".join(head) + "\n\n" + "\n\n".join(
        f"--- {m['role']} ---\n{m['content']}" for m in result.prompt.messages)


def render_timings(result: TurnResult | None) -> str:
    """`retrieval 0.21 s · first token 1.80 s · total 4.02 s` of a turn."""
    if result is None or not result.timings:
        return "(no answer yet)"
    names = (("retrieval_s", "retrieval"), ("first_token_s", "first token"), ("total_s", "total"))
    return " · ".join(f"{label} {result.timings[k]:.2f} s" for k, label in names
                      if k in result.timings)


class Repl:
    """Drives a Chat from a terminal or a pipe."""

    def __init__(self, chat: Chat, out: TextIO = sys.stdout, err: TextIO = sys.stderr,
                 show_context: bool = False) -> None:
        self.chat = chat
        chat.rag_off_hint = "turn retrieval off with /rag off"
        self.show_context = show_context
        self.out = out
        self.err = err

    def command(self, line: str) -> bool:
        """Run a slash command; False means leave."""
        cmd, _, arg = line[1:].partition(" ")
        arg = arg.strip()
        say: Callable[[str], None] = lambda s: print(s, file=self.out, flush=True)  # noqa: E731
        if cmd in ("quit", "exit", "q"):
            return False
        if cmd == "help":
            say(HELP)
        elif cmd == "sources":
            last = self.chat.last
            say("\n".join(render_sources(last)) if last and last.sources else "(no sources)")
        elif cmd == "context":
            say(render_context(self.chat.last))
        elif cmd == "time":
            say(render_timings(self.chat.last))
        elif cmd == "rag":
            if arg not in ("on", "off"):
                say("usage: /rag on|off")
            elif arg == "on" and not self.chat.roots:
                say("no indexed folder for this chat: start it with --rag PATH")
            else:
                self.chat.use_rag = arg == "on"
                say(f"retrieval {arg}")
        elif cmd == "k":
            if arg.isdigit() and 1 <= int(arg) <= 50:
                self.chat.top_k = int(arg)
                say(f"top-k {arg}")
            else:
                say("usage: /k N (1-50)")
        elif cmd == "reset":
            self.chat.reset()
            say("conversation reset")
        elif cmd == "save":
            from hydra_rag.answer import sessions

            say(f"saved {sessions.save(self.chat.doc)}")
        else:
            say(f"unknown command /{cmd} — /help lists them")
        return True

    def turn(self, question: str, stream: bool) -> None:
        def on_token(piece: str) -> None:
            if stream:
                self.out.write(piece)
                self.out.flush()

        try:
            result = self.chat.ask(question, on_token, more=True)
        except HydraError as exc:
            print(f"error: {exc}", file=self.err, flush=True)
            return
        except KeyboardInterrupt:  # before the answer started streaming
            print("\n(interrupted)", file=self.out, flush=True)
            return
        if not stream or result.no_context:
            self.out.write(result.answer)
        self.out.write("\n")
        for line in render_sources(result) + render_checks(result):
            print(line, file=self.out)
        if self.show_context:
            print(render_context(result), file=self.out)
        self.out.flush()
        if result.hint:
            print(result.hint, file=self.err, flush=True)

    def dispatch(self, line: str) -> bool:
        """A slash command or a turn; False means leave."""
        if line.startswith("/"):
            return self.command(line)
        self.turn(line, stream=True)
        return True

    def run_piped(self, lines: TextIO) -> None:
        """Each input line is one turn (or a slash command)."""
        told = False
        for raw in lines:
            line = raw.strip().replace("\x00", "")
            if not line:
                if not told:  # once, not per line: a script may be full of them
                    print("note: a blank line is not a question; blank lines are skipped",
                          file=self.err, flush=True)
                    told = True
                continue
            if not line.startswith("/"):
                print(f"> {line}", file=self.out, flush=True)
            if not self.dispatch(line):
                return

    def run_terminal(self) -> None:
        try:
            import readline

            hist = state_dir() / "chat_history"
            try:
                readline.read_history_file(hist)
            except OSError:
                pass
        except ImportError:
            readline = None  # type: ignore[assignment]
            hist = None
        print(f"chatting with {self.chat.model.id}"
              + (f" over {', '.join(map(str, self.chat.roots))}" if self.chat.roots else "")
              + f" — session {self.chat.name}; /help for commands", file=self.err)
        try:
            self._loop()
        except KeyboardInterrupt:
            # A Ctrl-C racing with Ctrl-D or with the end of an answer: the user is leaving.
            print(file=self.err)
        finally:
            if readline is not None and hist is not None:
                try:
                    readline.write_history_file(hist)
                except OSError:
                    pass

    def _loop(self) -> None:
        while True:
            try:
                line = input(">>> ")
                while line.endswith("\\"):
                    line = line[:-1] + "\n" + input("... ")
            except KeyboardInterrupt:
                print("\n(Ctrl-C again or Ctrl-D to leave)", file=self.err)
                try:
                    line = input(">>> ")
                except (KeyboardInterrupt, EOFError):
                    print(file=self.err)
                    return
            except EOFError:
                print(file=self.err)
                return
            line = line.strip()
            if line and not self.dispatch(line):
                return
