"""llama.cpp on this machine: the instruction-set probe, the build made from it, crashes named as
crashes (provoked for real: a preloaded library makes llama.cpp's graph computation execute an
illegal instruction), a hostile environment, and the GPU setting's way to the sidecar."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from hydra_rag.config import load_settings
from hydra_rag.llamacpp import build, crash, probe
from hydra_rag.paths import dirs

# -- the probe ---------------------------------------------------------------------------


def _probe(flag: str, runs: bool) -> probe.Probe:
    return probe.Probe(flag, claimed=True, runs=runs)


@pytest.mark.parametrize(("runs", "on"), [
    # Everything runs: everything on.
    ({f.flag: True for f in probe.FEATURES}, {f.flag: True for f in probe.FEATURES}),
    # AVX-512 faults: its extensions and AMX go too, even though their own programs ran.
    ({f.flag: f.flag != "AVX512" for f in probe.FEATURES},
     {f.flag: f.flag in ("SSE42", "AVX", "AVX2", "FMA", "F16C", "BMI2", "AVX_VNNI")
      for f in probe.FEATURES}),
    # The VM of the report: AMX claimed but faulting; AVX-512 and its extensions kept.
    ({f.flag: not f.flag.startswith("AMX") for f in probe.FEATURES},
     {f.flag: not f.flag.startswith("AMX") for f in probe.FEATURES}),
    # AMX tiles run but the BF16 extension of AVX-512 does not: AMX_BF16 off, AMX_INT8 on.
    ({f.flag: f.flag != "AVX512_BF16" for f in probe.FEATURES},
     {f.flag: f.flag not in ("AVX512_BF16", "AMX_BF16") for f in probe.FEATURES}),
])
def test_chosen_needs_what_ggml_needs(runs: dict[str, bool], on: dict[str, bool]) -> None:
    assert probe.chosen([_probe(f, r) for f, r in runs.items()], opt_in=True) == on


def test_amx_is_left_out_unless_asked_for() -> None:
    """AMX ran in the probe of a VM whose llama.cpp then died on its first tile load."""
    everything = [_probe(f.flag, True) for f in probe.FEATURES]
    assert probe.chosen(everything) == {f.flag: not f.flag.startswith("AMX")
                                        for f in probe.FEATURES}


def test_cmake_args_name_every_option() -> None:
    on = {f.flag: f.flag == "AVX2" for f in probe.FEATURES}
    args = probe.cmake_args(on)
    assert args[0] == "-DGGML_NATIVE=OFF"
    assert "-DGGML_AVX2=ON" in args and "-DGGML_AMX_TILE=OFF" in args
    assert len(args) == 1 + len(probe.FEATURES)


@pytest.fixture(scope="module")
def probes() -> list[probe.Probe]:
    if not probe.is_x86_64():
        pytest.skip("the probe is for x86-64")
    return probe.probe()


def test_probe_runs_what_every_x86_64_machine_has(probes: list[probe.Probe]) -> None:
    seen = {p.flag: p for p in probes}
    assert seen["SSE42"].runs, seen["SSE42"].why
    _, claims = probe.cpuinfo()
    if "avx2" in claims:
        assert seen["AVX2"].runs, seen["AVX2"].why


def test_probe_catches_instructions_this_machine_lacks(probes: list[probe.Probe]) -> None:
    """A program whose instructions the processor does not have must not pass for running:
    this is what keeps AMX out of a build on a machine that cannot run it."""
    unclaimed = [p for p in probes if not p.claimed]
    if not unclaimed:
        pytest.skip("this processor claims every feature probed")
    for p in unclaimed:
        assert not p.runs, f"{p.flag} is not claimed here, yet its probe passed"
        assert p.why.startswith(("died with SIG", "the kernel refused")), p.why


def test_probe_programs_hold_their_instructions(tmp_path: Path) -> None:
    """A program the compiler reduced to scalar code would "run" on any machine: each one's
    assembly must hold the instructions its feature is about."""
    cc = probe.compiler()
    if cc is None or not probe.is_x86_64():
        pytest.skip("needs an x86-64 C compiler")
    for f in probe.FEATURES:
        cmd = probe.compile_command(cc, f, tmp_path, asm=True)
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            continue  # a compiler too old for it: the probe says so, and the feature is off
        asm = (tmp_path / f"{f.flag}.s").read_text()
        assert f.shows and all(re.search(r, asm, re.M) for r in f.shows), f.flag


def test_stale_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"libggml-cpu.so": [10, 1]}
    monkeypatch.setattr(build, "lib_files", lambda: files)
    monkeypatch.setattr(build, "installed_version", lambda: "0.3.36")
    args = ["-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON"]
    stamp = build.Stamp(requirement="llama-cpp-python==0.3.36", version="0.3.36",
                        cmake_args=args, gpu="", cpu="X", cpu_signature="s", probes={},
                        files=files)
    assert build.stale(stamp, stamp.requirement, args) == ""
    assert "not built by hydra-rag" in build.stale(None, stamp.requirement, args)
    assert "wanted llama-cpp-python==0.3.37" in build.stale(stamp, "llama-cpp-python==0.3.37",
                                                            args)
    assert "-DGGML_AVX2=OFF" in build.stale(stamp, stamp.requirement,
                                            ["-DGGML_NATIVE=OFF", "-DGGML_AVX2=OFF"])
    monkeypatch.setattr(build, "lib_files", lambda: {"libggml-cpu.so": [10, 2]})
    assert "replaced" in build.stale(stamp, stamp.requirement, args)
    monkeypatch.setattr(build, "installed_version", lambda: "")
    assert "not installed" in build.stale(stamp, stamp.requirement, args)


def test_requirement_is_the_pinned_one() -> None:
    text = (Path(build.__file__).resolve().parents[2] / "pyproject.toml").read_text()
    req = build.requirement()
    assert req.startswith("llama-cpp-python==") and f'"llama-cpp-python[server]{req[16:]}"' in text


def test_build_env_keeps_native_flags_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CFLAGS", "-O2 -march=native -g")
    monkeypatch.setenv("CMAKE_ARGS", "-DGGML_NATIVE=ON")
    env = build._build_env(["-DGGML_NATIVE=OFF", "-DGGML_CUDA=ON", "-DX=a b"])
    assert env["CFLAGS"] == "-O2 -g"
    assert env["CMAKE_ARGS"] == "-DGGML_NATIVE=OFF -DGGML_CUDA=ON '-DX=a b'"


def test_installed_build_is_the_one_for_this_machine(probes: list[probe.Probe]) -> None:
    """The llama-cpp-python the tests run on was built by `make install` for this machine's
    probe, not by pip with -march=native (nor left over from another machine)."""
    stamp = build.read_stamp()
    assert stamp is not None, f"no {build.stamp_path()}: run {build.rebuild_command()}"
    assert build.stale(stamp, build.requirement(), build.wanted(stamp.gpu, stamp.extra)[1]) == ""
    assert stamp.cpu_signature == probe.cpu_signature()
    on = probe.chosen(probes)
    assert all(f"-DGGML_{f}={'ON' if v else 'OFF'}" in stamp.cmake_args for f, v in on.items())


def test_signal_names_and_log_parsing() -> None:
    assert probe.signal_name(-signal.SIGILL) == "SIGILL"
    assert probe.signal_name(-signal.SIGSEGV) == "SIGSEGV"
    assert probe.signal_name(1) == ""
    log = "loading\nFatal Python error: Segmentation fault\n\nCurrent thread 0x1:\n  File x\n"
    assert crash.signal_in_log(log) == "SIGSEGV"
    assert crash.signal_in_log("Fatal Python error: init failed") == ""
    assert crash.excerpt(log).splitlines()[0].strip() == "Fatal Python error: Segmentation fault"
    msg = crash.explain("sidecar 'x'", "SIGILL")
    assert "instructions this machine does not execute" in msg
    assert msg.endswith(f"`{build.rebuild_command()}`")
    assert "rebuild" not in crash.explain("sidecar 'x'", "SIGKILL").lower()


# -- crashes, provoked ---------------------------------------------------------------------

CRASHER = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
/* Stands in for llama.cpp's graph computation: after CRASH_AFTER real calls, executes an
   illegal instruction (ud2), as a build for instructions the processor lacks would. */
typedef int (*compute_fn)(void *, void *);
static int calls;
int ggml_backend_sched_graph_compute_async(void *sched, void *graph) {
    const char *after = getenv("CRASH_AFTER");
    if (calls++ >= (after ? atoi(after) : 0)) __builtin_trap();
    void *base = dlopen("libggml-base.so.0", RTLD_NOLOAD | RTLD_LAZY);
    compute_fn real = (compute_fn)dlsym(base, "ggml_backend_sched_graph_compute_async");
    return real(sched, graph);
}
"""


@pytest.fixture(scope="module")
def crasher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("crasher")
    (folder / "crasher.c").write_text(CRASHER)
    lib = folder / "crasher.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", str(folder / "crasher.c"), "-o", str(lib),
                    "-ldl"], check=True)
    return lib


def _assert_crash_named(stderr: str, what: str) -> None:
    assert f"{what} crashed: SIGILL (illegal instruction" in stderr, stderr
    assert "instructions this machine does not execute" in stderr
    assert build.rebuild_command() in stderr
    assert "Fatal Python error: Illegal instruction" in stderr  # the log's own words
    assert "cannot reach" not in stderr


def test_crash_on_first_start_is_named(isolated_home: Path, corpus: Path, crasher: Path) -> None:
    proc = run_cli("index", str(corpus), env={"LD_PRELOAD": str(crasher)})
    assert proc.returncode == 1
    _assert_crash_named(proc.stderr, "sidecar 'minilm-l6'")


def test_crash_in_a_request_is_named(isolated_home: Path, corpus: Path, crasher: Path) -> None:
    # The sidecar's self-test is the one real computation; the first batch crashes it.
    proc = run_cli("index", str(corpus), env={"LD_PRELOAD": str(crasher), "CRASH_AFTER": "1"})
    assert proc.returncode == 1
    _assert_crash_named(proc.stderr, "sidecar 'minilm-l6'")
    # Without the crash the same command indexes the folder: nothing else was wrong.
    proc = run_cli("index", str(corpus))
    assert proc.returncode == 0, proc.stderr
    # A chat model that crashes mid-answer: the same message, not "stopped answering".
    proc = run_cli("ask", "smollm2-135m", "What do tomatoes need?", "--rag", str(corpus),
                   "--max-tokens", "20", env={"LD_PRELOAD": str(crasher), "CRASH_AFTER": "1"})
    assert proc.returncode == 1
    _assert_crash_named(proc.stderr, "sidecar 'smollm2-135m'")


def test_doctor_and_setup_self_test_in_a_child(isolated_home: Path, crasher: Path) -> None:
    proc = run_cli("doctor", env={"LD_PRELOAD": str(crasher)})
    assert proc.returncode == 1
    assert "self-test of 'minilm-l6' crashed: SIGILL" in proc.stdout
    assert build.rebuild_command() in proc.stdout
    proc = run_cli("rag", "setup", env={"LD_PRELOAD": str(crasher)})
    assert proc.returncode == 1
    _assert_crash_named(proc.stderr, "self-test of 'minilm-l6'")
    # And where nothing crashes, both pass and say where the model runs.
    proc = run_cli("rag", "setup")
    assert proc.returncode == 0, proc.stderr
    assert "minilm-l6: self-test passed on CPU" in proc.stderr
    proc = run_cli("doctor")
    assert "embedder minilm-l6:" in proc.stdout and "self-test passed on CPU" in proc.stdout


# -- only HYDRA_RAG_* configures hydra-rag ----------------------------------------------------

# Each would break llama-cpp-python's server if it reached its settings: not a valid value,
# a key every request must carry, a config file that does not exist, another model.
HOSTILE = {
    "CACHE": "/tmp/x", "PORT": "1", "HOST": "203.0.113.9", "MODEL": "/nonexistent.gguf",
    "VERBOSE": "perhaps", "N_CTX": "many", "N_THREADS": "-5", "N_BATCH": "0",
    "API_KEY": "s3cret", "INTERRUPT_REQUESTS": "sometimes", "N_GPU_LAYERS": "lots",
    "EMBEDDING": "nope", "CONFIG_FILE": "/nonexistent/config.yaml", "CHAT_FORMAT": "bogus",
    "model_alias": "other", "Flash_Attn": "maybe", "ROOT_PATH": "/elsewhere",
}


def test_hostile_environment(isolated_home: Path, corpus: Path) -> None:
    env = {**HOSTILE}
    proc = run_cli("index", str(corpus), env=env)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("search", "X-Api-Key", "--path", str(corpus), "-k", "1", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "src/auth.py" in proc.stdout
    fast = ["--max-tokens", "20", "--temperature", "0"]
    proc = run_cli("ask", "smollm2-135m", "What do tomatoes need?", "--rag", str(corpus),
                   *fast, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "sources:" in proc.stdout and "docs/gardening.md" in proc.stdout
    proc = run_cli("chat", "smollm2-135m", "--rag", str(corpus), "--new", *fast, env=env,
                   input="Which header carries the API key?\n")
    assert proc.returncode == 0, proc.stderr
    assert "sources:" in proc.stdout
    # The sidecars really were started here, under that environment.
    cmdlines = []
    for rec in json.loads(run_cli("sidecars", "list", "--json").stdout):
        environ = Path(f"/proc/{rec['pid']}/environ").read_bytes().split(b"\0")
        assert b"CACHE=/tmp/x" in environ  # inherited, then kept away from the settings
        cmdlines.append(rec["id"])
    assert sorted(cmdlines) == ["minilm-l6", "smollm2-135m"]


# -- the GPU setting -------------------------------------------------------------------------


def test_gpu_layers_reaches_the_sidecar(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra_rag.catalog import get_embedder
    from hydra_rag.models import sidecar
    from hydra_rag.models.embed import sidecar_spec

    emb = get_embedder("minilm-l6")
    spec = sidecar_spec(emb, load_settings())
    assert spec.gpu_layers == -1  # all layers by default, when there is a GPU backend
    monkeypatch.setenv("HYDRA_RAG_GPU_LAYERS", "0")
    cpu_only = sidecar_spec(emb, load_settings())
    assert cpu_only.gpu_layers == 0
    cmd = sidecar._command(cpu_only)
    assert cmd[cmd.index("--gpu-layers") + 1] == "0"
    import llama_cpp

    info = sidecar.self_test(spec)
    if llama_cpp.llama_supports_gpu_offload():
        assert info["device"].startswith("GPU") and info["gpu_layers"] == -1
    else:  # a CPU build: nothing to offload, and it says so
        assert info == {**info, "device": "CPU", "gpu_layers": 0}
    assert "AVX" in info["system_info"] or not probe.is_x86_64()
    rec = sidecar.ensure(cpu_only)
    try:
        assert rec.device == "CPU" and rec.gpu_layers == 0
        listed = json.loads(run_cli("sidecars", "list", "--json").stdout)
        assert [(r["id"], r["device"]) for r in listed] == [("minilm-l6", "CPU")]
        # A different setting is a different sidecar: it is started again with it.
        again = sidecar.ensure(spec)
        assert again.pid != rec.pid and again.gpu_layers == -1
    finally:
        sidecar.stop("minilm-l6")


def test_sidecar_log_keeps_llama_cpp_messages(isolated_home: Path, corpus: Path) -> None:
    proc = run_cli("index", str(corpus))
    assert proc.returncode == 0, proc.stderr
    log = (dirs().sidecars / "minilm-l6.log").read_text()
    assert "llama_model_loader" in log  # llama.cpp's own stderr
    assert "self-test passed; serving minilm-l6" in log
