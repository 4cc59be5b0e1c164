"""The Ray engine (`hydra-rag index --engine ray`, setting `engine: ray`): the changed files of
an index run are read, classified and chunked by Ray Data tasks, and their chunks embedded by
Ray actors that each run hydra-rag's own embedder (its llama.cpp sidecar, or the embedder's
`url:`), so that the vectors are those a local run makes.

What stays the driver's, as in a local run (run.py, batches.py): the walk and its rules, the
diff against files.db, vectors reused by text hash, the journal, the rows written a batch at a
time and files.db after them, the switch of generations. A job that fails or is killed leaves
what the local engine leaves after an interruption: the earlier generation in use, or the
batches stored so far, which the next run keeps and completes.

Ray is an optional dependency (`pip install 'hydra-rag[ray]'`); without it the engine says
so in one line.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pickle
import re
import socket
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra_rag.errors import HydraError
from hydra_rag.index.report import Progress

if TYPE_CHECKING:
    from hydra_rag.catalog import Embedder
    from hydra_rag.config import Settings
    from hydra_rag.index.prepare import Prepared
    from hydra_rag.read.walk import Candidate
    from hydra_rag.store.lexical import Analysis

INSTALL = "pip install 'hydra-rag[ray]'"
# Files per read-and-chunk task, and per call of an embedding actor: small enough that a
# folder of a few hundred files gives every node's actor work.
READ_BATCH = 8
# Ray's logical CPUs a task and an actor ask for: an embedding actor's sidecar uses the node's
# cores itself, and reading waits on the disk; a node of one CPU must fit both.
READ_CPUS = 0.25
EMBED_CPUS = 0.5


def require() -> Any:
    """The `ray` module, or a HydraError that names the one command that installs it."""
    try:
        import ray
        import ray.data  # noqa: F401 - Ray Data is the part the engine needs
    except ImportError:
        raise HydraError(f"the Ray engine (engine: ray) needs Ray, which is not installed: "
                         f"`{INSTALL}`") from None
    return ray


def start(settings: Settings) -> tuple[Any, str]:
    """Ray connected: to the cluster at `ray_address`, or a Ray of this machine started for
    the run. Returns the module and where it runs, in words (with the cluster's dashboard
    when it has one)."""
    ray = require()
    if ray.is_initialized():
        return ray, "the Ray this process was connected to"
    address = settings.ray_address or None
    # Ray Data's progress lines stay off the console: the run says its progress as a local
    # one does.
    for name in ("ray", "ray.data"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"ray\.")  # advice on its own tuning
    if address:
        _answers(address)
    where = f"the Ray cluster at {address}" if address else "a Ray of this machine"
    try:
        context = ray.init(address=address, include_dashboard=False, log_to_driver=False,
                           configure_logging=False, logging_level="ERROR")
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise HydraError(f"could not connect to {where} (setting ray_address): "
                         f"{_first_line(exc)}") from None
    dashboard = getattr(context, "dashboard_url", "") or ""
    if dashboard:
        where += f" (dashboard {dashboard if '://' in dashboard else 'http://' + dashboard})"
    try:
        from ray.data import DataContext

        ctx = DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
    except Exception:  # noqa: BLE001 - only the console's look
        pass
    for name in ("ray", "ray.data"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return ray, where


_FITS: dict[str, Any] = {}  # per worker process: each embedder's tokenizer, loaded once


def _fits(emb: Embedder) -> Any:
    """The embedder's "does this text fit" test, in a worker."""
    from hydra_rag.models.embed import EmbedClient, tokenizer_for

    if emb.id not in _FITS:
        _FITS[emb.id] = EmbedClient(emb, "", emb.id, tokenizer=tokenizer_for(emb)).fits
    return _FITS[emb.id]


def _read(batch: dict[str, Any], root: str, settings: Settings,
          embedders: dict[str, Embedder], analysis: dict[str, Analysis]) -> dict[str, Any]:
    """A Ray Data task: read, classify and chunk files, as a local run's reader thread does."""
    from hydra_rag.index.prepare import read_and_prepare
    from hydra_rag.read.source import reader_for

    reader = reader_for(settings, None, write=False)
    return {"prepared": [pickle.dumps(read_and_prepare(
        Path(root), pickle.loads(blob), reader, lambda kind: _fits(embedders[kind]), analysis))
        for blob in batch["cand"]]}


class _Embed:
    """A Ray actor: embeds the chunks of prepared files whose text has no vector yet, with
    hydra-rag's own client of each table's embedder (started once per actor)."""

    def __init__(self, settings: Settings, embedders: dict[str, Embedder],
                 known: Any) -> None:
        self.settings, self.embedders = settings, embedders
        self.known: dict[str, set[str]] = known
        self.clients: dict[str, Any] = {}

    def _client(self, emb: Embedder) -> Any:
        from hydra_rag.models.embed import connect

        if emb.id not in self.clients:
            self.clients[emb.id] = connect(emb, self.settings)
        return self.clients[emb.id]

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        items = [pickle.loads(b) for b in batch["prepared"]]
        for t, emb in self.embedders.items():
            known = self.known.get(t, set())
            todo = [(r, x) for p, _ in items if p.kind == t
                    for r, x in zip(p.rows, p.inputs, strict=True) if r["hash"] not in known]
            if todo:
                vecs = self._client(emb).embed_documents([x for _, x in todo])
                for (r, _), v in zip(todo, vecs, strict=True):
                    r["vector"] = v
        return {"prepared": [pickle.dumps(i) for i in items]}


def prepared(run: Any, changed: list[Candidate], known: dict[str, set[str]]
             ) -> Iterator[tuple[Prepared, list[int]]]:
    """The changed files read, chunked and embedded by a Ray Data job, as they come (every
    chunk whose hash is not in `known[table]` carries its vector), each with the pages of a
    document that could not be read."""
    ray, where = start(run.settings)
    cands = [{"cand": pickle.dumps(c)} for c in changed]
    ds = ray.data.from_items(cands, override_num_blocks=max(1, -(-len(cands) // READ_BATCH)))
    ds = ds.map_batches(_read, fn_kwargs={
        "root": str(run.root), "settings": run.settings, "embedders": dict(run.embedders),
        "analysis": dict(run.analysis)}, batch_size=READ_BATCH, num_cpus=READ_CPUS)
    settings, embedders = run.settings, dict(run.embedders)

    class Embed(_Embed):
        # What it needs travels with the class, not as constructor arguments in the object
        # store (which an actor restarted on another node could not get back)
        def __init__(self) -> None:
            super().__init__(settings, embedders, known)

    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    count, options = actor_options(nodes, float(ray.cluster_resources().get("GPU", 0)),
                                   dict(os.environ))
    run.progress(Progress("sidecar", message=(
        f"reading, chunking and embedding on {where}: {nodes} node{'s' * (nodes != 1)}, "
        f"{count} embedding actor{'s' * (count != 1)}"
        + (" (a GPU each)" if "num_gpus" in options else ""))))
    ds = ds.map_batches(Embed, batch_size=READ_BATCH, **options,
                        compute=ray.data.ActorPoolStrategy(size=count))
    # Ray prints what its nodes report (a task retried, a node lost) on the driver's stdout,
    # where `index --json` writes its report: on stderr, with the run's progress, instead.
    # Ray is let go of inside that (its shutdown joins the thread that prints them), so that
    # nothing of Ray's reaches stdout after the job.
    with contextlib.redirect_stdout(_RayNotes(run.report.notes)):
        try:
            for block in ds.iter_batches(batch_size=READ_BATCH, batch_format="numpy"):
                for blob in block["prepared"]:
                    yield pickle.loads(blob)
        except (HydraError, KeyboardInterrupt, GeneratorExit):
            raise
        except Exception as exc:  # noqa: BLE001 - Ray's errors are many; one line of it
            raise HydraError(f"the Ray job stopped: {_first_line(exc)}; the files stored "
                             "before are kept, and the next run indexes the rest") from None
        finally:
            ray.shutdown()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DEAD = re.compile(r"node with node id: \w+ and address: (\S+).*marked dead")
_RETRY = re.compile(r"retries remaining, so the task will be retried|repeated \d+x across cluster")


class _RayNotes(io.TextIOBase):
    """Where Ray's reports from its nodes go instead of stdout: a node lost becomes one line
    (on stderr, and among the run's notes); a task Ray retries by itself says nothing; any
    other report goes to stderr as Ray wrote it."""

    def __init__(self, notes: list[str]) -> None:
        self.notes, self.lost, self.part = notes, set[str](), ""

    def write(self, text: str) -> int:
        self.part += _ANSI.sub("", text)
        *lines, self.part = self.part.split("\n")
        for line in lines:
            dead = _DEAD.search(line)
            if dead:
                if dead[1] not in self.lost:
                    self.lost.add(dead[1])
                    note = (f"Ray lost the node at {dead[1]}; its work was done again on the "
                            "others")
                    self.notes.append(note)
                    print(f"note: {note}", file=sys.stderr)
            elif line.strip() and not _RETRY.search(line) and not line.startswith("\t"):
                print(line, file=sys.stderr)
        return len(text)


def _answers(address: str, timeout: float = 5.0) -> None:
    """A HydraError at once where nothing listens at a cluster's address (`host:port`, or
    `ray://host:port`): Ray itself retries for a quarter of an hour before it says so."""
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return  # `auto`, or a form Ray resolves itself
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return
    except OSError as exc:
        raise HydraError(f"nothing answers at the Ray cluster's address {address} (setting "
                         f"ray_address): {exc.strerror or exc}; `ray status` on a node of it "
                         "says whether it runs") from None


def _first_line(exc: BaseException) -> str:
    """The line of a Ray error that says what happened (its traces follow it)."""
    lines = [x.strip() for x in str(exc).splitlines() if x.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]


def actor_options(nodes: int, gpus: float, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """How many embedding actors, and what each asks Ray for: one per GPU where the cluster
    has GPUs (each actor's sidecar then runs the GPU build of llama.cpp that node has, all
    layers on its GPU: `gpu_layers`), else one per live node; HYDRA_RAG_RAY_ACTORS sets
    another number, HYDRA_RAG_RAY_RESOURCE a custom resource each asks one unit of (to keep
    them on the nodes that declare it, `ray start --resources`)."""
    options: dict[str, Any] = {"num_cpus": EMBED_CPUS}
    count = max(1, nodes)
    if gpus >= 1:
        options["num_gpus"] = 1
        count = int(gpus)
    given = env.get("HYDRA_RAG_RAY_ACTORS", "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise HydraError(f"HYDRA_RAG_RAY_ACTORS must be a whole number from 1, not {given!r}")
        count = int(given)
    name = env.get("HYDRA_RAG_RAY_RESOURCE", "").strip()
    if name:
        options["resources"] = {name: 1}
    return count, options
