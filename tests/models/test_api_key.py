"""Remote endpoints that need a key: `api_key_env` on catalog entries with `url:` (and
`embedder_api_key_env` beside `embedder_url`) names the environment variable holding a bearer
token, which is sent on every request and shown nowhere. The real endpoint is llama-cpp-python's
own OpenAI-compatible server started with `--api_key`, serving the default embedder and chat
model."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from conftest import run_cli, send_json
from hydra_rag.catalog import parse_catalog
from hydra_rag.errors import ConfigError

SECRET = "hydra-test-" + secrets.token_hex(12)
VAR = "HYDRA_TEST_ENDPOINT_KEY"


def _catalog(entry: dict[str, Any], section: str = "embedders") -> str:
    return yaml.safe_dump({section: [entry]})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write_user_catalog(home: Path, doc: dict[str, Any]) -> None:
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "catalog.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")


# -- the catalog -----------------------------------------------------------------------------

REMOTE: dict[str, dict[str, Any]] = {"embedders": {"id": "team", "dims": 384, "url": "http://gpu-box:8080/v1"},
          "models": {"id": "team-chat", "url": "http://gpu-box:8082/v1"},
          "rerankers": {"id": "team-rr", "url": "http://gpu-box:8081/v1"}}
LOCAL: dict[str, dict[str, Any]] = {"embedders": {"id": "mine", "dims": 384, "file": "mine.gguf"},
         "models": {"id": "mine-chat", "file": "mine.gguf"},
         "rerankers": {"id": "mine-rr", "file": "mine.gguf"}}


@pytest.mark.parametrize("section", list(REMOTE))
def test_api_key_env_is_kept_on_an_entry_with_url(section: str) -> None:
    cat = parse_catalog(_catalog({**REMOTE[section], "api_key_env": "TEAM_KEY"}, section), "c.yaml")
    (entry,) = getattr(cat, section).values()
    assert entry.api_key_env == "TEAM_KEY"
    (plain,) = getattr(parse_catalog(_catalog(REMOTE[section], section), "c.yaml"),
                       section).values()
    assert plain.api_key_env is None


@pytest.mark.parametrize("section", list(REMOTE))
@pytest.mark.parametrize("entry, message", [
    # Without url: a local sidecar takes no key.
    ({"api_key_env": "TEAM_KEY"}, "field 'api_key_env' applies only to an entry with 'url'"),
])
def test_api_key_env_needs_url(section: str, entry: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_catalog(_catalog({**LOCAL[section], **entry}, section), "c.yaml")
    assert str(exc.value).startswith(f"c.yaml: {section[:-1]} ")
    assert message in str(exc.value)


# Values that are not a variable's name; several are keys pasted where the name belongs, and
# no message may quote them.
NOT_NAMES = [123, True, ["TEAM_KEY"], "", "team_key", "sk-proj-4f9aC2e7Bb01", "hf_AbCdEfGh12345678",
             "TEAM KEY", "1TEAM"]


@pytest.mark.parametrize("section", list(REMOTE))
@pytest.mark.parametrize("value", NOT_NAMES)
def test_api_key_env_must_be_a_variable_name(section: str, value: Any) -> None:
    entry = REMOTE[section]
    with pytest.raises(ConfigError) as exc:
        parse_catalog(_catalog({**entry, "api_key_env": value}, section), "c.yaml")
    assert str(exc.value) == (
        f"c.yaml: {section[:-1]} {entry['id']!r}: field 'api_key_env' must be the name of an "
        "environment variable in capitals, digits and _ (like TEAM_EMBEDDER_KEY), never the "
        "key itself")


@pytest.mark.parametrize("section", list(REMOTE))
@pytest.mark.parametrize("field", ["api_key", "key", "token", "apiKey", "access_token",
                                   "password", "secret", "bearer", "Authorization", "auth"])
def test_a_field_holding_a_key_is_refused(section: str, field: str) -> None:
    key = "sk-" + secrets.token_hex(8)
    with pytest.raises(ConfigError) as exc:
        parse_catalog(_catalog({**REMOTE[section], field: key}, section), "c.yaml")
    msg = str(exc.value)
    assert f"field {field!r} would hold a key; never store a key in a catalog: put it in an " \
        "environment variable and name that variable in 'api_key_env'" in msg
    assert key not in msg


def test_other_unknown_fields_are_still_unknown() -> None:
    with pytest.raises(ConfigError, match="unknown field 'monkey' \\(known: .*api_key_env"):
        parse_catalog(_catalog({**REMOTE["embedders"], "monkey": 1}), "c.yaml")


@pytest.mark.parametrize("url, message", [
    ("http://me:{key}@gpu-box:8080/v1", "field 'url' carries credentials"),
    ("https://{key}@gpu-box/v1", "field 'url' carries credentials"),
    ("http://gpu-box:8080/v1?api_key={key}", "field 'url' carries a key in its api_key= parameter"),
    ("http://gpu-box:8080/v1?x=1&token={key}", "field 'url' carries a key in its token= parameter"),
])
def test_a_url_holding_a_key_is_refused(url: str, message: str) -> None:
    key = "sk-" + secrets.token_hex(8)
    with pytest.raises(ConfigError) as exc:
        parse_catalog(_catalog({**REMOTE["embedders"], "url": url.format(key=key)}), "c.yaml")
    assert message in str(exc.value) and "api_key_env" in str(exc.value)
    assert key not in str(exc.value)


def test_a_bundle_takes_no_key_field_either() -> None:
    doc = {"bundles": [{"id": "b", "base": "smollm2-135m", "api_key_env": "X"}]}
    with pytest.raises(ConfigError, match="bundle 'b': unknown field 'api_key_env'"):
        parse_catalog(yaml.safe_dump(doc), "c.yaml")


# -- settings --------------------------------------------------------------------------------

@pytest.fixture
def bare_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HYDRA_RAG_HOME with nothing in it: for settings alone."""
    monkeypatch.setenv("HYDRA_RAG_HOME", str(tmp_path / "home"))
    for name in ("HYDRA_RAG_EMBEDDER_URL", "HYDRA_RAG_EMBEDDER_API_KEY_ENV"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "home"


def test_embedder_api_key_env_comes_from_the_environment(
        bare_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra_rag.config import load_settings

    monkeypatch.setenv("HYDRA_RAG_EMBEDDER_URL", "http://gpu-box:8080/v1")
    monkeypatch.setenv("HYDRA_RAG_EMBEDDER_API_KEY_ENV", "TEAM_KEY")
    assert load_settings().embedder_api_key_env == "TEAM_KEY"


@pytest.mark.parametrize("env, message", [
    ({"HYDRA_RAG_EMBEDDER_API_KEY_ENV": "TEAM_KEY"},
     "embedder_api_key_env names the key of embedder_url, which is not set"),
    ({"HYDRA_RAG_EMBEDDER_URL": "http://gpu-box/v1", "HYDRA_RAG_EMBEDDER_API_KEY_ENV": "sk-abc123"},
     "embedder_api_key_env must be the name of an environment variable"),
])
def test_embedder_api_key_env_is_checked(bare_home: Path, monkeypatch: pytest.MonkeyPatch,
                                         env: dict[str, str], message: str) -> None:
    from hydra_rag.config import load_settings

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert message in str(exc.value) and "sk-abc123" not in str(exc.value)


def test_a_config_setting_holding_a_key_is_refused(bare_home: Path) -> None:
    from hydra_rag.config import load_settings

    (bare_home / "config").mkdir(parents=True)
    (bare_home / "config" / "config.yaml").write_text(f"embedder_api_key: {SECRET}\n")
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert "setting 'embedder_api_key' would hold a key" in str(exc.value)
    assert "embedder_api_key_env" in str(exc.value) and SECRET not in str(exc.value)


# -- the key at request time, without a server -----------------------------------------------

@pytest.mark.parametrize("value", [None, "", "   "])
def test_a_missing_key_names_the_entry_and_the_variable(
        monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    from hydra_rag.models.endpoint import KeyEnv

    if value is None:
        monkeypatch.delenv(VAR, raising=False)
    else:
        monkeypatch.setenv(VAR, value)
    with pytest.raises(ConfigError) as exc:
        KeyEnv("embedder 'team'", VAR).headers()
    assert str(exc.value) == (f"embedder 'team': its api_key_env names ${VAR}, which is not set "
                              f"— export {VAR}=<the endpoint's key> and run again")


def test_a_key_that_cannot_be_a_header_is_not_quoted(monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra_rag.models.endpoint import KeyEnv

    monkeypatch.setenv(VAR, f"{SECRET}\nX-Injected: 1")
    with pytest.raises(ConfigError) as exc:
        KeyEnv("embedder 'team'", VAR).headers()
    assert f"${VAR} does not hold a usable key" in str(exc.value)
    assert SECRET not in str(exc.value)
    monkeypatch.setenv(VAR, f"  {SECRET}\n")  # a file's trailing newline is no part of it
    assert KeyEnv("embedder 'team'", VAR).headers() == {"Authorization": f"Bearer {SECRET}"}


class _Listener:
    """A port that counts the connections made to it and closes each at once (a client that
    sent a request anyway fails fast instead of waiting for an answer)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.count = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            while True:
                self.sock.accept()[0].close()
                self.count += 1
        except OSError:
            pass

    def close(self) -> int:
        """Stop listening; how many connections were made."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        return self.count


def test_an_unset_key_is_an_error_before_any_request(
        isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra_rag.catalog import get_embedder, get_model
    from hydra_rag.config import load_settings
    from hydra_rag.models.chat import connect_chat, stream_chat
    from hydra_rag.models.embed import connect
    from hydra_rag.search.rerank import connect_reranker

    listener = _Listener()
    _write_user_catalog(isolated_home, {
        "embedders": [{"id": "keyed", "dims": 384, "url": listener.url, "api_key_env": VAR}],
        "models": [{"id": "keyed-chat", "url": listener.url, "api_key_env": VAR}],
        "rerankers": [{"id": "keyed-rr", "url": listener.url, "api_key_env": VAR}]})
    monkeypatch.delenv(VAR, raising=False)
    settings = load_settings(reranker="keyed-rr")
    for what, use in [("embedder 'keyed'", lambda: connect(get_embedder("keyed"), settings)),
                      ("chat model 'keyed-chat'",
                       lambda: connect_chat(get_model("keyed-chat"), settings)),
                      ("reranker 'keyed-rr'", lambda: connect_reranker(settings))]:
        with pytest.raises(ConfigError, match=f"^{what}: its api_key_env names \\${VAR}, which "
                                              "is not set"):
            use()
    # A variable unset after connecting: still named before anything is sent.
    monkeypatch.setenv(VAR, SECRET)
    client = connect(get_embedder("keyed"), settings)
    target = connect_chat(get_model("keyed-chat"), settings)
    monkeypatch.setenv(VAR, "")
    with pytest.raises(ConfigError, match=f"\\${VAR}, which is not set"):
        client.embed_query("anything")
    with pytest.raises(ConfigError, match=f"\\${VAR}, which is not set"):
        stream_chat(target, [{"role": "user", "content": "hi"}], {}, lambda _t: None)
    time.sleep(0.2)
    assert listener.count == 0
    socket.create_connection(listener.sock.getsockname()).close()  # the count does count
    deadline = time.monotonic() + 5
    while listener.count == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert listener.close() == 1


# -- a keyed endpoint of our own for the reranker (llama-cpp-python's server has no /v1/rerank)

class _Recorder(http.server.BaseHTTPRequestHandler):
    """POST /v1/rerank and /v1/embeddings that want `Bearer SECRET`: 401 without a key, 403
    with another; every Authorization header it is sent is recorded."""

    seen: list[str | None] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        auth = self.headers.get("Authorization")
        type(self).seen.append(auth)
        answer: dict[str, Any]
        if auth != f"Bearer {SECRET}":
            status, answer = (401 if auth is None else 403), {"error": f"got {auth}"}
        elif self.path.endswith("/rerank"):
            status, answer = 200, {"results": [{"index": i, "relevance_score": float(-i)}
                                               for i in range(len(body["documents"]))]}
        else:
            status, answer = 200, {"data": [{"index": i, "embedding": [1.0] + [0.0] * 383}
                                            for i in range(len(body["input"]))]}
        send_json(self, status, answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    _Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_reranker_sends_its_key(isolated_home: Path, recorder: str,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra_rag.config import load_settings
    from hydra_rag.search.rerank import connect_reranker

    _write_user_catalog(isolated_home, {"rerankers": [
        {"id": "keyed-rr", "url": recorder, "api_key_env": VAR},
        {"id": "keyless-rr", "url": recorder}]})
    monkeypatch.setenv(VAR, SECRET)
    assert connect_reranker(load_settings(reranker="keyed-rr")).scores("q", ["a", "b"]) == \
        [0.0, -1.0]
    assert _Recorder.seen == [f"Bearer {SECRET}"]
    wrong = "wrong-" + secrets.token_hex(8)
    monkeypatch.setenv(VAR, wrong)
    with pytest.raises(ConfigError) as exc:
        connect_reranker(load_settings(reranker="keyed-rr")).scores("q", ["a"])
    assert str(exc.value) == (f"reranker 'keyed-rr' at {recorder}: the endpoint refused the key "
                              f"in ${VAR} (HTTP 403) — check its value")
    with pytest.raises(ConfigError) as exc:
        connect_reranker(load_settings(reranker="keyless-rr")).scores("q", ["a"])
    assert str(exc.value) == (f"reranker 'keyless-rr' at {recorder}: the endpoint needs a key "
                              "(HTTP 401) — put it in an environment variable and set its "
                              "api_key_env to that variable's name")
    assert wrong not in str(exc.value)


def test_embedder_url_takes_its_own_key_never_the_entrys(
        isolated_home: Path, recorder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The entry's key belongs to the entry's url: an embedder_url elsewhere must not get it.
    from hydra_rag.catalog import get_embedder
    from hydra_rag.config import load_settings
    from hydra_rag.models.embed import connect

    _write_user_catalog(isolated_home, {"embedders": [
        {"id": "keyed", "dims": 384, "url": "http://gpu-box.invalid/v1", "api_key_env": VAR}]})
    monkeypatch.setenv(VAR, SECRET)
    monkeypatch.setenv("HYDRA_RAG_EMBEDDER_URL", recorder)
    with pytest.raises(ConfigError) as exc:
        connect(get_embedder("keyed"), load_settings()).embed_query("x")
    assert _Recorder.seen == [None]
    assert str(exc.value) == (f"embedder_url at {recorder}: the endpoint needs a key (HTTP 401) "
                              "— put it in an environment variable and set embedder_api_key_env "
                              "(HYDRA_RAG_EMBEDDER_API_KEY_ENV) to that variable's name")
    monkeypatch.setenv("HYDRA_RAG_EMBEDDER_API_KEY_ENV", VAR)
    vec = connect(get_embedder("keyed"), load_settings()).embed_query("x")
    assert vec[0] == 1.0 and _Recorder.seen[-1] == f"Bearer {SECRET}"


# -- llama-cpp-python's server with --api_key ------------------------------------------------

@pytest.fixture(scope="module")
def keyed_server(session_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server, demanding SECRET, serving the default
    embedder (as keyed-minilm) and chat model (as keyed-smollm); its /v1 URL."""
    models = session_home / "data" / "models"
    port = _free_port()
    config = tmp_path_factory.mktemp("keyed-server") / "server.json"
    config.write_text(json.dumps({
        "host": "127.0.0.1", "port": port, "api_key": SECRET,
        "models": [
            {"model": str(models / "minilm-l6.q8_0.gguf"), "model_alias": "keyed-minilm",
             "embedding": True, "n_ctx": 512, "n_batch": 512, "n_ubatch": 512, "verbose": False},
            {"model": str(models / "SmolLM2-135M-Instruct.Q8_0.gguf"),
             "model_alias": "keyed-smollm", "chat_format": "chatml", "n_ctx": 2048,
             "verbose": False},
        ]}))
    # Its settings read unprefixed variables (PORT, MODEL, API_KEY…): give it a bare environment.
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    log = config.with_name("server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--config_file",
                             str(config)], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{url}/v1/models", timeout=2)
            break
        except urllib.error.HTTPError:
            break  # it answers (401 without a key): up
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(config.with_name("server.log").read_text()) from None
            time.sleep(0.3)
    yield f"{url}/v1"
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def _keyed_catalog(home: Path, url: str, **extra: Any) -> None:
    _write_user_catalog(home, {
        "embedders": [{"id": "keyed-minilm", "dims": 384, "url": url, "port": 19081,
                       "file": "minilm-l6.q8_0.gguf", **extra}],
        "models": [{"id": "keyed-smollm", "url": url, "port": 18081, "context": 2048,
                    **extra}]})


def test_an_embedder_with_its_key_embeds(keyed_server: str, isolated_home: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra_rag.catalog import get_embedder
    from hydra_rag.config import load_settings
    from hydra_rag.models.embed import connect

    _keyed_catalog(isolated_home, keyed_server, api_key_env=VAR)
    monkeypatch.setenv(VAR, SECRET)
    client = connect(get_embedder("keyed-minilm"), load_settings())
    vecs = client.embed_documents(["Tomatoes need full sun and deep watering.",
                                   "How much sun do tomato plants need?",
                                   "Roman aqueducts carried water over arches."])
    assert vecs.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.2


def test_a_wrong_or_missing_key_is_refused_clearly(keyed_server: str, isolated_home: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra_rag.catalog import get_embedder
    from hydra_rag.config import load_settings
    from hydra_rag.models.embed import connect

    _keyed_catalog(isolated_home, keyed_server, api_key_env=VAR)
    wrong = "wrong-" + secrets.token_hex(8)
    monkeypatch.setenv(VAR, wrong)
    with pytest.raises(ConfigError) as exc:
        connect(get_embedder("keyed-minilm"), load_settings()).embed_query("tomatoes")
    assert str(exc.value) == (f"embedder 'keyed-minilm' at {keyed_server}: the endpoint refused "
                              f"the key in ${VAR} (HTTP 401) — check its value")
    _keyed_catalog(isolated_home, keyed_server)  # no api_key_env at all
    with pytest.raises(ConfigError) as exc2:
        connect(get_embedder("keyed-minilm"), load_settings()).embed_query("tomatoes")
    assert str(exc2.value) == (f"embedder 'keyed-minilm' at {keyed_server}: the endpoint needs a "
                               "key (HTTP 401) — put it in an environment variable and set its "
                               "api_key_env to that variable's name")
    for msg in (str(exc.value), str(exc2.value)):
        assert SECRET not in msg and wrong not in msg


def test_a_chat_model_with_its_key_answers(keyed_server: str, isolated_home: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra_rag.catalog import get_model
    from hydra_rag.config import load_settings
    from hydra_rag.models.chat import connect_chat, stream_chat

    _keyed_catalog(isolated_home, keyed_server, api_key_env=VAR)
    monkeypatch.setenv(VAR, SECRET)
    target = connect_chat(get_model("keyed-smollm"), load_settings())
    pieces: list[str] = []
    text, finish = stream_chat(target, [{"role": "user", "content": "Say hello."}],
                               {"max_tokens": 4, "temperature": 0}, pieces.append)
    assert text and text == "".join(pieces) and finish == "length"
    monkeypatch.setenv(VAR, "wrong")
    with pytest.raises(ConfigError) as exc:
        stream_chat(connect_chat(get_model("keyed-smollm"), load_settings()),
                    [{"role": "user", "content": "Say hello."}], {"max_tokens": 4},
                    lambda _t: None)
    assert str(exc.value) == (f"chat model 'keyed-smollm' at {keyed_server}: the endpoint "
                              f"refused the key in ${VAR} (HTTP 401) — check its value")


def test_the_key_is_nowhere_but_in_the_requests(keyed_server: str, isolated_home: Path,
                                                corpus: Path) -> None:
    # The real commands, with the shipped default embedder's id served by the keyed server:
    # what they print and every file they leave name the variable at most, never the key.
    _write_user_catalog(isolated_home, {
        "embedders": [{"id": "minilm-l6", "dims": 384, "url": keyed_server, "api_key_env": VAR,
                       "file": "minilm-l6.q8_0.gguf"}],
        "models": [{"id": "keyed-smollm", "url": keyed_server, "api_key_env": VAR,
                    "port": 18081, "context": 2048}]})
    env = {VAR: SECRET, "HYDRA_RAG_HOME": str(isolated_home)}
    runs = [run_cli("index", str(corpus), env=env),
            run_cli("search", "tomatoes need sun", "--json", env=env, cwd=corpus),
            run_cli("ask", "keyed-smollm", "How often are tomatoes watered?", "--max-tokens",
                    "8", env=env, cwd=corpus),
            run_cli("embedders", "info", "minilm-l6", env=env),
            run_cli("embedders", "list", "--json", env=env),
            run_cli("show", "keyed-smollm", env=env)]
    for proc in runs:
        assert proc.returncode == 0, (proc.args, proc.stderr)
        assert SECRET not in proc.stdout + proc.stderr
    hits = json.loads(runs[1].stdout)["results"]
    assert hits and hits[0]["path"] == "docs/gardening.md"
    assert f"api_key_env: {VAR}" in runs[3].stdout
    assert f"api_key_env: {VAR}" in runs[5].stdout
    secret = SECRET.encode()
    written = [p for root in (isolated_home, corpus) for p in root.rglob("*")
               if p.is_file() and not p.is_symlink()]
    assert any(".hydra-index" in p.parts for p in written)
    assert [p for p in written if secret in p.read_bytes()] == []
    # Without the variable, the command fails in one line naming the entry and the variable.
    bare = {k: v for k, v in os.environ.items() if k != VAR}
    proc = subprocess.run([sys.executable, "-m", "hydra_rag", "search", "tomatoes"],
                          capture_output=True, text=True, cwd=corpus,
                          env={**bare, "HYDRA_RAG_HOME": str(isolated_home)})
    assert proc.returncode == 1
    assert f"embedder 'minilm-l6': its api_key_env names ${VAR}, which is not set" in proc.stderr
