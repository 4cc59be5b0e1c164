"""GGUF models other tools already downloaded, found where those tools keep them, to be
registered where they lie (never copied):

- Ollama: `$OLLAMA_MODELS`, `~/.ollama/models` and the Linux service's
  `/usr/share/ollama/.ollama/models`. A manifest (`manifests/HOST/NAMESPACE/NAME/TAG`, JSON)
  lists layers by digest; the `application/vnd.ollama.image.model` layer is the GGUF, stored as
  `blobs/sha256-HEX`. Its `params` layer (temperature, num_ctx…) carries over where it maps.
- LM Studio: `~/.lmstudio/models` (and the folder its settings name), and the older
  `~/.cache/lm-studio/models`: `PUBLISHER/REPO/FILE.gguf`.
- The Hugging Face cache (HF_HUB_CACHE), as its own client reads it.
- llama.cpp's `-hf` downloads (`LLAMA_CACHE`, `~/.cache/llama.cpp`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra_rag.models.gguf import SPLIT

SOURCES = ("ollama", "lmstudio", "hf", "llama.cpp")
_OLLAMA_MODEL = "application/vnd.ollama.image.model"
_OLLAMA_PARAMS = "application/vnd.ollama.image.params"
_OLLAMA_ADAPTER = "application/vnd.ollama.image.adapter"
# Ollama's parameters that mean the same here.
_PARAMS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p",
           "repeat_penalty": "repeat_penalty", "seed": "seed", "num_predict": "max_tokens"}


@dataclass(frozen=True)
class Found:
    """A model file another tool holds."""

    source: str  # ollama, lmstudio, hf, llama.cpp
    name: str  # as that tool names it: llama3.2:3b, lmstudio-community/…/x.gguf
    path: Path  # the GGUF (a split model's first part)
    id_hint: str  # what its catalog id is made from
    params: dict[str, Any] = field(default_factory=dict)  # chat parameters it was set up with
    context: int = 0  # the context its tool runs it with (0: unset)
    note: str = ""  # why it cannot be imported ("" when it can)

    @property
    def via(self) -> str:
        return f"{self.source}:{self.name}"


def find(sources: tuple[str, ...] = SOURCES, home: Path | None = None) -> list[Found]:
    """Every GGUF model the named tools hold on this machine."""
    home = home or Path.home()
    out: list[Found] = []
    if "ollama" in sources:
        out += list(ollama(home))
    if "lmstudio" in sources:
        out += list(lmstudio(home))
    if "hf" in sources:
        out += list(hf_cache())
    if "llama.cpp" in sources:
        out += list(llama_cache(home))
    return out


def places(sources: tuple[str, ...] = SOURCES, home: Path | None = None
           ) -> list[tuple[str, Path, bool]]:
    """The folders `find` reads for each source: (source, folder, whether it is there)."""
    from huggingface_hub import constants

    home = home or Path.home()
    out: list[tuple[str, Path, bool]] = []
    if "ollama" in sources:
        out += [("ollama", r, _is_dir(r / "manifests")) for r in _unique(_ollama_all(home))]
    if "lmstudio" in sources:
        out += [("lmstudio", r, _is_dir(r)) for r in _unique(_lmstudio_all(home))]
    if "hf" in sources:
        hub = Path(constants.HF_HUB_CACHE)
        out.append(("hf", hub, _is_dir(hub)))
    if "llama.cpp" in sources:
        root = _llama_root(home)
        out.append(("llama.cpp", root, _is_dir(root)))
    return out


def _ollama_all(home: Path) -> list[Path]:
    roots = [Path(os.environ["OLLAMA_MODELS"]).expanduser()] if os.environ.get("OLLAMA_MODELS") \
        else []
    return roots + [home / ".ollama" / "models", Path("/usr/share/ollama/.ollama/models")]


def ollama_roots(home: Path) -> list[Path]:
    return _unique(r for r in _ollama_all(home) if _is_dir(r / "manifests"))


def _is_dir(path: Path) -> bool:
    """A folder this account can read (the Ollama service's may not be)."""
    try:
        return path.is_dir() and os.access(path, os.R_OK | os.X_OK)
    except OSError:
        return False


def ollama(home: Path) -> Iterator[Found]:
    for root in ollama_roots(home):
        try:
            manifests = sorted((root / "manifests").glob("*/*/*/*"))
        except OSError:
            continue
        for manifest in manifests:
            if manifest.is_file():
                found = _ollama_model(root, manifest)
                if found is not None:
                    yield found


def _ollama_model(root: Path, manifest: Path) -> Found | None:
    host, namespace, model, tag = manifest.relative_to(root / "manifests").parts
    name = f"{model}:{tag}" if (host, namespace) == ("registry.ollama.ai", "library") else \
        f"{namespace}/{model}:{tag}" if host == "registry.ollama.ai" else \
        f"{host}/{namespace}/{model}:{tag}"
    hint = model if tag == "latest" else f"{model}-{tag}"
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
        raw = doc.get("layers") if isinstance(doc, dict) else None
    except (OSError, ValueError):
        return None
    layers = [x for x in raw if isinstance(x, dict)] if isinstance(raw, list) else []
    models = [x for x in layers if x.get("mediaType") == _OLLAMA_MODEL]
    if not models:
        return None
    blob = _blob(root, str(models[0].get("digest", "")))
    note = ""
    readable = blob is not None and blob.is_file() and os.access(blob, os.R_OK)
    if len(models) > 1:
        note = "its model is in several layers, which only Ollama joins"
    elif any(x.get("mediaType") == _OLLAMA_ADAPTER for x in layers):
        note = "it adds an adapter (LoRA) to its model, which only Ollama applies"
    elif not readable:
        note = "its model blob is missing or not readable by this account"
    params: dict[str, Any] = {}
    context = 0
    for layer in layers:
        if layer.get("mediaType") != _OLLAMA_PARAMS:
            continue
        p = _blob(root, str(layer.get("digest", "")))
        try:
            raw = json.loads(p.read_text(encoding="utf-8")) if p else {}
        except (OSError, ValueError):
            raw = {}
        if isinstance(raw, dict):
            params = _params(raw)
            context = int(raw.get("num_ctx") or 0) if isinstance(raw.get("num_ctx"), int) else 0
    # A vision projector layer is left aside: the text model runs without it.
    return Found("ollama", name, blob or manifest, hint, params, context, note)


def _params(raw: dict[str, Any]) -> dict[str, Any]:
    """Ollama's sampling parameters as ours (counts as integers; -1, "no limit", dropped)."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in _PARAMS or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        ours = _PARAMS[key]
        if ours in ("top_k", "seed", "max_tokens"):
            if value < 0 or (ours != "seed" and value == 0):
                continue
            value = int(value)
        out[ours] = value
    return out


def _blob(root: Path, digest: str) -> Path | None:
    algo, _, hexdigest = digest.partition(":")
    if not hexdigest or "/" in hexdigest or algo != "sha256":
        return None
    return root / "blobs" / f"sha256-{hexdigest}"


def lmstudio_roots(home: Path) -> list[Path]:
    return _unique(r for r in _lmstudio_all(home) if _is_dir(r))


def _lmstudio_all(home: Path) -> list[Path]:
    roots = []
    for settings in (home / ".lmstudio" / "settings.json",
                     home / ".cache" / "lm-studio" / "settings.json"):
        try:
            folder = json.loads(settings.read_text(encoding="utf-8")).get("downloadsFolder")
        except (OSError, ValueError, AttributeError):
            folder = None
        if isinstance(folder, str) and folder:
            roots.append(Path(folder).expanduser())
    return roots + [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]


def lmstudio(home: Path) -> Iterator[Found]:
    for root in lmstudio_roots(home):
        try:
            paths = sorted(root.glob("*/*/*.gguf"))
        except OSError:
            continue
        for path in paths:
            if _is_model(path):
                rel = path.relative_to(root).as_posix()
                yield Found("lmstudio", rel, path, path.name)


def hf_cache() -> Iterator[Found]:
    from huggingface_hub import constants

    yield from _hub_layout(Path(constants.HF_HUB_CACHE), "hf")


def _hub_layout(root: Path, source: str) -> Iterator[Found]:
    """GGUFs in a cache laid out as the hub client lays it out
    (`models--OWNER--NAME/snapshots/COMMIT/PATH`): one per file, from the snapshot `refs/main`
    names when there is one, else the first. Snapshot paths are kept (links into `blobs/`):
    a split model's parts are found beside each other there."""
    if not _is_dir(root):
        return
    try:
        repos = sorted(root.glob("models--*--*"))
    except OSError:
        return
    for repo in repos:
        repo_id = "/".join(repo.name.split("--")[1:3])
        try:
            main = (repo / "refs" / "main").read_text().strip()
        except OSError:
            main = ""
        snaps = sorted((repo / "snapshots").glob("*"), key=lambda p: p.name != main) \
            if _is_dir(repo / "snapshots") else []
        seen: set[str] = set()
        for snap in snaps:
            try:
                files = sorted(snap.rglob("*.gguf"))
            except OSError:
                continue
            for f in files:
                rel = f.relative_to(snap).as_posix()
                if rel in seen or not f.exists() or not _is_model(f):
                    continue  # a broken link: an interrupted download, or a deleted blob
                seen.add(rel)
                yield Found(source, f"{repo_id}/{rel}", f, f.name)


def _llama_root(home: Path) -> Path:
    return Path(os.environ.get("LLAMA_CACHE") or home / ".cache" / "llama.cpp").expanduser()


def llama_cache(home: Path) -> Iterator[Found]:
    root = _llama_root(home)
    if not _is_dir(root):
        return
    try:
        flat = sorted(root.glob("*.gguf"))
    except OSError:
        flat = []
    for path in flat:
        if _is_model(path):
            yield Found("llama.cpp", path.name, path, path.name)
    # Newer llama.cpp keeps its downloads as the hub client does.
    yield from _hub_layout(root, "llama.cpp")


def _is_model(path: Path) -> bool:
    """A model's GGUF (a split model's first part), not a vision projector or a later part."""
    name = path.name.lower()
    if "mmproj" in name or "imatrix" in name or name.endswith(".partial"):
        return False
    m = SPLIT.match(path.name)
    return m is None or int(m.group("no")) == 1


def _unique(paths: Iterator[Path] | list[Path]) -> list[Path]:
    seen: set[Path] = set()
    out = []
    for p in paths:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
