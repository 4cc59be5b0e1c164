"""A warm process: the quick commands (`search`, `get`, `def`, `refs`, `outline`) run in a
background hydra-rag process that already holds LanceDB, the command line and the folders'
tables in memory, so that a search from a shell takes tens of milliseconds instead of the
seconds a fresh Python process spends importing LanceDB and opening tables.

- `client` is the caller's side, used by the `hydra-rag` entry point (hydra_rag.__main__),
  which imports only the standard library until it knows where the command runs: for a quick
  command it hands the arguments, the working folder and the terminal's facts to the warm
  process over a Unix socket and copies back what the command printed and its exit status;
  with no warm process (or one it must not use) the command runs in its own process.
- `server` is the warm process's loop. It runs each command with the same code a fresh process
  runs (hydra_rag.cli.warm gives it `hydra_rag.cli.run`), one at a time, printing into the
  socket as if into the caller's terminal or pipe; the searchers of the folders it searched are
  kept between commands (`api.searcher`). A quick command that ran without one starts it
  (setting `warm_minutes`, 0 for never); it stops after that many minutes without a command,
  or when hydra-rag's code changed under it.

Only the user who started it can reach it: the socket sits in a folder of mode 700 that must
belong to that user, and the server checks each caller's uid (SO_PEERCRED). It serves only
callers whose hydra-rag environment (HYDRA_RAG_*, XDG_*, HOME, AWS_*) is the one it
was started with, so an answer is the same as a fresh process would give.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from hydra_rag import __version__
from hydra_rag.paths import dirs

# The commands a warm process runs: quick, read-only, no input but their arguments.
COMMANDS = frozenset({"search", "get", "def", "refs", "outline"})

# The environment that decides what a command reads: a warm process serves only callers
# whose values equal its own.
_SAME_PREFIXES = ("HYDRA_RAG_", "XDG_", "AWS_")
_SAME_NAMES = ("HOME",)


def environment_key(environ: dict[str, str] | os._Environ[str]) -> str:
    kept = sorted((k, v) for k, v in environ.items()
                  if k.startswith(_SAME_PREFIXES) or k in _SAME_NAMES)
    return hashlib.sha256(repr(kept).encode()).hexdigest()


def code_stamp() -> str:
    """hydra-rag's version and the modification times of its modules: a warm process started
    before an upgrade or an edit does not answer for the new code."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(__version__.encode())
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False) and e.name != "__pycache__":
                    stack.append(e.path)
                elif e.name.endswith((".py", ".yaml")):
                    h.update(f"{e.path}\0{e.stat().st_mtime_ns}\0".encode())
    return h.hexdigest()


def socket_dir() -> Path:
    """A folder only this user can enter, for the sockets: $XDG_RUNTIME_DIR or the temporary
    folder (a Unix socket's path must be short, which a state folder's may not be)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / f"hydra-rag-{os.getuid()}"


def socket_path() -> Path:
    """The warm process's socket for this HYDRA_RAG_HOME (or XDG folders)."""
    state = str(dirs().state)
    return socket_dir() / f"warm-{hashlib.sha256(state.encode()).hexdigest()[:16]}.sock"


def private_dir(path: Path, create: bool) -> bool:
    """Whether `path` is a real folder of this user's that nobody else can enter (made so
    when `create`). A folder someone else made in a shared /tmp is never used."""
    if create:
        try:
            path.mkdir(mode=0o700, exist_ok=True)
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    import stat

    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and stat.S_IMODE(st.st_mode) & 0o077 == 0)
