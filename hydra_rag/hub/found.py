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


def ollama_roots(home: Path) -> list[Path]:
    roots = [Path(os.environ["OLLAMA_MODELS"]).expanduser()] if os.environ.get("OLLAMA_MODELS") \
        else []
    roots += [home / ".ollama" / "models", Path("/usr/share/ollama/.ollama/models")]
    return _unique(r for r in roots if (r / "manifests").is_dir())


def ollama(home: Path) -> Iterator[Found]:
    for root in ollama_roots(home):
        for manifest in sorted((root / "manifests").glob("*/*/*/*")):
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
        layers = [x for x in doc.get("layers", []) if isinstance(x, dict)]
    except (OSError, ValueError, AttributeError):
        return None
    models = [x for x in layers if x.get("mediaType") == _OLLAMA_MODEL]
    if not models:
        return None
    blob = _blob(root, str(models[0].get("digest", "")))
    note = ""
    if len(models) > 1:
        note = "its model is in several layers, which only Ollama joins"
    elif any(x.get("mediaType") == _OLLAMA_ADAPTER for x in layers):
        note = "it adds an adapter (LoRA) to its model, which only Ollama applies"
    elif blob is None or not blob.is_file():
        note = "its model blob is missing"
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
    roots = []
    for settings in (home / ".lmstudio" / "settings.json",
                     home / ".cache" / "lm-studio" / "settings.json"):
        try:
            folder = json.loads(settings.read_text(encoding="utf-8")).get("downloadsFolder")
        except (OSError, ValueError, AttributeError):
            folder = None
        if isinstance(folder, str) and folder:
            roots.append(Path(folder).expanduser())
    roots += [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]
    return _unique(r for r in roots if r.is_dir())


def lmstudio(home: Path) -> Iterator[Found]:
    for root in lmstudio_roots(home):
        for path in sorted(root.glob("*/*/*.gguf")):
            if _is_model(path):
                rel = path.relative_to(root).as_posix()
                yield Found("lmstudio", rel, path, path.name)


def hf_cache() -> Iterator[Found]:
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        info = scan_cache_dir()
    except (CacheNotFound, OSError, ValueError):
        return
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model":
            continue
        for rev in sorted(repo.revisions, key=lambda r: r.commit_hash):
            for f in sorted(rev.files, key=lambda f: f.file_name):
                if f.file_name.lower().endswith(".gguf") and _is_model(f.file_path):
                    rel = f.file_path.relative_to(rev.snapshot_path).as_posix()
                    yield Found("hf", f"{repo.repo_id}/{rel}", f.file_path, f.file_name)


def llama_cache(home: Path) -> Iterator[Found]:
    root = Path(os.environ.get("LLAMA_CACHE") or home / ".cache" / "llama.cpp").expanduser()
    if root.is_dir():
        for path in sorted(root.glob("*.gguf")):
            if _is_model(path):
                yield Found("llama.cpp", path.name, path, path.name)


def _is_model(path: Path) -> bool:
    """A model's GGUF (a split model's first part), not a vision projector or a later part."""
    name = path.name.lower()
    if name.startswith(("mmproj", "imatrix")) or name.endswith(".partial"):
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
