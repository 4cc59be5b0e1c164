"""A GGUF file's metadata, read from its header without loading the model: one value
(metadata_value), every scalar (header), or whether the file is whole (damage: the tensor
table against the file's size).

A GGUF file begins with its key-value metadata (gguf.md in llama.cpp's repository): the magic
`GGUF`, a version, the tensor and key counts, then each key (a length-prefixed string), its
type and its value. Reading stops at the key asked for, so that the vocabulary arrays that
usually follow the small keys are not read at all. Little-endian files only (GGUF v2 and v3,
which is what llama.cpp writes on every machine we run on).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any, BinaryIO

# llama.cpp's names for the parts of a model split over several files (llama_split_path):
# NAME-00001-of-00003.gguf…; it loads the first and finds the others beside it.
SPLIT = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)

# GGUF value types: 0–7 and 10–12 are scalars (struct formats), 8 a string, 9 an array.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}
_STRING, _ARRAY = 8, 9


def metadata_value(path: str | Path, key: str) -> Any:
    """The value of `key` in the GGUF file's metadata, or None when the file lacks it or is not
    a GGUF file this reader understands."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"GGUF" or _read(f, "I") not in (2, 3):
                return None
            _read(f, "Q")  # tensor count
            for _ in range(_read(f, "Q")):
                name = _string(f)
                kind = _read(f, "I")
                if name == key:
                    return _value(f, kind)
                _skip(f, kind)
    except (OSError, struct.error, ValueError, UnicodeDecodeError, OverflowError):
        return None
    return None


def _read(f: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize("<" + fmt)
    data = f.read(size)
    if len(data) != size:
        raise ValueError("truncated GGUF header")
    return struct.unpack("<" + fmt, data)[0]


MAX_STRING = 1 << 24  # bytes of one metadata string (a chat template is a few thousand)


def _string(f: BinaryIO) -> str:
    n = _read(f, "Q")
    if n > MAX_STRING:
        raise ValueError(f"a string of {n:,} bytes")
    data = f.read(n)
    if len(data) != n:
        raise ValueError("truncated GGUF header")
    return data.decode("utf-8")


def _value(f: BinaryIO, kind: int) -> Any:
    if kind in _SCALARS:
        return _read(f, _SCALARS[kind])
    if kind == _STRING:
        return _string(f)
    if kind == _ARRAY:
        item, n = _read(f, "I"), _read(f, "Q")
        return [_value(f, item) for _ in range(n)]
    raise ValueError(f"unknown GGUF value type {kind}")


def _skip(f: BinaryIO, kind: int) -> None:
    if kind in _SCALARS:
        f.seek(struct.calcsize("<" + _SCALARS[kind]), 1)
    elif kind == _STRING:
        f.seek(_read(f, "Q"), 1)
    elif kind == _ARRAY:
        item, n = _read(f, "I"), _read(f, "Q")
        if item in _SCALARS:
            f.seek(n * struct.calcsize("<" + _SCALARS[item]), 1)
        else:
            for _ in range(n):
                _skip(f, item)
    else:
        raise ValueError(f"unknown GGUF value type {kind}")


class NotGguf(ValueError):
    """The file is not a GGUF file this reader understands (why is the message)."""


def header(path: str | Path) -> dict[str, Any]:
    """Every number and string of a GGUF file's metadata, by key (arrays such as the vocabulary
    are skipped), with `GGUF.version` and `GGUF.tensor_count`. Raises NotGguf for a file that
    is not GGUF, of a version this reader does not know, or cut short inside its metadata."""
    try:
        with open(path, "rb") as f:
            return _metadata(f)
    except (struct.error, ValueError, UnicodeDecodeError, OverflowError) as exc:
        if isinstance(exc, NotGguf):
            raise
        raise NotGguf(f"its GGUF metadata is damaged or cut short ({exc})") from None


def _metadata(f: BinaryIO) -> dict[str, Any]:
    """header(), read from `f` at its start; `f` is left at the tensor table that follows."""
    if f.read(4) != b"GGUF":
        raise NotGguf("not a GGUF file (it does not begin with GGUF)")
    version = _read(f, "I")
    if version not in (2, 3):
        raise NotGguf(f"GGUF version {version} is not one this reader knows (2, 3)")
    out: dict[str, Any] = {"GGUF.version": version, "GGUF.tensor_count": _read(f, "Q")}
    for _ in range(_read(f, "Q")):
        name = _string(f)
        kind = _read(f, "I")
        if kind == _ARRAY:
            _skip(f, kind)
        else:
            out[name] = _value(f, kind)
    return out


def damage(path: str | Path, first: bool = True) -> str:
    """Why llama.cpp could not load the GGUF file at `path` ("" when it could, as far as its
    layout tells): not GGUF, metadata cut short, no `general.architecture` (in a model's
    `first` file: a split model's later parts hold only their tensors), or tensor data that
    ends past the end of the file (a download cut short). Reads the metadata and the tensor
    table only, skipping the vocabulary arrays (gguf's GGUFReader parses every token of them
    into numpy views: 5 s for a 250,000-word vocabulary on a 2-core VM)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        with open(path, "rb") as f:
            meta = _metadata(f)
            if first and "general.architecture" not in meta:
                return "no general.architecture key"
            align = meta.get("general.alignment")
            align = align if isinstance(align, int) and align > 0 else 32
            end = 0
            for _ in range(meta["GGUF.tensor_count"]):
                _string(f)
                shape = [_read(f, "Q") for _ in range(_read(f, "I"))]
                kind, offset = _read(f, "I"), _read(f, "Q")
                if kind not in GGMLQuantizationType._value2member_map_:
                    continue  # newer than this gguf package: its size is not known here
                block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
                count = 1
                for n in shape:
                    count *= n
                end = max(end, offset + count // block * size)
            start = -(-f.tell() // align) * align
            have = Path(path).stat().st_size
    except NotGguf as exc:
        return str(exc)
    # (a damaged length can also overflow a seek or ask for more memory than there is)
    except (struct.error, ValueError, KeyError, UnicodeDecodeError, OSError, OverflowError,
            MemoryError) as exc:
        return f"its GGUF header is damaged or cut short ({exc})"
    if start + end > have:
        return (f"the file is cut short: its tensors end at byte {start + end:,}, "
                f"the file has {have:,}")
    return ""


def split_parts(path: Path) -> tuple[Path, ...]:
    """The files of the model whose first (or only) file is `path`."""
    m = SPLIT.match(path.name)
    if m is None:
        return (path,)
    count = int(m.group("count"))
    return tuple(path.with_name(f"{m.group('prefix')}-{i:05d}-of-{count:05d}.gguf")
                 for i in range(1, count + 1))
