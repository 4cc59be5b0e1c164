"""Running LanceDB's async calls from synchronous code that a signal may interrupt.

A signal raised as an exception in the caller's thread (Ctrl-C, or SIGTERM during `index`) must
stop only the caller's wait, never an event loop in the middle of a read: that leaves
LanceDB's threads calling back into a stopped or closed loop ("Event loop is closed", "Invalid
file descriptor: -1" on stderr) and, now and then, a process that does not end. So the loop
runs in a thread of its own and the caller waits on a bare lock, whose acquire such an
exception leaves cleanly (a Condition's wait, which a future's `result()` is, does not).

A call the interrupt left running must also end before the interpreter does: LanceDB's native
threads hand its result back through the GIL, and one that does so while the interpreter
finalizes aborts the process ("PyGILState_Release: thread state … must be current", or a
segmentation fault) after the program's own work is done. So an exit waits for them
(EXIT_WAIT_S at most), and waits first: LanceDB's core shuts its runtime down in an exit
hook of its own, and a read still running then holds the GIL waiting on that runtime while the
runtime's threads wait for the GIL (a process that never ends). Hooks run last registered
first, so ours is registered again whenever LanceDB is loaded (`before_lancedb_exits`).
"""

from __future__ import annotations

import _thread
import asyncio
import atexit
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from hydra_rag.errors import HydraError

EXIT_WAIT_S = 10.0  # how long an exit lets calls left running finish

_pending: set[threading.Lock] = set()  # `in_a_thread` calls not ended: released at their end
_pending_lock = threading.Lock()
_loops: weakref.WeakSet[LoopThread] = weakref.WeakSet()


def _let_calls_end() -> None:
    """At exit, before the interpreter finalizes: the calls still running end, and the loops
    still open close."""
    deadline = time.monotonic() + EXIT_WAIT_S
    with _pending_lock:
        running = list(_pending)
    for ended in running:
        if ended.acquire(timeout=max(0.0, deadline - time.monotonic())):
            ended.release()
    for loop in list(_loops):
        loop.close()


def before_lancedb_exits() -> None:
    """Run `_let_calls_end` before the exit hooks registered so far (LanceDB's among them)."""
    atexit.unregister(_let_calls_end)
    atexit.register(_let_calls_end)


atexit.register(_let_calls_end)


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
        _loops.add(self)

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


def in_a_thread(make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """`asyncio.run(make())` in a thread of its own, waited for on a bare lock: a loop may run
    in the caller's thread already, and an interrupt there stops only the wait. The call,
    interrupted or not, ends in its thread and closes its loop, and an exit waits for it.

    An interrupt may also come while the thread is being started. `Thread.start` waits on a
    Condition for the thread to begin, and an interrupt there breaks the Condition's lock
    ("release unlocked lock"), so the thread is started with `_thread`. And it runs the call
    only once the call is on the exit's list: an interrupt before that leaves it idle, never
    a read the exit does not wait for."""
    out: Future[Any] = Future()
    ended = threading.Lock()
    ended.acquire()
    listed = threading.Lock()
    listed.acquire()

    def run() -> None:
        listed.acquire()
        with _pending_lock:
            if ended not in _pending:  # the caller was interrupted first: nobody waits
                return
        try:
            out.set_result(asyncio.run(make()))
        except BaseException as exc:  # handed to the caller
            out.set_exception(exc)
        finally:
            with _pending_lock:
                _pending.discard(ended)
            ended.release()

    _thread.start_new_thread(run, ())
    try:
        with _pending_lock:
            _pending.add(ended)
    finally:
        listed.release()
    return wait(out)
