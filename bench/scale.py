"""Scale (issue 19): exact and approximate vector search, and full-text search, on large LanceDB
tables of hydra's shape — to decide past which size the library should build a vector index,
of which type and parameters, and when to rebuild it.

    python bench/scale.py [--rows 20000 100000 1000000] [--queries 200] [--full-up-to 200000]
                          [--budget 20] [--library] [--keep] [--json]

Rows: the schema of `hydra_rag.store.index_dir.Store.schema` (id, path, kind, lines, hash, text, section,
lex, vector fixed_size_list<float32>[384]). Their vectors are *synthetic from real ones*: the
5,183 SciFact abstracts (../shared/data/scifact, "# title" + text, one chunk each) embedded once
with hydra's default embedder (minilm-l6, through `hydra_rag.models.embed.connect`), then each row takes
a random abstract's vector plus gaussian noise (σ per dimension = NOISE / √384, so the noise has
norm NOISE) and is re-normalised; its text and `lex` (lexical.Analysis("en")) are the abstract's.
Queries: the first --queries SciFact claims, embedded with the same embedder (real query vectors).

For each size the table is written in batches of 50,000 rows (as many fragments), while the
exact top-100 of every query is kept by numpy (the truth for recall@10). Then, one query at a
time through LanceDB's async API as retrieve.py issues them (`nearest_to(v).column("vector")
.distance_type("dot").limit(k)`, selecting the columns retrieve.py reads):

- exact: brute force, no index (`bypass_vector_index()` once one exists);
- fts: `create_fts_index("lex", with_position=False, **Analysis("en").fts_options())` as
  store.ensure_fts does, and BM25 queries (`nearest_to_text`, the claim analysed as retrieve does);
- per candidate vector index (IVF_FLAT, IVF_SQ, IVF_PQ, IVF_HNSW_SQ, metric dot): build time,
  size of its files, and p50/p95/recall@10 for several query settings (nprobes, ef,
  refine_factor);
- for the last index built (IVF_HNSW_SQ): 5% then 20% more rows added after the build
  (unindexed, brute-forced by LanceDB), then `optimize()`: its time, and whether the rows are
  indexed after it (index_stats.num_unindexed_rows).

--library measures only what hydra_rag does today (store.py's IvfHnswSq with LanceDB's default
partitions; retrieve.py's nprobes 20 and refine_factor 10, at limit 10 and 100).

Each query set runs up to --queries queries but stops after --budget seconds (at least 20
queries): exact search on a million rows is slow. Sizes above --full-up-to get fewer index
configurations (IVF_FLAT and IVF_HNSW_SQ only: IVF_SQ and IVF_PQ lost at 100k and IVF_PQ
takes minutes to build), and skip BM25 over the rows added after the FTS build. Peak RSS (VmHWM, reset through
/proc/self/clear_refs before each step) is the bench process's, LanceDB's caches included.

Work files in bench/.work/scale/ (the embedded vectors are kept; each table is deleted after its
size unless --keep). Progress on stderr; a table on stdout, or one JSON line per (size, method,
settings) with --json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = HERE / ".work" / "scale"
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
DIMS = 384
NOISE = 0.5  # norm of the noise added to a real vector: cosine ≈ 0.89 to its source
BATCH = 50_000
COLUMNS = ["id", "path", "kind", "line_start", "line_end", "text", "section"]  # retrieve._COLUMNS
TRUTH = 100


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- memory ------------------------------------------------------------------------------

def reset_peak() -> None:
    """Make VmHWM start again from the current RSS (Linux ≥ 4.0; ignored elsewhere)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


# -- the real vectors ----------------------------------------------------------------------

@dataclass
class Base:
    texts: list[str]
    lex: list[str]
    vectors: np.ndarray  # (n, 384) unit
    queries: list[str]
    qvecs: np.ndarray  # (q, 384) unit


def load_base(n_queries: int) -> Base:
    """SciFact abstracts and claims, embedded once with minilm-l6 (cached in WORK)."""
    from hydra_rag.store.lexical import Analysis

    docs = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open(encoding="utf-8")]
    texts = [f"# {d['title']}\n\n{d['text']}" for d in docs]
    queries = [json.loads(line)["text"]
               for line in (SCIFACT / "queries.jsonl").open(encoding="utf-8")][:n_queries]
    cache = WORK / f"vectors-{len(texts)}-{len(queries)}.npz"
    if cache.is_file():
        z = np.load(cache)
        vectors, qvecs = z["docs"], z["queries"]
    else:
        os.environ.setdefault("HYDRA_RAG_HOME", str(ROOT / ".test-home"))
        from hydra_rag.catalog import get_embedder
        from hydra_rag.config import load_settings
        from hydra_rag.models.embed import connect

        client = connect(get_embedder("minilm-l6"), load_settings())
        t0 = time.perf_counter()
        vectors = client.embed_documents(texts)
        qvecs = client.embed(queries, client.embedder.query_prefix)
        log(f"embedded {len(texts)} abstracts and {len(queries)} claims in "
            f"{time.perf_counter() - t0:.0f} s")
        WORK.mkdir(parents=True, exist_ok=True)
        np.savez(cache, docs=vectors, queries=qvecs)
    analysis = Analysis("en")
    return Base(texts, [analysis.document(t) for t in texts], vectors.astype(np.float32),
                queries, qvecs.astype(np.float32))


class Rows:
    """Row batches drawn from the base (deterministic per start row), and the exact top-TRUTH
    of every query over all rows written so far."""

    def __init__(self, base: Base) -> None:
        import pyarrow as pa

        self.base = base
        self.text = pa.array(base.texts, pa.string())
        self.lex = pa.array(base.lex, pa.string())
        q = len(base.qvecs)
        self.top_ids = np.full((q, TRUTH), -1, dtype=np.int64)
        self.top_sims = np.full((q, TRUTH), -np.inf, dtype=np.float32)
        self.count = 0

    def batch(self, n: int) -> Any:
        import pyarrow as pa

        from hydra_rag.store.index_dir import Store

        start = self.count
        rng = np.random.default_rng(start)
        idx = rng.integers(0, len(self.base.vectors), n)
        vec = self.base.vectors[idx] + rng.normal(0, NOISE / math.sqrt(DIMS), (n, DIMS)).astype(
            np.float32)
        vec /= np.linalg.norm(vec, axis=1, keepdims=True)
        self._truth(vec, start)
        self.count += n
        take = pa.array(idx)
        ids = [f"r{start + i}" for i in range(n)]
        cols = {
            "id": pa.array(ids, pa.string()),
            "path": pa.array([f"scifact/{i}.md" for i in idx.tolist()], pa.string()),
            "kind": pa.array(["prose"] * n, pa.string()),
            "line_start": pa.array(np.ones(n, np.int32)),
            "line_end": pa.array(np.full(n, 5, np.int32)),
            "hash": pa.array(ids, pa.string()),
            "text": self.text.take(take),
            "section": pa.array([""] * n, pa.string()),
            "lex": self.lex.take(take),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vec.ravel()), DIMS),
        }
        schema = Store.schema("minilm-l6", DIMS)
        return pa.table([cols[f.name] for f in schema], schema=schema)

    def _truth(self, vec: np.ndarray, start: int) -> None:
        sims = self.base.qvecs @ vec.T  # (q, n)
        k = min(TRUTH, sims.shape[1])
        part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        s = np.concatenate([self.top_sims, np.take_along_axis(sims, part, 1)], axis=1)
        i = np.concatenate([self.top_ids, part + start], axis=1)
        order = np.argsort(-s, axis=1, kind="stable")[:, :TRUTH]
        self.top_sims = np.take_along_axis(s, order, 1)
        self.top_ids = np.take_along_axis(i, order, 1)


# -- measuring -----------------------------------------------------------------------------

@dataclass
class Result:
    rows: int
    method: str
    params: dict[str, Any] = field(default_factory=dict)
    limit: int = 10
    p50_ms: float | None = None
    p95_ms: float | None = None
    recall_at_10: float | None = None
    build_s: float | None = None
    index_mb: float | None = None
    rss_mb: float | None = None
    queries: int = 0
    note: str = ""

    def json(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def pct(lat: list[float], q: int) -> float:
    return float(np.percentile(lat, q))


class Bench:
    def __init__(self, args: argparse.Namespace, base: Base) -> None:
        self.args = args
        self.base = base
        self.results: list[Result] = []

    def emit(self, r: Result) -> None:
        self.results.append(r)
        if self.args.json:
            print(json.dumps(r.json()), flush=True)
        log(f"{r.rows:>8} {r.method:<12} {fmt_params(r.params):<28} p50 {fmt(r.p50_ms)} "
            f"p95 {fmt(r.p95_ms)} recall {fmt(r.recall_at_10, 3)} build {fmt(r.build_s)} "
            f"rss {fmt(r.rss_mb, 0)} {r.note}")

    async def timed(self, make: Any, n: int | None = None) -> tuple[list[float], list[list[str]]]:
        """Run queries one at a time (after 3 warm-ups) until all are done or the budget is
        spent (at least 20); their latencies (ms) and result ids."""
        total = n or len(self.base.queries)
        for i in range(3):
            await make(i).to_arrow()
        lat: list[float] = []
        ids: list[list[str]] = []
        end = time.perf_counter() + self.args.budget
        for i in range(total):
            t0 = time.perf_counter()
            out = await make(i).to_arrow()
            lat.append((time.perf_counter() - t0) * 1000)
            ids.append(out.column("id").to_pylist())
            if i + 1 >= 20 and time.perf_counter() > end:
                break
        return lat, ids

    def recall(self, ids: list[list[str]], truth: np.ndarray) -> float:
        got = [len({int(x[1:]) for x in r[:10]} & set(truth[i, :10].tolist())) / 10
               for i, r in enumerate(ids)]
        return statistics.fmean(got)

    async def vector(self, n_rows: int, atbl: Any, truth: np.ndarray, method: str,
                     params: dict[str, Any], limit: int = 10, bypass: bool = False,
                     build_s: float | None = None, index_mb: float | None = None,
                     note: str = "") -> Result:
        q = self.base.qvecs

        def make(i: int) -> Any:
            query = (atbl.query().nearest_to(q[i]).column("vector").distance_type("dot")
                     .limit(limit).select([*COLUMNS, "_distance"]))
            if bypass:
                query = query.bypass_vector_index()
            if "nprobes" in params:
                query = query.nprobes(params["nprobes"])
            if "ef" in params:  # at least limit × refine_factor, or lance refuses the query
                query = query.ef(max(params["ef"], limit * max(1, params.get("refine", 1))))
            if params.get("refine"):
                query = query.refine_factor(params["refine"])
            return query

        reset_peak()
        lat, ids = await self.timed(make)
        r = Result(n_rows, method, params, limit, pct(lat, 50), pct(lat, 95),
                   self.recall(ids, truth), build_s, index_mb, peak_mb(), len(lat), note)
        self.emit(r)
        return r

    async def fts(self, n_rows: int, atbl: Any, build_s: float | None, index_mb: float | None,
                  limit: int, note: str = "") -> Result:
        from hydra_rag.store.lexical import Analysis

        analysis = Analysis("en")
        texts = [analysis.query(t) for t in self.base.queries]

        def make(i: int) -> Any:
            return (atbl.query().nearest_to_text(texts[i], columns="lex").limit(limit)
                    .select([*COLUMNS, "_score"]))

        reset_peak()
        lat, _ = await self.timed(make)
        r = Result(n_rows, "fts", {}, limit, pct(lat, 50), pct(lat, 95), None, build_s,
                   index_mb, peak_mb(), len(lat), note)
        self.emit(r)
        return r


def index_dirs(table_dir: Path) -> set[Path]:
    d = table_dir / "_indices"
    return set(d.iterdir()) if d.is_dir() else set()


def build_index(tbl: Any, table_dir: Path, **kw: Any) -> tuple[float, float]:
    """Create the vector index (replacing the previous one); (seconds, MB of its files)."""
    before = index_dirs(table_dir)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the metric=… form is marked deprecated
        tbl.create_index(metric="dot", vector_column_name="vector", replace=True, **kw)
    dt = time.perf_counter() - t0
    return dt, sum(dir_mb(p) for p in index_dirs(table_dir) - before)


# The index store.py builds past ANN_ROWS (IvfHnswSq, LanceDB's default partitions) and the
# query settings retrieve.py passes (nprobes 20, refine_factor 10, 100 candidates).
LIBRARY: list[tuple[str, dict[str, Any], list[dict[str, Any]]]] = [
    ("IVF_HNSW_SQ", {}, [{"nprobes": 20, "refine": 10}, {"nprobes": 20, "refine": 10, "limit": 100},
                         {"nprobes": 20, "ef": 100, "refine": 5}])]


def index_plan(n: int, full: bool) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """(index type, build parameters, query settings) to try at n rows; HNSW last (the index
    kept for the add/optimize step)."""
    sq = max(1, round(math.sqrt(n)))
    hnsw_parts = max(1, n // 100_000)
    plan: list[tuple[str, dict[str, Any], list[dict[str, Any]]]] = []
    plan.append(("IVF_FLAT", {"num_partitions": sq},
                 [{"nprobes": 10}, {"nprobes": 20}, {"nprobes": 50}] if full else
                 [{"nprobes": 50}, {"nprobes": 100}]))
    if full:
        plan.append(("IVF_SQ", {"num_partitions": sq},
                     [{"nprobes": 20}, {"nprobes": 20, "refine": 5}, {"nprobes": 50, "refine": 5}]))
        plan.append(("IVF_PQ", {"num_partitions": sq, "num_sub_vectors": 48},
                     [{"nprobes": 20}, {"nprobes": 20, "refine": 10},
                      {"nprobes": 50, "refine": 10}, {"nprobes": 50, "refine": 20}]))
    if full:  # too slow to build at a million rows for this run's time box (103 s at 100k)
        plan.append(("IVF_PQ", {"num_partitions": sq, "num_sub_vectors": 96},
                     [{"nprobes": 20}, {"nprobes": 20, "refine": 5},
                      {"nprobes": 20, "refine": 10}, {"nprobes": 50, "refine": 10}]))
        plan.append(("IVF_HNSW_SQ", {"num_partitions": max(1, n // 25_000)},
                     [{"nprobes": 4}, {"nprobes": 4, "refine": 5}]))
    fewer = [{"nprobes": max(1, hnsw_parts // 3), "ef": 100, "refine": 5}] if hnsw_parts > 2 else []
    plan.append(("IVF_HNSW_SQ", {"num_partitions": hnsw_parts},
                 [*fewer, {"nprobes": hnsw_parts}, {"nprobes": hnsw_parts, "ef": 100},
                  {"nprobes": hnsw_parts, "refine": 5},
                  {"nprobes": hnsw_parts, "ef": 100, "refine": 5},
                  {"nprobes": hnsw_parts, "ef": 100, "refine": 10}]))
    return plan


async def one_size(bench: Bench, n: int) -> None:
    import lancedb

    from hydra_rag.store.index_dir import Store
    from hydra_rag.store.lexical import Analysis

    args = bench.args
    full = n <= args.full_up_to
    folder = WORK / f"t{n}"
    shutil.rmtree(folder, ignore_errors=True)
    db = lancedb.connect(str(folder))
    rows = Rows(bench.base)
    reset_peak()
    t0 = time.perf_counter()
    tbl = db.create_table("chunks", schema=Store.schema("minilm-l6", DIMS), mode="overwrite")
    done = 0
    while done < n:
        k = min(BATCH, n - done)
        tbl.add(rows.batch(k))
        done += k
    write_s = time.perf_counter() - t0
    table_dir = folder / "chunks.lance"
    bench.emit(Result(n, "write", {"batch": BATCH}, build_s=write_s,
                      index_mb=dir_mb(table_dir), rss_mb=peak_mb(),
                      note="table written (MB: the whole table)"))
    truth = rows.top_ids.copy()
    adb = await lancedb.connect_async(str(folder))
    atbl = await adb.open_table("chunks")

    await bench.vector(n, atbl, truth, "exact", {}, note="brute force, no index")
    await bench.vector(n, atbl, truth, "exact", {}, limit=100, note="brute force, limit 100")

    # Full text, as store.ensure_fts creates it.
    before = index_dirs(table_dir)
    reset_peak()
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tbl.create_fts_index("lex", replace=True, with_position=False,
                             **Analysis("en").fts_options())
    fts_s = time.perf_counter() - t0
    fts_mb = sum(dir_mb(p) for p in index_dirs(table_dir) - before)
    await atbl.checkout_latest()
    await bench.fts(n, atbl, fts_s, fts_mb, 10)
    await bench.fts(n, atbl, fts_s, fts_mb, 100)

    last: tuple[str, dict[str, Any], list[dict[str, Any]]] | None = None
    plan = LIBRARY if args.library else index_plan(n, full)
    for kind, build, settings in plan:
        reset_peak()
        build_s, mb = build_index(tbl, table_dir, index_type=kind, **build)
        await atbl.checkout_latest()
        for s in settings:
            limit = s.get("limit", 10)
            await bench.vector(n, atbl, truth, kind,
                               {**build, **{k: v for k, v in s.items() if k != "limit"}},
                               limit=limit, build_s=build_s, index_mb=mb,
                               note="as store.py builds and retrieve.py queries it" if
                               args.library else "")
        last = (kind, build, settings)
    assert last is not None
    kind, build, settings = last
    best = settings[0] if args.library else settings[-2]  # ef 100, refine 5
    if not args.library:
        await bench.vector(n, atbl, truth, kind, {**build, **best}, limit=100,
                           note="limit 100 (hydra's candidates)")

    # Rows added after the build: LanceDB brute-forces them beside the index.
    grown = 0
    for share in (0.05, 0.20):
        add = round(n * share) - grown
        tbl.add(rows.batch(add))
        grown += add
        await atbl.checkout_latest()
        stats = await atbl.index_stats("vector_idx")
        unindexed = stats.num_unindexed_rows if stats else None
        truth = rows.top_ids.copy()
        await bench.vector(rows.count, atbl, truth, kind, {**build, **best},
                           note=f"+{share:.0%} rows after build ({unindexed} unindexed)")
    await bench.vector(rows.count, atbl, truth, "exact", {}, bypass=True,
                       note="brute force, after +20%")
    if full and not args.library:  # a brute-force BM25 over 200,000 unindexed rows takes seconds per query
        await bench.fts(rows.count, atbl, None, None, 10, note="+20% rows not in FTS index")
    reset_peak()
    t0 = time.perf_counter()
    tbl.optimize()
    opt_s = time.perf_counter() - t0
    await atbl.checkout_latest()
    stats = await atbl.index_stats("vector_idx")
    note = (f"after optimize() ({stats.num_unindexed_rows} unindexed, "
            f"{stats.num_indices} index parts)" if stats else "after optimize()")
    await bench.vector(rows.count, atbl, truth, kind, {**build, **best}, build_s=opt_s, note=note)
    fstats = await atbl.index_stats("lex_idx")
    await bench.fts(rows.count, atbl, opt_s, None, 10,
                    note=f"after optimize() ({fstats.num_unindexed_rows if fstats else '?'} "
                         "unindexed)")
    if not args.keep:
        del tbl, atbl, db, adb
        shutil.rmtree(folder, ignore_errors=True)


def fmt(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def fmt_params(p: dict[str, Any]) -> str:
    short = {"num_partitions": "parts", "num_sub_vectors": "subvec"}
    return " ".join(f"{short.get(k, k)}={v}" for k, v in p.items())


def table(results: list[Result]) -> str:
    head = ("rows", "method", "parameters", "limit", "p50 ms", "p95 ms", "recall@10",
            "build s", "MB", "peak RSS MB", "n", "note")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        lines.append("| " + " | ".join([
            f"{r.rows:,}", r.method, fmt_params(r.params), str(r.limit), fmt(r.p50_ms),
            fmt(r.p95_ms), fmt(r.recall_at_10, 3), fmt(r.build_s), fmt(r.index_mb, 0),
            fmt(r.rss_mb, 0), str(r.queries), r.note]) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[20_000, 100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--budget", type=float, default=20.0,
                    help="seconds per query set (at least 20 queries run)")
    ap.add_argument("--full-up-to", type=int, default=200_000,
                    help="sizes above this try fewer index configurations")
    ap.add_argument("--library", action="store_true",
                    help="only the index and query settings hydra_rag uses today")
    ap.add_argument("--keep", action="store_true", help="keep the tables in bench/.work/scale")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("LANCEDB_LOG", "error")
    WORK.mkdir(parents=True, exist_ok=True)
    base = load_base(args.queries)
    log(f"{len(base.texts)} real vectors (SciFact abstracts, minilm-l6) + noise of norm {NOISE}, "
        f"{len(base.queries)} real query vectors (SciFact claims)")
    bench = Bench(args, base)
    for n in args.rows:
        t0 = time.perf_counter()
        asyncio.run(one_size(bench, n))
        log(f"{n} rows done in {time.perf_counter() - t0:.0f} s")
    if not args.json:
        print(f"Vectors: {len(base.texts)} SciFact abstracts embedded with minilm-l6, repeated "
              f"with gaussian noise (norm {NOISE}) and re-normalised; queries: {len(base.queries)} "
              "SciFact claims, embedded. MB: index files (write: the table).")
        print(table(bench.results))


if __name__ == "__main__":
    main()
