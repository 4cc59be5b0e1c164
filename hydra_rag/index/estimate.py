"""What a first index of a folder would take, before it is made: its files read and chunked as
an index run reads and chunks them (nothing written), the embedder's input counted in its own
tokens, and the time each installed embedder would take to embed them, from the rates measured
on this machine (hydra_rag.models.speeds; checks/first_index.py times them first). For
`models recommend --path`, `doctor PATH` and `rag setup --path`: a user choosing an embedder
sees what the choice costs on their folder.

Phase one (names, exact strings, words) reads and chunks the same files, then stores them: the
time this count takes is a floor for it. Phase two is the embedding, estimated per embedder."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra_rag.config import Settings, table_embedder
from hydra_rag.index.dry_run import reading
from hydra_rag.index.prepare import prepare
from hydra_rag.index.report import duration
from hydra_rag.store.index_dir import TABLES


@dataclass
class FirstIndex:
    root: str
    files: int = 0
    chunks: dict[str, int] = field(default_factory=dict)  # per table
    tokens: int = 0  # the embedder's input, in the configured embedders' tokens
    read_s: float = 0.0  # walking, reading and chunking here, as phase one does
    indexed: bool = False  # the folder has an index already (a rebuild would take this)
    # per installed embedder: {"id", "backend", "tokens_per_s", "basis", "seconds"}
    embedders: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total_chunks(self) -> int:
        return sum(self.chunks.values())

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "total_chunks": self.total_chunks}


def count(path: Path, settings: Settings) -> FirstIndex:
    """Read and chunk the folder as an index run would (its recorded --include/--exclude, if
    it has an index); count chunks and tokens."""
    from hydra_rag.models.embed import EmbedClient, tokenizer_for

    started = time.monotonic()
    read = reading(path, settings)
    est = FirstIndex(str(read.root), chunks=dict.fromkeys(TABLES, 0), indexed=bool(read.meta))
    clients = {}
    for t in TABLES:
        emb = table_embedder(settings, t, None)
        clients[t] = EmbedClient(emb, "", emb.id, tokenizer=tokenizer_for(emb))
    for cand, src in read.each(settings):
        if src.text is None or src.kind not in clients:
            continue
        client = clients[src.kind]
        prepared = prepare(cand, src, client.fits, lambda text: "")
        est.files += 1
        est.chunks[src.kind] += len(prepared.rows)
        limit = client.token_limit()
        est.tokens += sum(min(client.tokens(i), limit) for i in prepared.inputs)
    est.read_s = round(time.monotonic() - started, 1)
    return est


def with_embedders(est: FirstIndex, fits: list[Any]) -> FirstIndex:
    """The embedding time of `est` with each installed embedder (recommend.assess's fits),
    fastest first; an embedder with no rate measured or estimated here is left out."""
    from hydra_rag.catalog import load_embedders

    catalog = load_embedders()
    rows = []
    for f in fits:
        if f.role != "embed" or not f.installed or not f.tokens_per_s or f.id not in catalog:
            continue
        rows.append({"id": f.id, "backend": catalog[f.id].backend, "tokens_per_s": f.tokens_per_s,
                     "basis": f.basis, "busy": f.note,
                     "seconds": round(est.tokens / f.tokens_per_s)})
    est.embedders = sorted(rows, key=lambda r: r["seconds"])
    return est


def lines(est: FirstIndex, configured: str) -> list[str]:
    """What a person reads: the folder's count, then one line per embedder."""
    what = "a rebuild" if est.indexed else "a first index"
    out = [f"{what} of {est.root}: {est.files:,} files, {est.total_chunks:,} chunks "
           f"({est.tokens:,} tokens to embed); names, exact strings and words are searchable "
           f"after phase one (reading and chunking took {est.read_s:g} s here, then the rows "
           "are stored), meaning as the vectors arrive:"]
    for r in est.embedders:
        mark = " (configured)" if r["id"] == configured else ""
        basis = "" if r["basis"] == "measured" else f", {r['basis']}"
        busy = f", timed when {r['busy']}" if r["busy"] else ""
        out.append(f"  {r['id']}{mark}: {duration(r['seconds'])} "
                   f"({r['tokens_per_s']:,.0f} tokens/s on {r['backend']}{basis}{busy})")
    if not est.embedders:
        out.append("  no installed embedder's speed is known here: `hydra-rag models "
                   "recommend` times them")
    return out

