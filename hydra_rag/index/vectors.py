"""Phase two of an index run: the vectors of the chunks phase one stored without them, a batch
at a time, each batch searchable as it is stored (store/vectors.py). For `Run` (run.py), which
inherits it. A kill at any point leaves whole batches: the next run embeds only what is still
without a vector, and a no-op run knows from meta.yaml (`vectors_pending`) whether there is
any, without opening the tables."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from hydra_rag.config import Settings
from hydra_rag.index.prepare import embed_input
from hydra_rag.index.report import IndexReport, Progress, ProgressFn
from hydra_rag.store import vectors
from hydra_rag.store.index_dir import TABLES, Store

if TYPE_CHECKING:
    from hydra_rag.models.embed import EmbedClient


PHASE_TWO_BATCH = 128  # chunks embedded, then stored, at a time (seconds of embedding each)
# Chunks per request to a local sidecar in phase two. The sidecar serves one request at a
# time, and a search's query vector waits behind the request being served: at 64 chunks a
# request (~6 s on 2 cores) searches took 3-6 s. Each chunk is its own decode either way.
PHASE_TWO_REQUEST = 8


class Vectors:
    """What it expects of the class: `store`, `settings`, `meta`, `report`, `progress`,
    `_done`, `_batch_size`, `client()`, `_embed()` and `_refresh()` (state.py, batches.py,
    run.py)."""

    store: Store
    settings: Settings
    meta: dict[str, Any]
    report: IndexReport
    progress: ProgressFn
    _done: Progress | None
    _batch_size: tuple[int, int, int]
    in_phase_two = False
    embed_now = True  # False: phase one only (`index --background` leaves phase two to a child)

    if TYPE_CHECKING:
        def client(self, table: str) -> EmbedClient: ...
        def _embed(self, client: EmbedClient, texts: list[str]
                   ) -> tuple[list[Any], BaseException | None]: ...
        def _refresh(self, tables: set[str]) -> None: ...

    def vectors_pending(self) -> dict[str, int]:
        """What meta.yaml says waits for a vector, per table (none: {})."""
        return vectors.recorded(self.meta)

    def vectors(self) -> None:
        """Embed every chunk stored without its vector, batch by batch; then train the vector
        index (past ANN_ROWS) and compact."""
        store = self.store
        pending = {t: vectors.pending(store, t) for t in TABLES if t in store.table_names()}
        total = sum(pending.values())
        self.report.vectors_pending = total
        if not total or not self.embed_now:
            self._record_pending(pending)
            return
        self.in_phase_two = True
        done = Progress("vectors", bytes_total=total)
        self._done = done
        self.progress(Progress("vectors", message=f"searchable now by names, exact strings and "
                                                  f"words; embedding {total:,} chunks, each batch "
                                                  "searchable as it is stored"))
        self.progress(done)
        # Smaller than phase one's batches: each is searchable as soon as it is stored.
        batch = max(1, min(self.settings.index_batch, PHASE_TWO_BATCH))
        started = time.monotonic()
        for t in (t for t in TABLES if pending.get(t)):
            client = self.client(t)
            if client.sidecar_id is not None and not client.more_urls:
                client.batch = min(client.batch, PHASE_TWO_REQUEST)  # the run's last use
            while rows := vectors.waiting(store, t, batch):
                texts = [embed_input(r["kind"], r["path"], r["section"], r["text"], client.fits)
                         for r in rows]
                self._batch_size = (len(rows), len(rows), done.chunks_done)
                vecs, stopped = self._embed(client, texts)
                vectors.put(store, t, [r["id"] for r in rows[:len(vecs)]], vecs)
                self.report.chunks_embedded += len(vecs)
                pending[t] -= len(vecs)
                done.bytes_done += len(vecs)
                done.bytes_estimate = done.bytes_done
                # the embedder's own rate, for `status` to say the time left
                self.meta["vectors_rate"] = round(done.bytes_done
                                                  / max(time.monotonic() - started, 1e-3), 2)
                self._record_pending(pending)
                self.report.vectors_pending = sum(pending.values())
                if stopped is not None:
                    raise stopped
                self.progress(done)
        self._refresh({t for t in TABLES if t in store.table_names()})
        self._record_pending({}, always=True)  # the vector index trained just now, too
        self.in_phase_two = False

    def _record_pending(self, pending: dict[str, int], always: bool = False) -> None:
        """meta.yaml's count of chunks without a vector, and files.db touched, so that a
        search process (its caches are stamped with files.db's time) reads the new vectors."""
        left = {t: n for t, n in pending.items() if n > 0}
        if left:
            self.meta["vectors_pending"] = left
        elif "vectors_pending" not in self.meta and not always:
            return
        else:
            self.meta.pop("vectors_pending", None)
            self.meta.pop("vectors_rate", None)
        self.meta["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.store.write_meta(self.meta)
        try:
            os.utime(self.store.files_path)
        except OSError:
            pass
