"""Build llama-cpp-python for the instruction sets that really execute on this machine.

    python -m hydra_rag.llamacpp.build [--force] [--gpu cuda|vulkan|hip|none]

llama-cpp-python compiles llama.cpp on install, by default with `-march=native`: whatever the
processor claims. On a virtual machine that claims AMX and faults on it, that build crashes on
its first embedding. Here the instruction sets are probed first (probe.py) and named one by one
(`-DGGML_NATIVE=OFF -DGGML_AVX512=ON …`), so the fast paths that do run are kept and the ones
that fault are left out. The build is recorded in a stamp beside the environment; run again, it
rebuilds only when this machine's probe, the wanted version or the installed files changed. pip
never reuses a wheel it cached from a build with other flags (`--no-cache-dir`, from source).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field, replace
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

from hydra_rag.llamacpp import probe as cpu

DIST = "llama-cpp-python"
FALLBACK_REQUIREMENT = "llama-cpp-python==0.3.36"
# CMake options that give llama.cpp a GPU backend.
GPU_BACKENDS = {"cuda": "-DGGML_CUDA=ON", "vulkan": "-DGGML_VULKAN=ON", "hip": "-DGGML_HIP=ON"}


@dataclass(frozen=True)
class Stamp:
    """What was built, for which processor, and the files it left (to notice a replacement)."""

    requirement: str
    version: str
    cmake_args: list[str]
    gpu: str
    cpu: str
    cpu_signature: str
    probes: dict[str, str]  # flag -> "runs" or why it does not
    files: dict[str, list[int]]  # llama_cpp/lib file -> [size, mtime_ns]
    system_info: str = ""
    extra: str = ""  # HYDRA_RAG_CMAKE_ARGS as it was (kept for later runs, like `gpu`)
    built: float = field(default_factory=time.time)


def stamp_path() -> Path:
    """Beside the Python environment llama-cpp-python is installed in."""
    return Path(sys.prefix) / "hydra-rag-llama-build.json"


def read_stamp() -> Stamp | None:
    """The stamp of the installed build, or None if there is none (or it is unreadable)."""
    try:
        return Stamp(**json.loads(stamp_path().read_text()))
    except (OSError, ValueError, TypeError):
        return None


def lib_files() -> dict[str, list[int]]:
    """The installed llama_cpp's shared libraries, found without importing (loading) them."""
    spec = find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return {}
    lib = Path(spec.origin).parent / "lib"
    out = {}
    for p in sorted(lib.glob("*.so*")) if lib.is_dir() else []:
        st = p.stat()
        out[p.name] = [st.st_size, st.st_mtime_ns]
    return out


def requirement() -> str:
    """The llama-cpp-python requirement hydra-rag declares (pyproject.toml of a source checkout,
    else the installed package's metadata)."""
    reqs: list[str] = []
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        reqs = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        try:
            reqs = metadata.requires("hydra-rag") or []
        except metadata.PackageNotFoundError:
            pass
    for req in reqs:
        if req.replace("_", "-").lower().startswith(DIST):
            name_end = req.find("]") + 1 if "[" in req else len(DIST)
            return DIST + req[name_end:].split(";")[0].strip()
    return FALLBACK_REQUIREMENT


def installed_version() -> str:
    try:
        return metadata.version(DIST)
    except metadata.PackageNotFoundError:
        return ""


def rebuild_command(gpu: str | None = None) -> str:
    """The exact command that rebuilds llama-cpp-python for this machine, in this environment."""
    stamp = read_stamp()
    gpu = gpu if gpu is not None else (stamp.gpu if stamp else "")
    extra = f" --gpu {gpu}" if gpu else ""
    return f"{shlex.quote(sys.executable)} -m hydra_rag.llamacpp.build --force{extra}"


def extra_args(stamp: Stamp | None) -> str:
    """The user's own CMake options: HYDRA_RAG_CMAKE_ARGS, else those of the last build."""
    env = os.environ.get("HYDRA_RAG_CMAKE_ARGS")
    return env if env is not None else (stamp.extra if stamp else "")


def wanted(gpu: str, extra: str = "") -> tuple[list[cpu.Probe], list[str]]:
    """This machine's probe and the CMake options it calls for (the user's own last)."""
    probes = cpu.probe()
    args = cpu.cmake_args(cpu.chosen(probes)) if probes else []
    if gpu:
        args.append(GPU_BACKENDS[gpu])
    return probes, args + shlex.split(extra)


def _build_env(args: list[str]) -> dict[str, str]:
    """The environment pip builds in: our CMake options, and no compiler flag of the user's
    that would bring -march=native back (it defines __AMX_INT8__ and the like for ggml)."""
    env = {**os.environ, "CMAKE_ARGS": shlex.join(args), "FORCE_CMAKE": "1"}
    if os.environ.get("CMAKE_ARGS"):
        print(f"note: CMAKE_ARGS={os.environ['CMAKE_ARGS']!r} is not used; put options of your "
              "own in HYDRA_RAG_CMAKE_ARGS", file=sys.stderr)
    for var in ("CFLAGS", "CXXFLAGS"):
        flags = shlex.split(env.get(var, ""))
        kept = [f for f in flags if not f.startswith(("-march=", "-mcpu="))]
        if kept != flags:
            print(f"note: {var}: {' '.join(set(flags) - set(kept))} left out of the build",
                  file=sys.stderr)
            env[var] = shlex.join(kept)
    return env


def stale(stamp: Stamp | None, req: str, args: list[str]) -> str:
    """Why the installed build does not fit this machine and requirement ("" if it does)."""
    if not installed_version():
        return f"{DIST} is not installed"
    if stamp is None:
        return f"{DIST} {installed_version()} was not built by hydra-rag (no {stamp_path().name})"
    if stamp.files != lib_files():
        return f"{DIST}'s libraries were replaced since hydra-rag built them"
    if stamp.requirement != req:
        return f"wanted {req}, built {stamp.requirement}"
    if stamp.cmake_args != args:
        return f"built with {' '.join(stamp.cmake_args) or 'native flags'}, this machine wants " \
               f"{' '.join(args) or 'native flags'}"
    return ""


def _write(stamp: Stamp) -> None:
    tmp = stamp_path().with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(stamp), indent=1))
    tmp.replace(stamp_path())


def _pip(*args: str, env: dict[str, str] | None = None) -> None:
    cmd = [sys.executable, "-P", "-m", "pip", "--disable-pip-version-check", *args]
    print("+ " + " ".join(shlex.quote(a) for a in cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env=env)


def system_info() -> tuple[int, str]:
    """Load the installed build in a child process: (exit code, llama.cpp's system info)."""
    code = "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())"
    proc = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                          timeout=300)
    return proc.returncode, (proc.stdout.strip() or proc.stderr.strip()[-500:])


def build(force: bool = False, gpu: str | None = None) -> Stamp:
    """Make the installed llama-cpp-python one built for this machine; returns its stamp."""
    old = read_stamp()
    gpu = (old.gpu if old else "") if gpu is None else ("" if gpu == "none" else gpu)
    extra = extra_args(old)
    probes, args = wanted(gpu, extra)
    for p in probes:
        seen = "runs" if p.runs else p.why
        print(f"  {p.flag:<12} {'claimed' if p.claimed else 'not claimed':<12} {seen}",
              file=sys.stderr)
    req = requirement()
    why = "forced" if force else stale(old, req, args)
    if not why and old is not None:
        print(f"{DIST} {old.version}: already built for this machine", file=sys.stderr)
        if old.cpu_signature != cpu.cpu_signature():  # another processor, the same options
            old = replace(old, cpu=cpu.cpuinfo()[0], cpu_signature=cpu.cpu_signature())
            _write(old)
        return old
    print(f"building {req} ({why}) with CMAKE_ARGS={shlex.join(args) or '(native)'}",
          file=sys.stderr, flush=True)
    # From source, never from pip's wheel cache: a cached wheel was built with other flags.
    # (The old stamp stays until the new build is in: if this fails, pip has left the old
    # build installed, or its files changed and the stamp no longer matches them.)
    _pip("install", "--no-cache-dir", "--no-binary", DIST, "--force-reinstall", "--no-deps",
         req, env=_build_env(args))
    _pip("install", f"{DIST}[server]{req[len(DIST):]}")  # the server's dependencies
    code, info = system_info()
    if code != 0:
        name = cpu.signal_name(code) or f"exit code {code}"
        raise SystemExit(f"the new build of {DIST} does not load ({name}): {info}")
    name, _ = cpu.cpuinfo()
    stamp = Stamp(
        requirement=req, version=installed_version(), cmake_args=args, gpu=gpu, cpu=name,
        cpu_signature=cpu.cpu_signature(),
        probes={p.flag: "runs" if p.runs else p.why for p in probes},
        files=lib_files(), system_info=info, extra=extra,
    )
    _write(stamp)
    print(f"built {DIST} {stamp.version}: {info}", file=sys.stderr)
    return stamp


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m hydra_rag.llamacpp.build", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--force", action="store_true", help="rebuild even if the build is current")
    ap.add_argument("--gpu", choices=[*GPU_BACKENDS, "none"], default=None,
                    help="add a GPU backend (default: the one the current build has)")
    ap.add_argument("--check", action="store_true",
                    help="only say whether the build fits this machine (exit 1 if not)")
    args = ap.parse_args()
    if args.check:
        old = read_stamp()
        gpu = (old.gpu if old else "") if args.gpu is None else ("" if args.gpu == "none" else args.gpu)
        why = stale(old, requirement(), wanted(gpu, extra_args(old))[1])
        print(why or "current", file=sys.stderr)
        raise SystemExit(1 if why else 0)
    try:
        build(force=args.force, gpu=args.gpu)
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"building {DIST} failed (exit code {exc.returncode}); see above") from None


if __name__ == "__main__":
    main()
