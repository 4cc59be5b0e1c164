"""What a first index of a folder would take with each installed embedder, the embedders timed
first where no rate is measured here (for `rag setup --path`, `doctor PATH`, `models recommend
--path`): hydra_rag.index.estimate counts, hydra_rag.hub.recommend times and judges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra_rag.config import Settings
from hydra_rag.errors import HydraError
from hydra_rag.hub import recommend as rec
from hydra_rag.index.estimate import FirstIndex, count, with_embedders


def first_index(path: Path, settings: Settings, measure: bool = True,
                timed: set[str] | frozenset[str] = frozenset(),
                say: Any = None) -> FirstIndex:
    """`count`, with the time each installed embedder would take; `measure` first times those
    whose rate no measurement here gives (the configured one and the smallest of each other
    backend, ONNX Runtime's included: recommend.to_measure), except the ids in `timed`."""
    if measure:
        for entry in rec.to_measure("embed"):
            if entry.id in timed:
                continue
            if say is not None:
                say(f"timing {entry.id} (a short self-test)")
            try:
                rec.measure(entry, "embed")
            except HydraError as exc:
                if say is not None:
                    say(f"warning: {entry.id} could not be timed: {exc}")
    est = count(path, settings)
    return with_embedders(est, rec.assess(rec.this_machine()))
