"""One error family: every message says what went wrong and, where it can, what to run next."""


class HydraError(Exception):
    """Base of every error the library raises on purpose; the CLI prints it as one red line."""


class UsageError(HydraError):
    """Options that cannot go together, or an argument of the wrong shape: the CLI exits 2."""


class ConfigError(HydraError):
    """A catalog, config file or setting is invalid."""


class ModelError(HydraError):
    """A model is unknown, missing, or cannot be installed."""


class Unreachable(ModelError):
    """A model's source could not be reached at all (no network, a closed port, a name that
    does not resolve): `tried` names the source, `reason` says what the system answered."""

    def __init__(self, message: str, tried: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.tried = tried
        self.reason = reason


class SidecarError(HydraError):
    """A sidecar process failed to start, died, or does not answer."""


class SidecarCrash(SidecarError):
    """A llama.cpp process died by a signal (an illegal instruction, a memory fault, ...)."""

    def __init__(self, message: str, signal: str = "") -> None:
        super().__init__(message)
        self.signal = signal  # "SIGILL", ...


class EmbedError(HydraError):
    """An embeddings endpoint refused or failed a request."""


class IndexError_(HydraError):
    """An index is missing, corrupt, locked, or does not match the chosen embedder."""


class MetaCorrupt(IndexError_):
    """An index's meta.yaml cannot be read. `problem` says what is wrong without the advice
    (an index run repairs it from the tables, and says so)."""

    def __init__(self, path: object, why: str, root: object) -> None:
        self.problem = f"{path} is corrupt ({why})"
        super().__init__(f"{self.problem} — rebuild it with `hydra-rag index {root} --full`")


class IndexLocked(IndexError_):
    """Another process is indexing the same folder."""


class IndexFault(IndexError_):
    """The machine stopped a run (a full disk, a read-only folder, memory exhausted): what
    happened, what the index kept, what to do."""


def yaml_problem(exc: Exception) -> str:
    """A YAML parser error in one line: what is wrong and where ("mapping values are not
    allowed here, line 3 column 7"), not the parser's multi-line trace."""
    problem = getattr(exc, "problem", None) or next(iter(str(exc).splitlines()), "") \
        or type(exc).__name__
    mark = getattr(exc, "problem_mark", None)
    where = f", line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def unreadable(path: object, exc: OSError | UnicodeDecodeError) -> HydraError:
    """`cannot read PATH: why`, in the system's words and without Python's `[Errno N]`; a
    folder where a file was asked for is a usage error (exit 2), as a file for a folder is."""
    if isinstance(exc, IsADirectoryError):
        return UsageError(f"{path}: a folder, not a file")
    if isinstance(exc, UnicodeDecodeError):
        return HydraError(f"cannot read {path}: not UTF-8 text (byte {exc.start})")
    return HydraError(f"cannot read {path}: {(exc.strerror or str(exc)).lower()}")
