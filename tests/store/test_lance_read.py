"""A search reads tables through LanceDB's native core alone (hydra_rag.store.lance_read): the
same rows as LanceDB's own Python API, without importing it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hydra_rag.store import lance_read
from hydra_rag.store.lance import lancedb

DIMS = 8
WORDS = ["alpha", "beta", "gamma", "delta", "render", "table", "title", "console", "print",
         "wrap"]


@pytest.fixture(scope="module")
def db_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    rng = np.random.default_rng(7)
    rows = []
    for i in range(300):
        vec = rng.normal(size=DIMS).astype(np.float32)
        rows.append({
            "id": f"c{i}", "path": f"src/f{i % 17}.py",
            "text": " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), 12)),
            "vector": (vec / np.linalg.norm(vec)).tolist(),
        })
    uri = str(tmp_path_factory.mktemp("lance") / "db")
    tbl = lancedb().connect(uri).create_table("code", rows)
    tbl.create_fts_index("text")
    return uri


def _both(uri: str, build: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows `build(table.query())` gives through the native core and through LanceDB."""
    async def go() -> tuple[Any, Any]:
        native = await lance_read.open_table(uri, "code")
        assert isinstance(native, lance_read.ReadTable)
        full = await (await lancedb().connect_async(uri)).open_table("code")
        return (await build(native.query()).to_arrow(), await build(full.query()).to_arrow())

    a, b = asyncio.run(go())
    assert a.schema.names == b.schema.names
    return a.to_pylist(), b.to_pylist()


def test_filtered_scan_matches(db_uri: str) -> None:
    a, b = _both(db_uri, lambda q: q.where("path IN ('src/f1.py', 'src/f2.py')")
                 .select(["id", "path", "text"]).limit(50))
    assert a == b and 0 < len(a) <= 50
    assert {r["path"] for r in a} == {"src/f1.py", "src/f2.py"}
    a, b = _both(db_uri, lambda q: q.with_row_id().select(["id", "vector"]))
    assert a == b and len(a) == 300 and "_rowid" in a[0]


def test_full_text_search_matches(db_uri: str) -> None:
    a, b = _both(db_uri, lambda q: q.nearest_to_text("render title", columns="text").limit(20)
                 .where("path != 'src/f3.py'").select(["id", "path", "_score"]))
    assert a == b and len(a) == 20
    assert all(r["path"] != "src/f3.py" for r in a)
    a, b = _both(db_uri, lambda q: q.nearest_to_text("console").limit(10).with_row_id()
                 .select(["_score"]))
    assert a == b and len(a) == 10 and set(a[0]) == {"_score", "_rowid"}


def test_vector_search_matches(db_uri: str) -> None:
    vec = np.ones(DIMS, dtype=np.float32) / np.sqrt(DIMS)
    a, b = _both(db_uri, lambda q: q.nearest_to(vec).column("vector").distance_type("dot")
                 .nprobes(20).refine_factor(5).where("path = 'src/f4.py'").limit(5)
                 .select(["id", "path", "_distance"]))
    assert a == b and len(a) == 5
    assert [r["_distance"] for r in a] == sorted(r["_distance"] for r in a)


def test_read_rows_inside_and_outside_an_event_loop(db_uri: str) -> None:
    where = "id IN ('c1', 'c2', 'c3')"
    rows = lance_read.read_rows(db_uri, "code", [where], ["id"]).to_pylist()
    assert sorted(r["id"] for r in rows) == ["c1", "c2", "c3"]

    async def inside() -> Any:
        return lance_read.read_rows(db_uri, "code", [where], ["id"])

    assert asyncio.run(inside()).to_pylist() == rows


def _python(code: str, cwd: Path) -> str:
    """What a fresh Python running `code` prints (it must succeed)."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_an_interrupt_during_a_read_leaves_no_loop_behind(db_uri: str, tmp_path: Path) -> None:
    """Ctrl-C (or `index`'s SIGTERM, raised as KeyboardInterrupt) at any moment of a read:
    the caller gets KeyboardInterrupt, and nothing else happens later. Interrupting the event
    loop itself left LanceDB's threads calling back into a closed loop (tracebacks on
    stderr) and, within a few hundred interrupts, a process that hung."""
    code = (
        "import random, signal, sys\n"
        "from hydra_rag.store import lance_read\n"
        f"uri = {db_uri!r}\n"
        "def read(): return lance_read.read_rows(uri, 'code', ['id >= \\'c1\\''], ['id', 'text'])\n"
        "def on(*_): raise KeyboardInterrupt\n"
        "signal.signal(signal.SIGALRM, on)\n"
        "random.seed(3); read(); done = stopped = 0\n"
        "for i in range(600):\n"
        "    try:\n"
        "        signal.setitimer(signal.ITIMER_REAL, random.uniform(0.0003, 0.006))\n"
        "        try:\n"
        "            done += read().num_rows == 299\n"
        "        finally:\n"
        "            signal.setitimer(signal.ITIMER_REAL, 0)\n"
        "    except KeyboardInterrupt:\n"
        "        stopped += 1\n"
        "print('READS', i + 1, done > 0, stopped > 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["READS", "600", "True", "True"], proc.stdout
    assert "Traceback" not in proc.stderr and "Event loop is closed" not in proc.stderr, \
        proc.stderr[-2000:]


def test_a_process_ends_cleanly_just_after_interrupted_reads(db_uri: str, tmp_path: Path) -> None:
    """Reads an interrupt left running, then the end of the program: LanceDB's own exit hook
    shut its runtime down under them, and about one such process in twenty aborted
    ("PyGILState_Release: thread state … must be current"), crashed, or hung (CI, stop 64).
    An interrupt while the read's thread was starting broke `Thread.start`'s lock ("release
    unlocked lock"). Sixty processes: the code before failed this test in 4 runs of 4."""
    code = (
        "import random, signal, sys\n"
        "from hydra_rag.store import lance_read\n"
        f"uri = {db_uri!r}\n"
        "def read():\n"
        "    return lance_read.read_rows(uri, 'code', ['id >= \\'c1\\''], ['id', 'text'])\n"
        "def on(*_): raise KeyboardInterrupt\n"
        "signal.signal(signal.SIGALRM, on)\n"
        "random.seed(int(sys.argv[1])); read(); stopped = 0\n"
        "for i in range(4):\n"
        "    try:\n"
        "        signal.setitimer(signal.ITIMER_REAL, random.uniform(0.0003, 0.001))\n"
        "        try:\n"
        "            read()\n"
        "        finally:\n"
        "            signal.setitimer(signal.ITIMER_REAL, 0)\n"
        "    except KeyboardInterrupt:\n"
        "        stopped += 1\n"
        "print('STOPPED', stopped)\n"
    )
    stopped = 0
    for seed in range(60):
        proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code, str(seed)],
                              capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert proc.returncode == 0, (seed, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, (seed, proc.stderr[-2000:])
        stopped += int(proc.stdout.split()[1])
    assert stopped > 60  # the interrupts did land mid-read


def test_reading_does_not_import_lancedb(db_uri: str, tmp_path: Path) -> None:
    """What a cold `hydra-rag search` pays for: the native core, not LanceDB's Python layer."""
    code = (
        "import asyncio, sys\n"
        "from hydra_rag.store import lance_read\n"
        f"uri = {db_uri!r}\n"
        "async def go():\n"
        "    t = await lance_read.open_table(uri, 'code')\n"
        "    return await t.query().nearest_to_text('alpha').limit(3).select(['id']).to_arrow()\n"
        "print('ROWS', asyncio.run(go()).num_rows)\n"
        "print('ROWS', lance_read.read_rows(uri, 'code', [\"id = 'c9'\"], ['id']).num_rows)\n"
        "print('LOADED', sorted(m for m in ('lancedb', 'lance_namespace', 'pydantic')"
        " if m in sys.modules))\n"
    )
    out = _python(code, tmp_path)
    assert out.split("\n")[:3] == ["ROWS 3", "ROWS 1", "LOADED []"], out


def test_a_search_process_imports_lancedb_afterwards_with_the_same_core(db_uri: str,
                                                                        tmp_path: Path) -> None:
    """A process that read through the core alone and then writes (an index after a search in
    the warm process) gets LanceDB's package over the very same core."""
    code = (
        "import sys\n"
        "from hydra_rag.store import lance_read\n"
        f"uri = {db_uri!r}\n"
        "lance_read.read_rows(uri, 'code', [\"id = 'c9'\"], ['id'])\n"
        "core = sys.modules['lancedb._lancedb']\n"
        "from hydra_rag.store.lance import lancedb\n"
        "db = lancedb().connect(uri)\n"
        "print('SAME', sys.modules['lancedb._lancedb'] is core, db.open_table('code').count_rows())\n"
    )
    out = _python(code, tmp_path)
    assert "SAME True 300" in out, out


def test_threads_opening_tables_at_once_share_one_loaded_core(db_uri: str,
                                                              tmp_path: Path) -> None:
    """A cold server's first searches open tables side by side: none may get the core before
    it has finished loading (`serve` answered 500 to some of sixteen searches at once)."""
    code = (
        "import asyncio, sys\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from hydra_rag.store import lance_read\n"
        f"uri = {db_uri!r}\n"
        "def one(_):\n"
        "    async def go():\n"
        "        t = await lance_read.open_table(uri, 'code')\n"
        "        return (await t.query().limit(2).select(['id']).to_arrow()).num_rows\n"
        "    return asyncio.run(go())\n"
        "with ThreadPoolExecutor(16) as pool:\n"
        "    print('ROWS', sorted(set(pool.map(one, range(32)))))\n"
    )
    for _ in range(3):
        out = _python(code, tmp_path)
        assert "ROWS [2]" in out, out
