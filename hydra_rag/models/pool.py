"""Work spread over several endpoints of one model (an embedder on several GPU boxes, say).

Each endpoint has a thread that takes the next batch from one shared queue, so a fast endpoint
takes more batches than a slow one: the load follows measured speed without a schedule. A batch
that fails goes back to the queue for another endpoint, and the one that failed is taken out
for a while (1 s, then 2, 4 … 60 s) and tried again after, so it comes back when it recovers.
Results are kept by batch number: none is lost or counted twice, and a late answer to a batch
already done elsewhere is dropped.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

from hydra_rag.errors import ConfigError, HydraError

_In = TypeVar("_In")
_Out = TypeVar("_Out")

BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
# A batch that failed on this many attempts (on any endpoints) fails the whole call: it is the
# batch, not the endpoints (or every endpoint is down for good).
MAX_ATTEMPTS = 8


@dataclass
class EndpointStats:
    """What the pool measured of one endpoint."""

    name: str
    batches: int = 0
    items: int = 0
    seconds: float = 0.0  # spent in successful calls
    failures: int = 0
    down_until: float = 0.0  # monotonic; 0: in service
    last_error: str = ""
    _streak: int = field(default=0, repr=False)  # failures since its last success

    @property
    def rate(self) -> float:
        """Items per second over its successful calls (0 before the first)."""
        return self.items / self.seconds if self.seconds else 0.0


class Pool(Generic[_In, _Out]):
    """Calls `call(endpoint_index, batch)` for every batch, over all endpoints at once."""

    def __init__(self, names: Sequence[str], call: Callable[[int, _In], _Out],
                 size: Callable[[_In], int] = lambda _b: 1) -> None:
        if not names:
            raise ConfigError("a pool needs at least one endpoint")
        self.call = call
        self.size = size
        self.stats = [EndpointStats(n) for n in names]
        self._lock = threading.Lock()

    def map(self, batches: Sequence[_In], on_done: Callable[[int], None] | None = None) -> list[_Out]:
        """The result of every batch, in order; `on_done` hears the number of items done after
        each batch. Raises the error of a batch that failed MAX_ATTEMPTS times, or a
        ConfigError (a refused key) at once."""
        results: list[_Out | None] = [None] * len(batches)
        done = [False] * len(batches)
        attempts = [0] * len(batches)
        todo: deque[int] = deque(range(len(batches)))
        state = {"done": 0, "items": 0}
        fatal: list[BaseException] = []
        wake = threading.Condition(self._lock)

        cancelled = threading.Event()  # the caller was interrupted: take no more batches

        def finished() -> bool:
            return state["done"] == len(batches) or bool(fatal) or cancelled.is_set()

        def worker(e: int) -> None:
            st = self.stats[e]
            while True:
                with wake:
                    while True:
                        if finished():
                            return
                        now = time.monotonic()
                        if todo and st.down_until <= now:
                            i = todo.popleft()
                            break
                        # Out of service, or nothing to take (others hold the last batches,
                        # which may come back): wait to be woken, or for the backoff to end.
                        wake.wait(timeout=max(0.05, st.down_until - now) if st.down_until > now
                                  else 0.5)
                t0 = time.monotonic()
                try:
                    out = self.call(e, batches[i])
                except ConfigError as exc:
                    with wake:
                        fatal.append(exc)
                        wake.notify_all()
                    return
                except (HydraError, OSError) as exc:
                    with wake:
                        st.failures += 1
                        st._streak += 1
                        st.last_error = str(exc).splitlines()[0][:300]
                        st.down_until = time.monotonic() + BACKOFF_S[
                            min(st._streak, len(BACKOFF_S)) - 1]
                        attempts[i] += 1
                        if attempts[i] >= MAX_ATTEMPTS:
                            fatal.append(exc)
                        elif not done[i]:
                            todo.appendleft(i)  # next, on whichever endpoint is up first
                        wake.notify_all()
                    continue
                with wake:
                    st.batches += 1
                    st.items += self.size(batches[i])
                    st.seconds += time.monotonic() - t0
                    st._streak, st.down_until = 0, 0.0
                    if not done[i]:
                        done[i] = True
                        results[i] = out
                        state["done"] += 1
                        state["items"] += self.size(batches[i])
                        if on_done is not None:
                            on_done(state["items"])
                    wake.notify_all()

        threads = [threading.Thread(target=worker, args=(e,), daemon=True,
                                    name=f"hydra-pool-{e}") for e in range(len(self.stats))]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        finally:
            cancelled.set()
            with wake:
                wake.notify_all()
        if fatal:
            raise fatal[0]
        assert all(done)
        return cast("list[_Out]", results)
