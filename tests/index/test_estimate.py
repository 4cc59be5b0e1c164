"""What a first index would take, said before it is made (`models recommend --path`, `doctor
PATH`): the folder read and chunked as an index run chunks it, with the real embedder's
tokenizer, nothing written; the time per installed embedder from the rates measured here."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli, write_tree
from hydra_rag.config import load_settings
from hydra_rag.index import index_folder
from hydra_rag.index.estimate import count


def _project(root: Path) -> Path:
    files = {f"src/lamp{i}.py": "".join(
        f"def lamp_{i}_{j}(keeper):\n    \"\"\"Light lamp {i}.{j} for the {j}th watch.\"\"\"\n"
        f"    return keeper.light({i}, {j}) + {'x' * (j % 7)!r}.count('x')\n\n"
        for j in range(40)) for i in range(5)}
    files |= {f"docs/watch{i}.md": f"# Watch {i}\n\n" + "\n\n".join(
        f"The keeper of watch {i} trims wick {j} and logs the weather at dusk." for j in range(60))
        for i in range(4)}
    files["data/blob.bin"] = bytes(range(256)) * 8  # not text: neither counted nor indexed
    return write_tree(root, files)


def test_the_count_is_what_the_index_run_then_stores(home: Path, tmp_path: Path) -> None:
    root = _project(tmp_path / "proj")
    est = count(root, load_settings())
    assert not (root / ".hydra-index").exists()  # nothing written
    assert est.files == 9 and not est.indexed
    rep = index_folder(root, load_settings())
    assert est.total_chunks == rep.chunks_added == sum(rep.chunks_total.values())
    assert est.chunks["code"] > 0 and est.chunks["prose"] > 0
    assert est.total_chunks * 8 < est.tokens <= est.total_chunks * 512  # MiniLM's own tokens
    assert count(root, load_settings()).indexed  # a rebuild would take as long


def test_recommend_and_doctor_say_what_a_first_index_takes(home: Path, tmp_path: Path) -> None:
    root = _project(tmp_path / "proj")
    proc = run_cli("models", "recommend", "--path", str(root), "--json")  # times minilm-l6
    assert proc.returncode == 0, proc.stderr
    first = json.loads(proc.stdout)["first_index"]
    assert first["root"] == str(root.resolve()) and first["files"] == 9
    by_id = {r["id"]: r for r in first["embedders"]}
    minilm = by_id["minilm-l6"]
    assert minilm["basis"] == "measured" and minilm["backend"] == "llama.cpp"
    assert minilm["seconds"] == round(first["tokens"] / minilm["tokens_per_s"])
    shown = run_cli("models", "recommend", "--no-measure", "--path", str(root)).stdout
    assert (f"a first index of {root.resolve()}: 9 files, {first['total_chunks']:,} chunks"
            in shown), shown
    assert "  minilm-l6 (configured): about " in shown, shown

    doc = run_cli("doctor", str(root))
    assert f"first index: 9 files, {first['total_chunks']:,} chunks" in doc.stdout, doc.stdout
    assert "minilm-l6 (configured) about " in doc.stdout, doc.stdout
    assert not (root / ".hydra-index").exists()

    missing = run_cli("models", "recommend", "--no-measure", "--path", str(tmp_path / "nope"))
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert "nope" in missing.stderr, missing.stderr
