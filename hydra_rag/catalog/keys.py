"""Keeping keys out of catalogs: `api_key_env` must name an environment variable, a url must carry
no credentials, and no field may be named like one that holds a key."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from hydra_rag.errors import ConfigError

# An environment variable's name as api_key_env takes it. Capitals only: a pasted key
# (sk-…, hf_…, hex) is mixed case or has other characters, so it is refused as a name
# before it could be printed in a message as one.
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
# The last word of a name that holds a key (api_key, access-token, apiKey), or the whole name.
_SECRET_WORDS = frozenset({"key", "keys", "apikey", "token", "tokens", "accesstoken",
                           "authtoken", "secret", "secrets", "password", "passwd", "bearer",
                           "auth", "authorization", "credential", "credentials"})
NO_KEYS = ("never store a key in a catalog: put it in an environment variable and name that "
           "variable in 'api_key_env' (api_key_env: MY_ENDPOINT_KEY)")


def looks_like_secret(name: str) -> bool:
    """Does a field or parameter name say it holds a key (api_key, token, apiKey, auth…)?"""
    words = re.findall(r"[a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower())
    return bool(words) and (words[-1] in _SECRET_WORDS or "".join(words) in _SECRET_WORDS)


def _check_remote(where: str, raw: dict[str, Any]) -> None:
    """`api_key_env` names a variable and comes with `url:`; the url carries no key. No message
    quotes a value here: it may be the key itself."""
    url = raw.get("url") or raw.get("urls")
    listed = raw.get("urls")
    several: list[Any] = listed if isinstance(listed, list) else []
    for field, u in [("url", raw.get("url")), *(("urls", u) for u in several)]:
        if not isinstance(u, str):
            continue
        parts = urlsplit(u)
        if parts.username is not None or parts.password is not None:
            raise ConfigError(f"{where}: field {field!r} carries credentials (user@ or "
                              f"user:password@); {NO_KEYS}")
        secret = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True)
                  if looks_like_secret(k)]
        if secret:
            raise ConfigError(f"{where}: field {field!r} carries a key in its {secret[0]}= "
                              f"parameter; {NO_KEYS}")
    if "api_key_env" not in raw:
        return
    name = raw["api_key_env"]
    if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
        raise ConfigError(f"{where}: field 'api_key_env' must be the name of an environment "
                          "variable in capitals, digits and _ (like TEAM_EMBEDDER_KEY), "
                          "never the key itself")
    if not url:
        raise ConfigError(f"{where}: field 'api_key_env' applies only to an entry with 'url' "
                          "(a local sidecar takes no key)")
