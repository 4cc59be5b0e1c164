"""A search result: one retrieved chunk with its fused score, the rank each list gave it and
where it stands (folder, file, lines, section, pages). The record every stage above search
reads (reranking, the prompt, the front ends)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk, with its fused score and the rank each list gave it."""

    store: str
    path: str
    kind: str
    line_start: int
    line_end: int
    text: str
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    id: str = ""
    similarity: float | None = None  # cosine similarity to the query, when a vector list had it
    rerank: float | None = None  # the reranker's score, when it read this chunk
    section: str = ""  # the headings the chunk stands under ("Guide › Install")
    embedder: str = ""  # the embedder of the chunk's table
    min_similarity: float = 0.2  # that embedder's cosine for "bears on the query"
    # A document's pages (slides, chapters: `page_unit`) the chunk spans; 0 when not known
    page_start: int = 0
    page_end: int = 0
    page_unit: str = ""
    # The ranking signals that moved it (hydra_rag.search.signals): name → factor or addition
    signals: dict[str, float] = field(default_factory=dict)
