"""docker/: the containers serve what the catalog says, on ports hydra-rag's sidecars never
take, from the models folder hydra-rag uses, and the README's URLs are the published ones."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hydra_rag.catalog import CHAT_PORTS, EMBED_PORTS, RERANK_PORTS, parse_catalog
from hydra_rag.paths import dirs

DOCKER = Path(__file__).resolve().parent.parent / "docker"
SHIPPED = parse_catalog((Path(__file__).resolve().parent.parent / "hydra_rag/catalog.yaml")
                        .read_text(), "shipped")


def _compose(name: str = "compose.yaml") -> dict[str, Any]:
    return yaml.safe_load((DOCKER / name).read_text())


def _published(service: dict[str, Any]) -> int:
    (mapping,) = service["ports"]
    host, port, target = mapping.split(":")
    assert host == "127.0.0.1" and target == "8080"  # loopback only, like the sidecars
    return int(port)


def test_docker_compose_matches_the_catalog() -> None:
    compose = _compose()
    chat = compose["services"]["chat"]
    model = SHIPPED.models["smollm2-135m"]
    assert all(v.endswith(":/models:ro") for v in chat["volumes"])
    ccmd = chat["command"]
    assert ccmd[ccmd.index("--model") + 1] == f"/models/{model.file}"
    assert ccmd[ccmd.index("--alias") + 1] == model.id
    assert ccmd[ccmd.index("--ctx-size") + 1] == str(model.context)
    assert ccmd[ccmd.index("--chat-template") + 1] == model.chat_format
    svc = compose["services"]["embedder"]
    emb = SHIPPED.embedders["minilm-l6"]
    assert all(v.endswith(":/models:ro") for v in svc["volumes"])
    cmd = svc["command"]
    assert cmd[cmd.index("--model") + 1] == f"/models/{emb.file}"
    assert cmd[cmd.index("--alias") + 1] == emb.id
    assert cmd[cmd.index("--pooling") + 1] == emb.pooling
    assert cmd[cmd.index("--ctx-size") + 1] == str(emb.max_tokens)
    assert "--embedding" in cmd


def test_published_ports_are_outside_the_sidecars_ranges() -> None:
    # A sidecar hydra-rag starts beside the containers must never find its port taken by one.
    services = _compose()["services"]
    ports = {name: _published(svc) for name, svc in services.items()}
    assert len(set(ports.values())) == len(ports)
    for port in ports.values():
        assert port not in CHAT_PORTS and port not in EMBED_PORTS and port not in RERANK_PORTS
    # What docker/ tells users to point hydra-rag at is what is published.
    readme = (DOCKER / "README.md").read_text()
    comment = (DOCKER / "compose.yaml").read_text()
    for text in (readme, comment):
        assert f"http://127.0.0.1:{ports['embedder']}/v1" in text
        assert f"127.0.0.1:{ports['chat']}" in text
    for sidecar_port in ("19080", "18080"):
        assert f"127.0.0.1:{sidecar_port}" not in readme + comment


@pytest.mark.parametrize("env", [
    {"HYDRA_RAG_HOME": "/srv/rag-home"},
    {"XDG_DATA_HOME": "/srv/xdg-data"},
    {},
])
def test_the_models_volume_follows_hydra_rag_home(env: dict[str, str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # Compose interpolates ${A:-x} and ${A:+x} as the shell does: the shell evaluates the
    # volume's source here, with the environment dirs() resolves the models folder from.
    for name in ("HYDRA_RAG_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for svc in _compose()["services"].values():
        (volume,) = svc["volumes"]
        source = volume.removesuffix(":/models:ro")
        assert "$(" not in source and "`" not in source
        shell = subprocess.run(["bash", "-c", f'printf %s "{source}"'], capture_output=True,
                               text=True, check=True)
        assert shell.stdout == str(dirs().models)


def test_the_key_override_sets_llama_servers_key_variable() -> None:
    base, key = _compose()["services"], _compose("compose.key.yaml")["services"]
    assert set(key) == set(base)
    for svc in key.values():
        assert svc == {"environment": {"LLAMA_API_KEY": svc["environment"]["LLAMA_API_KEY"]}}
        # Required (`:?`): an empty LLAMA_API_KEY would make the server demand an empty key.
        assert svc["environment"]["LLAMA_API_KEY"].startswith("${RAG_SERVER_KEY:?")
    assert "api_key_env: RAG_SERVER_KEY" in (DOCKER / "README.md").read_text()
