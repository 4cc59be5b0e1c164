"""Test tools for pulling models by name: a local server that speaks the part of the Hugging
Face hub's HTTP API huggingface_hub uses to resolve and download a repository's files, and a
GGUF splitter that writes a real model as llama.cpp's split parts.

The server holds repositories of real GGUF files (the project's own test models), and can be
told to misbehave per file: publish a wrong SHA-256, drop the connection part-way through a
download, or require a token (a gated repository, answered as the hub answers)."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from hydra_rag.models.install import sha256_of


def split_gguf(src: Path, dest_dir: Path, prefix: str, parts: int) -> list[Path]:
    """Write the GGUF `src` as `parts` files, PREFIX-0000K-of-0000N.gguf, as llama.cpp's
    gguf-split does (the metadata in the first, the tensors shared out)."""
    import gguf

    reader = gguf.GGUFReader(str(src))
    arch = str(reader.fields["general.architecture"].contents())
    per = -(-len(reader.tensors) // parts)
    dest_dir.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(dest_dir / f"{prefix}.gguf"), arch, split_max_tensors=per)
    for name, f in reader.fields.items():
        if name.startswith(("GGUF.", "split.")) or name == "general.architecture":
            continue
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, f.contents(), vtype, sub_type=sub)
    for t in reader.tensors:
        writer.add_tensor(t.name, t.data, raw_shape=t.data.shape,
                          raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    out = sorted(dest_dir.glob(f"{prefix}-*-of-*.gguf"))
    assert len(out) == parts, out
    return out


@dataclass
class FakeFile:
    data: Path
    sha256: str = ""  # what the API publishes; default the true one
    drop_after: int = 0  # a GET from byte 0 sends this many bytes, then hangs up (0: never)
    cut_at: int = 0  # no GET sends a byte past this offset: each hangs up there (0: never)
    lfs: bool = True  # False: kept in git itself, described by its git blob id
    gets: list[str] = field(default_factory=list)  # the Range header of each GET ("" none)


@dataclass
class FakeRepo:
    files: dict[str, FakeFile]
    token: str = ""  # a gated repository: files need `Authorization: Bearer TOKEN`
    commit: str = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    """`with FakeHub(repos) as hub:` serves on hub.url until the block ends."""

    def __init__(self, repos: dict[str, FakeRepo]) -> None:
        self.repos = repos
        self._hashes: dict[Path, str] = {}
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:  # noqa: N802
                hub._resolve(self, head=True)

            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                if url.path.startswith("/api/models/"):
                    hub._info(self, unquote(url.path[len("/api/models/"):]),
                              "blobs=true" in url.query.lower())
                else:
                    hub._resolve(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _true_hash(self, f: FakeFile) -> str:
        if f.data not in self._hashes:
            self._hashes[f.data] = sha256_of(f.data)
        return self._hashes[f.data]

    def _error(self, h: BaseHTTPRequestHandler, status: int, code: str, msg: str) -> None:
        body = json.dumps({"error": msg}).encode()
        h.send_response(status)
        h.send_header("X-Error-Code", code)
        h.send_header("X-Error-Message", msg)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _git_hash(self, f: FakeFile) -> str:
        h = hashlib.sha1(f"blob {f.data.stat().st_size}\0".encode())
        with f.data.open("rb") as src:
            for block in iter(lambda: src.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    def _info(self, h: BaseHTTPRequestHandler, rest: str, blobs: bool) -> None:
        repo_id = rest.split("/revision/")[0]
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._error(h, 401, "RepoNotFound", "Repository not found")
        siblings: list[dict[str, Any]] = []
        for name, f in repo.files.items():
            sib: dict[str, Any] = {"rfilename": name}
            if blobs:  # sizes and hashes only when asked for, as the hub does
                size = f.data.stat().st_size
                sib.update(size=size, blobId=self._git_hash(f) if not f.lfs else "0" * 40)
                if f.lfs:
                    sib["lfs"] = {"sha256": f.sha256 or self._true_hash(f), "size": size,
                                  "pointerSize": 134}
            siblings.append(sib)
        body = json.dumps({"id": repo_id, "sha": repo.commit, "siblings": siblings,
                           "gated": "manual" if repo.token else False,
                           "private": False}).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _resolve(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        # /OWNER/REPO/resolve/REVISION/PATH
        parts = unquote(urlparse(h.path).path).lstrip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            return self._error(h, 404, "EntryNotFound", "no such route")
        repo = self.repos.get("/".join(parts[:2]))
        if repo is None:
            return self._error(h, 401, "RepoNotFound", "Repository not found")
        if repo.token and h.headers.get("Authorization") != f"Bearer {repo.token}":
            return self._error(h, 403, "GatedRepo", "Access to this model is restricted: you "
                               "must accept its conditions")
        f = repo.files.get("/".join(parts[4:]))
        if f is None:
            return self._error(h, 404, "EntryNotFound", "Entry not found")
        size = f.data.stat().st_size
        start, status = 0, 200
        rng = h.headers.get("Range", "")
        if not head:
            f.gets.append(rng)
        if rng.startswith("bytes=") and not head:
            start = int(rng[6:].split("-")[0] or 0)
            status = 206
        h.send_response(status)
        h.send_header("X-Repo-Commit", repo.commit)
        h.send_header("ETag", f'"{f.sha256 or self._true_hash(f)}"')
        h.send_header("Content-Length", str(size - start))
        if status == 206:
            h.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        h.send_header("Accept-Ranges", "bytes")
        h.end_headers()
        if head:
            return
        limit = f.drop_after if f.drop_after and start == 0 else size
        if f.cut_at:
            limit = min(limit, f.cut_at)
        with f.data.open("rb") as src:
            src.seek(start)
            left = min(size, limit) - start
            while left > 0:
                block = src.read(min(1 << 20, left))
                if not block:
                    break
                h.wfile.write(block)
                left -= len(block)
        if limit < size:
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(2)
