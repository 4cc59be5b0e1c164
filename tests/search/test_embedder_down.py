"""An embedder that fails during a long-lived searcher's life (a server's, a chat's) costs its
folders their vectors for a while, not their results, and not for the rest of the searcher's
life: they are searched by full text with a warning, and the embedder is asked again after
RETRY_S. The embedder here is the real default one, reached through a relay in front of its
sidecar that can be told to answer HTTP 503."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli, send_json
from hydra_rag.catalog import get_embedder
from hydra_rag.config import load_settings
from hydra_rag.errors import HydraError
from hydra_rag.models.embed import connect
from hydra_rag.search import retrieve
from hydra_rag.search.retrieve import Searcher


class Relay:
    """An OpenAI-compatible /v1/embeddings endpoint answered by the real sidecar, or by HTTP
    503 while `failing`; it counts the requests it gets."""

    def __init__(self) -> None:
        sidecar = connect(get_embedder("minilm-l6"), load_settings())
        self.failing = False
        self.requests = 0
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server name)
                relay.requests += 1
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if relay.failing:
                    send_json(self, 503, {"error": "loading model"})
                else:
                    vectors = sidecar._post(list(body["input"]))
                    send_json(self, 200, {"data": [
                        {"index": i, "embedding": v} for i, v in enumerate(vectors)]})

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def relay(home: Path) -> Iterator[Relay]:
    r = Relay()
    yield r
    r.server.shutdown()


def test_a_failing_embedder_leaves_full_text_results_and_is_tried_again(
        corpus: Path, relay: Relay, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_cli("index", str(corpus)).returncode == 0
    monkeypatch.setattr(retrieve, "RETRY_S", 1.5)
    settings = replace(load_settings(), embedder_url=relay.url)
    searcher = Searcher([corpus], settings, skip_broken=True)
    try:
        hits = searcher.search("monthly invoice total", k=3)
        assert hits[0].path == "src/billing.py" and hits[0].similarity is not None
        assert searcher.warnings == []

        relay.failing = True
        hits = searcher.search("monthly invoice total", k=3)
        assert hits and hits[0].path == "src/billing.py"  # by its words
        assert all(h.similarity is None for h in hits)
        [warning] = searcher.warnings
        assert "minilm-l6 searched without vectors" in warning and "HTTP 503" in warning
        asked = relay.requests
        assert searcher.search("invalid api key", k=1)[0].path == "src/auth.py"
        assert relay.requests == asked  # resting: not asked again before RETRY_S

        relay.failing = False
        time.sleep(1.6)
        hits = searcher.search("monthly invoice total", k=3)
        assert relay.requests == asked + 1
        assert hits[0].path == "src/billing.py" and hits[0].similarity is not None
        assert searcher.warnings == []
    finally:
        searcher.close()


def test_a_one_off_search_says_the_embedder_failed(corpus: Path, relay: Relay) -> None:
    assert run_cli("index", str(corpus)).returncode == 0
    relay.failing = True
    searcher = Searcher([corpus], replace(load_settings(), embedder_url=relay.url))
    try:
        with pytest.raises(HydraError, match="^cannot embed the query with minilm-l6: .*HTTP 503"):
            searcher.search("monthly invoice total", k=3)
    finally:
        searcher.close()
