"""The on-disk index beside the files: `.hydra-index/` with two LanceDB tables (`code`, `prose`),
`meta.yaml` (versions, which embedder built each table) and `files.db` (what is indexed, see
hydra_rag.store.filelist).

The tables, files.db and the journal form a generation. Generation 0 lives in `.hydra-index/`
itself (`lance/`, `files.db`: every index until its first rebuild); generation N in
`.hydra-index/gen-N/`. `meta.yaml` says which one is in use: a rebuild builds the next
generation beside it and switches by replacing meta.yaml (see hydra_rag.store.rebuild).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hydra_rag.errors import HydraError, IndexError_, MetaCorrupt, yaml_problem
from hydra_rag.locks import write_atomic
from hydra_rag.paths import INDEX_DIR
from hydra_rag.read.chunk import CHUNKER_VERSION
from hydra_rag.store.filelist import FILES_DB, LEGACY_JSON, FileEntry, FileList
from hydra_rag.store.symbols import Parsed

# 2: a `lex` column (the analysed text, see lexical.py) carries the full-text index; a
# format-1 index is migrated in place (re-analysed, never re-embedded).
# 3: a `section` column (the headings a chunk stands under, see chunk.py).
# 4: files.db (hydra_rag.store.filelist) instead of files.json; a format-3 index is migrated in place
# (its files.json moved). The number changes so that an older hydra-rag still running (a
# watch, say) rebuilds the index rather than take a missing files.json for an empty folder.
FORMAT_VERSION = 4
MIGRATED_FORMATS = (1, 3)
TABLES = ("code", "prose")
FTS_COLUMN = "lex"
FTS_INDEX = "lex_idx"
# Past this many rows a table gets an approximate vector index: exact search through LanceDB
# passes 20 ms at about 25,000 rows here, and tables up to 20,000 are searched in memory
# (BENCHMARKS.md "Scale"). Below half of it the index is dropped.
VECTOR_INDEX = "vector_idx"
ANN_ROWS = 25_000
# Trained again once the table has grown by this share since: at a million rows, folding 20%
# new rows into the index (optimize) took longer than a new build and lost recall.
RETRAIN_GROWTH = 0.2
# Queries on an indexed table look into this many partitions and re-rank this many times the
# rows asked for by their exact vectors: recall@10 against exact search stays at or above 0.99.
NPROBES = 20
REFINE_FACTOR = 10
GEN_PREFIX = "gen-"
# Generation 0's part of .hydra-index/.
GEN0_ENTRIES = ("lance", FILES_DB, FILES_DB + "-journal", LEGACY_JSON, "journal", "documents.json",
                "tables.uri")
# In a generation's folder: the URI of its tables when they are not in its `lance/` folder
# (the `tables_uri` setting, e.g. an s3:// bucket; see docs/SCALE.md "The smallest piece").
TABLES_URI = "tables.uri"
_META_EMBEDDER = b"hydra.embedder"
_META_DIMS = b"hydra.dims"


@dataclass(frozen=True)
class Marker:
    """What `rebuild.json` says: which generation is being built, by whom, since when, why."""

    generation: int
    pid: int
    started: str
    reason: str
    # Built from the folder's files alone, nothing copied from the index in use: a run that
    # would build the same generation may resume it (see hydra_rag.store.rebuild.unfinished).
    fresh: bool = False

    def running(self) -> bool:
        """Whether the process that writes it is still alive (a dead one was interrupted)."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # alive, another user's
            return True
        return True


def marker(store: Store) -> Marker | None:
    """The rebuild marker of a folder's index (see hydra_rag.store.rebuild), if there is one
    (one failed open if not)."""
    try:
        raw = json.loads(store.rebuild_path.read_text(encoding="utf-8"))
        return Marker(int(raw["generation"]), int(raw["pid"]), str(raw["started"]),
                      str(raw.get("reason", "")), raw.get("fresh") is True)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return None  # torn or foreign: the next index run removes it


def sql_str(value: str) -> str:
    """A SQL string literal (LanceDB filters), quotes doubled."""
    return "'" + value.replace("'", "''") + "'"


def _in_list(column: str, values: Iterable[str]) -> str:
    return f"{column} IN ({', '.join(sql_str(v) for v in values)})"


def in_list(column: str, values: Iterable[str] | None) -> str | None:
    """`column IN (…)` for a LanceDB filter; None (no filter) when `values` is None; a filter
    that keeps nothing when it is empty."""
    if values is None:
        return None
    values = sorted(values)
    return _in_list(column, values) if values else "false"


class Store:
    """One folder's index: the generation meta.yaml names, or a given one (`staged`: a
    generation being built, whose meta.yaml waits in its own folder until the switch).
    Cheap to construct: nothing is opened until it is needed."""

    def __init__(self, root: Path, generation: int | None = None, staged: bool = False) -> None:
        self.root = root
        self.dir = root / INDEX_DIR
        self._generation = generation  # None: the one meta.yaml names, read when first needed
        self.staged = staged
        self._db: Any = None
        self._tables: dict[str, Any] = {}

    # -- generations -------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """The generation this store reads and writes."""
        if self._generation is None:
            try:
                self.read_meta()  # sets it
            except IndexError_:
                pass
            if self._generation is None:
                # No meta.yaml, or a corrupt one: the newest generation that is not being built.
                m = marker(self)
                done = [g for g in self.generations() if m is None or g != m.generation]
                self._generation = done[-1] if done else 0
        return self._generation

    def generations(self) -> list[int]:
        """The generations present on disk, in order (whole or not)."""
        found = []
        try:
            names = {e.name for e in os.scandir(self.dir)}
        except OSError:
            return []
        if any(n in names for n in GEN0_ENTRIES):
            found.append(0)
        for n in names:
            if n.startswith(GEN_PREFIX) and n[len(GEN_PREFIX):].isdigit():
                found.append(int(n[len(GEN_PREFIX):]))
        return sorted(found)

    def generation_dir(self, generation: int) -> Path:
        return self.dir if generation == 0 else self.dir / f"{GEN_PREFIX}{generation}"

    def remove_generation(self, generation: int) -> int:
        """Delete a generation's tables and files (never meta.yaml); returns the bytes freed."""
        if generation == 0:
            paths = [self.dir / n for n in GEN0_ENTRIES]
        else:
            paths = [self.generation_dir(generation)]
        freed = 0
        elsewhere = Store(self.root, generation, staged=True)
        if elsewhere.remote:  # its tables first: the local file is what names them
            for name in elsewhere.table_names():
                elsewhere.db.drop_table(name)
        for p in paths:
            if p.is_dir() and not p.is_symlink():
                freed += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
                shutil.rmtree(p)
            elif p.exists() or p.is_symlink():
                freed += p.stat().st_size if p.exists() else 0
                p.unlink()
        return freed

    # -- files on the side -------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        """Where this store's generation keeps its tables, files.db and journal."""
        return self.generation_dir(self.generation)

    @property
    def meta_path(self) -> Path:
        return self.data_dir / "meta.yaml" if self.staged else self.dir / "meta.yaml"

    @property
    def files_path(self) -> Path:
        """files.db (see hydra_rag.store.filelist); its mtime changes with every recorded batch."""
        return self.data_dir / FILES_DB

    @property
    def lance_uri(self) -> str:
        """Where this generation's tables are: its `lance/` folder, or the URI its
        `tables.uri` names."""
        try:
            uri = (self.data_dir / TABLES_URI).read_text(encoding="utf-8").strip()
        except OSError:
            uri = ""
        return uri or str(self.lance_path)

    @property
    def remote(self) -> bool:
        return self.lance_uri != str(self.lance_path)

    def place_tables(self, base: str) -> str:
        """Put this generation's tables under `base` (a URI LanceDB opens, e.g. s3://bucket/x)
        instead of its `lance/` folder: under a new random key and the generation, so that
        folders and generations never share tables. Before any table exists. (A copy
        of the folder, `.hydra-index/` with it, names the same tables: index the copy with
        `--full`.)"""
        assert not self.table_names(), "a generation's tables stay where they were made"
        # A new name each time: an index deleted and made again, or a folder of the same path
        # on another machine, never finds tables it did not make.
        key = secrets.token_hex(8)
        uri = f"{base.rstrip('/')}/{self.root.name or 'root'}-{key}/gen-{self.generation}"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.data_dir / TABLES_URI, uri + "\n")
        self._db = None
        self._tables.clear()
        return uri

    @property
    def lance_path(self) -> Path:
        return self.data_dir / "lance"

    @property
    def journal_path(self) -> Path:
        """Present while a run is changing the index; found at start, it means "repair"."""
        return self.data_dir / "journal"

    @property
    def lock_path(self) -> Path:
        return self.dir / "lock"

    @property
    def rebuild_path(self) -> Path:
        """Present while a new generation is being built (see hydra_rag.store.rebuild)."""
        return self.dir / "rebuild.json"

    def exists(self) -> bool:
        return self.meta_path.is_file() or bool(self.generations())

    def read_meta(self) -> dict[str, Any]:
        """meta.yaml as a dict; {} if absent. Raises IndexError_ if it is corrupt."""
        if not self.meta_path.is_file():
            return {}
        try:
            meta = yaml.safe_load(self.meta_path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise MetaCorrupt(self.meta_path, yaml_problem(exc), self.root) from None
        if not isinstance(meta, dict) or not isinstance(meta.get("tables", {}), dict):
            raise MetaCorrupt(self.meta_path, "not a mapping with 'tables'", self.root)
        generation = meta.get("generation", 0)
        if not isinstance(generation, int) or generation < 0:
            raise MetaCorrupt(self.meta_path, f"generation {generation!r}", self.root)
        if self._generation is None:
            self._generation = generation
        return meta

    def write_meta(self, meta: dict[str, Any]) -> None:
        """meta.yaml, naming this store's generation (left out for 0, as before generations)."""
        meta = {k: v for k, v in meta.items() if k != "generation"}
        if self.generation:
            meta["generation"] = self.generation
        self.meta_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.meta_path, yaml.safe_dump(meta, sort_keys=False))

    @property
    def file_list(self) -> FileList:
        return FileList(self.data_dir)

    def read_files(self) -> dict[str, FileEntry]:
        """What the index records of each file; {} if nothing. IndexError_ if it is corrupt."""
        return self.file_list.read()

    def write_files(self, files: dict[str, FileEntry]) -> None:
        """Replace the whole record (a repair, a new generation)."""
        self.file_list.write(files)

    def update_files(self, put: dict[str, FileEntry], drop: Iterable[str] = (),
                     symbols: dict[str, Parsed] | None = None) -> None:
        """Record these files and forget those: what a stored batch changed, and no more;
        with the symbols of the files read again."""
        self.file_list.update(put, drop, symbols)

    def read_documents(self) -> dict[str, dict[str, Any]]:
        return self.file_list.read_documents()

    # -- tables --------------------------------------------------------------------------

    @property
    def db(self) -> Any:
        if self._db is None:
            from hydra_rag.store.lance import lancedb

            self.data_dir.mkdir(parents=True, exist_ok=True)
            # A remote store's endpoint, region and keys come from the environment
            # (AWS_ENDPOINT, AWS_REGION, AWS_ACCESS_KEY_ID…), as LanceDB reads them.
            self._db = lancedb().connect(self.lance_uri)
        return self._db

    def table_names(self) -> list[str]:
        if self.remote:  # a request to the store
            try:
                listed = set(self.db.list_tables().tables)
            except Exception as exc:  # LanceDB raises several types for a store it cannot reach
                raise HydraError(f"cannot list the tables at {self.lance_uri}: {exc}") from None
            return [t for t in TABLES if t in listed]
        lance = self.lance_path
        if not lance.is_dir():
            return []
        return [t for t in TABLES if (lance / f"{t}.lance").is_dir()]

    def table(self, name: str) -> Any | None:
        """The LanceDB table, or None if it was never created."""
        if name in self._tables:
            return self._tables[name]
        if name not in self.table_names():
            return None
        try:
            tbl = self.db.open_table(name)
        except Exception as exc:  # LanceDB raises several types for a damaged table
            raise IndexError_(
                f"table {name!r} in {self.data_dir} cannot be opened ({exc}); "
                f"run `hydra-rag index {self.root} --full`"
            ) from None
        self._tables[name] = tbl
        return tbl

    def table_embedder(self, name: str) -> tuple[str, int] | None:
        """(embedder id, dims) recorded in a table's own schema — a second copy of meta.yaml."""
        tbl = self.table(name)
        if tbl is None:
            return None
        md = tbl.schema.metadata or {}
        if _META_EMBEDDER not in md:
            return None
        return md[_META_EMBEDDER].decode(), int(md.get(_META_DIMS, b"0"))

    def create_table(self, name: str, embedder_id: str, dims: int,
                     fts_options: dict[str, Any], data: Any = None) -> Any:
        """A new, empty table (or one holding the Arrow table `data`) with its FTS index."""
        tbl = self.db.create_table(name, data=data, schema=self.schema(embedder_id, dims),
                                   mode="overwrite")
        self._tables[name] = tbl
        self.ensure_fts(name, fts_options, replace=True)
        return tbl

    @staticmethod
    def schema(embedder_id: str, dims: int) -> Any:
        import pyarrow as pa

        return pa.schema(
            [
                pa.field("id", pa.string()),
                pa.field("path", pa.string()),
                pa.field("kind", pa.string()),
                pa.field("line_start", pa.int32()),
                pa.field("line_end", pa.int32()),
                pa.field("hash", pa.string()),
                pa.field("text", pa.string()),
                pa.field("section", pa.string()),
                pa.field(FTS_COLUMN, pa.string()),
                pa.field("vector", pa.list_(pa.float32(), dims)),
            ],
            metadata={_META_EMBEDDER: embedder_id.encode(), _META_DIMS: str(dims).encode()},
        )

    def reanalyse(self, name: str, analyse: Any, fts_options: dict[str, Any],
                  source: Store | None = None) -> int:
        """Write table `name` from the rows of `source`'s (default: this store's own) with its
        `lex` column recomputed by `analyse(text, path, section)` and a new FTS index — vectors
        are kept, nothing is re-embedded. One overwrite commit: a crash leaves either the old
        table or the new one. Returns the number of rows."""
        import pyarrow as pa

        src = source or self
        recorded = src.table_embedder(name)
        if recorded is None:
            raise IndexError_(f"table {name!r} in {src.data_dir} does not say which embedder "
                              "built it")
        has_section = src.has_column(name, "section")  # not in a format-1 table
        data = src.scan(name, ["id", "path", "kind", "line_start", "line_end", "hash", "text",
                               *(["section"] if has_section else []), "vector"])
        at = data.schema.get_field_index("vector")
        if not has_section:
            data = data.add_column(at, "section", pa.array([""] * data.num_rows, pa.string()))
            at += 1
        lex = pa.array([analyse(*row) for row in zip(data.column("text").to_pylist(),
                                                     data.column("path").to_pylist(),
                                                     data.column("section").to_pylist(),
                                                     strict=True)], pa.string())
        data = data.add_column(at, FTS_COLUMN, lex)
        schema = self.schema(*recorded)
        self.create_table(name, recorded[0], recorded[1], fts_options, data.cast(schema))
        return data.num_rows

    def copy_table(self, source: Store, name: str) -> None:
        """Table `name` of another generation, copied as it is (rows, vectors, FTS index)."""
        if self.remote or source.remote:
            raise HydraError(
                f"the index of {self.root} keeps its tables at {source.lance_uri}, where a new "
                "full-text analysis cannot copy them yet; `hydra-rag index --full` rebuilds it")
        src = source.lance_path / f"{name}.lance"
        if src.is_dir():
            shutil.copytree(src, self.lance_path / f"{name}.lance")
            self._tables.pop(name, None)

    def ensure_fts(self, name: str, fts_options: dict[str, Any], replace: bool = False) -> None:
        """Create the native full-text index on `lex` (if the table has none, or `replace`)."""
        import warnings

        tbl = self.table(name)
        if tbl is None:
            return
        if replace or not any(ix.name == FTS_INDEX for ix in tbl.list_indices()):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # create_fts_index is marked deprecated
                tbl.create_fts_index(FTS_COLUMN, replace=True, with_position=False,
                                     **fts_options)

    def refresh(self, name: str, fts_options: dict[str, Any], trained: int = 0) -> int:
        """Compact the table and bring its indexes up to date with every row: the FTS index,
        and past ANN_ROWS the vector index (`trained`: the rows it was trained on; returns the
        new figure, 0 without one)."""
        from datetime import timedelta

        tbl = self.table(name)
        if tbl is None:
            return 0
        self.ensure_fts(name, fts_options)
        if not tbl.count_rows("vector IS NULL"):  # trained once every chunk has its vector
            trained = self._vector_index(tbl, trained)
        # Keep a few minutes of old versions: a search running right now may still read one.
        # (optimize also adds the rows appended since to the indexes, without retraining.)
        tbl.optimize(cleanup_older_than=timedelta(minutes=5))
        return trained

    @staticmethod
    def _vector_index(tbl: Any, trained: int) -> int:
        """Build the vector index when the table passes ANN_ROWS, train it again when the table
        has grown by RETRAIN_GROWTH since (smaller additions are folded in by optimize), drop
        it below ANN_ROWS / 2."""
        rows = tbl.count_rows()
        has = tbl.index_stats(VECTOR_INDEX) is not None
        if has and rows < ANN_ROWS // 2:
            tbl.drop_index(VECTOR_INDEX)
            return 0
        if rows < ANN_ROWS or (has and trained and rows < (1 + RETRAIN_GROWTH) * trained):
            return trained if has else 0
        from lancedb.index import IvfHnswSq

        tbl.create_index("vector", config=IvfHnswSq(distance_type="dot"), name=VECTOR_INDEX,
                         replace=True)
        return int(rows)

    def vector_index(self, name: str) -> dict[str, Any] | None:
        """The vector index of a table: its type, rows indexed and not yet (None: exact)."""
        tbl = self.table(name)
        stats = tbl.index_stats(VECTOR_INDEX) if tbl is not None else None
        if stats is None:
            return None
        return {"type": stats.index_type, "indexed": int(stats.num_indexed_rows),
                "unindexed": int(stats.num_unindexed_rows)}

    def fts_unindexed(self, name: str) -> int:
        """Rows the FTS index does not cover yet (should be 0 after every run)."""
        tbl = self.table(name)
        if tbl is None:
            return 0
        stats = tbl.index_stats(FTS_INDEX)
        if stats is None:
            return tbl.count_rows()
        return int(stats.num_unindexed_rows)

    def add(self, name: str, rows: list[dict[str, Any]]) -> None:
        """Store rows; a row whose vector is None waits for it (store/vectors.py)."""
        if rows:
            tbl = self.table(name)
            assert tbl is not None
            later = any(r["vector"] is None for r in rows)
            tbl.add(rows, **({"on_bad_vectors": "null"} if later else {}))

    def delete_ids(self, name: str, ids: Iterable[str]) -> None:
        tbl = self.table(name)
        ids = list(ids)
        if tbl is None or not ids:
            return
        for i in range(0, len(ids), 500):
            tbl.delete(_in_list("id", ids[i : i + 500]))

    def id_counts(self, name: str) -> Counter[str]:
        """How many rows carry each chunk id (more than one is a duplicate)."""
        tbl = self.table(name)
        if tbl is None:
            return Counter()
        return Counter(self.scan(name, ["id"]).column("id").to_pylist())

    def has_column(self, name: str, column: str) -> bool:
        tbl = self.table(name)
        return tbl is not None and column in tbl.schema.names

    def scan(self, name: str, columns: list[str]) -> Any:
        """Some columns of every row, as an Arrow table."""
        tbl = self.table(name)
        assert tbl is not None
        return tbl.search().select(columns).limit(None).to_arrow()

    def rows_for_paths(self, name: str, paths: list[str], columns: list[str]) -> list[dict[str, Any]]:
        return self.rows_in(name, "path", paths, columns)

    def rows_in(self, name: str, column: str, values: list[str],
                columns: list[str]) -> list[dict[str, Any]]:
        """The rows whose `column` is one of `values`."""
        if not values or name not in self.table_names():
            return []
        if self.remote:
            tbl = self.table(name)
            assert tbl is not None
            return [row for i in range(0, len(values), 200)
                    for row in tbl.search().where(_in_list(column, values[i : i + 200]))
                    .select(columns).limit(None).to_list()]
        # Read through LanceDB's core alone: a search that shows definitions needs no more.
        from hydra_rag.store.lance_read import read_rows

        wheres = [_in_list(column, values[i : i + 200]) for i in range(0, len(values), 200)]
        try:
            found = read_rows(self.lance_uri, name, wheres, columns)
        except Exception as exc:  # LanceDB raises several types for a damaged table
            raise IndexError_(
                f"table {name!r} in {self.data_dir} cannot be read ({exc}); "
                f"run `hydra-rag index {self.root} --full`"
            ) from None
        rows: list[dict[str, Any]] = found.to_pylist()
        return rows


def new_meta(embedders: dict[str, tuple[str, int]]) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return {
        "format_version": FORMAT_VERSION,
        "chunker_version": CHUNKER_VERSION,
        "tables": {t: {"embedder": e, "dims": d} for t, (e, d) in embedders.items()},
        "created": now,
        "updated": now,
    }
