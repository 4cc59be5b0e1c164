"""Which of the instruction sets llama.cpp can be built for really execute on this machine.

The processor's own claims (cpuid, /proc/cpuinfo) are not enough: some virtual machines list
AMX and then fault on its first instruction, and `-march=native` believes the claim. So each
set is tried: a tiny C program using it is compiled and run in a child process, and a set
counts only if its program ran to the end and computed the right value.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import signal
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Feature:
    """One of ggml's instruction-set options (`GGML_<flag>`) and how to try it."""

    flag: str
    cflags: tuple[str, ...]
    claims: tuple[str, ...]  # /proc/cpuinfo flags by which the processor claims it
    needs: tuple[str, ...]  # other features its code in ggml is only built with
    body: str  # C statements; `return 0` only if the instructions ran and computed right
    shows: tuple[str, ...] = ()  # regexes its assembly must match, each on one line (tested)
    # Left out of the build even where its program ran: only HYDRA_RAG_CMAKE_ARGS turns it on.
    opt_in: bool = False


_AMX_SETUP = """
    /* Linux hands out the tile state only on request, as ggml does (amx.cpp). */
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */)) return 2;
    struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; }
        __attribute__((packed, aligned(64))) cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 3; t++) { cfg.colsb[t] = 64; cfg.rows[t] = 16; }
    static uint8_t in[16 * 64] __attribute__((aligned(64)));
    static int32_t out[16 * 16] __attribute__((aligned(64)));
    _tile_loadconfig(&cfg);
"""
# Tiles 1 and 2 full of ones (int8 1, or bf16 1.0 = 0x3f80), tile 0 zero: each element of the
# product is then 16 rows x 4 int8 pairs = 64, or 16 x 2 bf16 pairs = 32.0f.
_AMX_ONES = """
    for (int i = 0; i < (int)sizeof in; i++) in[i] = (uint8_t)(%s);
    _tile_loadd(1, in, 64); _tile_loadd(2, in, 64); _tile_zero(0);
"""
_AMX_END = """
    _tile_stored(0, out, 64);
    _tile_release();
    %s
"""

# In ggml's own order; `needs` mirrors what its CMake and sources assume of each option. Every
# value passes through H() (an empty asm statement the compiler must assume changes it), so
# no instruction can be folded away or replaced by a scalar one; test_llamacpp checks that the
# assembly of each program holds the instructions it is about.
FEATURES: tuple[Feature, ...] = (
    Feature("SSE42", ("-msse4.2",), ("sse4_2",), (),
            "unsigned c = one; HS(c); c = _mm_crc32_u32(0, c); HS(c);\n"
            "    return c == 0xdd45aab8u ? 0 : 3;",
            shows=(r"crc32l\s",)),
    Feature("AVX", ("-mavx",), ("avx",), ("SSE42",),
            "__m256 v = _mm256_set1_ps(fone); H(v); v = _mm256_add_ps(v, v); H(v);\n"
            "    float o[8]; _mm256_storeu_ps(o, v); return o[7] == 2.0f ? 0 : 3;",
            shows=(r"vaddps\s+%ymm",)),
    Feature("AVX2", ("-mavx2",), ("avx2",), ("AVX",),
            "__m256i v = _mm256_set1_epi32(one); H(v); v = _mm256_add_epi32(v, v); H(v);\n"
            "    int o[8]; _mm256_storeu_si256((__m256i *)o, v); return o[7] == 2 ? 0 : 3;",
            shows=(r"vpaddd\s+%ymm",)),
    Feature("FMA", ("-mavx", "-mfma"), ("fma",), ("AVX",),
            "__m256 v = _mm256_set1_ps(fone); H(v); v = _mm256_fmadd_ps(v, v, v); H(v);\n"
            "    float o[8]; _mm256_storeu_ps(o, v); return o[0] == 2.0f ? 0 : 3;",
            shows=(r"vfmadd\w+ps\s+%ymm",)),
    Feature("F16C", ("-mf16c",), ("f16c",), ("AVX",),
            "__m128i h = _mm_set1_epi16((short)(0x3c00 * one)); H(h);\n"
            "    __m128 f = _mm_cvtph_ps(h); H(f);\n"
            "    float o[4]; _mm_storeu_ps(o, f); return o[3] == 1.0f ? 0 : 3;",
            shows=(r"vcvtph2ps\s",)),
    Feature("BMI2", ("-mbmi2",), ("bmi2",), (),
            "unsigned x = 3u * one; HS(x); x = _pdep_u32(x, 0xf0u); HS(x);\n"
            "    return x == 0x30u ? 0 : 3;",
            shows=(r"pdep\s",)),
    Feature("AVX_VNNI", ("-mavx2", "-mavxvnni"), ("avx_vnni",), ("AVX2",),
            "__m256i v = _mm256_set1_epi32(one); H(v); v = _mm256_dpbusd_avx_epi32(v, v, v); H(v);\n"
            "    int o[8]; _mm256_storeu_si256((__m256i *)o, v); return o[0] == 2 ? 0 : 3;",
            shows=(r"vpdpbusd\s+%ymm",)),
    Feature("AVX512", ("-mavx512f", "-mavx512cd", "-mavx512vl", "-mavx512dq", "-mavx512bw"),
            ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"), ("AVX2", "FMA", "F16C"),
            "__m512i v = _mm512_set1_epi32(one); H(v);\n"
            "    __m512i f = _mm512_add_epi32(v, v); H(f);                    /* F */\n"
            "    __m512i c = _mm512_conflict_epi32(v); H(c);                  /* CD */\n"
            "    __m512i b = _mm512_add_epi8(v, v); H(b);                     /* BW */\n"
            "    __m512i q = _mm512_mullo_epi64(v, v); H(q);                  /* DQ */\n"
            "    __mmask8 k = (__mmask8)(0xff * one);\n"
            "    __m256i w = _mm256_set1_epi32(one); H(w);\n"
            "    w = _mm256_mask_add_epi32(w, k, w, w); H(w);                 /* VL */\n"
            "    int of[16], oc[16], oq[16], ow[8]; char ob[64];\n"
            "    _mm512_storeu_si512(of, f); _mm512_storeu_si512(oc, c);\n"
            "    _mm512_storeu_si512(ob, b); _mm512_storeu_si512(oq, q);\n"
            "    _mm256_storeu_si256((__m256i *)ow, w);\n"
            "    return of[0] == 2 && oc[15] == 0x7fff && ob[0] == 2 && oq[0] == 1 && ow[7] == 2\n"
            "        ? 0 : 3;",
            shows=(r"vpaddd\s+%zmm", r"vpconflictd\s+%zmm", r"vpaddb\s+%zmm",
                   r"vpmullq\s+%zmm", r"vpaddd\s+%ymm.*\{%k")),
    Feature("AVX512_VBMI", ("-mavx512f", "-mavx512vbmi"), ("avx512vbmi",), ("AVX512",),
            "__m512i v = _mm512_set1_epi8((char)one), i = _mm512_setzero_si512(); H(v); H(i);\n"
            "    v = _mm512_permutexvar_epi8(i, v); H(v);\n"
            "    char o[64]; _mm512_storeu_si512(o, v); return o[63] == 1 ? 0 : 3;",
            shows=(r"vpermb\s+%zmm",)),
    Feature("AVX512_VNNI", ("-mavx512f", "-mavx512vnni"), ("avx512_vnni",), ("AVX512",),
            "__m512i v = _mm512_set1_epi32(one); H(v); v = _mm512_dpbusd_epi32(v, v, v); H(v);\n"
            "    int o[16]; _mm512_storeu_si512(o, v); return o[0] == 2 ? 0 : 3;",
            shows=(r"vpdpbusd\s+%zmm",)),
    Feature("AVX512_BF16", ("-mavx512f", "-mavx512bf16"), ("avx512_bf16",), ("AVX512",),
            "__m512 v = _mm512_set1_ps(fone); H(v);\n"
            "    __m512i r = (__m512i)_mm512_cvtne2ps_pbh(v, v); H(r);\n"
            "    short o[32]; _mm512_storeu_si512(o, r); return o[0] == 0x3f80 ? 0 : 3;",
            shows=(r"vcvtne2ps2bf16\s+%zmm",)),
    Feature("AMX_TILE", ("-mamx-tile",), ("amx_tile",), ("AVX512",),
            _AMX_SETUP + _AMX_ONES % "one" + "    _tile_stored(1, out, 64); _tile_release();\n"
            "    return out[255] == 0x01010101 ? 0 : 3;",
            shows=(r"ldtilecfg\s", r"tileloadd\s", r"tilestored\s"), opt_in=True),
    Feature("AMX_INT8", ("-mamx-tile", "-mamx-int8"), ("amx_int8",),
            ("AMX_TILE", "AVX512_VNNI"),
            _AMX_SETUP + _AMX_ONES % "one" + "    _tile_dpbssd(0, 1, 2);\n"
            + _AMX_END % "return out[255] == 64 ? 0 : 3;",
            shows=(r"tdpbssd\s",), opt_in=True),
    Feature("AMX_BF16", ("-mamx-tile", "-mamx-bf16"), ("amx_bf16",),
            ("AMX_TILE", "AVX512_BF16"),
            _AMX_SETUP + _AMX_ONES % "i % 2 ? 0x3f * one : 0x80 * one"
            + "    _tile_dpbf16ps(0, 1, 2);\n"
            + _AMX_END % "float f; memcpy(&f, &out[255], 4); return f == 32.0f ? 0 : 3;",
            shows=(r"tdpbf16ps\s",), opt_in=True),
)

_PROGRAM = """\
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
/* Hide a value (vector, scalar) from the optimiser: it must be computed, by the very
   instructions asked for. */
#define H(x) __asm__ volatile("" : "+v"(x))
#define HS(x) __asm__ volatile("" : "+r"(x))
/* Read at run time, so the compiler cannot work the answer out and drop the instructions. */
volatile int volatile_one = 1;
int main(void) {
    int one = volatile_one;
    float fone = (float)one;
    (void)fone;
    %s
}
"""


@dataclass(frozen=True)
class Probe:
    """What was seen of one feature: claimed by the processor, and whether it ran."""

    flag: str
    claimed: bool
    runs: bool
    why: str = ""  # when it does not run: "SIGILL (illegal instruction)", "cannot compile", ...


def is_x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def cpuinfo() -> tuple[str, frozenset[str]]:
    """(model name, flags) of the first processor in /proc/cpuinfo; empty if unreadable."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return "", frozenset()
    name, flags = "", frozenset[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not name:
            name = value.strip()
        elif key == "flags" and not flags:
            flags = frozenset(value.split())
    return name, flags


def cpu_signature() -> str:
    """A short fingerprint of this processor's claims: equal on machines of the same kind."""
    name, flags = cpuinfo()
    return hashlib.sha256((name + "|" + " ".join(sorted(flags))).encode()).hexdigest()[:16]


def compiler() -> str | None:
    """The C compiler CMake would pick first."""
    for cc in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


def signal_name(returncode: int) -> str:
    """'SIGILL' for -4, '' for a normal exit."""
    if returncode >= 0:
        return ""
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def compile_command(cc: str, feature: Feature, folder: Path, asm: bool = False) -> list[str]:
    """Write the feature's program into `folder`; the command that compiles it (to assembly
    with `asm`, for the test that the instructions are really there)."""
    src = folder / f"{feature.flag}.c"
    src.write_text(_PROGRAM % feature.body)
    out = folder / (f"{feature.flag}.s" if asm else feature.flag)
    return [cc, "-O1", *feature.cflags, *(["-S"] if asm else []), str(src), "-o", str(out)]


def _try(feature: Feature, cc: str, folder: Path, claims: frozenset[str]) -> Probe:
    claimed = all(c in claims for c in feature.claims)
    built = subprocess.run(compile_command(cc, feature, folder), capture_output=True, text=True)
    if built.returncode != 0:
        first = (built.stderr.strip().splitlines() or ["?"])[0]
        return Probe(feature.flag, claimed, False, f"the compiler cannot build it ({first})")
    try:
        ran = subprocess.run([str(folder / feature.flag)], capture_output=True, timeout=20)
    except subprocess.TimeoutExpired:
        return Probe(feature.flag, claimed, False, "hung")
    except OSError as exc:  # a temporary folder mounted noexec, say
        return Probe(feature.flag, claimed, False, f"could not run it ({exc})")
    if ran.returncode == 0:
        return Probe(feature.flag, claimed, True)
    if ran.returncode < 0:
        return Probe(feature.flag, claimed, False, f"died with {signal_name(ran.returncode)}")
    why = {2: "the kernel refused the tile state (no AMX here)", 3: "computed a wrong result"}
    return Probe(feature.flag, claimed, False, why.get(ran.returncode, f"exit {ran.returncode}"))


def probe(cc: str | None = None) -> list[Probe]:
    """Try every feature on this machine (x86-64 only; elsewhere an empty list)."""
    if not is_x86_64():
        return []
    cc = cc or compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc or clang) on PATH: llama.cpp cannot be built")
    _, claims = cpuinfo()
    with tempfile.TemporaryDirectory(prefix="hydra-rag-probe-") as tmp, \
            ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(lambda f: _try(f, cc, Path(tmp), claims), FEATURES))


def chosen(probes: list[Probe], opt_in: bool = False) -> dict[str, bool]:
    """Each ggml option on or off: on only if it ran here and so did everything it needs, and
    AMX only when asked for (`opt_in`). A virtual machine here ran each AMX program and then
    faulted on ggml's first tile load in its AMX matrix product (SIGILL, ILL_ILLOPN, one thread
    or two); llama.cpp's tracker has other crashes of that path. A probe cannot vouch for it."""
    runs = {p.flag: p.runs for p in probes}
    on: dict[str, bool] = {}
    for f in FEATURES:  # in order, so `needs` are decided first
        on[f.flag] = runs.get(f.flag, False) and all(on.get(n, False) for n in f.needs) \
            and (opt_in or not f.opt_in)
    return on


def cmake_args(on: dict[str, bool]) -> list[str]:
    """CMake options for a build with exactly these instruction sets (and not -march=native,
    which would take the processor's word for what it can run)."""
    return ["-DGGML_NATIVE=OFF"] + [f"-DGGML_{flag}={'ON' if value else 'OFF'}"
                                    for flag, value in on.items()]


def main() -> None:
    """Print what ran and what did not."""
    probes = probe()
    if not probes:
        print(f"{platform.machine()}: not x86-64, nothing to probe (llama.cpp's native build)")
        return
    on = chosen(probes)
    for p in probes:
        state = "on " if on[p.flag] else "off"
        seen = "runs" if p.runs else p.why
        if p.runs and not on[p.flag] and next(f for f in FEATURES if f.flag == p.flag).opt_in:
            seen += " (left out unless asked for: HYDRA_RAG_CMAKE_ARGS=-DGGML_" + p.flag + "=ON)"
        claim = "claimed" if p.claimed else "not claimed"
        print(f"{state} {p.flag:<12} {claim:<12} {seen}")
    print(" ".join(cmake_args(on)))


if __name__ == "__main__":
    main()
