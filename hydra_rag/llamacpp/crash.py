"""What it means when a process running llama.cpp dies by a signal, and the command that fixes
it. A crash is called a crash: never "cannot reach" a server that is simply gone.
"""

from __future__ import annotations

import re

from hydra_rag.llamacpp import probe
from hydra_rag.llamacpp.build import read_stamp, rebuild_command

# Signals a build for the wrong instructions ends with: SIGILL for an instruction the processor
# does not have; SIGSEGV when it has it but the hypervisor or kernel refuses it (AMX's
# `ldtilecfg` in some virtual machines raises a general protection fault).
BUILD_SIGNALS = ("SIGILL", "SIGSEGV", "SIGBUS")

MEANINGS = {
    "SIGILL": "illegal instruction: llama.cpp was built for instructions this machine does not "
              "execute",
    "SIGSEGV": "segmentation fault: a build for instructions this machine claims but does not "
               "execute (AMX in some virtual machines) ends this way, as does a bug in llama.cpp",
    "SIGBUS": "bus error: a model file changed or truncated while mapped, or a build for "
              "instructions this machine does not execute",
    "SIGFPE": "arithmetic fault in llama.cpp",
    "SIGABRT": "llama.cpp stopped on a failed check (its message is in the log)",
    "SIGKILL": "killed from outside: out of memory (the kernel's OOM killer) or by a user",
    "SIGTERM": "stopped by a signal from another process",
}

# How Python's faulthandler names the signal in the log when it dies by one.
_FAULTHANDLER = {"Illegal instruction": "SIGILL", "Segmentation fault": "SIGSEGV",
                 "Bus error": "SIGBUS", "Floating point exception": "SIGFPE",
                 "Aborted": "SIGABRT"}
_FATAL = re.compile(r"^Fatal Python error: (" + "|".join(map(re.escape, _FAULTHANDLER)) + r")",
                    re.MULTILINE)


def signal_in_log(text: str) -> str:
    """The signal a process died of, as its faulthandler wrote it in its log ('' if none)."""
    found = _FATAL.findall(text)
    return _FAULTHANDLER[found[-1]] if found else ""


def excerpt(text: str, lines: int = 8) -> str:
    """The lines of a log that show where the process died: the faulthandler's report and the
    crashing thread's innermost frames (the end of the log is other threads' stacks)."""
    found = list(_FATAL.finditer(text))
    if not found:
        return ""
    tail = [ln for ln in text[found[-1].start():].splitlines() if ln.strip()][:lines]
    return "\n".join("    " + ln for ln in tail)


def build_note() -> str:
    """What is known of the installed build against this machine, for a crash message."""
    stamp = read_stamp()
    if stamp is None:
        return ("llama-cpp-python was not built by hydra-rag's probe (a plain pip install uses "
                "-march=native, which trusts every instruction the processor claims)")
    if stamp.cpu_signature != probe.cpu_signature():
        return f"llama-cpp-python was built for another processor ({stamp.cpu or 'unknown'})"
    return ""


def explain(what: str, sig: str, log: str = "") -> str:
    """One message for `what` (e.g. "sidecar 'minilm-l6'") having died of `sig`."""
    meaning = MEANINGS.get(sig, "killed by a signal")
    msg = f"{what} crashed: {sig} ({meaning})"
    if sig in BUILD_SIGNALS:
        note = build_note()
        msg += f"; {note}" if note else ""
        msg += f". Rebuild llama-cpp-python for this machine: `{rebuild_command()}`"
    if log:
        msg += f"\nlog {log}"
    return msg
