"""LoopThread (pure): calls run in the loop's own thread one at a time, an interrupt stops only
the caller's wait, and close lets a call left running end before the loop goes."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from hydra_rag.errors import HydraError
from hydra_rag.store.loop_thread import LoopThread


def _interrupted(runner: LoopThread, make, after: float) -> None:  # type: ignore[no-untyped-def]
    """runner.run(make), with a Ctrl-C (KeyboardInterrupt) in this thread `after` s in."""
    def on(*_: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, on)
    try:
        signal.setitimer(signal.ITIMER_REAL, after)
        with pytest.raises(KeyboardInterrupt):
            runner.run(make)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_call_left_running_ends_before_the_next_starts() -> None:
    runner = LoopThread("test-loop")
    spans: list[tuple[str, float, float]] = []

    def job(name: str, seconds: float):  # type: ignore[no-untyped-def]
        async def go() -> str:
            start = time.perf_counter()
            await asyncio.sleep(seconds)
            spans.append((name, start, time.perf_counter()))
            return name
        return go

    try:
        _interrupted(runner, job("first", 0.3), 0.05)
        assert runner.run(job("second", 0.01)) == "second"
        (a, _, a_end), (b, b_start, _) = spans
        assert (a, b) == ("first", "second") and b_start >= a_end
    finally:
        runner.close()


def test_close_lets_a_call_left_running_end() -> None:
    runner = LoopThread("test-loop")
    ended: list[bool] = []

    async def slow() -> None:
        await asyncio.sleep(0.3)
        ended.append(True)

    _interrupted(runner, lambda: slow(), 0.05)
    runner.close()
    assert ended == [True] and not runner._thread.is_alive()
    with pytest.raises(HydraError, match="closed"):
        runner.run(lambda: slow())
    runner.close()  # twice is fine


def test_errors_reach_the_caller() -> None:
    runner = LoopThread("test-loop")

    async def bad() -> None:
        raise ValueError("from the loop")

    try:
        with pytest.raises(ValueError, match="from the loop"):
            runner.run(lambda: bad())
    finally:
        runner.close()
