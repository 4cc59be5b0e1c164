"""The layout of hydra_rag: one subpackage per stage, each importing only the stages below it,
no circle of imports between modules, few modules loose in the package, none too long.

Read from the source with `ast` (every import counts: at the top, inside a function, under
TYPE_CHECKING), so a lazy import that runs back up a stage fails here too.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "hydra_rag"

# Each stage and the stages directly below it that it may import (and, through them, what
# those may import). Listed bottom up, as docs/ARCHITECTURE.md draws them.
BELOW: dict[str, tuple[str, ...]] = {
    "basics": (),  # errors, paths, locks, bulk, the package itself
    "llamacpp": (),  # the engine's build: standard library only
    "catalog": ("basics",),
    "config": ("catalog",),
    "documents": ("basics",),
    "models": ("config", "llamacpp"),
    "read": ("config", "documents"),
    "store": ("read",),
    "warm": ("config",),  # the warm process's socket and loop; what it runs comes from cli
    "index": ("models", "store"),
    "search": ("models", "store"),
    "answer": ("search",),
    # models by name: pulled, imported, registered (self-tested like any sidecar), judged
    "hub": ("search",),
    "checks": ("answer", "index", "hub"),
    "api": ("answer", "index"),
    "serve": ("api", "checks"),
    "cli": ("serve", "warm"),
}
BASICS = {"__init__", "errors", "paths", "locks", "bulk"}
LOOSE_MAX = 8
LINES_MAX = 600


@cache
def allowed(stage: str) -> frozenset[str]:
    """The stage itself and every stage below it."""
    out = {stage}
    for lower in BELOW[stage]:
        out |= allowed(lower)
    return frozenset(out)


def modules() -> dict[str, Path]:
    """Dotted name → file, for every module of the package (a package by its __init__)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def stage_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "basics"
    if len(parts) == 2 and not (PACKAGE / parts[1]).is_dir():
        name = parts[1]
        return "basics" if name in BASICS else {"__main__": "cli"}.get(name, name)
    return parts[1]


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the modules of the package it imports (`from pkg import name` counts as the
    submodule when `name` is one, else as the package)."""
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.split(".")[0] == "hydra_rag"}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source.split(".")[0] != "hydra_rag":
                    continue
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    targets.add(sub if sub in mods else source)
        graph[name] = {t for t in targets if t in mods and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_known_stage() -> None:
    unknown = sorted(m for m in modules() if stage_of(m) not in BELOW)
    assert unknown == [], f"modules outside every stage (add them to a stage): {unknown}"


def test_no_import_runs_up_a_stage() -> None:
    graph = imports(modules())
    upward = sorted(f"{m} ({stage_of(m)}) imports {t} ({stage_of(t)})"
                    for m, targets in graph.items() for t in targets
                    if stage_of(t) not in allowed(stage_of(m)))
    assert upward == [], "imports that run back up a stage:\n" + "\n".join(upward)


def test_no_circle_of_imports() -> None:
    found = cycles(imports(modules()))
    assert found == [], "circles of imports: " + "; ".join(" ↔ ".join(c) for c in found)


def test_few_loose_modules() -> None:
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= LOOSE_MAX, f"{len(loose)} modules loose in hydra_rag/: {loose}"


def test_no_module_too_long() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > LINES_MAX}
    assert long == {}, f"modules over {LINES_MAX} lines (split them): {long}"


def test_every_stage_says_what_it_does() -> None:
    silent = [p.parent.name for p in PACKAGE.glob("*/__init__.py")
              if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))]
    assert silent == [], f"stage packages without a docstring in __init__.py: {silent}"


def test_the_checks_can_fail() -> None:
    # A circle and an upward import, as the checks above would meet them.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert "search" not in allowed("index") and "index" in allowed("cli")
    assert stage_of("hydra_rag.search.retrieve") == "search"
    assert stage_of("hydra_rag.errors") == "basics" and stage_of("hydra_rag.api") == "api"
