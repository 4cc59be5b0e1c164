"""A model file's GGUF layout read without loading it (hydra_rag.models.gguf.damage): what
`doctor` says of a model file before it starts llama.cpp on it. Real model files throughout."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli
from hydra_rag.models.gguf import damage

MODELS = ("minilm-l6.q8_0.gguf", "multilingual-e5-small.q4_0.gguf",
          "SmolLM2-135M-Instruct.Q8_0.gguf")


def _cut(src: Path, dest: Path, size: int) -> Path:
    with src.open("rb") as f:
        dest.write_bytes(f.read(size))
    return dest


def test_whole_models_pass_and_cut_or_foreign_files_say_why(session_home: Path,
                                                          tmp_path: Path) -> None:
    models = session_home / "data" / "models"
    for name in MODELS:  # e5's 250,000-word vocabulary among them
        assert damage(models / name) == "", name
    minilm = models / MODELS[0]
    size = minilm.stat().st_size
    why = damage(_cut(minilm, tmp_path / "tail.gguf", size - 100))
    assert why == f"the file is cut short: its tensors end at byte {size:,}, the file has {size - 100:,}"
    assert "damaged or cut short" in damage(_cut(minilm, tmp_path / "head.gguf", 1000))
    (tmp_path / "notes.gguf").write_text("not a model\n")
    assert damage(tmp_path / "notes.gguf") == "not a GGUF file (it does not begin with GGUF)"
    assert damage(_cut(minilm, tmp_path / "empty.gguf", 0)).startswith("not a GGUF file")


def test_doctor_names_a_model_file_cut_short_and_how_to_mend_it(session_home: Path,
                                                               tmp_path: Path) -> None:
    home = tmp_path / "home"
    models = home / "data" / "models"
    models.mkdir(parents=True)
    shared = session_home / "data" / "models"
    for f in shared.iterdir():
        if f.name != MODELS[2]:
            (models / f.name).symlink_to(f.resolve())
    chat = shared / MODELS[2]
    _cut(chat, models / MODELS[2], chat.stat().st_size // 2)  # a download that stopped halfway
    env = {"HYDRA_RAG_HOME": str(home)}
    try:
        proc = run_cli("doctor", env=env)
    finally:
        run_cli("sidecars", "stop", "--all", env=env)
    assert proc.returncode == 1, proc.stdout
    line = next(x for x in proc.stdout.splitlines() if "chat model smollm2-135m" in x)
    assert line.startswith("fail") and "is not loadable: the file is cut short" in line, line
    assert "hydra-rag models pull smollm2-135m --force" in proc.stdout
    assert "embedder minilm-l6" in proc.stdout and "self-test passed" in proc.stdout


def test_a_damaged_length_or_an_unknown_tensor_type_is_said_plainly(session_home: Path,
                                                                   tmp_path: Path) -> None:
    import struct

    data = (session_home / "data" / "models" / MODELS[0]).read_bytes()
    # the first key's length (after magic, version, tensor and key counts) made absurd
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(data[:24] + struct.pack("<Q", 1 << 62) + data[32:])
    assert damage(bad).startswith("its GGUF header is damaged or cut short (a string of")
    bad.write_bytes(data[:24] + struct.pack("<Q", (1 << 64) - 1) + data[32:])
    assert damage(bad).startswith("its GGUF header is damaged or cut short")
    # a tensor type newer than the installed gguf package knows: its size is not checked
    import gguf
    import numpy as np

    made = tmp_path / "made.gguf"
    writer = gguf.GGUFWriter(str(made), "llama")
    writer.add_tensor("t", np.zeros(64, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert damage(made) == ""
    info = struct.pack("<Q", 1) + b"t" + struct.pack("<IQ", 1, 64)
    raw = made.read_bytes()
    at = raw.index(info + struct.pack("<I", 0)) + len(info)
    made.write_bytes(raw[:at] + struct.pack("<I", 250) + raw[at + 4:])
    assert damage(made) == ""
    made.write_bytes(raw[:-8])  # the F32 tensor's last two values gone
    assert damage(made).startswith("the file is cut short")


def test_every_part_of_a_split_model_is_checked(session_home: Path, tmp_path: Path) -> None:
    # Written as llama.cpp's gguf-split writes one: the metadata in the first part only.
    import gguf

    from fakehub import split_gguf
    from hydra_rag.checks.doctor import _file_check
    from hydra_rag.models.gguf import split_parts

    first, second, third = split_gguf(session_home / "data" / "models" / MODELS[0],
                                      tmp_path / "split", "minilm-Q8_0", 3)
    assert split_parts(first) == (first, second, third)
    assert "general.architecture" not in gguf.GGUFReader(str(second)).fields
    check = _file_check("embedder x", first, "pull it", "pull it again")
    assert check.status == "ok", check
    size = second.stat().st_size
    _cut(second, tmp_path / "cut.gguf", size - 64).replace(second)
    check = _file_check("embedder x", first, "pull it", "pull it again")
    assert check.status == "fail" and check.fix == "pull it again", check
    assert (f"part 2 of 3, {second.name}: the file is cut short: its tensors end at byte "
            f"{size:,}") in check.detail, check.detail
    third.unlink()
    check = _file_check("embedder x", first, "pull it", "pull it again")
    assert f"part 3 of 3, {third.name}, is missing" in check.detail, check.detail
