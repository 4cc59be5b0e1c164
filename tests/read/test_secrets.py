"""Secrets stay out unless said twice: private keys and credentials, found by name or by content,
are skipped whatever --include says, and indexed only with --include-secrets. Pure: the walker
and the content check, no index."""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest

from conftest import write_tree
from hydra_rag.read.secrets import holds_private_key
from hydra_rag.read.walk import Walker, content_skip, read_indexable


def _pem(label: str, nbytes: int = 600) -> str:
    """A PEM block with a random body: the shape of a key or certificate, never a real one."""
    body = base64.b64encode(random.Random(label).randbytes(nbytes)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (_pem("RSA PRIVATE KEY"), True),
        (_pem("EC PRIVATE KEY"), True),
        (_pem("PRIVATE KEY"), True),
        (_pem("ENCRYPTED PRIVATE KEY"), True),
        (_pem("OPENSSH PRIVATE KEY"), True),
        ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n"
         + _pem("PGP PRIVATE KEY BLOCK").split("\n", 1)[1], True),
        ("meeting notes\n\nserver key below, do not share\n" + _pem("RSA PRIVATE KEY")
         + "\nmore notes\n", True),
        ("---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nSubject: me\n", True),
        ("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\n", True),
        (_pem("CERTIFICATE"), False),
        (_pem("PUBLIC KEY"), False),
        (_pem("PGP PUBLIC KEY BLOCK"), False),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx0 me@host\n", False),
        # A parser that names the header, documentation that shows its shape: no key.
        ('HEADER = "-----BEGIN RSA PRIVATE KEY-----"\n', False),
        ("A key looks like:\n\n    -----BEGIN PRIVATE KEY-----\n    MIIEv...\n"
         "    -----END PRIVATE KEY-----\n", False),
    ],
)
def test_holds_private_key(text: str, secret: bool) -> None:
    assert holds_private_key(text) is secret
    assert (content_skip(text, included=True) == "secret") is secret


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "proj", {
        "README.md": "# keys\n",
        "tls/server.pem": _pem("PRIVATE KEY"),
        "tls/chain.pem": _pem("CERTIFICATE"),
        "ssh/id_ed25519": _pem("OPENSSH PRIVATE KEY"),
        "ssh/id_ed25519.pub": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDx0 me@host\n",
        "notes.txt": "backup of the deploy key\n" + _pem("RSA PRIVATE KEY"),
        ".env": "API_TOKEN=abc\n",
        ".env.example": "API_TOKEN=\n",
        ".netrc": "machine example.com login me password pw\n",
        ".aws/credentials": "[default]\naws_secret_access_key = x\n",
        "kube/kubeconfig": "apiVersion: v1\nusers: []\n",
        "secring.gpg": "not really\n",
        # Code about credentials is code; their data files are not.
        "src/botocore/credentials.py": "class Credentials:\n    pass\n",
        "config/credentials.yaml": "token: abc\n",
        "client_secret_123.apps.json": '{"installed": {"client_secret": "x"}}\n',
        ".streamlit/secrets.toml": 'password = "x"\n',
        "prod.tfvars": 'db_password = "x"\n',
        ".s3cfg": "[default]\nsecret_key = x\n",
    })


def _taken(root: Path, **kw: object) -> set[str]:
    """What an index run would index: the walk, then the content check of each file kept."""
    walked = Walker(root, **kw).walk()  # type: ignore[arg-type]
    return {c.rel for c in walked.files
            if read_indexable(root / c.rel, c.included, c.secrets)[0] is not None}


def test_secrets_are_skipped_with_their_reason(keys: Path) -> None:
    walked = Walker(keys).walk()
    assert set(walked.skipped_paths["secret"]) == {
        "tls/server.pem", "ssh/id_ed25519", ".env", ".netrc", ".aws/credentials",
        "kube/kubeconfig", "secring.gpg", "config/credentials.yaml", "client_secret_123.apps.json",
        ".streamlit/secrets.toml", "prod.tfvars", ".s3cfg"}
    # A certificate and a public key are no secrets: key material, which --include brings back.
    assert set(walked.skipped_paths["certificate"]) == {"tls/chain.pem", "ssh/id_ed25519.pub"}
    # notes.txt is found by its content, when it is read.
    assert read_indexable(keys / "notes.txt") == (None, "secret")
    assert _taken(keys) == {"README.md", ".env.example", "src/botocore/credentials.py"}


def test_include_alone_does_not_bring_a_secret_in(keys: Path) -> None:
    taken = _taken(keys, include=["*.pem", "*.pub", "notes.txt", ".env", "ssh/**"])
    assert taken == {"README.md", ".env.example", "tls/chain.pem", "ssh/id_ed25519.pub",
                     "src/botocore/credentials.py"}


def test_include_secrets_brings_them_in(keys: Path) -> None:
    taken = _taken(keys, include=["*.pem", "notes.txt", "ssh/**"], include_secrets=True)
    assert {"tls/server.pem", "ssh/id_ed25519", "notes.txt", ".env", ".netrc",
            ".aws/credentials", "secring.gpg"} <= taken
    assert "secret" not in Walker(keys, include_secrets=True).walk().skipped


def test_a_secret_in_a_folder_brought_back_by_include(tmp_path: Path) -> None:
    # node_modules/ is blacklisted; an --include reaching into it still leaves keys out.
    root = write_tree(tmp_path / "p", {"node_modules/pkg/index.js": "x = 1\n",
                                       "node_modules/pkg/.env": "TOKEN=1\n"})
    walked = Walker(root, include=["node_modules/**"]).walk()
    assert [c.rel for c in walked.files] == ["node_modules/pkg/index.js"]
    assert walked.skipped_paths["secret"] == ["node_modules/pkg/.env"]
