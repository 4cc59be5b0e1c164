"""Where hydra-rag keeps things: XDG folders, or all of them under one HYDRA_RAG_HOME."""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from hydra_rag.errors import HydraError

APP = "hydra-rag"
INDEX_DIR = ".hydra-index"

T = TypeVar("T")


def stat_key(path: Path, key: Callable[[os.stat_result], T]) -> T | None:
    """`key` of a file's stat (its identity or its version: `(st.st_ino, st.st_mtime_ns)`),
    None when it cannot be stat'ed: what long-running code compares to see a change."""
    try:
        st = path.stat()
    except OSError:
        return None
    return key(st)


@dataclass(frozen=True)
class Dirs:
    """The four folders: config (user catalogs), data (models), state (registry, sidecars), cache."""

    config: Path
    data: Path
    state: Path
    cache: Path

    @property
    def models(self) -> Path:
        return self.data / "models"

    @property
    def sidecars(self) -> Path:
        return self.state / "sidecars"

    @property
    def registry(self) -> Path:
        return self.state / "stores.json"


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    # XDG says relative values are invalid and must be ignored.
    if value and os.path.isabs(value):
        return Path(value)
    return Path.home() / fallback


def dirs() -> Dirs:
    """Resolve the folders now (tests change HYDRA_RAG_HOME between calls)."""
    home = os.environ.get("HYDRA_RAG_HOME")
    if home:
        root = Path(home).expanduser().resolve()
        return Dirs(root / "config", root / "data", root / "state", root / "cache")
    return Dirs(
        _xdg("XDG_CONFIG_HOME", ".config") / APP,
        _xdg("XDG_DATA_HOME", ".local/share") / APP,
        _xdg("XDG_STATE_HOME", ".local/state") / APP,
        _xdg("XDG_CACHE_HOME", ".cache") / APP,
    )


def private_dir(path: Path) -> Path:
    """`path` made (with its parents) for this user alone, 0o700, and narrowed to that if it
    was made wider before: hydra-rag's state and cache hold text of indexed files, chat
    sessions and logs, and a folder's mode is the gate to everything in it. A folder another
    account owns (a shared HYDRA_RAG_HOME) is refused: that account reads all of it."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError as exc:
        raise HydraError(f"cannot create {path}: {exc.strerror}; "
                         "point HYDRA_RAG_HOME at a folder of your own") from None
    if st.st_uid != os.getuid():
        raise HydraError(f"{path} belongs to another account, which can read what hydra-rag "
                         "keeps there; point HYDRA_RAG_HOME at a folder of your own")
    if st.st_mode & 0o077:
        narrow_tree(path, 0o700)
    return path


def read_secret(path: Path, what: str, fix: str, error: type[HydraError] = HydraError,
                shortest: int = 32) -> str:
    """The secret kept in `path` (serve's token, the sidecars' key), refused unless the file is
    a plain one of this user's that no one else can read: another account may already have
    read a wider one, so a new secret is the fix, not a chmod. FileNotFoundError: none yet."""
    try:
        # O_NOFOLLOW: a link put in its place cannot make us read (and send) another file.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise error(f"cannot read {what} {path} ({exc.strerror or exc}) — {fix}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what} {path} is not a plain file — {fix}")
        if st.st_uid != os.getuid():
            raise error(f"{what} {path} belongs to user id {st.st_uid}, not to you — {fix}")
        if st.st_mode & 0o077:
            raise error(f"{what} {path} can be read by other accounts (mode "
                        f"{stat.S_IMODE(st.st_mode):o}) — {fix}")
        secret = os.read(fd, 4096).decode("ascii", errors="replace").strip()
    finally:
        os.close(fd)
    if len(secret) < shortest or not (secret.isascii() and secret.isprintable()) or " " in secret:
        raise error(f"{what} {path} is damaged: it does not hold a usable key — {fix}")
    return secret


def kept_secret(path: Path, what: str, fix: str, error: type[HydraError] = HydraError,
                shortest: int = 32) -> str:
    """`read_secret`, made first if there is none: written whole under a temporary name with
    mode 600 from its first byte, then linked into place, so that no process ever reads half
    of one and two made at once agree (the first link wins). OSError: it cannot be written."""
    try:
        return read_secret(path, what, fix, error, shortest)
    except FileNotFoundError:
        pass
    private_dir(path.parent)  # a library caller may never have run the CLI
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (secrets.token_urlsafe(32) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass  # another process made one first: theirs is the secret
    finally:
        tmp.unlink(missing_ok=True)
    return read_secret(path, what, fix, error, shortest)


def narrow_tree(top: Path, mode: int) -> None:
    """Take from `top` and from every folder under it what `mode` does not give. The top alone
    is not enough: an account that entered a subfolder while it was open (its working folder, an
    open handle) keeps its way into what is written there until that subfolder is closed too."""
    for path in (top, *folders_under(top)):
        try:
            current = path.lstat().st_mode & 0o777
            if current & ~mode:
                os.chmod(path, current & mode)
        except OSError as exc:
            raise HydraError(f"cannot take access away from {path} ({exc.strerror}); fix it "
                             f"with `chmod {mode:o} {path}` and run again") from None


def folders_under(top: Path) -> list[Path]:
    """Every folder under `top`, top-down; links are not followed (nor listed)."""
    found: list[Path] = []
    stack = [top]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                subs = [Path(e.path) for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue  # gone meanwhile, or not ours to list
        found += subs
        stack += subs
    return found


def own_dirs() -> None:
    """The state folder made private before anything writes to it (a sidecar started by any
    command logs there), and a cache folder made wider by an older version narrowed."""
    state_dir()
    if dirs().cache.is_dir():
        cache_dir()


def state_dir() -> Path:
    """The state folder (registry, sidecars and their logs, sessions), made private."""
    return private_dir(dirs().state)


def sidecars_dir() -> Path:
    """The sidecars' folder (their records and logs, which quote what they were sent), made
    private, in a private state folder."""
    state_dir()
    return private_dir(dirs().sidecars)


def cache_dir() -> Path:
    """The cache folder (downloads), made private."""
    return private_dir(dirs().cache)


def store_names(stores: Iterable[str | Path]) -> dict[str, str]:
    """One short name per indexed folder, the same in `search`, the chat's sources and JSON:
    its base name, with as many parent folders as it takes to tell two of one name apart."""
    paths = [Path(s) for s in dict.fromkeys(map(str, stores))]
    depth = dict.fromkeys(paths, 1)
    while True:
        names = {p: "/".join(p.parts[-depth[p]:]) for p in paths}
        clash = [p for p in paths
                 if list(names.values()).count(names[p]) > 1 and depth[p] < len(p.parts)]
        if not clash:
            return {str(p): names[p] for p in paths}
        for p in clash:
            depth[p] += 1


# A file's name as the index stores, cites and shows it. Linux names are bytes: Python gives
# those that are not UTF-8 as lone surrogates (surrogateescape), which SQLite, LanceDB, JSON and
# a terminal all refuse, and a name may hold a newline, a tab or a control character that would
# break a `path:line` citation or move a terminal's cursor. Such characters are escaped, and the
# backslash with them, so the form is valid UTF-8, printable and reversible: `\\` a backslash;
# `\t`, `\n`, `\r`; `\xHH` one byte (an ASCII control, or a byte of a name that is not UTF-8);
# `\uHHHH` a C1 control, a line or paragraph separator or a bidirectional control. The set is
# fixed (not str.isprintable, which grows with each Unicode version), so a name's form never
# changes under an index. Every other name is stored as it is.
_UNSAFE = re.compile("[\\\\\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
                     "\udc80-\udcff]")
_SHORT = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_ESCAPE = re.compile(r"\\(?:([\\tnr])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4}))")
_UNSHORT = {"\\": b"\\", "t": b"\t", "n": b"\n", "r": b"\r"}


def _escape_char(m: re.Match[str]) -> str:
    ch = m.group()
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for byte code - 0xDC00
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"


def escape_name(name: str) -> str:
    """A name or relative path as the file system gives it (str, surrogateescape) → the form
    the index stores and every front end shows: valid UTF-8, printable, reversible."""
    return _UNSAFE.sub(_escape_char, name) if _UNSAFE.search(name) else name


def unescape_name(text: str) -> str:
    """`escape_name` undone: the name the file system knows (a backslash that starts no
    escape, as a user may type one, stays as it is)."""
    if "\\" not in text:
        return text
    out = bytearray()
    pos = 0
    for m in _ESCAPE.finditer(text):
        out += text[pos:m.start()].encode("utf-8", "surrogateescape")
        short, byte, char = m.groups()
        out += (_UNSHORT[short] if short else bytes([int(byte, 16)]) if byte
                else chr(int(char, 16)).encode("utf-8", "surrogatepass"))
        pos = m.end()
    out += text[pos:].encode("utf-8", "surrogateescape")
    return os.fsdecode(bytes(out))


def typed_path(path: str | Path) -> Path:
    """A path a user or a client gave: as the file system names it, or as hydra-rag shows it
    (escape_name's form, copied from a search); the first of the two that is there, else as
    given."""
    given = Path(path).expanduser()
    if "\\" not in str(path) or os.path.lexists(given):
        return given
    shown = Path(unescape_name(str(given)))
    return shown if os.path.lexists(shown) else given


def on_disk(root: Path, rel: str) -> Path:
    """The file an index's path `rel` (as escape_name made it) names under `root`."""
    return root / unescape_name(rel)
