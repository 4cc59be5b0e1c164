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
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from hydra_rag.errors import HydraError


def wait(future: Future[Any], timeout: float | None = None) -> Any:
    """The future's result, waited for on a bare lock (TimeoutError after `timeout` s)."""
    done = threading.Lock()
    done.acquire()
    future.add_done_callback(lambda _: done.release())
    if not done.acquire(timeout=-1 if timeout is None else timeout):
        raise TimeoutError
    return future.result()  # done: returns at once


class LoopThread:
    """An event loop kept in a daemon thread of its own, for an object that keeps async handles
    (open tables) between calls. Calls run one at a time, in the order they were made: a call
    an interrupt left running ends before the next one starts. The coroutine is made in the
    loop's thread, so an interrupt before it is scheduled leaves nothing behind."""

    CLOSE_WAIT_S = 10.0  # how long `close` lets a call left running finish

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._serial: asyncio.Lock | None = None  # made in the loop's thread
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

    async def _one_at_a_time(self, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        if self._serial is None:
            self._serial = asyncio.Lock()
        async with self._serial:
            return await make()

    def run(self, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """`await make()` in the loop's thread, waited for here."""
        if self._closed:
            raise HydraError("the searcher was closed")
        out: Future[Any] = Future()

        def start() -> None:
            task = self._loop.create_task(self._one_at_a_time(make))

            def done(t: asyncio.Task[Any]) -> None:
                if t.cancelled():
                    out.cancel()
                elif t.exception() is not None:
                    out.set_exception(t.exception())
                else:
                    out.set_result(t.result())

            task.add_done_callback(done)

        self._last = out
        self._loop.call_soon_threadsafe(start)
        result = wait(out)
        self._last = None
        return result

    def close(self) -> None:
        """Let a call left running end (CLOSE_WAIT_S at most: LanceDB's threads must not call
        back into a closed loop), then stop the loop. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        last = self._last
        on_loop = threading.current_thread() is self._thread
        if last is not None and not last.done() and not on_loop:
            try:
                wait(last, self.CLOSE_WAIT_S)
            except (Exception, asyncio.CancelledError):  # its outcome is moot now
                pass
        try:
            self._loop.call_soon_threadsafe(self._loop.stop)
        except RuntimeError:  # already closed (interpreter shutdown)
            return
        if not on_loop:
            self._thread.join(self.CLOSE_WAIT_S)
