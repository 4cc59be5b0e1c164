"""The MCP server: its tools over a Scope, on the official MCP SDK (stdio, or streamable HTTP
under `hydra-rag serve`). The descriptions are written for the model that reads them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field  # the SDK reads the tools' annotations: names at module level

from hydra_rag.errors import HydraError
from hydra_rag.serve.scope import MAX_K, Scope

INSTRUCTIONS = (
    "hydra-rag searches the user's own indexed folders (code and documents) on this machine. "
    "Use `search` to find passages, `get` to read the lines around a hit, `definition`, "
    "`references` and `outline` to navigate code by its names, `ask` for an answer "
    "written by the local model with numbered, checked citations, `stores` to see which "
    "folders are searchable, and `status` to see whether their indexes are current. Cite what "
    "you use as path:line_start-line_end."
)


def build(scope: Scope) -> Any:
    """An MCPServer whose tools answer from `scope`."""
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from hydra_rag import __version__

    server = MCPServer("hydra-rag", instructions=INSTRUCTIONS, version=__version__,
                       log_level="WARNING")

    async def run(func: Any, *args: Any) -> Any:
        try:
            return await anyio.to_thread.run_sync(func, *args)
        except HydraError as exc:
            raise ToolError(str(exc)) from None

    @server.tool(description=(
        "Search the user's indexed folders for passages about a query: hybrid retrieval "
        "(meaning + keywords + exact strings), best first. Each result has path (relative to "
        "its folder), store_name, line_start, line_end, section (the headings it stands "
        "under), score, text, and weak=true when it does not really bear on the query. Use "
        "exact identifiers or error messages as typed when you have them. Then read around a "
        "hit with `get`."))
    async def search(
        query: Annotated[str, Field(description="What to look for: words, a question, an "
                                    "identifier or a copied error message.")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many passages.")] = 10,
        paths: Annotated[list[str] | None, Field(
            description="Only these folders of the scope (path or name, see `stores`).")] = None,
        tag: Annotated[str | None, Field(description="Only folders with this tag.")] = None,
        mode: Annotated[str, Field(description="hybrid (default), vector or bm25.")] = "hybrid",
        glob: Annotated[list[str] | None, Field(description=(
            "Only files matching these patterns (gitignore's syntax: '*.py', 'src/**', "
            "'!tests/').")) ] = None,
        lang: Annotated[list[str] | None, Field(description=(
            "Only files in these languages (python, typescript, go, markdown…)."))] = None,
        group_by: Annotated[str, Field(description=(
            "chunk (default): passages; file: the k files most about the query, each with "
            "its best passages, ranked from all of a file's evidence."))] = "chunk",
    ) -> dict[str, Any]:
        return await run(lambda: scope.search(query, k, paths, tag, mode, glob, lang, group_by))

    @server.tool(description=(
        "Read lines of an indexed file, to see the context around a search hit. path is as "
        "search returned it (relative to its folder; prefix store_name: when several folders "
        "are searched). Without line_start the whole file; with line_start alone 40 lines. "
        "For a document (PDF, Word, EPUB…) the lines are those of its extracted text, and "
        "page gives one page (slide, chapter) of it, as search's page_start names it. "
        "Only files the index holds can be read (no ignored files, secrets or files outside "
        "the folders)."))
    async def get(
        path: Annotated[str, Field(description="File path as search returned it.")],
        line_start: Annotated[int | None, Field(ge=1, description="First line (1-based).")] = None,
        line_end: Annotated[int | None, Field(ge=1, description="Last line, inclusive.")] = None,
        page: Annotated[int | None, Field(ge=1, description=(
            "A document's page (slide, chapter), instead of lines."))] = None,
    ) -> dict[str, Any]:
        return await run(lambda: scope.get(path, line_start, line_end, page))

    @server.tool(description=(
        "Where a name is defined in the user's code (functions, methods, classes, types, "
        "constants), parsed from the source: exact, unlike `search`. name as code writes it: "
        "`send`, `Session.send` or `Session::send` (the part before the last dot narrows to "
        "that class or module). Returns results (path, store_name, kind, qualified, "
        "line_start, line_end of the whole definition, line of its name, text of that line), "
        "best first, tests last; total. Read one with `get`."))
    async def definition(
        name: Annotated[str, Field(description="The name, as code writes it.")],
        paths: Annotated[list[str] | None, Field(
            description="Only these folders of the scope (path or name, see `stores`).")] = None,
        tag: Annotated[str | None, Field(description="Only folders with this tag.")] = None,
    ) -> dict[str, Any]:
        return await run(lambda: scope.definition(name, paths, tag))

    @server.tool(description=(
        "Where a name is used in the user's code: calls, types and classes named, "
        "implementations, parsed from the source. Returns results (path, store_name, line, "
        "kind: call, type, class…, text of the line), file by file, tests last (at most 200), "
        "and total; uses through another module (re.escape where the code defines its own "
        "escape function) are counted apart, in others."))
    async def references(
        name: Annotated[str, Field(description="The name, as code writes it.")],
        paths: Annotated[list[str] | None, Field(
            description="Only these folders of the scope (path or name, see `stores`).")] = None,
        tag: Annotated[str | None, Field(description="Only folders with this tag.")] = None,
    ) -> dict[str, Any]:
        return await run(lambda: scope.references(name, paths, tag))

    @server.tool(description=(
        "The outline of one indexed code file: its definitions in line order, each with kind, "
        "name, qualified name, line_start, line_end and depth (0 top level, 1 a method of a "
        "class…); of a Markdown file or a document, its headings (kind heading, with its "
        "section's lines and page). A cheap map of a file before reading parts of it with "
        "`get`."))
    async def outline(
        path: Annotated[str, Field(description="File path as search returned it.")],
    ) -> dict[str, Any]:
        return await run(lambda: scope.outline(path))

    @server.tool(description=(
        "Ask the local model a question about the user's folders: it retrieves passages and "
        "answers citing them as [n]; the citations are checked in code. Returns answer, "
        "sources (n, path, line_start, line_end, section), citations, verdict ('ok', "
        "'problems', or 'no context' when the folders have nothing on the question) and "
        "problems. The local model is small: prefer `search` and `get` when you can read the "
        "passages yourself."))
    async def ask(
        question: Annotated[str, Field(description="The question.")],
        model: Annotated[str | None, Field(description="Chat model id (default: the "
                                           "configured default_model).")] = None,
        bundle: Annotated[str | None, Field(description="A bundle alias: its model, persona "
                                            "and folders.")] = None,
        k: Annotated[int | None, Field(ge=1, le=MAX_K, description="Passages to retrieve.")] = None,
        earlier: Annotated[list[str] | None, Field(description=(
            "The questions asked before this one in the conversation, oldest first: a "
            "follow-up such as 'where is it defined?' is searched with their subject."))] = None,
    ) -> dict[str, Any]:
        return await run(lambda: scope.ask(question, model, bundle, k, earlier=earlier))

    @server.tool(description=(
        "The folders this server searches: path, name, tags, chunks per table (code, prose), "
        "embedders, when each was last indexed, and any problem."))
    async def stores() -> dict[str, Any]:
        return {"stores": await run(scope.stores)}

    @server.tool(description=(
        "Whether each folder's index is current: state (current, stale, not_indexed), the "
        "files added, changed and removed since it was last indexed (up to 50 of each; counts "
        "has the totals), a rebuild the next index run would do, when it was last indexed, and "
        "fix: the command that brings it up to date. Search results from a stale folder may "
        "miss or misplace recent edits. Reads only; changes nothing."))
    async def status(
        paths: Annotated[list[str] | None, Field(
            description="Only these folders of the scope (path or name, see `stores`).")] = None,
        tag: Annotated[str | None, Field(description="Only folders with this tag.")] = None,
    ) -> dict[str, Any]:
        return {"folders": await run(lambda: scope.status(paths, tag))}

    return server
