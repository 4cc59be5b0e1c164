"""One settings resolver. Precedence: flag > environment (HYDRA_RAG_*) > user config > defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from hydra_rag.catalog import ENV_NAME, Embedder, get_embedder, looks_like_secret
from hydra_rag.catalog import table_embedder as catalog_table_embedder
from hydra_rag.errors import ConfigError, ModelError, yaml_problem
from hydra_rag.paths import dirs


@dataclass(frozen=True)
class Settings:
    """Everything a run may tune; each field maps to HYDRA_RAG_<FIELD> and a config.yaml key."""

    embedder: str = "minilm-l6"
    code_embedder: str = ""  # empty: use `embedder`
    prose_embedder: str = ""
    # The prose embedder for a folder in a language the chosen one does not know ("off": none)
    foreign_embedder: str = "multilingual-e5-small"
    embedder_url: str = ""  # an OpenAI-compatible /v1/embeddings base URL replacing the sidecar
    # The environment variable holding embedder_url's bearer token (its name, never the key).
    embedder_api_key_env: str = ""
    sidecar_idle_minutes: float = 15.0
    sidecar_start_timeout: float = 120.0
    threads: int = 0  # 0: one per core
    # Model layers on the GPU when llama.cpp was built with a GPU backend: -1 all, 0 CPU only.
    gpu_layers: int = -1
    embed_batch: int = 64  # texts per /v1/embeddings request
    index_batch: int = 512  # chunks per stored batch (what an interruption can lose)
    # Two phases: every file's chunks are stored (names, exact strings, BM25 search them)
    # before any is embedded; the vectors follow, a batch at a time (hydra_rag.index.vectors).
    vectors_later: bool = True
    # Documents (PDF, DOCX, ODT, PPTX, EPUB, RTF, HTML pages): the largest file read, and the
    # time and memory one document's extraction may take before it is skipped.
    max_document_mb: float = 100.0
    document_timeout: float = 60.0  # seconds
    document_memory_mb: int = 2048
    # Pages without a text layer (scans) and images named by --include are read by OCR with
    # Tesseract (`ocr_command`), in these languages: Tesseract's codes joined by + (eng+deu);
    # "off": never. A language needs its data package (apt-get install tesseract-ocr-deu).
    ocr_languages: str = "eng"
    ocr_command: str = "tesseract"
    # Memory a search process may use to hold small tables' vectors and rows (0: none); see
    # retrieve.Searcher for why.
    search_cache_mb: int = 128
    # Where a new index puts its tables, when not in .hydra-index/: a URI LanceDB opens
    # (s3://bucket/prefix; endpoint, region and keys from AWS_* variables). Read when an index
    # is first made or rebuilt (`index --full`); an index keeps its tables where they are.
    tables_uri: str = ""
    # What reads, chunks and embeds an index run's changed files: `local` (this process and
    # its sidecars) or `ray` (a Ray Data job on the cluster at `ray_address`; "" starts a Ray
    # of this machine's own; hydra_rag.index.ray_engine). Needs `pip install 'hydra-rag[ray]'`.
    engine: str = "local"
    ray_address: str = ""
    # The chat model (or bundle alias) `ask` and `chat` use when none is named.
    default_model: str = "smollm2-135m"
    context_model: str = "smollm2-135m"  # the chat model `index --contextualize` uses
    fusion: str = "score"  # how hybrid lists are fused: score (weighted, normalised) or rrf
    literal: bool = True  # chunks holding the query as typed come first (score fusion)
    # A query that names a symbol (`Session.send`, "where is X defined") gets the chunks of its
    # definitions first (hydra_rag.search.definitions)
    definitions: bool = True
    # Ranking signals for code (hydra_rag.search.signals, central), each measured alone in
    # bench/code_search.py: a question in words weighs the literal list less (rank_kind);
    # tests, examples, benchmarks, vendored code and documentation come after the
    # implementation unless asked for (rank_aside); the question's words in a file's path
    # (rank_paths); how central a file is in the graph of uses (rank_central); a name inside a
    # question brings its definition (rank_names); the question's words in the names a file
    # defines (rank_map).
    rank_kind: bool = True
    rank_aside: bool = True
    rank_paths: bool = True
    rank_central: bool = False  # measured: no help on bench/code_search.py (BENCHMARKS.md)
    rank_names: bool = True
    rank_bodies: bool = True  # search --files: a header's implementation just before it
    rank_map: bool = False  # measured: lost 0.02 nDCG@10 on CoSQA, no help on code_search
    rerank: bool = False  # reorder the first `rerank_top` fused candidates with `reranker`
    reranker: str = "ms-marco-minilm-l12"
    rerank_top: int = 20  # candidates the reranker reads per search (1-100)
    # Prompt tokens the retrieved passages may take in a chat turn; each is narrowed to the
    # lines around its best matches (0: whole chunks). See hydra_rag.answer.budget.
    context_tokens: int = 600
    # The share of context_tokens the best passage (and a definition the question names) may
    # take before the others; each passage takes half of what is left (budget.DECAY), so 0
    # gives the best passage half of it too.
    context_lead: float = 0.5
    # Each narrowed passage keeps the line that opens the definition its lines stand in, and
    # the first line of that definition's docstring or comment.
    context_heads: bool = True
    # A passage that names a constant, variable or macro defined in a few lines elsewhere is
    # sent with that definition (hydra_rag.answer.follow), within context_tokens.
    context_follow: bool = True
    # A narrowed passage's best line is sent with the whole definition it stands in (the
    # symbol table's span), when that fits the passage's share.
    context_scope: bool = True
    # The passages are the best `top_k` of the first context_pool hits, ranked by their fused
    # score and how well their best line holds the question's words (budget.by_lines); 0 or
    # at most top_k: the first top_k hits as search ranks them.
    context_pool: int = 10
    # In a conversation (the chat REPL), the chat sidecar evaluates the turns so far while the
    # answer is read, so that the next turn's prompt evaluates only its passages and question.
    chat_warm: bool = True
    # Earlier turns a chat prompt carries: -1, as the chat model's catalog entry says (`turns`);
    # 0 or more, that many of the latest at most.
    chat_turns: int = -1
    # How a follow-up ("where is it defined?") is searched: "carry" puts the subject of the
    # question before it into the query; "off" searches it as typed (with the question before).
    follow_up: str = "carry"
    # Minutes a warm background process (hydra_rag.warm) keeps the quick commands (search,
    # get, def, refs, outline) fast after the last one; it starts on first use (0: never).
    warm_minutes: float = 10.0
    # Paths in `search` output on a terminal are links that open the file (OSC 8): auto (on a
    # terminal whose TERM is not known to show the codes as text), on or off.
    hyperlinks: str = "auto"
    # Who may read a folder's .hydra-index (hydra_rag.store.access): auto (only this user when
    # a file in it is one others cannot read, else as the files are), private or shared.
    index_access: str = "auto"

    def embedder_for(self, table: str) -> str:
        """The embedder id chosen for the `code` or `prose` table."""
        specific = self.code_embedder if table == "code" else self.prose_embedder
        return specific or self.embedder

    @property
    def foreign(self) -> str:
        """`foreign_embedder`, or "" when it is off."""
        return "" if self.foreign_embedder.lower() in ("", "off", "none") else self.foreign_embedder


def config_path() -> Path:
    return dirs().config / "config.yaml"


def _coerce(name: str, raw: Any, target: type, origin: str) -> Any:
    try:
        if target is bool:
            if isinstance(raw, str):
                return raw.strip().lower() in ("1", "true", "yes", "on")
            return bool(raw)
        return target(raw)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{origin}: {name} must be {target.__name__}, got {raw!r}"
        ) from None


def load_settings(**flags: Any) -> Settings:
    """Resolve settings; `flags` holds command-line values, None meaning "not given"."""
    settings = Settings()
    types = {f.name: type(getattr(settings, f.name)) for f in fields(Settings)}
    path = config_path()
    if path.is_file():
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({yaml_problem(exc)}) — fix or remove "
                              "that file") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: expected a mapping of setting: value")
        for key, value in doc.items():
            if key not in types and looks_like_secret(str(key)):
                raise ConfigError(f"{path}: setting {key!r} would hold a key; never store a "
                                  "key in a config file: put it in an environment variable and "
                                  "name that variable in 'embedder_api_key_env'")
            if key not in types:
                raise ConfigError(f"{path}: unknown setting {key!r} (known: {', '.join(types)})")
            settings = replace(settings, **{key: _coerce(key, value, types[key], str(path))})
    for name, target in types.items():
        env = os.environ.get(f"HYDRA_RAG_{name.upper()}")
        if env is not None and env != "":
            settings = replace(
                settings, **{name: _coerce(name, env, target, f"HYDRA_RAG_{name.upper()}")}
            )
    for name, value in flags.items():
        if value is not None:
            settings = replace(settings, **{name: _coerce(name, value, types[name], f"--{name}")})
    _check_key_env(settings)
    _check_answering(settings)
    if settings.engine not in ENGINES:
        raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, not {settings.engine!r}")
    if settings.index_access not in INDEX_ACCESS:
        raise ConfigError(f"index_access must be one of {', '.join(INDEX_ACCESS)}, "
                          f"not {settings.index_access!r}")
    return settings


def origin(name: str, value: Any) -> str:
    """Where setting `name` got `value`, for a message that says what to change: its
    environment variable, config.yaml, else the option of the same name (a default is never
    the culprit)."""
    env = f"HYDRA_RAG_{name.upper()}"
    if os.environ.get(env) == str(value):
        return f"{env}={value}"
    path = config_path()
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, yaml.YAMLError):
        doc = None
    if isinstance(doc, dict) and doc.get(name) == value:
        return f"`{name}: {value}` in {path}"
    return f"--{name.replace('_', '-')}"


# The smallest share of context_tokens a passage is given (hydra_rag.answer.budget): a smaller
# budget would send no passage at all.
SMALLEST_SHARE = 96
FOLLOW_UPS = ("carry", "rewrite", "off")
INDEX_ACCESS = ("auto", "private", "shared")
ENGINES = ("local", "ray")


def _check_answering(settings: Settings) -> None:
    """The chat's settings, checked before a sidecar starts."""
    if settings.follow_up not in FOLLOW_UPS:
        raise ConfigError(f"follow_up must be one of {', '.join(FOLLOW_UPS)}, "
                          f"not {settings.follow_up!r}")
    if not 0.0 <= settings.context_lead < 1.0:
        raise ConfigError(f"context_lead must be a share from 0 up to (not including) 1, "
                          f"not {settings.context_lead}")
    if settings.chat_turns < -1:
        raise ConfigError(f"chat_turns must be -1 (as the model says) or a number of turns, "
                          f"not {settings.chat_turns}")
    if settings.context_tokens < 0 or 0 < settings.context_tokens < SMALLEST_SHARE:
        raise ConfigError(f"context_tokens must be 0 (whole chunks) or at least "
                          f"{SMALLEST_SHARE} (one passage's smallest share), "
                          f"not {settings.context_tokens}")
    if not 0 <= settings.context_pool <= 100:
        raise ConfigError(f"context_pool must be a number of hits from 0 to 100, "
                          f"not {settings.context_pool}")


def _check_key_env(settings: Settings) -> None:
    """embedder_api_key_env names a variable (the message never quotes it: it may be a pasted
    key) and comes with the embedder_url it authenticates."""
    name = settings.embedder_api_key_env
    if not name:
        return
    if not ENV_NAME.fullmatch(name):
        raise ConfigError("embedder_api_key_env must be the name of an environment variable in "
                          "capitals, digits and _ (like TEAM_EMBEDDER_KEY), never the key itself")
    if not settings.embedder_url:
        raise ConfigError("embedder_api_key_env names the key of embedder_url, which is not set "
                          "(a catalog entry's url: takes its own api_key_env)")


def chosen_embedder(settings: Settings, table: str) -> Embedder:
    """The embedder the settings choose for the `code` or `prose` table; an unknown id names
    the setting (and where it was set) as well as the known ids, so that every command that
    reads it — index, status, search, ask — fails with the same line."""
    name = f"{table}_embedder" if getattr(settings, f"{table}_embedder", "") else "embedder"
    try:
        return get_embedder(settings.embedder_for(table))
    except ModelError as exc:
        raise ModelError(f"{exc} — change {origin(name, getattr(settings, name))}") from None


def table_embedder(settings: Settings, table: str, language: str | None) -> Embedder:
    """catalog.table_embedder, with an unknown chosen id said as `chosen_embedder` says it."""
    chosen_embedder(settings, table)
    return catalog_table_embedder(settings, table, language)
