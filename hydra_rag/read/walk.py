"""Walk a folder the way a careful user expects: git's three ignore layers, a .hydraignore,
a hard-wired blacklist, secrets never indexed, size and content checks, and a reason for every skip.
Text that is not worth indexing (vector images, certificates, minified code and data on enormous
lines) is skipped too, under its own reason, unless --include names it.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from fnmatch import translate
from pathlib import Path
from typing import NamedTuple

import pathspec

from hydra_rag.bulk import no_gc
from hydra_rag.documents import format_of
from hydra_rag.paths import INDEX_DIR, escape_name
from hydra_rag.read import secrets

MAX_BYTES = 1 << 20
MAX_DOCUMENT_BYTES = 100 << 20  # setting max_document_mb

_BLACKLIST_DIRS = [
    ".git/", ".hg/", ".svn/", ".bzr/", "_darcs/", ".fossil/", "CVS/",
    INDEX_DIR + "/", "node_modules/", "bower_components/", "jspm_packages/", "vendor/bundle/",
    ".venv/", "venv/", "env/", ".env/", "virtualenv/", ".virtualenv/", ".tox/", ".nox/",
    "__pycache__/", ".mypy_cache/", ".pytest_cache/", ".ruff_cache/", ".hypothesis/",
    ".ipynb_checkpoints/", ".cache/", ".parcel-cache/", ".next/", ".nuxt/", ".svelte-kit/",
    ".turbo/", ".gradle/", ".idea/", ".vs/", ".terraform/", ".eggs/", "*.egg-info/",
    "target/", "dist/", "build/", "out/", "_build/", "site-packages/", "coverage/",
    "htmlcov/", ".coverage/", ".nyc_output/", "Pods/", "DerivedData/",
]
_BLACKLIST_FILES = [
    # lock files
    "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb", "Cargo.lock",
    "poetry.lock", "Pipfile.lock", "composer.lock", "Gemfile.lock", "go.sum", "uv.lock",
    "*.lock",
    # minified and generated assets
    "*.min.js", "*.min.css", "*.min.mjs", "*.map", "*.bundle.js", "*.chunk.js",
    # compiled objects and libraries
    "*.o", "*.obj", "*.a", "*.lib", "*.so", "*.so.*", "*.dylib", "*.dll", "*.exe", "*.class",
    "*.jar", "*.war", "*.pyc", "*.pyo", "*.pyd", "*.wasm", "*.elc", "*.beam", "*.ko",
    # archives
    "*.zip", "*.tar", "*.tgz", "*.gz", "*.bz2", "*.xz", "*.zst", "*.7z", "*.rar", "*.whl",
    "*.egg", "*.deb", "*.rpm", "*.dmg", "*.iso", "*.apk",
    # media
    "*.png", "*.jpg", "*.jpeg", "*.gif", "*.bmp", "*.ico", "*.icns", "*.webp", "*.tif",
    "*.tiff", "*.psd", "*.heic", "*.avif", "*.mp3", "*.wav", "*.flac", "*.ogg", "*.m4a",
    "*.aac", "*.mp4", "*.mkv", "*.mov", "*.avi", "*.webm", "*.ttf", "*.otf", "*.woff",
    "*.woff2", "*.eot",
    # office formats not read (PDF, DOCX, ODT, PPTX, EPUB are: see hydra_rag.documents)
    "*.doc", "*.xls", "*.xlsx", "*.ppt", "*.ods", "*.odp",
    # databases
    "*.db", "*.sqlite", "*.sqlite3", "*.mdb", "*.parquet", "*.arrow", "*.lance", "*.feather",
    "*.h5", "*.hdf5", "*.npy", "*.npz", "*.pkl", "*.pickle",
    # model weights
    "*.gguf", "*.ggml", "*.safetensors", "*.bin", "*.pt", "*.pth", "*.ckpt", "*.onnx",
    "*.tflite", "*.mlmodel", "*.pb",
    # OS litter
    ".DS_Store", "Thumbs.db", "desktop.ini",
]
# Text that is not worth indexing, each kind under its own reason (--include brings it back):
# an SVG is coordinates and style (click's artwork/logo.svg is a 3,594-character line of path
# data, the kind of chunk retrieved for unrelated questions); certificates, signing requests,
# revocation lists and public keys are base64 (a .pem that holds a private key is a secret).
_JUNK_NAMES = {
    "vector_image": ["*.svg", "*.svgz"],
    "certificate": ["*.crt", "*.cer", "*.csr", "*.crl", "*.der", "*.p7b", "*.p7c", "*.p7s",
                    "*.pub", *secrets.PEM_NAMES],
}


class _NameRules:
    """Fixed rules, gitignore-style: a pattern without a slash matches a base name at any
    depth. Sets and suffix tuples cost a fraction of running ~200 regexes on every path."""

    def __init__(self, patterns: list[str]) -> None:
        exact, suffixes, prefixes = set(), [], []
        self.globs: list[str] = []
        self.paths: list[str] = []
        for p in (p.rstrip("/") for p in patterns):
            wild = [i for i, ch in enumerate(p) if ch in "*?["]
            if "/" in p:
                self.paths.append(p)
            elif not wild:
                exact.add(p)
            elif wild == [0]:
                suffixes.append(p[1:])
            elif wild == [len(p) - 1] and p[-1] == "*":
                prefixes.append(p[:-1])
            else:
                self.globs.append(p)
        self.exact = exact
        self.suffixes = tuple(suffixes)
        self.prefixes = tuple(prefixes)
        # One regular expression for all the globs, and suffix tuples for the paths: a walk
        # asks every file's name of several rule sets.
        self._glob = re.compile("|".join(translate(g) for g in self.globs)) if self.globs else None
        self._paths = frozenset(self.paths)
        self._path_ends = tuple("/" + p for p in self.paths)

    def match(self, rel: str, name: str) -> bool:
        if name in self.exact or name.endswith(self.suffixes) or name.startswith(self.prefixes):
            return True
        if self._glob is not None and self._glob.match(name):
            return True
        return rel in self._paths or rel.endswith(self._path_ends)


BLACKLIST_DIRS = _NameRules(_BLACKLIST_DIRS)
BLACKLIST_FILES = _NameRules(_BLACKLIST_FILES)
SECRETS = _NameRules(secrets.NAMES)
SECRETS_OK = _NameRules(secrets.OK_NAMES)
PEM_NAMES = _NameRules(secrets.PEM_NAMES)
JUNK_NAMES = {reason: _NameRules(patterns) for reason, patterns in _JUNK_NAMES.items()}
# Any of the file name rules above: most files match none, and are asked this alone.
ANY_FILE_RULE = _NameRules(_BLACKLIST_FILES + secrets.NAMES
                           + [p for patterns in _JUNK_NAMES.values() for p in patterns])


class Candidate(NamedTuple):
    """A file the walk kept: its path relative to the root (POSIX, as `escape_name` writes
    it: the index's name for the file; `on_disk` finds it again), size and mtime (ns),
    whether an --include pattern names it (which also overrides the content checks of
    `read_indexable`, a private key's aside) and whether the run was given --include-secrets
    (then a private key does not skip it). A named tuple: a walk makes one per file."""

    rel: str
    size: int
    mtime_ns: int
    included: bool = False
    secrets: bool = False


@dataclass
class WalkResult:
    """Kept files, and for each skip reason how many (and which) files it removed."""

    files: list[Candidate] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_paths: dict[str, list[str]] = field(default_factory=dict)  # as escape_name writes
    # Folders walked into ("" the root), as the file system names them (watch compares them
    # with the paths of its events).
    dirs: set[str] = field(default_factory=set)
    # Kept files other accounts cannot read (no o+r, or a folder on the way without o+x): an
    # index holding their text must be no wider than they are (store.access).
    private: int = 0

    def skip(self, reason: str, rel: str) -> None:
        self.skipped[reason] += 1
        self.skipped_paths.setdefault(reason, []).append(escape_name(rel))


@dataclass
class _Layer:
    base: str  # relative dir ("" for root) the patterns are anchored at
    spec: pathspec.PathSpec
    reason: str
    # For a layer from a folder above the root: the root's path as seen from that folder.
    outer: str = ""
    # (files, folders): the layer as two regular expressions on the name alone, when every
    # pattern is a plain name glob (see _by_name); None: ask pathspec.
    names: tuple[re.Pattern[str], re.Pattern[str]] | None = None


_NEVER = re.compile(r"(?!)")


def _closed(pattern: str) -> bool:
    """Every `[` opens a class that a `]` closes (git matches nothing with an unclosed one,
    where fnmatch would read it as a plain character)."""
    i = pattern.find("[")
    while i >= 0:
        end = pattern.find("]", i + 2)  # `[]...]`: a class may hold a `]` first
        if end < 0:
            return False
        i = pattern.find("[", end + 1)
    return True


def _by_name(lines: list[str]) -> tuple[re.Pattern[str], re.Pattern[str]] | None:
    """A layer whose patterns are all plain name globs (`*.log`, `build/`, `.env*`: no slash
    but a trailing one, no negation, no escapes, no `**`) ignores a path iff its name matches
    one of them (folder-only ones for folders): one regular expression per kind instead of
    pathspec's pattern-by-pattern check, which a walk asks of every file. None: not such a
    layer."""
    files, folders = [], []
    for line in lines:
        p = line.strip()  # _add dropped blank lines and comments
        if (p != line or p.startswith("!") or "\\" in p or "**" in p or "[^" in p
                or "/" in p.rstrip("/") or p == "/" or not _closed(p)):
            return None
        glob = translate(p.rstrip("/"))
        folders.append(glob)
        if not p.endswith("/"):
            files.append(glob)
    return (re.compile("|".join(files)) if files else _NEVER,
            re.compile("|".join(folders)) if folders else _NEVER)


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _git_toplevel(root: Path) -> Path | None:
    for parent in (root, *root.parents):
        if (parent / ".git").exists():
            return parent
    return None


def global_excludes_file() -> Path | None:
    """The user's global git excludes file (core.excludesFile or git's XDG default)."""
    try:
        proc = subprocess.run(
            ["git", "config", "--global", "--path", "core.excludesFile"],
            capture_output=True, text=True, timeout=5,
        )
        if proc.returncode == 0 and proc.stdout.strip():
            return Path(proc.stdout.strip()).expanduser()
    except (OSError, subprocess.SubprocessError):
        pass
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(xdg) / "git" / "ignore"


def _rel_to(path_rel: str, base: str) -> str | None:
    if not base:
        return path_rel
    if path_rel == base or path_rel.startswith(base + "/"):
        return path_rel[len(base) + 1 :]
    return None


def _verdict(layers: list[_Layer], rel: str, name: str, is_dir: bool) -> tuple[bool, str]:
    """Git semantics: the deepest layer that has an opinion wins (negation included). `name`
    is the last part of `rel`."""
    for layer in reversed(layers):
        if layer.names is not None:  # a layer of name globs applies at any depth below it
            if layer.names[is_dir].match(name):
                return True, layer.reason
            continue
        sub = f"{layer.outer}/{rel}" if layer.outer else _rel_to(rel, layer.base)
        if sub is None:
            continue
        res = layer.spec.check_file(sub + "/" if is_dir else sub)
        if res.include is not None:
            return bool(res.include), layer.reason
    return False, ""


def _matches(spec: pathspec.PathSpec, rel: str) -> bool:
    """Whether an --include or --exclude pattern names `rel`, as the file system gives it or as
    hydra-rag shows it (escape_name's form, which `status --files` suggests for --include)."""
    if spec.match_file(rel):
        return True
    shown = escape_name(rel)
    return shown != rel and spec.match_file(shown)


def _include_prefixes(patterns: list[str]) -> list[str] | None:
    """Literal folder prefixes of --include patterns; None when one may match anywhere."""
    prefixes = []
    for pat in patterns:
        p = pat.lstrip("/")
        if "/" not in p.rstrip("/"):
            if not pat.startswith("/"):
                return None  # `name` matches at any depth
            if not any(ch in p for ch in "*?["):  # `/name`: at the top only
                prefixes.append(p.rstrip("/"))
            continue
        literal = []
        for part in p.split("/"):
            if any(ch in part for ch in "*?[") or part == "":
                break
            literal.append(part)
        if not literal:
            return None
        prefixes.append("/".join(literal))
    return prefixes


class Walker:
    """Walks one root with a fixed set of rules; `walk()` yields what would be indexed."""

    def __init__(
        self,
        root: Path,
        include: list[str] | None = None,
        exclude: list[str] | None = None,
        max_bytes: int = MAX_BYTES,
        max_document_bytes: int = MAX_DOCUMENT_BYTES,
        include_secrets: bool = False,
    ) -> None:
        self.root = root
        self.include_secrets = include_secrets
        self.max_bytes = max_bytes
        self.max_document_bytes = max_document_bytes
        self.include = (
            pathspec.GitIgnoreSpec.from_lines(include) if include else None
        )
        self.include_prefixes = _include_prefixes(include) if include else []
        self.exclude = pathspec.GitIgnoreSpec.from_lines(exclude) if exclude else None
        self.base_layers: list[_Layer] = []
        # Ignore files read from outside the root, there or not (`watch` looks at them too).
        self.outer_files: list[Path] = []
        glob = global_excludes_file()
        if glob:
            self.outer_files.append(glob)
        if glob and glob.is_file():
            self._add(self.base_layers, "", _read_lines(glob), "gitignore")
        top = _git_toplevel(root)
        if top is not None:
            info = top / ".git" / "info" / "exclude"
            if top != root:
                self.outer_files.append(info)
            # Patterns of files above the root are anchored at the repository top; translate
            # them by keeping only what applies inside the root.
            prefix = root.relative_to(top).as_posix() if top != root else ""
            lines = _read_lines(info) if info.is_file() else []
            parents = [top / p for p in (root.relative_to(top).parents if top != root else [])]
            self._add_outer(prefix, top, lines, "gitignore")
            for parent in sorted(parents, key=lambda p: len(p.parts)):
                if parent == root or parent == top and prefix == "":
                    continue
                gi = parent / ".gitignore"
                self.outer_files.append(gi)
                if gi.is_file():
                    self._add_outer(prefix, parent, _read_lines(gi), "gitignore")

    def _add(self, layers: list[_Layer], base: str, lines: list[str], reason: str) -> None:
        lines = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        if lines:
            layers.append(_Layer(base, pathspec.GitIgnoreSpec.from_lines(lines), reason,
                                 names=_by_name(lines)))

    def _add_outer(self, prefix: str, at: Path, lines: list[str], reason: str) -> None:
        # A layer anchored above the root: match against the path as seen from `at`.
        lines = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        if not lines:
            return
        outer = self.root.relative_to(at).as_posix()
        if outer != ".":
            # The folder the user named is indexed even where a file above ignores it (a
            # build output, a vendored tree, a benchmark's download folder), as ripgrep
            # searches a folder it is given: a rule that ignores the root or a folder
            # between it and `at` does not apply inside it. Other rules (`*.log`) still do.
            parts = outer.split("/")
            above = ["/".join(parts[:i]) + "/" for i in range(1, len(parts) + 1)]
            lines = [ln for ln in lines if ln.lstrip().startswith("!") or not any(
                pathspec.GitIgnoreSpec.from_lines([ln]).match_file(d) for d in above)]
            if not lines:
                return
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
        self.base_layers.append(_Layer("", spec, reason, "" if outer == "." else outer))

    def _included(self, rel: str) -> bool:
        return self.include is not None and _matches(self.include, rel)

    def _may_include_below(self, rel_dir: str) -> bool:
        if self.include is None:
            return False
        if self.include_prefixes is None:
            return True
        return any(
            p == rel_dir or p.startswith(rel_dir + "/") or rel_dir.startswith(p + "/")
            for p in self.include_prefixes
        )

    def _rule(self, layers: list[_Layer], rel: str, is_dir: bool) -> str:
        """The reason this path is left out, or "" to keep it (before --include)."""
        name = rel.rsplit("/", 1)[-1]
        if is_dir:
            if BLACKLIST_DIRS.match(rel, name):
                return "blacklisted"
        elif ANY_FILE_RULE.match(rel, name):
            if BLACKLIST_FILES.match(rel, name):
                return "blacklisted"
            if not self.include_secrets and self._secret(rel, name):
                return secrets.SECRET
            for reason, rules in JUNK_NAMES.items():
                if rules.match(rel, name):
                    return reason
        if self.exclude is not None and _matches(self.exclude, rel + "/" if is_dir else rel):
            return "excluded"
        ignored, why = _verdict(layers, rel, name, is_dir)
        return why if ignored else ""

    def _secret(self, rel: str, name: str) -> bool:
        if SECRETS_OK.match(rel, name):
            return False
        if SECRETS.match(rel, name):
            return True
        return PEM_NAMES.match(rel, name) and secrets.pem_holds_secret(self.root / rel)

    def walk(self) -> WalkResult:
        """Walk the whole tree; never follows symlinked folders."""
        result = WalkResult()
        with no_gc():
            self._walk_dir(self.root, "", list(self.base_layers), result, pruned=False,
                           shut=False)
        result.files.sort(key=lambda c: c.rel)
        return result

    def _walk_dir(
        self, path: Path, rel_dir: str, layers: list[_Layer], result: WalkResult, pruned: bool,
        shut: bool,
    ) -> None:
        """`shut`: a folder between the root and this one keeps other accounts out."""
        result.dirs.add(rel_dir)
        if not pruned:
            for fname, reason in ((".gitignore", "gitignore"), (".hydraignore", "hydraignore")):
                f = path / fname
                if f.is_file():
                    layers = [*layers]
                    self._add(layers, rel_dir, _read_lines(f), reason)
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except PermissionError:
            result.skip("unreadable", rel_dir or ".")
            return
        except OSError:
            result.skip("unreadable", rel_dir or ".")
            return
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                is_link = entry.is_symlink()
                st = entry.stat(follow_symlinks=True)
            except FileNotFoundError:
                result.skip("broken_symlink" if entry.is_symlink() else "vanished", rel)
                continue
            except OSError as exc:
                # ELOOP for symlink loops, EACCES and friends otherwise.
                result.skip("symlink_loop" if exc.errno == 40 else "unreadable", rel)
                continue
            if stat.S_ISDIR(st.st_mode):
                if is_link:
                    result.skip("symlink_dir", rel)
                    continue
                if entry.name == INDEX_DIR:  # an index (this one, or a nested folder's) is
                    if rel != INDEX_DIR:  # never indexed, --include or not; this folder's
                        result.skip("blacklisted", rel + "/")  # own is not among its files
                    continue
                why = "" if pruned else self._rule(layers, rel, is_dir=True)
                if pruned or why:
                    if self._may_include_below(rel):
                        self._walk_dir(Path(entry.path), rel, layers, result, pruned=True,
                                       shut=shut or not st.st_mode & stat.S_IXOTH)
                    else:
                        result.skip(why or "blacklisted", rel + "/")
                    continue
                self._walk_dir(Path(entry.path), rel, layers, result, pruned=False,
                               shut=shut or not st.st_mode & stat.S_IXOTH)
                continue
            if not stat.S_ISREG(st.st_mode):
                result.skip("special", rel)
                continue
            if pruned:
                if not self._included(rel):
                    continue
                if not self.include_secrets and self._secret(rel, entry.name):
                    result.skip(secrets.SECRET, rel)
                    continue
            else:
                why = self._rule(layers, rel, is_dir=False)
                # --include brings back what the rules leave out, a secret aside: that takes
                # --include-secrets (then _rule does not call it one).
                if why and (why == secrets.SECRET or not self._included(rel)):
                    result.skip(why, rel)
                    continue
            if is_link:
                target = Path(os.path.realpath(entry.path))
                if not target.is_relative_to(self.root):
                    result.skip("symlink_outside", rel)
                    continue
            if st.st_size == 0:
                result.skip("empty", rel)
                continue
            if st.st_size > (self.max_document_bytes if format_of(rel) else self.max_bytes):
                result.skip("too_large", rel)
                continue
            if shut or not st.st_mode & stat.S_IROTH:
                result.private += 1
            # The rules above match the name the file system gives; the index keeps its
            # escaped form (valid UTF-8, one line), which the rest of the run works with.
            result.files.append(Candidate(escape_name(rel), st.st_size, st.st_mtime_ns,
                                          self._included(rel), self.include_secrets))


def read_text(path: Path) -> tuple[str | None, str]:
    """Read a file as UTF-8; returns (text, "") or (None, skip reason)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, "vanished"
    except OSError:
        return None, "unreadable"
    if not data:
        return None, "empty"
    if len(data) > MAX_BYTES:
        return None, "too_large"
    if b"\x00" in data:
        return None, "binary"
    try:
        # The whole file is decoded, never a sniff window, so a multi-byte character at any
        # offset cannot make a valid file look invalid.
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not_utf8"
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, ""



# The content checks below are reasons --include overrides, as it overrides the name rules; an
# unchanged file skipped for one of them is read again once an --include names it. A private
# key ("secret") is not among them: only --include-secrets lets one in.
OVERRIDABLE = frozenset({"certificate", "enormous_line"})

# A line longer than this is cut mid-line by the chunker (chunk.HARD): a file mostly made of
# such lines, not prose, becomes chunks of minified code or data that search poorly (a warning).
LONG_LINE = 3_000
# A file mostly made of lines longer than this, not prose, is skipped. Measured on 23,238 text
# files (site-packages, the standard library, click, flask, npm's node_modules, /usr/share/doc,
# SciFact, CoSQA), it takes 24: minified bundles and source maps (17 of them already skipped
# by name), inlined WebAssembly, a Sphinx search index, a JSON seed file, a protobuf descriptor
# and a table of names in a .py. At 5,000 it would also take generated HTML manual pages that
# are one line of 5,100-7,521 characters (indexed with a warning at this limit); no line of
# prose in those trees is longer than 10,000 characters, and a longer one is kept anyway.
ENORMOUS_LINE = 10_000
_MOSTLY = 0.5

def _reads_as_prose(line: str) -> bool:
    # A strided sample of ~4,096 characters gives these ratios as well as the whole line does,
    # at a fraction of the cost on a megabyte of minified code.
    sample = line[:: max(1, len(line) // 4096)]
    letters = sum(c.isalpha() for c in sample)
    if sum(not c.isascii() for c in sample if c.isalpha()) >= len(sample) / 2:
        return True  # Chinese, Japanese, Thai… are written without spaces
    return sample.count(" ") >= 0.1 * len(sample) and letters >= 0.5 * len(sample)


def mostly_long_lines(text: str, longer_than: int = LONG_LINE) -> bool:
    """Whether lines longer than `longer_than` characters that do not read as prose (minified
    code, data, base64) hold most of the text. A long line of prose is cut between words and
    searches as well as any other paragraph."""
    if len(text) <= longer_than:
        return False
    long = sum(len(ln) for ln in text.splitlines()
               if len(ln) > longer_than and not _reads_as_prose(ln))
    return long >= _MOSTLY * len(text)


def _mostly_armored(text: str) -> bool:
    """Whether PEM blocks with a real body (certificates, signing requests, public keys, and
    private keys where --include-secrets lets them in) make up most of `text`: key material,
    not worth searching. Code that merely names a PEM header, or a README quoting a
    certificate, is not."""
    armored = sum(len(m.group(0)) for m in secrets.PEM.finditer(text) if secrets.armored(m))
    return armored >= _MOSTLY * len(text)


def content_skip(text: str, included: bool = False, allow_secrets: bool = False) -> str:
    """Why text read from a file is not indexed ("secret": it holds a private key, unless
    `allow_secrets`; "certificate": it is mostly certificates or other key material;
    "enormous_line": it is mostly minified code or data on enormous lines), or "". A file
    an --include names (`included`) is only checked for a private key."""
    if not allow_secrets and secrets.holds_private_key(text):
        return secrets.SECRET
    if included:
        return ""
    if "-----BEGIN " in text and _mostly_armored(text):
        return "certificate"
    return "enormous_line" if mostly_long_lines(text, ENORMOUS_LINE) else ""


def read_indexable(path: Path, included: bool = False,
                   allow_secrets: bool = False) -> tuple[str | None, str]:
    """`read_text`, then `content_skip`."""
    text, why = read_text(path)
    if text is None:
        return text, why
    why = content_skip(text, included, allow_secrets)
    return (None, why) if why else (text, "")
