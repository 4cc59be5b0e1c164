"""Pure unit tests: hub names, quantisations in file names, split groups, and which file a
name asks for."""

from __future__ import annotations

import pytest

from hydra_rag.errors import UsageError
from hydra_rag.hub.describe import suggest_id
from hydra_rag.models.hf.refs import HubRef, candidates, choose, needs, parse_ref, quant_of


@pytest.mark.parametrize("text, want", [
    ("hf:Qwen/Qwen2.5-3B-Instruct-GGUF", HubRef("Qwen/Qwen2.5-3B-Instruct-GGUF")),
    ("hf:Qwen/Qwen2.5-3B-Instruct-GGUF:q4_k_m", HubRef("Qwen/Qwen2.5-3B-Instruct-GGUF",
                                                      quant="q4_k_m")),
    ("hf:a/b/sub/x-Q8_0.gguf", HubRef("a/b", file="sub/x-Q8_0.gguf")),
    ("hf:a/b@v1.0:Q8_0", HubRef("a/b", revision="v1.0", quant="Q8_0")),
    ("hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M",
     HubRef("bartowski/Llama-3.2-3B-Instruct-GGUF", quant="Q4_K_M")),
    ("https://huggingface.co/a/b/resolve/main/x.gguf", HubRef("a/b", "main", file="x.gguf")),
    ("https://huggingface.co/a/b/blob/abc123/d/x.gguf", HubRef("a/b", "abc123", file="d/x.gguf")),
])
def test_hub_names(text: str, want: HubRef) -> None:
    assert parse_ref(text) == want


@pytest.mark.parametrize("text", ["hf:nobody", "hf:a/b/readme.md", "hf:a/b/x.gguf:Q8_0",
                                  "qwen2.5", "hf:../b", "hf:a/b:Q4 K"])
def test_bad_hub_names_say_so(text: str) -> None:
    with pytest.raises(UsageError):
        parse_ref(text)


@pytest.mark.parametrize("name, quant", [
    ("qwen2.5-1.5b-instruct-q4_k_m.gguf", "Q4_K_M"),
    ("Llama-3.2-3B-Instruct-IQ3_XXS.gguf", "IQ3_XXS"),
    ("bge-m3-FP16.gguf", "F16"),
    ("model-q4_k_m_imatrix.gguf", "Q4_K_M"),
    ("nomic-embed-text-v1.5.Q8_0.gguf", "Q8_0"),
    ("Qwen3-30B-A3B-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"),
    ("qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf", "Q4_K_M"),
    ("Q8_0/model-00002-of-00003.gguf", ""),
    ("model.gguf", ""),
])
def test_quantisations_in_file_names(name: str, quant: str) -> None:
    assert quant_of(name) == quant


MiB = 1 << 20
REPO = {
    "README.md": 1,
    "m-Q4_K_M-00001-of-00002.gguf": 3000 * MiB, "m-Q4_K_M-00002-of-00002.gguf": 1000 * MiB,
    "m-Q8_0-00001-of-00003.gguf": 3000 * MiB, "m-Q8_0-00003-of-00003.gguf": 3000 * MiB,
    "m-Q2_K.gguf": 2000 * MiB,
    "m-F16.gguf": 14000 * MiB,
    "mmproj-m-f16.gguf": 600 * MiB,
    "m-Q4_K_M-mmproj-f16.gguf": 600 * MiB,
    "m-Q4_K_M.imatrix.gguf": 1 * MiB,
}


def test_split_models_are_one_candidate_and_incomplete_ones_none() -> None:
    found = {c.first: c for c in candidates(REPO)}
    assert set(found) == {"m-Q4_K_M-00001-of-00002.gguf", "m-Q2_K.gguf", "m-F16.gguf"}
    assert found["m-Q4_K_M-00001-of-00002.gguf"].size == 4000 * MiB
    assert len(found["m-Q4_K_M-00001-of-00002.gguf"].files) == 2


def test_the_default_quantisation_fits_the_memory() -> None:
    found = candidates(REPO)
    ref = HubRef("o/m")
    assert choose(found, ref, "chat").quant == "Q4_K_M"
    # Not enough memory for Q4_K_M: the smaller quantisation that fits.
    assert choose(found, ref, "chat", memory_bytes=needs(2000 * MiB)).quant == "Q2_K"
    with pytest.raises(UsageError, match="no quantisation of hf:o/m fits"):
        choose(found, ref, "chat", memory_bytes=1000 * MiB)
    # An embedder keeps more of its quality at higher precision.
    assert choose(found, ref, "embed").quant == "F16"
    assert choose(found, HubRef("o/m", quant="q2_k"), "chat").first == "m-Q2_K.gguf"
    with pytest.raises(UsageError, match="its quantisations: F16, Q2_K, Q4_K_M"):
        choose(found, HubRef("o/m", quant="Q5_K_M"), "chat")
    assert choose(found, HubRef("o/m", file="m-Q4_K_M-00002-of-00002.gguf"), "chat").first \
        == "m-Q4_K_M-00001-of-00002.gguf"
    with pytest.raises(UsageError, match="has no file"):
        choose(found, HubRef("o/m", file="m-Q8_0-00001-of-00003.gguf"), "chat")


def test_catalog_ids_from_file_names() -> None:
    assert suggest_id("qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf") == \
        "qwen2.5-7b-instruct-q4_k_m"
    assert suggest_id("Qwen/Qwen2.5-3B-Instruct-GGUF") == "qwen2.5-3b-instruct"
    assert suggest_id("Weird Name (v2)!.gguf") == "weird-name-v2"
