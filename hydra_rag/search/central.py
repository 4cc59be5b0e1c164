"""How central a file is to its project: PageRank over the graph of which file uses the names
which other file defines (the symbol table: hydra_rag.store.symbols), as Aider's repository
map ranks files. A question about how a part works is more often about the module that holds
the logic, which many files call into, than about a helper at the edge. Pure; the searcher
reads the table once per index run (hydra_rag.search.retrieve).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

DAMPING = 0.85
ROUNDS = 30
# A name defined in more files than this (`new`, `String`, `get`) says nothing about which of
# them a use means.
AMBIGUOUS = 3


def centrality(links: Iterable[tuple[str, str, bool]]) -> dict[str, float]:
    """Each file's PageRank in the graph of uses (file → the files defining the names it
    uses), scaled so that the most central file has 1.0; files with no edge are left out."""
    defines: dict[str, set[str]] = defaultdict(set)
    uses: dict[str, set[str]] = defaultdict(set)
    for rel, name, definition in links:
        (defines if definition else uses)[name].add(rel)
    # Edge weights: how many distinct names one file takes from another.
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name, users in uses.items():
        owners = defines.get(name, ())
        if not owners or len(owners) > AMBIGUOUS:
            continue
        for user in users:
            for owner in owners:
                if owner != user:
                    out[user][owner] += 1.0 / len(owners)
    nodes = sorted({*out, *(o for targets in out.values() for o in targets)})
    if not nodes:
        return {}
    n = len(nodes)
    rank = dict.fromkeys(nodes, 1.0 / n)
    totals = {u: sum(t.values()) for u, t in out.items()}
    for _ in range(ROUNDS):
        fresh = dict.fromkeys(nodes, (1.0 - DAMPING) / n)
        # A file that uses nothing spreads its rank evenly (no rank leaks away).
        sink = sum(rank[u] for u in nodes if u not in out) * DAMPING / n
        for u, targets in out.items():
            share = rank[u] * DAMPING / totals[u]
            for v, w in targets.items():
                fresh[v] += share * w
        rank = {u: r + sink for u, r in fresh.items()}
    top = max(rank.values())
    return {u: r / top for u, r in rank.items()}
