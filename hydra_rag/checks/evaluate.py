"""`hydra-rag eval`: measure retrieval on the user's own questions and say why each bad one
failed, walking the data flow and stopping at the first failure:

  data        the file (or the quoted passage) is not in the index at all
  chunking    the quoted passage is not whole inside any one chunk
  search      no list (vector, BM25) has the right chunk among its candidates
  reranking   a list had it, but fusion left it out of the top k
  generation  (with --answers) the right chunk was in the context, yet the answer misses the
              expected answer or fails the citation check

A question's target is one place (file, optionally lines and/or a quote); a chunk is relevant
when it is in that file, overlaps those lines and holds the whole quote. With one target per
question, nDCG@10 is 1 / log2(1 + rank) of the first relevant chunk (0 beyond 10).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from hydra_rag.answer.citations import fold
from hydra_rag.documents import SKIPS, skip_label
from hydra_rag.errors import HydraError, unreadable, yaml_problem
from hydra_rag.paths import on_disk
from hydra_rag.read.walk import read_text
from hydra_rag.search.rerank import MAX_TOP
from hydra_rag.search.retrieve import CANDIDATES, Searcher
from hydra_rag.store.index_dir import Store

FIXES = {
    "data": "make sure the file is indexed: {detail}",
    "chunking": "the passage is split between chunks {detail}: keep it within one section "
                "(under ~1,500 characters) or quote a shorter passage",
    "search": "neither list found it ({detail}): use the document's own words in the question, "
              "or an embedder that knows this language or domain (`index --embedder`)",
    "reranking": "it was a candidate ({detail}) but fused to rank {rank}: raise -k to {rank}, "
                 "{rerank}or try `--mode bm25`/`--mode vector` to see which list is misleading",
    "generation": "the answer was in context [{detail}] but the model missed it: try a "
                  "stronger chat model, or fewer passages (-k)",
}


@dataclass
class Question:
    question: str
    path: str
    lines: tuple[int, int] | None = None
    quote: str = ""
    answer: str = ""
    id: str = ""
    page: tuple[int, int] | None = None  # a document's page (slide, chapter) range, for lines


@dataclass
class Outcome:
    id: str
    question: str
    path: str
    rank: int | None  # of the first relevant chunk among the top k; None: not there
    label: str = "ok"  # ok | data | chunking | search | reranking | generation
    fix: str = ""
    candidate_rank: int | None = None  # its rank in the fused candidates, beyond k
    list_ranks: dict[str, int] = field(default_factory=dict)
    answer: str | None = None


def _lines(raw: Any, where: str, key: str = "lines") -> tuple[int, int] | None:
    if raw is None:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        return (raw, raw)
    if isinstance(raw, list) and len(raw) == 2 and all(isinstance(x, int) for x in raw):
        return (raw[0], raw[1])
    if isinstance(raw, str) and (m := re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+))?\s*", raw)):
        return (int(m.group(1)), int(m.group(2) or m.group(1)))
    raise HydraError(f"{where}: '{key}' must be N, \"A-B\" or [A, B], got {raw!r}")


def load_questions(path: Path) -> list[Question]:
    """Questions from JSONL (one object per line) or YAML (a list, or {questions: [...]})."""
    try:
        raw_text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable(path, exc) from None
    items: list[tuple[str, Any]] = []
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            doc = yaml.safe_load(raw_text)
        except yaml.YAMLError as exc:
            raise HydraError(f"{path}: not valid YAML ({yaml_problem(exc)})") from None
        if isinstance(doc, dict):
            doc = doc.get("questions")
        if not isinstance(doc, list):
            raise HydraError(f"{path}: expected a list of questions (or `questions:` holding one)")
        items = [(f"{path}: item {i}", x) for i, x in enumerate(doc, start=1)]
    else:
        for n, line in enumerate(raw_text.splitlines(), start=1):
            if line.strip():
                try:
                    items.append((f"{path}:{n}", json.loads(line)))
                except ValueError as exc:
                    raise HydraError(f"{path}:{n}: not JSON ({exc})") from None
    out: list[Question] = []
    for where, item in items:
        if not isinstance(item, dict):
            raise HydraError(f"{where}: expected an object with 'question' and 'path'")
        q, p = item.get("question"), item.get("path")
        if not isinstance(q, str) or not q.strip() or not isinstance(p, str) or not p.strip():
            raise HydraError(f"{where}: needs a non-empty 'question' and 'path'")
        for key in ("quote", "answer", "id"):
            if key in item and not isinstance(item[key], str | int):
                raise HydraError(f"{where}: '{key}' must be a string")
        if "lines" in item and "page" in item:
            raise HydraError(f"{where}: give 'lines' or 'page', not both")
        out.append(Question(q.strip(), p.strip(), _lines(item.get("lines"), where),
                            str(item.get("quote", "")), str(item.get("answer", "")),
                            str(item.get("id", len(out) + 1)),
                            _lines(item.get("page"), where, "page")))
    if not out:
        raise HydraError(f"{path}: no questions in it")
    return out


def _relative(q: Question, roots: list[Path]) -> list[tuple[Path, str]]:
    """(store root, path relative to it) for every store the question's path may mean."""
    p = Path(q.path).expanduser()
    if p.is_absolute():
        return [(r, p.resolve().relative_to(r).as_posix()) for r in roots
                if p.resolve().is_relative_to(r)]
    return [(r, p.as_posix()) for r in roots]


def in_target(store: str, path: str, targets: list[tuple[Path, str]]) -> bool:
    """Is (store, path) the file a question points at?"""
    return any(str(r) == store and rel == path for r, rel in targets)


class _Located(Protocol):
    @property
    def store(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def line_start(self) -> int: ...
    @property
    def line_end(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def page_start(self) -> int: ...
    @property
    def page_end(self) -> int: ...


def relevant(hit: _Located, q: Question, targets: list[tuple[Path, str]]) -> bool:
    """Is this chunk (a search hit, or a source the chat model was given) the question's
    passage: its file, overlapping its lines (or a document's pages), holding its quote?"""
    if not in_target(hit.store, hit.path, targets):
        return False
    if q.lines and (hit.line_end < q.lines[0] or hit.line_start > q.lines[1]):
        return False
    if q.page and (not hit.page_start or hit.page_end < q.page[0] or hit.page_start > q.page[1]):
        return False
    return not q.quote or fold(q.quote) in fold(hit.text)


class Evaluator:
    def __init__(self, searcher: Searcher, roots: list[Path], k: int,
                 answer: Callable[[str], Any] | None = None) -> None:
        self.searcher = searcher
        self.roots = roots
        self.k = k
        self.answer = answer  # question → chat TurnResult (with --answers)
        self._files = {r: Store(r).read_files() for r in roots}
        self._skips: dict[Path, dict[str, str]] = {}

    def run(self, questions: list[Question]) -> list[Outcome]:
        return [self.one(q) for q in questions]

    def one(self, q: Question) -> Outcome:
        targets = _relative(q, self.roots)
        hits = self.searcher.fused(q.question, candidates=CANDIDATES)
        ranked = [i for i, h in enumerate(hits, start=1) if relevant(h, q, targets)]
        first = ranked[0] if ranked else None
        out = Outcome(q.id, q.question, q.path, first if first and first <= self.k else None)
        if first is not None:
            out.candidate_rank = first
            out.list_ranks = hits[first - 1].ranks
        if out.rank is not None:
            if self.answer is not None:
                self._check_answer(q, out, targets)
            return out
        # Walk the data flow; stop at the first failure.
        problem = self._data(q, targets)
        if problem:
            return self._label(out, "data", problem)
        split = self._chunking(q, targets)
        if split:
            return self._label(out, "chunking", split)
        if first is None:
            return self._label(out, "search", f"not in the top {CANDIDATES} of any list")
        detail = ", ".join(f"{name} #{r}" for name, r in sorted(out.list_ranks.items()))
        return self._label(out, "reranking", detail, rank=first)

    def _label(self, out: Outcome, label: str, detail: str, rank: int | None = None) -> Outcome:
        out.label = label
        hint = ""
        if rank is not None and rank <= MAX_TOP:  # the reranker can reach it
            hint = (f"let a cross-encoder reorder the candidates (`--rerank --rerank-top "
                    f"{max(rank, 20)}`), ")
        out.fix = FIXES[label].format(detail=detail, rank=rank, rerank=hint)
        return out

    def _data(self, q: Question, targets: list[tuple[Path, str]]) -> str:
        if not targets:
            return f"{q.path} is not inside any searched folder"
        for root, rel in targets:
            entry = self._files[root].get(rel)
            if entry is not None and entry.chunks:
                if q.quote:
                    if entry.doc is not None:  # a document: the text it was indexed as
                        from hydra_rag.search.excerpt import document_text

                        text = document_text(on_disk(root, rel), root, entry.doc, False)[0]
                    else:
                        text, _ = read_text(on_disk(root, rel))
                    if text is None or fold(q.quote) not in fold(text):
                        return f"the quote is not in {rel} (a typo, or the file changed)"
                return ""
        root, rel = targets[0]
        if not on_disk(root, rel).is_file():
            return f"{rel} does not exist in {root}"
        reason = self._skip_reason(root, rel)
        if reason == "secret":
            return (f"{rel} looks like a private key or credentials and is not indexed; "
                    f"to index it anyway, `hydra-rag index {root} --include-secrets`")
        if reason in SKIPS and reason != "too_large":  # a document that yields no text
            return (f"{rel} cannot be read ({skip_label(reason)}): `hydra-rag index {root} "
                    "--dry-run` says what is wrong with it")
        if reason:
            return (f"{rel} is skipped ({reason}); `hydra-rag index {root} --include {rel}` "
                    "brings it in")
        return f"{rel} is not indexed yet; run `hydra-rag index {root}`"

    def _skip_reason(self, root: Path, rel: str) -> str:
        if root not in self._skips:
            from hydra_rag.config import load_settings
            from hydra_rag.read.source import walker

            walked = walker(root, None, None, load_settings()).walk()
            self._skips[root] = {p: why for why, paths in walked.skipped_paths.items()
                                 for p in paths}
        reason = self._skips[root].get(rel, "")
        entry = self._files[root].get(rel)
        return reason or (entry.skip if entry is not None else "")

    def _chunking(self, q: Question, targets: list[tuple[Path, str]]) -> str:
        """With a quote: the chunks of the file between which it is split (if it is)."""
        if not q.quote:
            return ""
        for root, rel in targets:
            if not self._files[root].get(rel):
                continue
            rows = self._file_chunks(root, rel)
            quote = fold(q.quote)
            if any(quote in fold(r["text"]) for r in rows):
                return ""
            touching = [r for r in rows if fold(r["text"])[-60:] in quote
                        or quote[:60] in fold(r["text"]) or _overlap(quote, fold(r["text"]))]
            spans = ", ".join(f"{rel}:{r['line_start']}-{r['line_end']}" for r in touching[:3])
            return spans or f"of {rel}"
        return ""

    def _file_chunks(self, root: Path, rel: str) -> list[dict[str, Any]]:
        store = Store(root)
        entry = self._files[root][rel]
        if entry.kind is None:
            return []
        rows = store.rows_for_paths(entry.kind, [rel], ["text", "line_start", "line_end"])
        return sorted(rows, key=lambda r: r["line_start"])

    def _check_answer(self, q: Question, out: Outcome, targets: list[tuple[Path, str]]) -> None:
        assert self.answer is not None
        result = self.answer(q.question)
        out.answer = result.answer
        cited = [s.n for s in result.sources if relevant(s, q, targets)]
        if not cited:  # in the top k, yet left out to fit the model's context
            out.label = "reranking"
            out.fix = ("the passage was left out of the model's context (it did not fit): "
                       "use a model with a longer context, or fewer passages (-k)")
            return
        missing = q.answer and fold(q.answer) not in fold(result.answer)
        if missing or not result.citations.ok:
            self._label(out, "generation", ", ".join(map(str, cited)))


def _overlap(quote: str, text: str, n: int = 40) -> bool:
    """Does the chunk hold a 40-character piece of the quote (it holds part of it)?"""
    return any(quote[i:i + n] in text for i in range(0, max(1, len(quote) - n), n))


def summarize(outcomes: list[Outcome], k: int) -> dict[str, Any]:
    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs) if xs else 0.0

    # Hit@5/10 and nDCG@10 count the rank among all fused candidates, whatever -k is.
    ranks = [o.candidate_rank for o in outcomes]
    bad = [o for o in outcomes if o.label != "ok" or o.rank != 1]
    worst = sorted(bad, key=lambda o: (o.label == "ok", o.candidate_rank is not None,
                                       -(o.candidate_rank or 0)))[:5]
    labels: dict[str, int] = {}
    for o in outcomes:
        labels[o.label] = labels.get(o.label, 0) + 1
    return {
        "questions": len(outcomes), "k": k,
        "hit@1": mean([1.0 if r is not None and r <= 1 else 0.0 for r in ranks]),
        "hit@5": mean([1.0 if r is not None and r <= 5 else 0.0 for r in ranks]),
        "hit@10": mean([1.0 if r is not None and r <= 10 else 0.0 for r in ranks]),
        "mrr": mean([1.0 / r if r else 0.0 for r in ranks]),
        "ndcg@10": mean([1.0 / math.log2(1 + r) if r and r <= 10 else 0.0 for r in ranks]),
        "labels": labels,
        "worst": [o.id for o in worst],
        "results": [asdict(o) for o in outcomes],
    }
