"""Reranking: a cross-encoder reads the question together with each of the top fused
candidates and scores the pair; those candidates are reordered by that score.

A cross-encoder sees question and passage at once, which neither the vectors (embedded apart)
nor BM25 (word overlap) do, but it costs a forward pass per candidate: `rerank_top` (default
20, at most MAX_TOP) bounds the time of one search. It is off by default: the shipped MS MARCO
MiniLM reranker ranks worse than the default hybrid on both benchmark sets (SciFact −0.03,
CoSQA −0.12 nDCG@10, BENCHMARKS.md); it is there for folders where it measures better and for
stronger cross-encoders a user registers.

The model runs in a llama.cpp sidecar of its own (role "rerank", `POST /v1/rerank`), started
and stopped like the embedder's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

from hydra_rag.catalog import RERANK_PORTS, Reranker, get_reranker
from hydra_rag.config import Settings
from hydra_rag.errors import ConfigError, ModelError, SidecarError
from hydra_rag.models.endpoint import Auth, JsonEndpoint, KeyEnv
from hydra_rag.models.sidecar import SidecarSpec, ensure, restarter
from hydra_rag.models.sidecar_key import SidecarKey
from hydra_rag.read.chunk import heading, with_context

if TYPE_CHECKING:
    from hydra_rag.search.hits import Hit

MAX_TOP = 100  # a cap whatever is asked: 100 pairs already take ~10 s on two cores


def check_top(top: int) -> int:
    """`rerank_top` as given, or a clear error."""
    if not 1 <= top <= MAX_TOP:
        raise ConfigError(f"rerank_top must be between 1 and {MAX_TOP}, got {top} "
                          "(it bounds how many candidates the reranker reads per search)")
    return top


@dataclass
class RerankClient:
    """Talks to one /v1/rerank endpoint for one catalog reranker."""

    reranker: Reranker
    base_url: str
    sidecar_id: str | None = None
    restart: Callable[[], str] | None = None  # brings a crashed sidecar back (its new URL)
    auth: Auth | None = None  # a remote endpoint's key, or our sidecars'

    @cached_property
    def _http(self) -> JsonEndpoint:
        return JsonEndpoint(self.base_url, self.sidecar_id,
                            f"reranker {self.reranker.id!r} at {self.base_url}",
                            restart=self.restart, auth=self.auth)

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance score per document, in the documents' order (higher: more relevant)."""
        if not documents:
            return []
        raw = self._http.post("rerank", {"query": query, "documents": list(documents),
                                         "model": self.reranker.id})
        try:
            results = json.loads(raw)["results"]
            by_index = {int(r["index"]): float(r["relevance_score"]) for r in results}
            return [by_index[i] for i in range(len(documents))]
        except (ValueError, KeyError, TypeError):
            raise SidecarError(f"reranker {self.reranker.id!r} at {self.base_url} gave an answer "
                               "that is not a score per document") from None


def sidecar_spec(rr: Reranker, settings: Settings) -> SidecarSpec:
    """How the reranker's local sidecar runs (it must have a model file)."""
    path = rr.model_path()
    assert path is not None
    return SidecarSpec(
        id=rr.id, role="rerank", model_path=str(path), port=rr.port,
        port_range=(RERANK_PORTS.start, RERANK_PORTS.stop - 1),
        n_ctx=rr.max_tokens, n_batch=rr.max_tokens, threads=settings.threads,
        idle_seconds=settings.sidecar_idle_minutes * 60, gpu_layers=settings.gpu_layers,
    )


def connect_reranker(settings: Settings) -> RerankClient:
    """A client for the configured reranker: its URL if it has one, else its local sidecar."""
    rr = get_reranker(settings.reranker)
    if rr.url:
        auth = KeyEnv.of("reranker", rr)
        auth.headers()  # a missing key is named now, before the first search reaches it
        return RerankClient(rr, rr.url, auth=auth)
    path = rr.model_path()
    if path is None or not path.is_file():
        if rr.sources:
            raise ModelError(f"reranker {rr.id!r} is not installed ({path}); "
                             f"run `hydra-rag rerankers pull {rr.id}`")
        raise ModelError(f"reranker {rr.id!r}: its file {path} is missing; register it again "
                         f"with `hydra-rag rerankers add {rr.id} FILE.gguf`")
    spec = sidecar_spec(rr, settings)
    rec = ensure(spec, timeout=settings.sidecar_start_timeout)
    return RerankClient(rr, rec.url, sidecar_id=rr.id,
                        restart=restarter(spec, settings.sidecar_start_timeout),
                        auth=SidecarKey(f"reranker sidecar {rr.id!r}"))


def rerank(client: RerankClient, query: str, hits: Sequence[Hit], top: int) -> list[Hit]:
    """The first `top` hits reordered by the reranker (each carrying its score in `rerank`),
    the rest after them in their fused order."""
    head, tail = list(hits[:top]), list(hits[top:])
    # The reranker reads what the embedder read: the chunk under its section.
    scores = client.scores(query, [with_context(heading(h.kind, h.path, h.section), h.text)
                                   for h in head])
    order = sorted(range(len(head)), key=lambda i: -scores[i])  # stable: ties keep fused order
    return [replace(head[i], rerank=scores[i]) for i in order] + tail
