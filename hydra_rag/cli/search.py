"""`hydra-rag search` and `hydra-rag eval`: retrieval, shown or measured."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hydra_rag import api
from hydra_rag.cli.base import (
    RERANK,
    RERANK_TOP,
    app,
    file_url,
    hyperlinks,
    methods,
    out,
    print_json,
    rerank_flags,
    say,
)
from hydra_rag.errors import HydraError, unreadable
from hydra_rag.paths import on_disk, store_names


def _show(i: int, h: Any, query: str, label: str, explain: bool, link: str | None) -> None:
    from rich.style import Style
    from rich.text import Text

    from hydra_rag.documents import locate
    from hydra_rag.search.evidence import matching_lines, weak

    score = f"{h.score:.4f}" if h.rerank is None else f"reranker {h.rerank:.2f}"
    head = Text(f"{i:2}. ", style="bold")
    # On a terminal that shows them, the place is a link that opens the file (OSC 8).
    head.append(locate(label, h.line_start, h.line_end, h.page_unit, h.page_start, h.page_end),
                style=Style(bold=True, link=link))
    if h.page_unit:
        head.append(f"  lines {h.line_start}-{h.line_end}", style="dim")
    head.append(f"  {h.kind} · {score}", style="dim")
    if weak(h, query):
        head.append("  weak: not about this", style="yellow")
    out.print(head, highlight=False)
    if explain:
        ranks = ", ".join(f"{name} #{r}" for name, r in sorted(h.ranks.items()))
        sim = f"   cosine {h.similarity:.3f}" if h.similarity is not None else ""
        fused = f"   fused {h.score:.4f}" if h.rerank is not None else ""
        out.print(f"    ranks: {ranks}{sim}{fused}", markup=False, highlight=False)
        if h.signals:
            moved = ", ".join(f"{n} ×{v:.2f}" if n.startswith("aside:") else f"{n} +{v:.3f}"
                              for n, v in sorted(h.signals.items()))
            out.print(f"    signals: {moved}", markup=False, highlight=False)
    if h.section:
        out.print(f"    § {h.section}", style="dim", markup=False, highlight=False)
    lines = matching_lines(h.text, h.line_start, query)
    width = len(str(lines[-1].number)) if lines else 1
    for line in lines:
        text = Text()
        text.append(f"    {line.number:>{width}}│ ", style="dim")
        body = Text(line.text)
        for a, b in line.spans:
            body.stylize("bold magenta", a, b)
        text.append_text(body)
        # Cut to the terminal's width on a terminal; whole into a pipe or a file.
        if out.is_terminal:
            out.print(text, highlight=False, soft_wrap=False, overflow="ellipsis", no_wrap=True)
        else:
            out.print(text, highlight=False, soft_wrap=True)


@app.command()
def search(
    query: Annotated[str | None, typer.Argument(help="What to look for.")] = None,
    path: Annotated[list[Path] | None, typer.Option(
        "--path", help="Indexed folder, or a file or subfolder of one, to search alone "
        "(repeatable; default: nearest folder at or above here).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Search every registered folder.")] = False,
    tag: Annotated[list[str] | None, typer.Option(
        "--tag", help="Search the registered folders with this tag (repeatable).")] = None,
    k: Annotated[int, typer.Option("-k", "--top-k", min=1, help="Results to show.")] = 10,
    code_only: Annotated[bool, typer.Option("--code-only", help="Search code only.")] = False,
    prose_only: Annotated[bool, typer.Option("--prose-only", help="Search prose only.")] = False,
    explain: Annotated[bool, typer.Option("--explain", help="Show each list's rank.")] = False,
    mode: Annotated[str, typer.Option(
        "--mode", help="hybrid (vector + BM25, fused), vector or bm25.")] = "hybrid",
    glob: Annotated[list[str] | None, typer.Option(
        "--glob", "-g", metavar="PATTERN",
        help="Only files matching it (gitignore's syntax: *.py, src/**, !tests/; repeatable).")
    ] = None,
    lang: Annotated[list[str] | None, typer.Option(
        "--lang", metavar="L", help="Only files in this language (python, go, markdown…; "
        "repeatable).")] = None,
    files: Annotated[bool, typer.Option(
        "--files", "-l", help="Print only the matching files, best first, one per line.")] = False,
    vimgrep: Annotated[bool, typer.Option(
        "--vimgrep", help="One line per matching line, `path:line:column:text`, paths from "
        "the working folder (for editors' quickfix lists).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    queries: Annotated[Path | None, typer.Option(
        "--queries", help="JSONL file of {\"_id\", \"text\"}: one JSON result per line.")] = None,
    rerank: RERANK = None,
    rerank_top: RERANK_TOP = None,
) -> None:
    """Retrieval only: vector + BM25 on code and prose, fused (see --explain)."""
    from hydra_rag.config import load_settings
    from hydra_rag.search.paths import PathFilter

    if code_only and prose_only:
        raise typer.BadParameter("--code-only and --prose-only exclude each other")
    if sum((files, vimgrep, as_json and not files)) > 1 or (vimgrep and explain):
        raise typer.BadParameter("choose one output: --json, --files or --vimgrep "
                                 "(--explain only with the default output)")
    if (query is None) == (queries is None):
        raise typer.BadParameter("give a QUERY or --queries FILE (one of them)")
    tables = ("code",) if code_only else ("prose",) if prose_only else ("code", "prose")
    lists = methods(mode)
    items = _read_queries(queries) if queries is not None else []  # before any folder's index
    where = PathFilter.of(glob, lang, api.within(path))
    roots, federated = api.folders(path, all_, tag)
    searcher = api.searcher(roots, load_settings(**rerank_flags(rerank, rerank_top)),
                            skip_broken=federated)
    names = store_names(str(store.root) for store, _ in searcher.stores)
    if queries is not None:
        for n, item in enumerate(items, start=1):
            hits = searcher.search(item["text"], k, tables, methods=lists, where=where)
            print_json({"query_id": item.get("_id", str(n)), "query": item["text"],
                         "results": [api.hit_json(i, h, item["text"], names)
                                     for i, h in enumerate(hits, 1)]})
        return
    assert query is not None
    if files:
        _files(searcher, query, k, tables, lists, where, as_json, names)
        return
    hits = searcher.search(query, k, tables, methods=lists, where=where)
    for w in searcher.warnings:
        say(f"warning: {w}")
    if as_json:
        print_json({"query": query, "results": [api.hit_json(i, h, query, names)
                                                for i, h in enumerate(hits, 1)],
                    "warnings": list(searcher.warnings)})
        return
    if not hits:
        say("no results")
        return
    if vimgrep:
        _vimgrep(hits, query)
        return
    multi = len(searcher.stores) > 1
    links = hyperlinks(out, searcher.settings.hyperlinks)
    for i, h in enumerate(hits, start=1):
        link = file_url(on_disk(Path(h.store), h.path)) if links else None
        _show(i, h, query, f"{names[h.store]}:{h.path}" if multi else h.path, explain, link)


def _vimgrep(hits: list[Any], query: str) -> None:
    """`path:line:column:text` once per matching line of the hits, best hit first (column in
    bytes, from 1, as grep tools and vim count; a line two overlapping chunks share, once).
    Only when no hit holds a matching line (a question found by meaning alone) does each hit
    give its best line. Paths are relative to the working folder when under it, else
    absolute: what an editor started here opens."""
    import os

    from hydra_rag.search.evidence import grep_lines, matching_lines

    here = Path.cwd()
    found = [(h, grep_lines(h.text, h.line_start, query)) for h in hits]
    if not any(lines for _, lines in found):
        found = [(h, matching_lines(h.text, h.line_start, query, limit=1, whole=True))
                 for h in hits]
    seen: set[tuple[Path, int]] = set()
    for h, lines in found:
        full = Path(h.store) / h.path
        shown = os.path.relpath(full, here) if full.is_relative_to(here) else str(full)
        for line in lines:
            if (full, line.number) in seen:
                continue
            seen.add((full, line.number))
            at = line.spans[0][0] if line.spans else 0
            column = len(line.text[:at].encode("utf-8")) + 1
            sys.stdout.write(f"{shown}:{line.number}:{column}:{line.text}\n")






def _files(searcher: Any, query: str, k: int, tables: tuple[str, ...], lists: tuple[str, ...],
           where: Any, as_json: bool, names: dict[str, str]) -> None:
    """`search --files`: the k files most about the query, each ranked from all its candidate
    chunks (hydra_rag.search.files); with --json, each with its best passages."""
    found = searcher.files(query, k, tables, methods=lists, where=where)
    for w in searcher.warnings:
        say(f"warning: {w}")
    multi = len(searcher.stores) > 1
    paths = [f"{names[f.store]}:{f.path}" if multi else f.path for f in found]
    if as_json:
        print_json({"query": query, "files": [api.file_json(i, f, query, names)
                                              for i, f in enumerate(found, 1)],
                    "warnings": list(searcher.warnings)})
        return
    for p in paths:
        sys.stdout.write(p + "\n")
    if not paths:
        say("no results")


def _read_queries(path: Path) -> list[dict[str, str]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable(path, exc) from None
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
    from hydra_rag.checks.evaluate import Evaluator, load_questions, summarize
    from hydra_rag.config import load_settings
    from hydra_rag.search.retrieve import Searcher

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


@app.command()
def get(
    spec: Annotated[str, typer.Argument(
        metavar="PATH[:START[-END]]",
        help="An indexed file, optionally a line or a range of lines (`src/app.py:120-160`; "
             "START alone shows 40 lines).")],
    page: Annotated[int | None, typer.Option(
        "--page", metavar="N", min=1,
        help="One page (slide, chapter) of a document, as search cites it.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Print lines of an indexed file, to read around a search hit. A document (PDF, Word,
    EPUB…) is shown as the text that was indexed."""
    from hydra_rag.documents import locate
    from hydra_rag.search.excerpt import parse_spec, read_excerpt

    target, start, end = parse_spec(spec)
    ex = read_excerpt(target, start, end, page=page)  # lines and a page together: UsageError
    if ex.changed:
        say(f"warning: {ex.path} changed since it was indexed — run `hydra-rag index {ex.root}`")
    if as_json:
        print_json({**ex.to_json(), "lines": ex.lines})
        return
    trail = f"  § {ex.section}" if ex.section else ""
    where = locate(ex.path, ex.line_start, ex.line_end, ex.page_unit, ex.page_start, ex.page_end)
    lines = f" (lines {ex.line_start}-{ex.line_end})" if ex.page_unit else ""
    say(f"{where}{lines} of {ex.total}{trail}")
    width = len(str(ex.line_end))
    for n, line in enumerate(ex.lines, start=ex.line_start):
        sys.stdout.write(f"{n:>{width}}  {line}\n")
