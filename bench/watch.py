"""Always fresh (issue 18): edit-to-searchable latency with `hydra-rag watch`, the CPU of an idle
watch over a large tree, and a branch switch against an index with content hashes — each with
its reference measured in the same run.

    python bench/watch.py [--edits 50] [--ref-edits 10] [--files 10000] [--seconds 60]
                          [--repo-files 500] [--repo-changed 20] [--parts edit,idle,switch] [--json]

1. *edit*: the flask source distribution (`flask==3.1.2`, as bench/index_throughput.py fetches
   it), copied to a work folder and indexed, with `hydra-rag watch --json` running on it. Each
   scripted edit appends or inserts a line holding a made-up token (`zqx…`) in a random indexed
   .py or .rst file; the time from the write (file closed) until a BM25 search
   (`Searcher.search(token, 5, methods=("bm25",))`, polled every 20 ms in this process) returns
   a hit of that file holding the token. Reference: the same edit, then a whole
   `hydra-rag index` process, then the same search (the best a user without watch gets).
2. *idle*: a generated tree of --files small files in --files/20 folders, indexed, watched
   for --seconds with no change: CPU seconds (utime + stime from /proc/PID/stat) of the watch
   process, its peak RSS (VmHWM) and its inotify watches (/proc/PID/fdinfo). Reference, in the
   next window of the same length: watchfiles' own polling (`watchfiles.watch(root,
   force_polling=True, poll_delay_ms=2000)`, what hydra falls back to) and a plain
   `os.walk` + `stat` of every file every 2 s, as two processes side by side.
3. *switch*: a git repository of --repo-files Markdown files of a few KB; branch `other`
   changes all of them, branch `target` changes --repo-changed of them (new paragraphs)
   relative to `main`. Indexed on `main` with watch running, then `git checkout other && git
   checkout target`: the time from the end of the checkout until `status` says current
   (`hydra_rag.index.status.folder_status`, what `hydra-rag status` prints, polled every
   100 ms; the CLI's exit code is checked once at the end), and the watch runs it took.
   Reference: the same switch in two copies made before it, each then brought current by a
   plain `hydra-rag index` — one whose files.json has its content hashes ("digest") stripped
   (an index from before content hashes), one as it is.

The corpora are built once and kept in bench/.work/watch/base-* while `hydra-rag status` says
their index is current; every run works on fresh copies (bench/.work/watch/run-*). Uses the
bench home (bench/.work/home) and the default embedder. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from index_throughput import fetch_sdist  # noqa: E402  (the same flask folder)

WORK = HERE / ".work" / "watch"
TICK = os.sysconf("SC_CLK_TCK")
POLL_S = 0.02
_VOCABULARY = """river stone lantern harbour copper meadow signal archive thread window valve ledger
orchard compass beacon furnace quarry saddle anchor kettle mirror tunnel garden pepper violin
marble canyon feather ribbon spindle parcel clover harvest timber glacier lattice pigeon crater
velvet hammer socket buffer cursor packet schema render module vector kernel batch query index
token filter stream cache"""
WORDS = _VOCABULARY.split()


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def hydra(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "hydra_rag", *args], capture_output=True,
                          text=True)
    if check and proc.returncode != 0:
        raise SystemExit(f"hydra-rag {' '.join(args)} failed ({proc.returncode}): "
                         f"{proc.stderr[-2000:]}")
    return proc


def index(root: Path) -> tuple[float, dict[str, Any]]:
    """Wall seconds and the --json summary of one whole `hydra-rag index` process."""
    t0 = time.perf_counter()
    out = hydra("index", str(root), "--json").stdout
    return time.perf_counter() - t0, json.loads(out)


def current(root: Path) -> bool:
    return hydra("status", str(root), check=False).returncode == 0


def pct(xs: list[float], q: int) -> float:
    """The q-th percentile (inclusive method; the largest value for small samples at 95)."""
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=100, method="inclusive")[q - 1]


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def prepared(name: str, make: Callable[[Path], None]) -> Path:
    """WORK/base-<name>: built by `make` and indexed, or kept from an earlier run while its
    index is current."""
    base = WORK / f"base-{name}"
    if base.is_dir() and (base / ".hydra-index").is_dir() and current(base):
        log(f"{base.name}: kept from an earlier run (status: current)")
        return base
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    make(base)  # each its own git repository: this checkout's .gitignore hides bench/.work/
    log(f"{base.name}: indexing")
    wall, rep = index(base)
    log(f"{base.name}: {rep['files_indexed']} files, {rep['chunks_added']} chunks in {wall:.0f}s")
    return base


def fresh_copy(base: Path, name: str) -> Path:
    """A copy of a base folder (mtimes kept, so its index stays current)."""
    dst = WORK / f"run-{name}"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(base, dst, symlinks=True)
    return dst


class Watcher:
    """A running `hydra-rag watch --json`; each line is queued with the time it was read."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "hydra_rag", "watch", str(root),
                                      "--json"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.events: queue.Queue[tuple[float, dict[str, Any]] | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr or []),
                         daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout or []:
            self.events.put((time.perf_counter(), json.loads(line)))
        self.events.put(None)

    def next(self, timeout: float) -> tuple[float, dict[str, Any]] | None:
        """The next event (None: none came within `timeout`)."""
        try:
            item = self.events.get(timeout=max(timeout, 0.001))
        except queue.Empty:
            return None
        if item is None:
            raise SystemExit(f"watch ended ({self.proc.wait()}): {''.join(self.stderr)[-2000:]}")
        if item[1]["event"] == "error":
            log(f"watch error: {item[1].get('message')}")
        return item

    def expect(self, event: str, timeout: float = 600) -> tuple[float, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while (item := self.next(deadline - time.monotonic())) is not None:
            if item[1]["event"] == event:
                return item
        raise SystemExit(f"no {event} event from watch in {timeout:.0f}s")

    def started(self) -> dict[str, Any]:
        first = self.expect("indexed")[1]
        self.expect("watching")
        return first

    def drain(self, quiet: float) -> list[tuple[float, dict[str, Any]]]:
        """Events until none came for `quiet` seconds."""
        got = []
        while (item := self.next(quiet)) is not None:
            got.append(item)
        return got

    def warm_up(self, root: Path) -> float:
        """A file added and removed again, not measured: a watch's first run after it started
        also imports LanceDB and opens the tables. Returns that first run's seconds."""
        scratch = root / "zz-watch-warm-up.md"
        scratch.write_text("# Warm up\n\nA scratch note the benchmark adds and removes.\n")
        cold = self.expect("indexed", 120)[1]["elapsed_s"]
        scratch.unlink()
        self.expect("indexed", 120)
        return float(cold)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=120)
        if rc != 0:
            log(f"watch exited {rc}: {''.join(self.stderr)[-1000:]}")


# -- 1. edit to searchable ------------------------------------------------------------------


def edit(path: Path, token: str, rng: random.Random, append: bool) -> None:
    lines = path.read_text().splitlines(keepends=True)
    new = f"# {token}\n"
    if append or len(lines) < 3:
        if lines and not lines[-1].endswith("\n"):
            new = "\n" + new
        lines.append(new)
    else:
        lines.insert(rng.randrange(1, len(lines)), new)
    with open(path, "w") as fh:
        fh.write("".join(lines))


def found(searcher: Any, token: str, rel: str, timeout: float = 120) -> tuple[float, float]:
    """Poll until a hit of `rel` holds `token`: the time it was found and the last search's
    duration."""
    deadline = time.perf_counter() + timeout
    while True:
        t = time.perf_counter()
        hits = searcher.search(token, 5, methods=("bm25",))
        now = time.perf_counter()
        if any(h.path == rel and token in h.text for h in hits):
            return now, now - t
        if now > deadline:
            raise SystemExit(f"{token} never became searchable in {rel}")
        time.sleep(POLL_S)


def bench_edits(args: argparse.Namespace, emit: Callable[..., None]) -> None:
    from hydra_rag.config import load_settings
    from hydra_rag.search.retrieve import Searcher

    corpus = fetch_sdist(args.sdist)
    base = prepared("flask", lambda dst: shutil.copytree(
        corpus, dst, symlinks=True, dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(".hydra-index")))
    root = fresh_copy(base, "flask")
    files = json.loads((root / ".hydra-index" / "files.json").read_text())["files"]
    targets = sorted(p for p in files if p.endswith((".py", ".rst")))
    rng = random.Random(18)
    w = Watcher(root)
    first = w.started()
    cold_s = w.warm_up(root)
    log(f"edit: watching {root.name} ({len(files)} files indexed, initial run "
        f"{first['elapsed_s']:.2f}s, first run after a change {cold_s:.2f}s); {args.edits} "
        f"edits over {len(targets)} .py/.rst files")
    searcher = Searcher(root, load_settings())
    searcher.search("warm up the searcher", 5, methods=("bm25",))

    rows = []
    last = ""
    for i in range(args.edits):
        rel = rng.choice([t for t in targets if t != last])
        last = rel
        token = "zqx" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(9))
        edit(root / rel, token, rng, append=i % 2 == 0)
        t0 = time.perf_counter()
        t_found, search_s = found(searcher, token, rel)
        # The run that indexed it (its event may come just after the search found the token).
        runs = []
        while not runs or not any(ev["files_indexed"] for _, ev in runs):
            t, ev = w.expect("indexed", 60)
            runs.append((t, ev))
        t_ev, ev = runs[-1]
        run_s = sum(e["elapsed_s"] for _, e in runs)
        rows.append({"latency": t_found - t0, "before_run": t_ev - ev["elapsed_s"] - t0,
                     "run": run_s, "after_run": t_found - t_ev, "search": search_s,
                     "runs": len(runs), "chunks_embedded": ev["chunks_embedded"]})
        log(f"edit {i + 1}/{args.edits} {rel}: {rows[-1]['latency']:.2f}s "
            f"(run {run_s:.2f}s, {len(runs)} run(s), {ev['chunks_embedded']} embedded)")
        time.sleep(rng.uniform(0.1, 0.4))
    w.stop()

    refs = []
    for i in range(args.ref_edits):
        rel = rng.choice([t for t in targets if t != last])
        last = rel
        token = "zqx" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(9))
        edit(root / rel, token, rng, append=i % 2 == 0)
        t0 = time.perf_counter()
        wall, rep = index(root)
        t_found, search_s = found(searcher, token, rel)
        refs.append({"latency": t_found - t0, "index": wall, "run": rep["elapsed_s"],
                     "search": search_s})
        log(f"reference edit {i + 1}/{args.ref_edits} {rel}: {refs[-1]['latency']:.2f}s "
            f"(index process {wall:.2f}s, of which run {rep['elapsed_s']:.2f}s)")
    searcher.close()

    def summary(rs: list[dict[str, Any]], key: str) -> dict[str, float]:
        xs = [r[key] for r in rs]
        return {"p50": statistics.median(xs), "p95": pct(xs, 95), "max": max(xs)}

    lat = summary(rows, "latency")
    emit("edit_latency", "watch", f"edit → searchable with watch ({len(rows)} edits): p50 "
         f"{lat['p50']:.2f}s, p95 {lat['p95']:.2f}s, max {lat['max']:.2f}s; medians: event to run "
         f"{statistics.median(r['before_run'] for r in rows):.2f}s (quiet period "
         f"0.3s), run {statistics.median(r['run'] for r in rows):.2f}s, run end to found "
         f"{statistics.median(r['after_run'] for r in rows):.3f}s (one search "
         f"{statistics.median(r['search'] for r in rows) * 1000:.0f} ms); "
         f"{sum(r['runs'] > 1 for r in rows)} edits took more than one run",
         edits=len(rows), **lat,
         **{f"median_{k}": statistics.median(r[k] for r in rows)
            for k in ("before_run", "run", "after_run", "search")},
         multi_run_edits=sum(r["runs"] > 1 for r in rows), cold_first_run_s=cold_s,
         chunks_embedded=sum(r["chunks_embedded"] for r in rows))
    if refs:
        ref = summary(refs, "latency")
        emit("edit_latency", "manual_index", f"reference, edit → `hydra-rag index` process → "
             f"search ({len(refs)} edits): p50 {ref['p50']:.2f}s, p95 {ref['p95']:.2f}s, max "
             f"{ref['max']:.2f}s; index process median "
             f"{statistics.median(r['index'] for r in refs):.2f}s, of which its run "
             f"{statistics.median(r['run'] for r in refs):.2f}s",
             edits=len(refs), **ref,
             median_index_process=statistics.median(r["index"] for r in refs),
             median_run=statistics.median(r["run"] for r in refs))


# -- 2. an idle watch over a large tree ------------------------------------------------------


def make_tree(n: int) -> Callable[[Path], None]:
    def make(root: Path) -> None:
        rng = random.Random(n)
        git(root, "init", "-q")  # its own repository: this checkout ignores bench/.work/
        folders = max(1, n // 20)
        for i in range(n):
            j = i % folders
            d = root / f"area{j % 20:02d}" / f"part{j:03d}"
            d.mkdir(parents=True, exist_ok=True)
            words = [rng.choice(WORDS) for _ in range(rng.randint(12, 40))]
            if i % 3 == 0:
                name, fn = words[0], "_".join(words[1:3])
                text = (f'"""The {name} helper number {i}."""\n\n\ndef {fn}_{i}(x):\n'
                        f'    """{" ".join(words[3:])}."""\n    return x + {i}\n')
                (d / f"mod_{i}.py").write_text(text)
            else:
                text = f"# Note {i}: {words[0]} {words[1]}\n\n{' '.join(words[2:]).capitalize()}.\n"
                (d / f"note_{i}.md").write_text(text)
    return make


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def status_kib(pid: int, key: str) -> int:
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                if ln.startswith(key + ":"))
    return int(line.split()[1])


def inotify_watches(pid: int) -> int | None:
    total, seen = 0, False
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) != "anon_inode:inotify":
                continue
            seen = True
            text = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
        except OSError:
            continue
        total += sum(ln.startswith("inotify wd:") for ln in text.splitlines())
    return total if seen else None


POLLING = """import sys, watchfiles
for changes in watchfiles.watch(sys.argv[1], force_polling=True, poll_delay_ms=2000,
                                 debug=False, raise_interrupt=False):
    print(len(changes), flush=True)
"""
WALKING = """import os, sys, time
while True:
    n = 0
    for d, _, fs in os.walk(sys.argv[1]):
        for f in fs:
            os.stat(os.path.join(d, f)); n += 1
    time.sleep(2)
"""


def bench_idle(args: argparse.Namespace, emit: Callable[..., None]) -> None:
    root = prepared(f"tree-{args.files}", make_tree(args.files))
    n_files = sum(len(fs) for d, _, fs in os.walk(root)
                  if Path(d).relative_to(root).parts[:1] not in ((".git",), (".hydra-index",)))
    w = Watcher(root)
    t0 = time.perf_counter()
    first = w.started()
    start_s = time.perf_counter() - t0
    log(f"idle: watching {n_files} files (start to watching {start_s:.1f}s, initial run "
        f"{first['elapsed_s']:.2f}s); {args.seconds:.0f}s with no change")
    time.sleep(2)
    pid = w.proc.pid
    c0, t0 = cpu_s(pid), time.perf_counter()
    time.sleep(args.seconds)
    c1, t1 = cpu_s(pid), time.perf_counter()
    hwm, rss, watches = status_kib(pid, "VmHWM"), status_kib(pid, "VmRSS"), inotify_watches(pid)
    extra = [ev for _, ev in w.drain(0.1)]
    w.stop()
    cpu = c1 - c0
    emit("idle_cpu", "watch", f"idle watch over {n_files} files, {t1 - t0:.0f}s: {cpu:.2f} CPU s "
         f"= {100 * cpu / (t1 - t0):.2f}% of one core; peak RSS {hwm / 1024:.0f} MiB (now "
         f"{rss / 1024:.0f}); {watches} inotify watches; {len(extra)} events while idle",
         files=n_files, seconds=t1 - t0, cpu_s=cpu, cpu_pct=100 * cpu / (t1 - t0),
         vm_hwm_mib=hwm / 1024, vm_rss_mib=rss / 1024, inotify_watches=watches,
         idle_events=len(extra), start_to_watching_s=start_s,
         initial_run_s=first["elapsed_s"])

    procs = {name: subprocess.Popen([sys.executable, "-c", code, str(root)],
                                    stdout=subprocess.DEVNULL)
             for name, code in (("watchfiles_polling", POLLING), ("walk_stat_loop", WALKING))}
    log(f"idle: references (watchfiles force_polling 2s; os.walk+stat every 2s) side by side "
        f"for {args.seconds:.0f}s")
    time.sleep(3)  # imports and the first scan
    c0s = {k: cpu_s(p.pid) for k, p in procs.items()}
    t0 = time.perf_counter()
    time.sleep(args.seconds)
    t1 = time.perf_counter()
    for name, p in procs.items():
        cpu, hwm = cpu_s(p.pid) - c0s[name], status_kib(p.pid, "VmHWM")
        p.terminate()
        p.wait()
        what = ("watchfiles.watch(force_polling=True, poll_delay_ms=2000)"
                if name == "watchfiles_polling" else "os.walk + stat of every file every 2 s")
        emit("idle_cpu", name, f"reference, {what}, {t1 - t0:.0f}s: {cpu:.2f} CPU s = "
             f"{100 * cpu / (t1 - t0):.2f}% of one core; peak RSS {hwm / 1024:.0f} MiB",
             files=n_files, seconds=t1 - t0, cpu_s=cpu, cpu_pct=100 * cpu / (t1 - t0),
             vm_hwm_mib=hwm / 1024)


# -- 3. a branch switch ----------------------------------------------------------------------


def paragraph(rng: random.Random, words: int) -> str:
    out, line = [], []
    for _ in range(words):
        line.append(rng.choice(WORDS))
        if sum(len(x) + 1 for x in line) > 90:
            out.append(" ".join(line))
            line = []
    out.append(" ".join(line))
    return "\n".join(out).capitalize() + ".\n"


def make_repo(n: int, changed: int) -> Callable[[Path], None]:
    def make(root: Path) -> None:
        rng = random.Random(n * 1000 + changed)
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "user.email", "bench@example.invalid")
        git(root, "config", "user.name", "bench")
        rels = []
        for i in range(n):
            rel = f"topic{i % 25:02d}/page_{i:03d}.md"
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            paras = [f"# Page {i}: {rng.choice(WORDS)} and {rng.choice(WORDS)}\n"]
            paras += [paragraph(rng, rng.randint(60, 160)) for _ in range(rng.randint(3, 6))]
            (root / rel).write_text("\n".join(paras))
            rels.append(rel)
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "main")
        git(root, "checkout", "-q", "-b", "other")
        for rel in rels:  # every file changed (a reformat, a licence header…)
            with open(root / rel, "a") as fh:
                fh.write("\nRevised on the other branch.\n")
        git(root, "commit", "-q", "-am", "other")
        git(root, "checkout", "-q", "main")
        git(root, "checkout", "-q", "-b", "target")
        for rel in rng.sample(rels, changed):  # new text in a few
            with open(root / rel, "a") as fh:
                fh.write("\n## New section\n\n" + paragraph(rng, 120))
        git(root, "commit", "-q", "-am", "target")
        git(root, "checkout", "-q", "main")
    return make


def switch(root: Path) -> float:
    t0 = time.perf_counter()
    git(root, "checkout", "-q", "other")
    git(root, "checkout", "-q", "target")
    return time.perf_counter() - t0


def strip_digests(root: Path) -> None:
    path = root / ".hydra-index" / "files.json"
    doc = json.loads(path.read_text())
    for entry in doc["files"].values():
        entry.pop("digest", None)
    path.write_text(json.dumps(doc))


def bench_switch(args: argparse.Namespace, emit: Callable[..., None]) -> None:
    from hydra_rag.config import load_settings
    from hydra_rag.index.status import CURRENT, folder_status

    n, k = args.repo_files, args.repo_changed
    base = prepared(f"repo-{n}-{k}", make_repo(n, k))
    settings = load_settings()
    copies = {name: fresh_copy(base, f"repo-{name}") for name in ("watch", "nohash", "hashed")}
    strip_digests(copies["nohash"])
    for c in copies.values():
        git(c, "update-index", "-q", "--refresh")  # a copy's new inodes: not in the timing
    root = copies["watch"]
    w = Watcher(root)
    w.started()
    cold_s = w.warm_up(root)
    log(f"switch: watching {root.name} ({n} files); git checkout other && git checkout target")
    t_start = time.perf_counter()
    checkout_s = switch(root)
    t_end = time.perf_counter()
    polls = 0
    while folder_status(root, settings).state != CURRENT:
        polls += 1
        if time.perf_counter() - t_end > 600:
            raise SystemExit("status never said current")
        time.sleep(0.1)
    t_current = time.perf_counter()
    runs = [(t, ev) for t, ev in w.drain(2.0) if ev["event"] == "indexed"]
    w.stop()
    cli_current = current(root)
    totals = {key: sum(ev[key] for _, ev in runs)
              for key in ("changes", "files_indexed", "files_touched", "files_removed",
                          "chunks_embedded", "chunks_reused", "chunks_added", "chunks_removed")}
    wait_s = t_current - t_end
    took = ", ".join(f"{ev['elapsed_s']:.2f}s" for _, ev in runs)
    emit("branch_switch", "watch", f"switch of {n} files ({k} with new text) with watch: "
         f"checkout {checkout_s:.2f}s, then {wait_s:.2f}s until status said current "
         f"(`hydra-rag status` exit {0 if cli_current else 1} after); {len(runs)} watch run(s) "
         f"({took}): "
         f"{totals['files_touched']} touched, {totals['files_indexed']} indexed, "
         f"{totals['chunks_embedded']} chunks embedded ({totals['chunks_reused']} reused)",
         files=n, changed=k, checkout_s=checkout_s, to_current_s=wait_s, runs=len(runs),
         run_s=[ev["elapsed_s"] for _, ev in runs], status_cli_current=cli_current,
         cold_first_run_s=cold_s, status_polls=polls,
         runs_started_before_checkout_end=sum(t - ev["elapsed_s"] < t_end for t, ev in runs),
         first_run_start_s=(runs[0][0] - runs[0][1]["elapsed_s"] - t_start) if runs else None,
         **totals)

    for name, label in (("nohash", "index without content hashes"),
                        ("hashed", "index with content hashes")):
        c = copies[name]
        checkout_s = switch(c)
        wall, rep = index(c)
        ok = current(c)
        emit("branch_switch", f"manual_index_{name}", f"reference, the same switch, then "
             f"`hydra-rag index` on an {label}: {wall:.2f}s (run {rep['elapsed_s']:.2f}s): "
             f"{rep['files_indexed']} files read again, {rep['files_touched']} touched, "
             f"{rep['chunks_embedded']} chunks embedded ({rep['chunks_reused']} reused)"
             + ("" if ok else " — status NOT current after"),
             files=n, changed=k, checkout_s=checkout_s, index_process_s=wall,
             run_s=rep["elapsed_s"], files_indexed=rep["files_indexed"],
             files_touched=rep["files_touched"], chunks_embedded=rep["chunks_embedded"],
             chunks_reused=rep["chunks_reused"], chunks_added=rep["chunks_added"],
             chunks_removed=rep["chunks_removed"], status_cli_current=ok)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdist", default="flask==3.1.2")
    ap.add_argument("--edits", type=int, default=50, help="edits measured with watch")
    ap.add_argument("--ref-edits", type=int, default=10, help="edits of the manual reference")
    ap.add_argument("--files", type=int, default=10_000, help="files of the idle tree")
    ap.add_argument("--seconds", type=float, default=60, help="idle window, each")
    ap.add_argument("--repo-files", type=int, default=500)
    ap.add_argument("--repo-changed", type=int, default=20)
    ap.add_argument("--parts", default="edit,idle,switch")
    ap.add_argument("--json", action="store_true", help="one JSON line per measurement")
    args = ap.parse_args()
    if not 0 < args.repo_changed <= args.repo_files:
        ap.error("--repo-changed must be between 1 and --repo-files")

    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    hydra("rag", "setup")
    WORK.mkdir(parents=True, exist_ok=True)

    def emit(measure: str, mode: str, line: str, **fields: Any) -> None:
        if args.json:
            print(json.dumps({"measure": measure, "mode": mode, **{
                k: round(v, 4) if isinstance(v, float) else v for k, v in fields.items()}}),
                flush=True)
        else:
            print(line, flush=True)

    parts = {"edit": bench_edits, "idle": bench_idle, "switch": bench_switch}
    for name in args.parts.split(","):
        if name not in parts:
            ap.error(f"unknown part {name!r} (known: {', '.join(parts)})")
        t0 = time.perf_counter()
        parts[name](args, emit)
        log(f"{name}: done in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
