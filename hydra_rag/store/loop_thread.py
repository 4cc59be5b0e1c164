"""Running LanceDB's async calls from synchronous code that a signal may interrupt.

A signal raised as an exception in the caller's thread (Ctrl-C, or SIGTERM during `index`) must
stop only the caller's wait, never an event loop in the middle of a read: that leaves
LanceDB's threads calling back into a stopped or closed loop ("Event loop is closed", "Invalid
file descriptor: -1" on stderr) and, now and then, a process that does not end. So the loop
runs in a thread of its own and the caller waits on a bare lock, whose acquire such an
exception leaves cleanly (a Condition's wait, which a future's `result()` is, does not).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any

from hydra_rag.errors import HydraError


def wait(future: Future[Any]) -> Any:
    """The future's result, waited for on a bare lock."""
    done = threading.Lock()
    done.acquire()
    future.add_done_callback(lambda _: done.release())
    done.acquire()
    return future.result()  # done: returns at once


class LoopThread:
    """An event loop kept in a daemon thread of its own, for an object that keeps async handles
    (open tables) between calls. `run` waits for a call an interrupt left running before it
    starts the next, so calls never overlap."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._last: Future[Any] | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        submitted = False
        try:
            if self._closed:
                raise HydraError("the searcher was closed")
            last = self._last  # kept until it has ended: an interrupt may land in this wait too
            if last is not None and not last.done():
                try:
                    wait(last)
                except (Exception, asyncio.CancelledError):  # its caller was interrupted: moot
                    pass
            self._last = asyncio.run_coroutine_threadsafe(coro, self._loop)
            submitted = True
        finally:
            if not submitted:
                coro.close()  # never run: no "coroutine was never awaited"
        return wait(self._last)

    def close(self) -> None:
        """Stop the loop; a call still running is cancelled. Safe to call twice."""
        if not self._closed:
            self._closed = True
            try:
                self._loop.call_soon_threadsafe(self._loop.stop)
            except RuntimeError:  # already closed (interpreter shutdown)
                pass
