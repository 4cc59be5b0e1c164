"""`hydra-rag watch --install`: a systemd user unit that runs the watch at login."""

from __future__ import annotations

import hashlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from hydra_rag.catalog.keys import looks_like_secret
from hydra_rag.errors import HydraError
from hydra_rag.locks import write_atomic
from hydra_rag.read.source import resolve_root


@dataclass(frozen=True)
class Unit:
    name: str  # hydra-rag-watch-<what>.service
    path: Path
    text: str
    replaced: bool  # a unit of that name was there, with other contents
    keys: tuple[str, ...] = ()  # variables holding endpoint keys, which the unit cannot carry

    def commands(self) -> list[str]:
        """What the user runs to start it now and at every login, and to read its log."""
        give = [f"systemctl --user set-environment {k}=<the key>  # the unit holds no keys"
                for k in self.keys]
        return [*give,
                f"systemctl --user daemon-reload && systemctl --user enable --now {self.name}",
                f"journalctl --user -u {self.name} -f",
                "loginctl enable-linger $USER  # optional: keep it running while logged out"]


def _key_variables() -> tuple[str, ...]:
    """The environment variables holding the keys of the embedders an index run would call."""
    from hydra_rag.catalog import get_embedder
    from hydra_rag.config import load_settings

    settings = load_settings()
    names = {settings.embedder_api_key_env} if settings.embedder_url else set()
    for table in ("code", "prose"):
        try:
            emb = get_embedder(settings.embedder_for(table))
        except HydraError:
            continue
        if emb.url and emb.api_key_env and not settings.embedder_url:
            names.add(emb.api_key_env)
    return tuple(sorted(n for n in names if n))


def unit_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def quote(arg: str) -> str:
    """One argument of ExecStart= as systemd reads it: double-quoted, with `\\` and `"`
    escaped, `%` (its specifiers) doubled and `$` (its variables) doubled."""
    esc = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{esc}"'


def unit_name(roots: list[Path], all_: bool, tags: list[str]) -> str:
    """A name per set of folders, so that units for different folders do not overwrite each
    other: `all`, `tag-<tags>`, or the folder's name (several: the first's, +N), each with a
    short hash of the exact arguments."""
    if all_:
        what = "all"
    elif tags:
        what = "tag-" + "-".join(tags)
    else:
        what = roots[0].name + (f"+{len(roots) - 1}" if len(roots) > 1 else "")
    slug = re.sub(r"[^A-Za-z0-9_.+-]+", "-", what).strip("-")[:40] or "folder"
    key = "\0".join([str(all_), *tags, *map(str, roots)])
    return f"hydra-rag-watch-{slug}-{hashlib.sha256(key.encode()).hexdigest()[:6]}.service"


def install(roots: list[Path], all_: bool = False, tags: list[str] | None = None,
            args: list[str] | None = None) -> Unit:
    """Write the unit for `hydra-rag watch` over these folders (`args`: further options, e.g.
    --include); returns it, and what to run to enable it."""
    tags = list(tags or [])
    roots = [resolve_root(r) for r in roots]
    # The interpreter this command runs in, not a `hydra-rag` looked up on a PATH that systemd
    # does not share with the login shell.
    cmd = [sys.executable, "-P", "-m", "hydra_rag", "watch", *map(str, roots)]
    cmd += ["--all"] if all_ else [a for t in tags for a in ("--tag", t)]
    cmd += list(args or [])
    # The watch's settings, never a secret (HYDRA_RAG_SERVE_TOKEN, a *_KEY): a unit file is
    # a config file, read by tools and copied by backups, and a watch needs none of them.
    env = [f"Environment={quote(f'{k}={v}')}" for k, v in sorted(os.environ.items())
           if k.startswith("HYDRA_RAG_") and not looks_like_secret(k)]
    what = "every registered folder" if all_ else (
        "folders tagged " + ", ".join(tags) if tags else ", ".join(map(str, roots)))
    text = "\n".join([
        "[Unit]",
        f"Description=hydra-rag watch: keeps the index of {what} current",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(quote(a) for a in cmd),
        *env,
        # SIGTERM ends a run at a consistent point and exits 0; an error (no folder left) is
        # restarted after a pause.
        "Restart=on-failure",
        "RestartSec=30",
        "TimeoutStopSec=120",
        "Nice=10",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ])
    name = unit_name(roots, all_, tags)
    path = unit_dir() / name
    try:
        replaced = path.is_file() and path.read_text() != text
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text, mode=0o600)  # it names folders and settings: ours alone
    except OSError as exc:
        raise HydraError(f"cannot write {path}: {exc.strerror}") from None
    return Unit(name, path, text, replaced, _key_variables())
