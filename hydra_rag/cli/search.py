"""`hydra-rag search` and `hydra-rag eval`: retrieval, shown or measured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from hydra_rag import api
from hydra_rag.cli.base import (
    RERANK,
    RERANK_TOP,
    app,
    methods,
    out,
    print_json,
    rerank_flags,
    say,
)
from hydra_rag.errors import HydraError


def _hit_json(rank: int, h: Any) -> dict[str, Any]:
    return {"rank": rank, "path": h.path, "store": h.store, "kind": h.kind,
            "line_start": h.line_start, "line_end": h.line_end, "section": h.section,
            "score": round(h.score, 6), "text": h.text, "ranks": h.ranks,
            **({"rerank": round(h.rerank, 4)} if h.rerank is not None else {})}




@app.command()
def search(
    query: Annotated[str | None, typer.Argument(help="What to look for.")] = None,
    path: Annotated[list[Path] | None, typer.Option(
        "--path", help="Indexed folder (repeatable; default: nearest one at or above here).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Search every registered folder.")] = False,
    tag: Annotated[list[str] | None, typer.Option(
        "--tag", help="Search the registered folders with this tag (repeatable).")] = None,
    k: Annotated[int, typer.Option("-k", "--top-k", min=1, help="Results to show.")] = 10,
    code_only: Annotated[bool, typer.Option("--code-only", help="Search code only.")] = False,
    prose_only: Annotated[bool, typer.Option("--prose-only", help="Search prose only.")] = False,
    explain: Annotated[bool, typer.Option("--explain", help="Show each list's rank.")] = False,
    mode: Annotated[str, typer.Option(
        "--mode", help="hybrid (vector + BM25, fused), vector or bm25.")] = "hybrid",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    queries: Annotated[Path | None, typer.Option(
        "--queries", help="JSONL file of {\"_id\", \"text\"}: one JSON result per line.")] = None,
    rerank: RERANK = None,
    rerank_top: RERANK_TOP = None,
) -> None:
    """Retrieval only: vector + BM25 on code and prose, fused (see --explain)."""
    from hydra_rag.config import load_settings
    from hydra_rag.retrieve import Searcher

    if code_only and prose_only:
        raise typer.BadParameter("--code-only and --prose-only exclude each other")
    if (query is None) == (queries is None):
        raise typer.BadParameter("give a QUERY or --queries FILE (one of them)")
    tables = ("code",) if code_only else ("prose",) if prose_only else ("code", "prose")
    lists = methods(mode)
    roots, federated = api.folders(path, all_, tag)
    searcher = Searcher(roots, load_settings(**rerank_flags(rerank, rerank_top)),
                        skip_broken=federated)
    if queries is not None:
        for n, item in enumerate(_read_queries(queries), start=1):
            hits = searcher.search(item["text"], k, tables, methods=lists)
            print_json({"query_id": item.get("_id", str(n)), "query": item["text"],
                         "results": [_hit_json(i, h) for i, h in enumerate(hits, 1)]})
        return
    assert query is not None
    hits = searcher.search(query, k, tables, methods=lists)
    for w in searcher.warnings:
        say(f"warning: {w}")
    if as_json:
        print_json({"query": query, "results": [_hit_json(i, h) for i, h in enumerate(hits, 1)]})
        return
    if not hits:
        say("no results")
        return
    multi = len(searcher.stores) > 1
    for i, h in enumerate(hits, start=1):
        label = f"{Path(h.store).name}:{h.path}" if multi else h.path
        score = f"{h.score:.4f}" if h.rerank is None else f"reranker {h.rerank:.2f}"
        out.print(f"[bold]{i:2}. {label}:{h.line_start}-{h.line_end}[/bold]  "
                  f"[dim]{h.kind} · {score}[/dim]", highlight=False)
        if explain:
            ranks = ", ".join(f"{name} #{r}" for name, r in sorted(h.ranks.items()))
            sim = f"   cosine {h.similarity:.3f}" if h.similarity is not None else ""
            fused = f"   fused {h.score:.4f}" if h.rerank is not None else ""
            out.print(f"    ranks: {ranks}{sim}{fused}", markup=False, highlight=False)
        if h.section:
            out.print(f"    § {h.section}", style="dim", markup=False, highlight=False)
        snippet = " ".join(h.text.split())[:160]
        out.print(f"    {snippet}", markup=False, highlight=False)






def _read_queries(path: Path) -> list[dict[str, str]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise HydraError(f"cannot read {path}: {exc}") from None
    items = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                raise ValueError("needs a string 'text'")
        except ValueError as exc:
            raise HydraError(f"{path}:{n}: not a query object ({exc})") from None
        items.append(item)
    return items




@app.command("eval")
def eval_(
    questions: Annotated[Path, typer.Argument(
        help="JSONL or YAML: each item a `question` and the `path` of its answer, optionally "
             "`lines` (A-B), a verbatim `quote`, the expected `answer` and an `id`.")],
    path: Annotated[list[Path] | None, typer.Option(
        "--path", help="Indexed folder (repeatable; default: nearest one at or above here).")] = None,
    k: Annotated[int, typer.Option("-k", "--top-k", min=1, max=100,
                                   help="How many chunks count as retrieved.")] = 10,
    answers: Annotated[str | None, typer.Option(
        "--answers", help="Also answer each question with this chat model (or bundle) and "
        "check the answer and its citations.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    rerank: RERANK = None,
    rerank_top: RERANK_TOP = None,
) -> None:
    """Measure retrieval on your own questions and diagnose the bad ones."""
    from hydra_rag.config import load_settings
    from hydra_rag.evaluate import Evaluator, load_questions, summarize
    from hydra_rag.retrieve import Searcher

    items = load_questions(questions)
    roots, _ = api.folders(path, False, None)
    settings = load_settings(**rerank_flags(rerank, rerank_top))
    searcher = Searcher(roots, settings)
    chat = None
    if answers:
        chat = api.open_chat(answers, roots, False, min(k, 50), None, True, save=False,
                             rerank=rerank, rerank_top=rerank_top)
    try:
        ask = None
        if chat is not None:
            def ask(question: str) -> Any:
                chat.reset()  # every question on its own, no history
                return chat.ask(question)

        outcomes = Evaluator(searcher, roots, k, ask).run(items)
    finally:
        if chat is not None:
            chat.close()
        searcher.close()
    report = summarize(outcomes, k)
    if as_json:
        print_json(report)
        return
    out.print(f"{report['questions']} questions, top {k}: "
              f"Hit@1 {report['hit@1']:.2f}  Hit@5 {report['hit@5']:.2f}  "
              f"Hit@10 {report['hit@10']:.2f}  MRR {report['mrr']:.3f}  "
              f"nDCG@10 {report['ndcg@10']:.3f}", markup=False, highlight=False)
    for o in outcomes:
        rank = f"#{o.rank}" if o.rank else "—"
        tag = "" if o.label == "ok" else f"  [{o.label}]"
        out.print(f"  {rank:>4}  {o.id}: {o.question[:80]}{tag}", markup=False, highlight=False)
    worst = [o for o in outcomes if o.id in report["worst"]]
    if worst:
        out.print("worst questions:", markup=False)
        for o in worst:
            where = f"rank {o.rank}" if o.rank else "not in the top " + str(k)
            out.print(f"  {o.id} ({where}) {o.label}: {o.fix or 'fine'}",
                      markup=False, highlight=False)
