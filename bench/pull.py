"""What pulling a model by name costs beyond moving its bytes: `models pull hf:…` from a local
server that speaks the hub's API (tests/fakehub.py) against copying the same file, in the same
run, and what `models recommend` measures and estimates here.

    python bench/pull.py [--rounds 3]

Each round pulls into a fresh home: the download through huggingface_hub's client (with its
resume bookkeeping), the SHA-256 check, the llama.cpp self-test, the catalog entry. A second
pull of the same name only verifies the file. The reference is `cp` of the same file (page
cache warm), and the loopback HTTP transfer alone (huggingface_hub's http_get into /dev/null).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from fakehub import FakeFile, FakeHub, FakeRepo  # noqa: E402

MODELS = Path(os.environ.get("HYDRA_RAG_TEST_HOME", REPO / ".test-home")) / "data" / "models"
SMOL = MODELS / "SmolLM2-135M-Instruct.Q8_0.gguf"  # served under a Q4_1 name below


def cli(*args: str, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hydra_rag", *args], capture_output=True,
                          text=True, env={**os.environ, **env})
    return time.perf_counter() - start, proc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not SMOL.is_file():
        raise SystemExit(f"{SMOL} is missing: run the test suite once (it prepares the models)")
    size_mb = SMOL.stat().st_size / (1 << 20)
    times: dict[str, list[float]] = {"cp": [], "http only": [], "pull": [], "pull again": [],
                                     "--version": []}
    repo = FakeRepo({"SmolLM2-135M-Instruct-Q4_1.gguf": FakeFile(SMOL)})
    with FakeHub({"bench/SmolLM2-GGUF": repo}) as hub:
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory() as tmp:
                home = Path(tmp)
                start = time.perf_counter()
                shutil.copyfile(SMOL, home / "copy.gguf")
                times["cp"].append(time.perf_counter() - start)
                env = {"HYDRA_RAG_HOME": str(home / "home"), "HF_ENDPOINT": hub.url,
                       "HF_HOME": str(home / "hf"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
                code = ("import sys,time; from huggingface_hub.file_download import http_get; "
                        "t=time.perf_counter(); http_get(sys.argv[1], open('/dev/null','wb')); "
                        "print(time.perf_counter()-t)")
                url = f"{hub.url}/bench/SmolLM2-GGUF/resolve/main/SmolLM2-135M-Instruct-Q4_1.gguf"
                out = subprocess.run([sys.executable, "-c", code, url], capture_output=True,
                                     text=True, env={**os.environ, **env}, check=True)
                times["http only"].append(float(out.stdout.strip()))
                took, proc = cli("--version", env=env)
                times["--version"].append(took)
                for label in ("pull", "pull again"):
                    took, proc = cli("models", "pull", "hf:bench/SmolLM2-GGUF:Q4_1", env=env)
                    if proc.returncode != 0:
                        raise SystemExit(proc.stderr)
                    times[label].append(took)
    print(f"SmolLM2-135M (the installed Q8_0 file), {size_mb:.0f} MiB, {args.rounds} rounds "
          "(p50 seconds; MiB/s)")
    for label, xs in times.items():
        p50 = statistics.median(xs)
        rate = f"{size_mb / p50:8.0f}" if label in ("cp", "http only", "pull") else "        "
        print(f"  {label:12} {p50:7.2f} s {rate}")
    with tempfile.TemporaryDirectory() as tmp:
        env = {"HYDRA_RAG_HOME": str(Path(tmp) / "home")}
        (Path(tmp) / "home" / "data").mkdir(parents=True)
        (Path(tmp) / "home" / "data" / "models").symlink_to(MODELS)
        took, proc = cli("models", "recommend", "--json", env=env)
        doc = json.loads(proc.stdout)
        print(f"models recommend ({took:.1f} s): measured {doc['measured_now']}")
        for row in doc["models"]:
            if row["tokens_per_s"]:
                print(f"  {row['role']:5} {row['id']:24} {row['tokens_per_s']:9,.0f} tokens/s "
                      f"({row['basis']})")


if __name__ == "__main__":
    main()
