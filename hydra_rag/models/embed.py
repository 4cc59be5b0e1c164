"""Embedding client: batches, document/query prefixes, L2-normalised float32 vectors, and a
token guard so no text longer than the embedder's context is ever sent.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from hydra_rag.catalog import EMBED_PORTS, Embedder
from hydra_rag.config import Settings
from hydra_rag.errors import EmbedError
from hydra_rag.models.endpoint import Auth, JsonEndpoint, KeyEnv
from hydra_rag.models.gguf import metadata_value
from hydra_rag.models.pool import Pool
from hydra_rag.models.sidecar import SidecarSpec, ensure, read_record, restarter
from hydra_rag.models.sidecar_key import SidecarKey

_QUIET: list[object] = []


def quiet_llama() -> None:
    """Silence llama.cpp's own logging in this process (it writes to stderr directly)."""
    if _QUIET:
        return
    import ctypes

    import llama_cpp

    @llama_cpp.llama_log_callback
    def _drop(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        return None

    _QUIET.append(_drop)  # keep a reference: llama.cpp calls it later
    llama_cpp.llama_log_set(_drop, ctypes.c_void_p(0))


# llama-cpp-python silences a quiet load by pointing file descriptors 1 and 2 at /dev/null and
# back. Two loads at once (two embedders' clients made in the search thread pool) interleave
# those swaps, and the process was left writing its stdout to /dev/null: `search` printed
# nothing when the code and prose tables had different embedders. One load at a time.
_LOAD = threading.Lock()


class Tokenizer:
    """Counts tokens exactly with the embedder's own vocabulary (llama.cpp, vocab only). The
    vocabulary is loaded on the first count: a search only prepares its query, which needs
    just the tokenizer's kind, read from the file's header."""

    def __init__(self, model_path: str) -> None:
        self.model_path = model_path
        # llama.cpp's Unigram tokenizer reads a newline or a tab as an unknown token, where
        # SentencePiece's own normaliser makes every whitespace run one space.
        kind = metadata_value(model_path, "tokenizer.ggml.model")
        self.unigram = kind == "t5" if kind is not None else self._llm.metadata.get(
            "tokenizer.ggml.model") == "t5"

    @cached_property
    def _llm(self) -> Any:
        import llama_cpp

        quiet_llama()
        with _LOAD:
            # A small context: llama-cpp-python sizes a logits array by n_batch × vocabulary
            # even when it only tokenizes (512 × 250,002 floats for multilingual-e5).
            return llama_cpp.Llama(self.model_path, vocab_only=True, n_ctx=16, n_batch=16,
                                   verbose=False)

    def prepare(self, text: str) -> str:
        """The text as the model's tokenizer expects it."""
        return " ".join(text.split()) if self.unigram else text

    def count(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))


class OnnxTokenizer:
    """The tokenizer an ONNX embedder carries (convert_onnx), loaded on the first count;
    counted as `Tokenizer` counts ([CLS] and [SEP] included), so texts are cut the same."""

    unigram = False

    def __init__(self, model_path: str) -> None:
        self.model_path = model_path

    @cached_property
    def _tok(self) -> Any:
        from hydra_rag.models.convert_onnx import carried_tokenizer, read_meta

        return carried_tokenizer(read_meta(Path(self.model_path)))

    def prepare(self, text: str) -> str:
        return text

    def count(self, text: str) -> int:
        return len(self._tok.encode(text).ids)


def tokenizer_for(emb: Embedder) -> Tokenizer | OnnxTokenizer | None:
    """The counting tokenizer of an embedder's model file, by its backend; None without the
    file."""
    path = emb.model_path()
    if path is None or not path.is_file():
        return None
    return OnnxTokenizer(str(path)) if emb.backend == "onnx" else Tokenizer(str(path))


@dataclass
class EmbedClient:
    """Talks to one OpenAI-compatible /v1/embeddings endpoint for one catalog embedder."""

    embedder: Embedder
    base_url: str
    model_name: str
    batch: int = 64
    tokenizer: Tokenizer | OnnxTokenizer | None = None
    sidecar_id: str | None = None
    restart: Callable[[], str] | None = None  # brings a crashed sidecar back (its new URL)
    auth: Auth | None = None  # a remote endpoint's key, or our sidecars'
    more_urls: tuple[str, ...] = ()  # other servers of the same model: a pool (hydra_rag.models.pool)

    @property
    def dims(self) -> int:
        return self.embedder.dims

    @cached_property
    def _http(self) -> JsonEndpoint:
        return JsonEndpoint(self.base_url, self.sidecar_id, error=EmbedError, restart=self.restart,
                            auth=self.auth)

    @cached_property
    def _endpoints(self) -> list[JsonEndpoint]:
        return [self._http, *(JsonEndpoint(u, error=EmbedError, auth=self.auth)
                              for u in self.more_urls)]

    @cached_property
    def pool(self) -> Pool[list[str], list[list[float]]] | None:
        """The servers batches are spread over, when there are several (None: one)."""
        if not self.more_urls:
            return None
        return Pool([e.base_url for e in self._endpoints],
                    lambda e, part: self._post(part, self._endpoints[e]), size=len)

    def token_limit(self) -> int:
        return self.embedder.max_tokens

    def tokens(self, text: str) -> int:
        """The tokens the embedder reads for a document text: its prefix, the text as the
        model's tokenizer prepares it, and the separator llama.cpp appends."""
        full = self.embedder.document_prefix + self._prepare(text)
        if self.tokenizer is not None:
            return self.tokenizer.count(full) + 1
        # Without the tokenizer, assume the worst common case: one token per UTF-8 byte
        # pair. Rarely binding for English, protective for scripts with long encodings.
        return math.ceil(len(full.encode("utf-8")) / 2) + 2

    def fits(self, text: str) -> bool:
        """Would the document text (with its prefix) fit the embedder's context?"""
        return self.tokens(text) <= self.token_limit()

    def _prepare(self, text: str) -> str:
        return self.tokenizer.prepare(text) if self.tokenizer is not None else text

    def _post(self, inputs: list[str], http: JsonEndpoint | None = None) -> list[list[float]]:
        http = http or self._http
        raw = http.post("embeddings", {"input": inputs, "model": self.model_name})
        try:
            data = json.loads(raw)["data"]
            data.sort(key=lambda d: d["index"])
            vecs = [d["embedding"] for d in data]
        except (ValueError, KeyError, TypeError):
            raise EmbedError(f"{http.base_url} gave an answer that is not an embeddings list") from None
        if len(vecs) != len(inputs) or any(len(v) != self.dims for v in vecs):
            got = f"{len(vecs)} vectors of {len(vecs[0]) if vecs else 0} dims"
            raise EmbedError(
                f"embedder {self.embedder.id!r} at {http.base_url} returned {got}, expected "
                f"{len(inputs)} of {self.dims} — is `dims` right in its catalog entry?")
        return vecs

    def embed(self, texts: Sequence[str], prefix: str,
              on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        """Vectors (n × dims, float32, unit length) for `texts`, sent in batches (over the
        pool's servers at once, when there are several); `on_batch` hears how many are done
        after each request."""
        parts = [[prefix + self._prepare(t) for t in texts[i : i + self.batch]]
                 for i in range(0, len(texts), self.batch)]
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        if self.pool is not None:
            answers = self.pool.map(parts, on_batch)
        else:
            answers, done = [], 0
            for part in parts:
                answers.append(self._post(part))
                done += len(part)
                if on_batch is not None:
                    on_batch(done)
        i = 0
        for vecs in answers:
            arr = np.asarray(vecs, dtype=np.float32)
            norms = np.linalg.norm(arr, axis=1, keepdims=True)
            norms[norms == 0] = 1.0
            out[i : i + len(arr)] = arr / norms
            i += len(arr)
        return out

    def embed_documents(self, texts: Sequence[str],
                        on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        return self.embed(texts, self.embedder.document_prefix, on_batch)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text], self.embedder.query_prefix)[0]


def sidecar_spec(emb: Embedder, settings: Settings) -> SidecarSpec:
    """How the embedder's local sidecar runs (it must have a model file)."""
    path = emb.model_path()
    assert path is not None
    return SidecarSpec(
        id=emb.id,
        role="embed",
        model_path=str(path),
        port=emb.port,
        port_range=(EMBED_PORTS.start, EMBED_PORTS.stop - 1),
        n_ctx=emb.max_tokens,
        # One ubatch per decode; larger batches make unified attention quadratic in the batch.
        n_batch=emb.max_tokens,
        threads=settings.threads,
        idle_seconds=settings.sidecar_idle_minutes * 60,
        gpu_layers=settings.gpu_layers,
        backend=emb.backend,
    )


def connect(
    emb: Embedder, settings: Settings, progress: Callable[[str], None] | None = None
) -> EmbedClient:
    """An embedding client: a remote URL if configured, else the embedder's local sidecar."""
    auth: KeyEnv | None = None
    if settings.embedder_url:
        # Not the entry's api_key_env: that key belongs to the entry's own url, another host.
        auth = KeyEnv("embedder_url", settings.embedder_api_key_env, "embedder_api_key_env "
                      "(HYDRA_RAG_EMBEDDER_API_KEY_ENV)")
    elif emb.url:
        auth = KeyEnv.of("embedder", emb)
    if auth is not None:
        auth.headers()  # a missing key is named now, before a tokenizer is loaded or a request
    # HYDRA_RAG_EMBEDDER_URL may list several servers, separated by commas, as `urls:` does.
    urls = ([u.strip() for u in settings.embedder_url.split(",") if u.strip()]
            if settings.embedder_url else list(emb.urls or ([emb.url] if emb.url else [])))
    tokenizer = tokenizer_for(emb)
    if urls:
        return EmbedClient(emb, urls[0], emb.id, settings.embed_batch, tokenizer, auth=auth,
                           more_urls=tuple(urls[1:]))
    spec = sidecar_spec(emb, settings)
    if progress and read_record(emb.id) is None:
        progress(f"starting embedder sidecar {emb.id}")
    rec = ensure(spec, timeout=settings.sidecar_start_timeout)
    return EmbedClient(emb, rec.url, emb.id, settings.embed_batch, tokenizer, sidecar_id=emb.id,
                       restart=restarter(spec, settings.sidecar_start_timeout),
                       auth=SidecarKey(f"embedder sidecar {emb.id!r}"))
