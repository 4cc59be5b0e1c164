"""Making many small objects at once (a walk's files, the index's record of them) without the
cyclic garbage collector: it would run again and again over the young objects, none of which
is garbage, and it took a third of the time to read the record of 100,000 files."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_gc() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
