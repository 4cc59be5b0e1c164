"""How long `hydra-rag search` takes from a shell: wall time (p50 of interleaved rounds) of a
search in a fresh process (cold: `warm_minutes: 0`) and through the warm process, against
`python -c pass` (the floor of any Python command) and ripgrep on the same folder; then where a
cold search's imports go (`python -X importtime`).

    python bench/startup.py [--rounds 9] [FOLDER]

FOLDER defaults to a copy of the `rich` package's sources (installed with hydra-rag, so
present offline), indexed under bench/.work/startup. The embedder sidecar is started before the
rounds, as it stays up between commands (`sidecar_idle_minutes`); so is the warm process.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUERIES = ["render a table with a title", "Console.print", "soft_wrap", "how are emoji codes replaced"]


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t0
    if proc.returncode not in ((0, 1) if "rg" in cmd[0] or "grep" in cmd[0] else (0,)):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr}")
    return took


def _folder(arg: str | None, hydra: list[str], env: dict[str, str]) -> Path:
    if arg:
        return Path(arg).resolve()
    import rich

    root = HERE / ".work" / "startup" / "rich"
    if not (root / ".hydra-index").is_dir():
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(Path(rich.__file__).parent, root,
                        ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        print(f"indexing {root} …", flush=True)
        subprocess.run([*hydra, "index", str(root)], env=env, check=True,
                       stdout=subprocess.DEVNULL)
    return root


def _importtime(hydra: list[str], env: dict[str, str], root: Path) -> list[tuple[float, str]]:
    proc = subprocess.run([sys.executable, "-X", "importtime", *hydra, "search", QUERIES[0]],
                          env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        depth = (len(name) - len(name.lstrip())) // 2
        if depth == 0:  # imported by hydra-rag's own modules (or the interpreter)
            rows.append((int(cumulative) / 1e6, name.strip()))
    return sorted(rows, reverse=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", nargs="?")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    env = {**os.environ}
    # As a user runs it: Python keeps compiled modules (some sandboxes and CI images turn that
    # off, and every command then compiles hydra-rag's modules again, ~0.15 s).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    # The installed command, as a user runs it (`python -m` would put the working folder, a
    # folder of Python sources here, first on the import path).
    hydra = [str(Path(sys.executable).parent / "hydra-rag")]
    cold_env = {**env, "HYDRA_RAG_WARM_MINUTES": "0"}
    warm_env = {**env, "HYDRA_RAG_WARM_MINUTES": "10"}
    root = _folder(args.folder, hydra, cold_env)
    rg = shutil.which("rg") or shutil.which("rg", path=str(Path(sys.executable).parent))
    grep = [rg, "-n", "--no-heading"] if rg else ["grep", "-rn"]
    # The sidecar and the warm process up before timing (a search starts both when missing).
    _run([*hydra, "search", QUERIES[0]], warm_env, root)
    deadline = time.monotonic() + 120
    while True:
        listed = subprocess.run([*hydra, "sidecars", "list"], env=warm_env, capture_output=True,
                                text=True).stdout
        if "warm" in listed or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    _run([*hydra, "search", QUERIES[0]], warm_env, root)  # tables read into memory

    kinds = {
        "python -c pass": lambda q: [sys.executable, "-c", "pass"],
        f"{Path(grep[0]).name} (same folder)": lambda q: [*grep, q.split()[0], "."],
        "hydra-rag --version": lambda q: [*hydra, "--version"],
        "search, cold": lambda q: [*hydra, "search", q],
        "search, warm": lambda q: [*hydra, "search", q],
    }
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(args.rounds):
        for name, cmd in kinds.items():
            e = warm_env if name == "search, warm" else cold_env
            times[name].append(_run(cmd(QUERIES[r % len(QUERIES)]), e, root))
    files = sum(1 for p in root.rglob("*") if p.is_file() and ".hydra-index" not in p.parts)
    print(f"\n{root.name}: {files} files; {args.rounds} interleaved rounds, "
          f"{len(QUERIES)} queries; {os.cpu_count()} cores")
    print(f"{'command':26} {'p50 s':>7} {'min s':>7} {'max s':>7}")
    for name, ts in times.items():
        print(f"{name:26} {statistics.median(ts):7.3f} {min(ts):7.3f} {max(ts):7.3f}")
    print("\ncold search, imports by cumulative time (python -X importtime, top 10):")
    for took, name in _importtime(hydra, cold_env, root)[:10]:
        print(f"  {took:6.3f} s  {name}")


if __name__ == "__main__":
    main()
