"""Persona files (pure): Markdown whose body becomes a system prompt, with optional YAML front
matter for sampling parameters."""

from __future__ import annotations

from typing import Any

import yaml

from hydra_rag.catalog import PARAMS, _check
from hydra_rag.errors import ConfigError, yaml_problem


def parse_persona(text: str, origin: str) -> tuple[str, dict[str, Any]]:
    """(system prompt, params) from a persona file's text; errors name the file and the key."""
    params: dict[str, Any] = {}
    body = text.lstrip("\ufeff")
    lines = body.splitlines(keepends=True)
    if lines and lines[0].strip() == "---":
        end = next((i for i, ln in enumerate(lines[1:], start=1) if ln.strip() == "---"), None)
        if end is None:
            raise ConfigError(f"{origin}: front matter opened with --- is never closed")
        try:
            # A newline first stands for the opening ---, so errors name the file's own lines.
            meta = yaml.safe_load("\n" + "".join(lines[1:end])) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{origin}: front matter is not valid YAML "
                              f"({yaml_problem(exc)})") from None
        if not isinstance(meta, dict):
            raise ConfigError(f"{origin}: front matter must be a mapping of parameters")
        for key, value in meta.items():
            if key not in PARAMS:
                raise ConfigError(f"{origin}: unknown parameter {key!r} in the front matter "
                                  f"(known: {', '.join(PARAMS)})")
            _check(origin, key, value, PARAMS[key])
            params[key] = value
        body = "".join(lines[end + 1 :])
    system = body.strip()
    if not system:
        raise ConfigError(f"{origin}: the persona has no text to use as a system prompt")
    return system, params
