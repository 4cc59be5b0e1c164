"""Fetching GGUF files from the Hugging Face hub with the hub's own client (huggingface_hub):
it honours HF_ENDPOINT (a mirror, or a test server), HF_TOKEN and `hf auth login` for gated
repositories, proxies, and its cache.

A file is pinned to the commit its repository was resolved at, downloaded into `NAME.partial`
beside its destination, resumed from there after a dropped connection (the client retries
within a run, with a Range request) or an interrupted run (the next run asks for the rest),
and checked against the SHA-256 the hub publishes for it before it takes its name. A file that
does not match is deleted: it is never registered.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra_rag.errors import ModelError, Unreachable
from hydra_rag.locks import file_lock
from hydra_rag.models.hf.refs import Candidate, HubRef

Say = Callable[[str], None]


@dataclass(frozen=True)
class HubFile:
    """One file of a repository as the hub describes it."""

    path: str
    size: int
    sha256: str | None  # the LFS object's SHA-256 (every large file)
    git_sha1: str | None  # the git blob id (a small file kept in git itself)


@dataclass(frozen=True)
class Repo:
    """A repository resolved at one commit."""

    id: str
    commit: str
    files: dict[str, HubFile]
    gated: bool

    def sizes(self) -> dict[str, int]:
        return {p: f.size for p, f in self.files.items()}


def endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def _gated_message(repo: str) -> str:
    return (f"hf:{repo} is gated: accept its terms at {endpoint()}/{repo} while logged in, then "
            "give a read token (HF_TOKEN=…, or `hf auth login`)")


def unreachable(exc: BaseException) -> str:
    """Why a server could not be reached at all ("connection refused", "name or service not
    known"), in the system's words; "" when the failure was another (it answered)."""
    import socket

    import httpx2

    if not isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout, ConnectionError,
                            socket.gaierror, TimeoutError)):
        return ""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return re.sub(r"^\[Errno -?\d+\]\s*", "", text).lower() or type(exc).__name__


def hub_error(exc: BaseException, repo: str, what: str) -> ModelError:
    """A hub client's exception as one message saying what to do."""
    from huggingface_hub import errors

    reason = unreachable(exc)
    if reason:
        return Unreachable(f"cannot reach the Hugging Face hub at {endpoint()} ({reason})",
                           f"{what} at {endpoint()}", reason)
    if isinstance(exc, errors.GatedRepoError):
        return ModelError(_gated_message(repo))
    if isinstance(exc, errors.RepositoryNotFoundError):
        return ModelError(f"hf:{repo}: no such repository at {endpoint()} (or it is private: "
                          "give a token with HF_TOKEN)")
    if isinstance(exc, errors.RevisionNotFoundError):
        return ModelError(f"hf:{repo}: no such revision ({exc})")
    if isinstance(exc, errors.EntryNotFoundError):
        return ModelError(f"hf:{repo}: {what} is not in the repository")
    if isinstance(exc, errors.OfflineModeIsEnabled):
        return Unreachable(f"cannot fetch {what}: HF_HUB_OFFLINE is set", what,
                           "HF_HUB_OFFLINE is set")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ModelError(f"cannot fetch {what} from {endpoint()}: {first}")


def resolve(ref: HubRef) -> Repo:
    """The repository's files, sizes and hashes at the revision asked for (default: main)."""
    import httpx2
    from huggingface_hub import HfApi, errors

    try:
        info = HfApi().model_info(ref.repo, revision=ref.revision, files_metadata=True)
    except (errors.HfHubHTTPError, httpx2.HTTPError, errors.OfflineModeIsEnabled,
            OSError) as exc:
        raise hub_error(exc, ref.repo, f"hf:{ref.repo}") from None
    except ValueError as exc:  # the client's own check of a repository name
        raise ModelError(f"hf:{ref.repo}: {exc}") from None
    files = {}
    for s in info.siblings or []:
        lfs = s.lfs
        files[s.rfilename] = HubFile(
            s.rfilename, int((lfs.size if lfs else s.size) or 0),
            lfs.sha256 if lfs else None, None if lfs else s.blob_id)
    if not info.sha:
        raise ModelError(f"hf:{ref.repo}: the hub did not say which commit it serves")
    # The hub's own spelling: names are matched without regard to case, and a renamed
    # repository answers for its old name.
    return Repo(info.id or ref.repo, info.sha, files, bool(info.gated))


def verify(path: Path, want: HubFile) -> str:
    """"" when the file is the one the hub describes (size and hash), else what differs."""
    size = path.stat().st_size
    if size != want.size:
        return f"{size} bytes where the hub says {want.size}"
    if want.sha256:
        h = hashlib.sha256()
        label, expected = "SHA-256", want.sha256
    elif want.git_sha1:
        h = hashlib.sha1(f"blob {size}\0".encode(), usedforsecurity=False)
        label, expected = "git hash", want.git_sha1
    else:
        return "the hub gives no hash to check it against"
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    got = h.hexdigest()
    return "" if got == expected.lower() else f"its {label} is {got}, the hub's {expected}"


def cached(repo: Repo, files: tuple[str, ...]) -> list[Path] | None:
    """The files in the hub client's own cache (HF_HUB_CACHE), when every one is there at
    this commit: pulled by another tool, they are used where they lie."""
    from huggingface_hub import try_to_load_from_cache

    found = []
    for name in files:
        hit = try_to_load_from_cache(repo.id, name, revision=repo.commit)
        if not isinstance(hit, str):
            return None
        found.append(Path(hit))
    return found


def fetch(repo: Repo, cand: Candidate, dest_dir: Path, say: Say,
          names: tuple[str, ...] | None = None, force: bool = False) -> list[Path]:
    """The candidate's files, verified: from the hub client's cache if all are there and
    match (unless `force`), else downloaded into `dest_dir` (as `names`, default their paths in
    the repository). A split model's first part is fetched last: until every part is here,
    the model is not installed (its first part is what names it)."""
    in_cache = None if force else cached(repo, cand.files)
    if in_cache is not None:
        bad = [f"{p}: {why}" for p, f in zip(in_cache, cand.files, strict=True)
               if (why := verify(p, repo.files[f]))]
        if not bad:
            say(f"using hf:{repo.id}/{cand.first} from the Hugging Face cache ({in_cache[0].parent})")
            return in_cache
        say("the Hugging Face cache's copy does not match the hub (" + "; ".join(bad)
            + "): downloading")
    names = names or cand.files
    pairs = list(zip(cand.files, names, strict=True))
    got = {f: download(repo, repo.files[f], dest_dir / n, say, force)
           for f, n in [*pairs[1:], pairs[0]]}
    return [got[f] for f in cand.files]


def download(repo: Repo, want: HubFile, dest: Path, say: Say, force: bool = False) -> Path:
    """One file into `dest`, resuming `dest.partial`, verified against the hub."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    # One lock per folder, never removed (removing a lock file lets two holders in).
    with file_lock(dest.parent / ".lock", wait=0.0, label="hydra-rag pull") as held:
        if not held:
            raise ModelError(f"another hydra-rag is downloading into {dest.parent}; try again "
                             "when it is done")
        if dest.is_file():
            why = "--force" if force else verify(dest, want)
            if not why:
                say(f"{dest.name}: already here, verified ({dest})")
                return dest
            if why != "--force":
                say(f"{dest.name}: the copy here does not match the hub ({why}): fetching it "
                    "again")
            dest.unlink()
        resumed = partial.exists() and partial.stat().st_size > 0
        _get(repo, want, partial, say)
        why = verify(partial, want)
        if why and resumed:
            # Left by a run for another version of the file: start again, once.
            say(f"{dest.name}: the part kept from an earlier run was of another version "
                f"({why}); downloading it whole")
            partial.unlink()
            _get(repo, want, partial, say)
            why = verify(partial, want)
        if why:
            partial.unlink(missing_ok=True)
            raise ModelError(f"hf:{repo.id}/{want.path}: the download does not match the "
                             f"hub ({why}); it was deleted and nothing was registered")
        partial.replace(dest)
        return dest


def _get(repo: Repo, want: HubFile, partial: Path, say: Say) -> None:
    import httpx2
    from huggingface_hub import errors, hf_hub_url
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    have = partial.stat().st_size if partial.exists() else 0
    if have > want.size:  # not a prefix of this file: start again
        partial.unlink()
        have = 0
    free = shutil.disk_usage(partial.parent).free
    if want.size - have > free:
        raise ModelError(f"hf:{repo.id}/{want.path} needs {_mib(want.size - have)} more and "
                         f"{partial.parent} has {_mib(free)} free")
    if have:
        say(f"{want.path}: resuming at {have >> 20} of {want.size >> 20} MiB")
    else:
        say(f"downloading hf:{repo.id}/{want.path} ({_mib(want.size)})")
    url = hf_hub_url(repo.id, want.path, revision=repo.commit)
    headers: dict[str, Any] = build_hf_headers()
    try:
        with partial.open("ab") as f:
            http_get(url, f, resume_size=have, headers=headers, expected_size=want.size,
                     displayed_filename=want.path.rsplit("/", 1)[-1])
    except (errors.HfHubHTTPError, httpx2.HTTPError, OSError) as exc:
        got = partial.stat().st_size if partial.exists() else 0
        if not got:
            partial.unlink(missing_ok=True)
        err = hub_error(exc, repo.id, f"hf:{repo.id}/{want.path}")
        if got and got < want.size and not isinstance(exc, errors.GatedRepoError):
            kept = (f"{err} ({got >> 20} of {want.size >> 20} MiB kept in {partial}: the same "
                    "command resumes)")
            if isinstance(err, Unreachable):
                raise Unreachable(kept, err.tried, err.reason) from None
            raise ModelError(kept) from None
        raise err from None


def _mib(size: int) -> str:
    return f"{size / (1 << 30):.1f} GiB" if size >= 1 << 30 else f"{max(size >> 20, 1)} MiB"
