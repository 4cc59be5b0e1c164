"""Model names as people write them, and the GGUF files they stand for.

`hf:OWNER/REPO` names a Hugging Face repository; `:QUANT` (Q4_K_M, Q8_0, F16…) picks one of
its quantisations and `/PATH` one of its files; `@REVISION` pins a branch, tag or commit. A
model too large for one file comes as a split GGUF, `NAME-00001-of-00003.gguf` and its
siblings, which llama.cpp loads from the first part; here such a group is one model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hydra_rag.errors import UsageError
from hydra_rag.models.gguf import SPLIT

# A quantisation's name inside a file name: Q4_K_M, IQ3_XXS, Q8_0, F16, BF16, MXFP4, UD-Q4_K_XL…
_QUANT = re.compile(r"(?<![A-Za-z0-9])((?:UD-)?I?Q\d(?:_[0-9A-Z]{1,3})*|B?F16|F32|FP16|FP32|MXFP4)"
                    r"(?![A-Za-z0-9])", re.IGNORECASE)
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
# Weights of another kind that share a repository with the model.
_NOT_MODELS = ("mmproj", "imatrix", "ggml-vocab-")

# The quantisation pulled when none is named, best first: llama.cpp's and Ollama's default
# for chat models; an embedder is small, and keeps the most of its quality at 8 bits.
CHAT_QUANTS = ("Q4_K_M", "Q4_K_S", "Q4_0", "Q4_1", "IQ4_XS", "IQ4_NL", "Q5_K_M", "Q5_K_S",
               "Q5_0", "Q5_1", "Q6_K", "Q8_0", "Q3_K_L", "Q3_K_M", "IQ3_M", "Q3_K_S", "IQ3_XS", "IQ3_XXS",
               "Q2_K", "IQ2_M", "BF16", "F16", "F32")
EMBED_QUANTS = ("Q8_0", "F16", "BF16", "Q6_K", "Q5_K_M", "Q5_1", "Q5_0", "Q4_K_M", "Q4_1",
                "Q4_0", "F32")


@dataclass(frozen=True)
class HubRef:
    """What `hf:OWNER/REPO[@REVISION][:QUANT|/FILE]` asks for."""

    repo: str
    revision: str | None = None
    quant: str | None = None
    file: str | None = None


def is_hub_name(name: str) -> bool:
    """Whether a model name on the command line names the hub rather than a catalog id."""
    return name.startswith(("hf:", "hf.co/", "huggingface.co/", "https://huggingface.co/"))


def parse_ref(text: str) -> HubRef:
    """`hf:OWNER/REPO[@REV][:QUANT|/FILE]`; also the `hf.co/OWNER/REPO:QUANT` of Ollama and
    llama.cpp, and a repository's or file's huggingface.co address."""
    raw = text.strip()
    for prefix in ("hf:", "https://huggingface.co/", "huggingface.co/", "hf.co/"):
        if raw.startswith(prefix):
            raw = raw[len(prefix):]
            break
    else:
        raise UsageError(f"{text!r} is not a hub name: write hf:OWNER/REPO[:QUANT|/FILE]")
    # A file's address: OWNER/REPO/blob|resolve/REVISION/PATH
    m = re.match(r"^([^/]+/[^/]+)/(?:blob|resolve)/([^/]+)/(.+)$", raw)
    if m:
        return _checked(HubRef(m.group(1), m.group(2), None, m.group(3)), text)
    parts = raw.split("/", 2)
    if len(parts) < 2:
        raise UsageError(f"{text!r}: a hub name is hf:OWNER/REPO, with the owner")
    owner, rest = parts[0], parts[1]
    file = parts[2] if len(parts) == 3 else None
    quant = None
    if file is None and ":" in rest:
        rest, quant = rest.split(":", 1)
    elif file is not None and ":" in file:
        raise UsageError(f"{text!r}: give a quantisation (:Q4_K_M) or a file (/NAME.gguf), "
                         "not both")
    revision = None
    if "@" in rest:
        rest, revision = rest.split("@", 1)
    if file is not None and not file.lower().endswith(".gguf"):
        raise UsageError(f"{text!r}: {file!r} is not a .gguf file")
    return _checked(HubRef(f"{owner}/{rest}", revision or None, quant or None, file), text)


def _checked(ref: HubRef, text: str) -> HubRef:
    if not _REPO.match(ref.repo) or ".." in ref.repo:
        raise UsageError(f"{text!r}: {ref.repo!r} is not a repository name (OWNER/REPO)")
    if ref.quant is not None and not re.fullmatch(r"[A-Za-z0-9_-]+", ref.quant):
        raise UsageError(f"{text!r}: {ref.quant!r} is not a quantisation name (Q4_K_M, Q8_0…)")
    return ref


def quant_of(filename: str) -> str:
    """The quantisation a file's name says, upper-case ("" when it says none)."""
    name = filename.rsplit("/", 1)[-1]
    m = SPLIT.match(name)
    stem = m.group("prefix") if m else name.removesuffix(".gguf").removesuffix(".GGUF")
    found = _QUANT.findall(stem)
    quant = found[-1].upper() if found else ""
    return {"FP16": "F16", "FP32": "F32"}.get(quant, quant)


@dataclass(frozen=True)
class Candidate:
    """One model in a repository: a GGUF file, or the parts of a split one, in order."""

    files: tuple[str, ...]
    size: int  # bytes, all parts

    @property
    def first(self) -> str:
        return self.files[0]

    @property
    def quant(self) -> str:
        return quant_of(self.first)


def candidates(sizes: dict[str, int]) -> list[Candidate]:
    """The models among a repository's files (path → size): single GGUF files, and split
    GGUFs whose parts are all there; vision projectors and importance matrices left out."""
    groups: dict[tuple[str, int], dict[int, str]] = {}
    out: list[Candidate] = []
    for path, size in sorted(sizes.items()):
        name = path.rsplit("/", 1)[-1]
        if not name.lower().endswith(".gguf") or any(x in name.lower() for x in _NOT_MODELS):
            continue
        m = SPLIT.match(name)
        if m is None:
            out.append(Candidate((path,), size))
            continue
        key = (path[: len(path) - len(name)] + m.group("prefix"), int(m.group("count")))
        groups.setdefault(key, {})[int(m.group("no"))] = path
    for (_, count), parts in groups.items():
        if sorted(parts) == list(range(1, count + 1)):
            files = tuple(parts[i] for i in range(1, count + 1))
            out.append(Candidate(files, sum(sizes[f] for f in files)))
    return sorted(out, key=lambda c: c.first)


def choose(found: list[Candidate], ref: HubRef, role: str, memory_bytes: int = 0) -> Candidate:
    """The model `ref` asks for among a repository's: its file, its quantisation, or (named
    neither) the best default quantisation for `role` that fits in `memory_bytes` (0: any)."""
    names = ", ".join(c.first for c in found) or "none"
    if not found:
        raise UsageError(f"hf:{ref.repo} holds no GGUF file llama.cpp could load")
    if ref.file is not None:
        for c in found:
            if ref.file in c.files or ref.file.rsplit("/", 1)[-1] in (
                    f.rsplit("/", 1)[-1] for f in c.files):
                return c
        raise UsageError(f"hf:{ref.repo} has no file {ref.file!r}; its GGUF files: {names}")
    if ref.quant is not None:
        hits = [c for c in found if c.quant == ref.quant.upper()]
        if not hits:
            quants = ", ".join(sorted({c.quant for c in found if c.quant})) or "none named"
            raise UsageError(f"hf:{ref.repo} has no {ref.quant.upper()} file; its "
                             f"quantisations: {quants}")
        if len(hits) > 1:
            raise UsageError(f"hf:{ref.repo} has several {ref.quant.upper()} files ("
                             + ", ".join(c.first for c in hits) + "): name one with /FILE")
        return hits[0]
    if len(found) == 1:
        return found[0]
    order = CHAT_QUANTS if role == "chat" else EMBED_QUANTS
    ranked = sorted((c for c in found if c.quant in order), key=lambda c: order.index(c.quant))
    if not ranked:
        raise UsageError(f"hf:{ref.repo} holds several GGUF files and none is a quantisation "
                         f"this knows: name one with hf:{ref.repo}/FILE ({names})")
    if memory_bytes:
        fitting = [c for c in ranked if needs(c.size) <= memory_bytes]
        if not fitting:
            small = min(ranked, key=lambda c: c.size)
            raise UsageError(
                f"no quantisation of hf:{ref.repo} fits this machine's {memory_bytes >> 20} MiB "
                f"of available memory (the smallest, {small.quant}, needs about "
                f"{needs(small.size) >> 20} MiB); name one with :QUANT to pull it anyway")
        ranked = fitting
    return ranked[0]


def needs(size: int) -> int:
    """Memory a model of `size` bytes needs to run: its weights, its context's cache and the
    runtime (a rule of thumb: a fifth more, and 300 MiB)."""
    return size + size // 5 + (300 << 20)
