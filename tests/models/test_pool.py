"""The endpoint pool alone (hydra_rag.models.pool), with endpoints simulated by functions: how batches
spread by speed, survive failures, come back to a recovered endpoint, and never repeat. The
real thing (several embedder sidecars, one killed mid-run) is in tests/models/test_embed_pool.py."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from hydra_rag.errors import ConfigError, EmbedError
from hydra_rag.models import pool as pool_module
from hydra_rag.models.pool import Pool


def test_batches_follow_speed_and_keep_their_order() -> None:
    delays = [0.002, 0.02]
    calls: Counter[int] = Counter()

    def call(e: int, batch: list[int]) -> list[int]:
        time.sleep(delays[e])
        calls[e] += 1
        return [x * 2 for x in batch]

    batches = [[i, i + 1] for i in range(0, 200, 2)]
    done: list[int] = []
    out = Pool(["fast", "slow"], call, size=len).map(batches, done.append)
    assert out == [[x * 2 for x in b] for b in batches]
    assert calls[0] > 3 * calls[1] > 0  # the fast one took most, the slow one some
    assert done == sorted(done) and done[-1] == 200


def test_a_dead_endpoint_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "BACKOFF_S", (0.05,))
    seen: Counter[int] = Counter()
    lock = threading.Lock()

    def call(e: int, batch: int) -> int:
        if e == 1:
            raise EmbedError("cannot reach http://b: connection refused")
        time.sleep(0.001)
        with lock:
            seen[batch] += 1
        return batch

    p = Pool(["a", "b", "c"], lambda e, b: call(e if e != 2 else 0, b))
    assert p.map(list(range(50))) == list(range(50))
    assert set(seen.values()) == {1}  # every batch answered once
    assert p.stats[1].failures >= 1 and p.stats[1].batches == 0
    assert "connection refused" in p.stats[1].last_error


def test_an_endpoint_that_recovers_is_used_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "BACKOFF_S", (0.05, 0.1))
    failures_left = [3]

    def call(e: int, batch: int) -> int:
        time.sleep(0.01)
        if e == 1 and failures_left[0] > 0:
            failures_left[0] -= 1
            raise EmbedError("busy")
        return batch

    p = Pool(["steady", "flaky"], call)
    assert p.map(list(range(100))) == list(range(100))
    assert p.stats[1].failures == 3 and p.stats[1].batches > 10


def test_a_batch_that_fails_everywhere_fails_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "BACKOFF_S", (0.01,))

    def call(e: int, batch: int) -> int:
        if batch == 7:
            raise EmbedError("HTTP 500: input too long")
        return batch

    with pytest.raises(EmbedError, match="input too long"):
        Pool(["a", "b"], call).map(list(range(20)))


def test_a_refused_key_stops_at_once() -> None:
    calls = Counter[int]()

    def call(e: int, batch: int) -> int:
        calls[batch] += 1
        raise ConfigError("the endpoint refused the key in $KEY (HTTP 401)")

    with pytest.raises(ConfigError, match="refused the key"):
        Pool(["a", "b"], call).map(list(range(20)))
    assert sum(calls.values()) <= 2  # one try per endpoint at most


@pytest.mark.parametrize("entry, message", [
    ({"urls": ["http://a:8080/v1", "http://b:8080/v1"], "url": "http://a:8080/v1"},
     "give 'url' (one server) or 'urls' (several), not both"),
    ({"urls": []}, "field 'urls' must be a list of one or more URLs"),
    ({"urls": ["http://a:8080/v1", 3]}, "field 'urls' must be a list of one or more URLs"),
    ({"urls": ["http://a:8080/v1", "http://a:8080/v1"]}, "field 'urls' lists a URL twice"),
    ({"urls": ["http://a:8080/v1", "http://me:sk-123@b:8080/v1"]},
     "field 'urls' carries credentials"),
    ({"urls": ["http://a:8080/v1?token=sk-123"]}, "field 'urls' carries a key in its token="),
])
def test_catalog_urls_are_checked(entry: dict[str, object], message: str) -> None:
    import yaml

    from hydra_rag.catalog import parse_catalog

    doc = {"embedders": [{"id": "pool", "dims": 384, **entry}]}
    with pytest.raises(ConfigError) as exc:
        parse_catalog(yaml.safe_dump(doc), "c.yaml")
    assert message in str(exc.value) and "sk-123" not in str(exc.value)


def test_catalog_urls_make_a_pool() -> None:
    import yaml

    from hydra_rag.catalog import parse_catalog

    doc = {"embedders": [{"id": "pool", "dims": 384, "api_key_env": "POOL_KEY",
                          "urls": ["http://a:8080/v1", "http://b:8080/v1"]}]}
    emb = parse_catalog(yaml.safe_dump(doc), "c.yaml").embedders["pool"]
    assert (emb.url, emb.urls, emb.api_key_env) == (
        "http://a:8080/v1", ("http://a:8080/v1", "http://b:8080/v1"), "POOL_KEY")
