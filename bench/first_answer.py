"""Seconds from `hydra-rag index FOLDER` starting to the first fresh `hydra-rag search` process
that answers a name and an exact string right, as a user meets it: the whole command, default
settings, a copy of the folder with no index. A name (a definition found in one file) and an
exact string (a line found in one file) are drawn from the folder with a fixed seed
(bench/two_phase.py's `queries`); each round runs one search process for each, one after the
other, and the time of each answer is taken when its process ends. Once both are right, it goes
on polling for `--after` seconds (phase two: how long a search takes while the vectors arrive),
then stops the run with SIGINT (Ctrl-C keeps every batch stored) unless `--wait`.

    .venv/bin/python bench/first_answer.py /tmp/big/django [--after 30] [--load]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from two_phase import _spin, queries  # noqa: E402

CLI = [sys.executable, "-m", "hydra_rag"]


def _search(root: Path, q: str) -> tuple[str | None, list[str], float]:
    """The first file a fresh search process gives, its warnings, and its seconds."""
    t = time.monotonic()
    proc = subprocess.run([*CLI, "search", "--path", str(root), "-k", "1", "--files", "--json",
                           "--", q], capture_output=True, text=True)
    took = time.monotonic() - t
    if proc.returncode != 0:
        return None, [proc.stderr.strip()[-200:]], took
    doc = json.loads(proc.stdout)
    first = doc["files"][0]["path"] if doc["files"] else None
    return first, doc.get("warnings", []), took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--after", type=float, default=30.0,
                    help="seconds to go on polling once both are answered")
    ap.add_argument("--wait", action="store_true", help="let the run finish (all vectors)")
    ap.add_argument("--load", action="store_true", help="keep one core busy throughout")
    args = ap.parse_args()
    qs = queries(args.folder, 1)
    (name, name_file), (exact, exact_file) = qs["names"][0], qs["exact"][0]
    spinner = None
    if args.load:
        spinner = multiprocessing.Process(target=_spin, daemon=True)
        spinner.start()
    print(f"cores: {os.cpu_count()}; {'one core kept busy' if args.load else 'idle'}")
    print(f"name: {name!r} (in {name_file}); exact string: {exact!r} (in {exact_file})")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / args.folder.name
            shutil.copytree(args.folder, root, ignore=shutil.ignore_patterns(".hydra-index"))
            with open(Path(tmp) / "index.log", "w") as log:
                t0 = time.monotonic()
                run = subprocess.Popen([*CLI, "index", str(root)], stdout=log,
                                       stderr=subprocess.STDOUT)
                first: dict[str, float] = {}
                after: list[float] = []
                notes: set[str] = set()
                phase_one = None
                while run.poll() is None:
                    if phase_one is None and "searchable now" in \
                            (Path(tmp) / "index.log").read_text():
                        phase_one = time.monotonic() - t0
                        print(f"  phase one done (index says 'searchable now') by {phase_one:.1f} s")
                    for kind, q, want in (("name", name, name_file), ("exact", exact, exact_file)):
                        got, warnings, took = _search(root, q)
                        now = time.monotonic() - t0
                        if got == want and kind not in first:
                            first[kind] = now
                            print(f"  {kind} answered right at {now:.1f} s (that search took "
                                  f"{took:.2f} s){'; ' + warnings[0] if warnings else ''}")
                        if len(first) == 2 and kind in first:
                            after.append(took)
                        notes.update(w for w in warnings if "vectors for" in w)
                    if len(first) == 2 and not args.wait \
                            and time.monotonic() - t0 > max(first.values()) + args.after:
                        run.send_signal(signal.SIGINT)
                        break
                    time.sleep(0.2)
                code = run.wait()
                end = time.monotonic() - t0
            said = (Path(tmp) / "index.log").read_text().splitlines()
    finally:
        if spinner is not None:
            spinner.terminate()
    print(f"index ended with {code} at {end:.1f} s"
          + (" (stopped with SIGINT)" if code and not args.wait else ""))
    print("  " + "\n  ".join(line for line in said if "chunks" in line or "stored" in line
                             or "interrupted" in line)[-1500:])
    for kind in ("name", "exact"):
        print(f"{kind}: first right answer at "
              + (f"{first[kind]:.1f} s" if kind in first else "never"))
    if after:
        print(f"searches once both were right: {len(after)}, median {statistics.median(after):.2f} s,"
              f" max {max(after):.2f} s")
    for note in sorted(notes)[:3]:
        print(f"  warning seen: {note}")


if __name__ == "__main__":
    main()
