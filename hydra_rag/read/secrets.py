"""Which files hold secrets: private keys and credentials, by name and by content. A secret is
never indexed unless the run says so with --include-secrets: an --include glob alone is not
enough (`--include '*.pem'` meant for certificates must not bring a server's key in with
them), and an index is read by every search, chat and server that looks into the folder.

Public keys and certificates are not secrets (the walker skips them as `certificate`, key
material not worth searching, which --include brings back).
"""

from __future__ import annotations

import re
from pathlib import Path

SECRET = "secret"
# What `status --files`, `--dry-run` and `eval` say of a file skipped as a secret.
HINT = "looks like a private key or credentials; index it with --include-secrets"

# Names that hold a secret whatever their content (gitignore-style: a pattern without a slash
# matches a base name at any depth). `*.pem` is not among them: a PEM file is as often a
# certificate chain as a key, and its content tells which (PEM_NAMES).
# Extensions of data files: a name like `credentials` or `secrets` with one of these holds
# them; with a code extension it is code about them.
_DATA = ("json", "yaml", "yml", "toml", "ini", "cfg", "conf", "txt", "csv", "xml",
         "properties", "env")
NAMES = [
    ".env", ".env.*", "*.env", ".envrc", "*.key", "*.p12", "*.pfx", "*.p8", "*.ppk",
    "*.jks", "*.keystore", "*.kdbx", "*.asc", "*.gpg", "id_rsa", "id_rsa.*", "id_dsa", "id_dsa.*",
    "id_ecdsa", "id_ecdsa.*", "id_ed25519", "id_ed25519.*", ".netrc", ".pgpass", ".npmrc",
    ".pypirc", ".htpasswd", ".s3cfg", ".my.cnf", ".vault-token", "credentials",
    # `credentials.*` as data only: botocore's and google-auth's credentials.py are code.
    *(f"credentials.{ext}" for ext in _DATA), "*credentials*.json", "client_secret*.json",
    *(f"secrets.{ext}" for ext in _DATA), "*.tfvars", "*.tfvars.json", "*.secret",
    "*.secrets", "service-account*.json", ".git-credentials", ".dockercfg",
    ".docker/config.json", "*.tfstate", "*.tfstate.*", "known_hosts", "authorized_keys",
    "kubeconfig", "*.kubeconfig", ".kube/config",
]
# Examples and templates of secrets files hold no secrets and are worth indexing; so does a
# public key (id_rsa.pub matches id_rsa.*), which is skipped as a certificate instead.
OK_NAMES = [".env.example", ".env.sample", ".env.template", "*.env.example", "*.pub",
            "*.tfvars.example"]
# Names whose content decides: a private key in them is a secret, certificates are not.
PEM_NAMES = ["*.pem"]

# How much of a file the name check reads: a PEM file starts with its blocks, and a chain of
# a dozen certificates is under 32 KB.
_HEAD = 64 << 10

PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]{1,60})-----(.{0,100000}?)-----END \1-----", re.S)
_OTHER_PRIVATE = re.compile(r"^(?:---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----|PuTTY-User-Key-File-\d+: )",
                            re.M)
_BASE64 = re.compile(r"[A-Za-z0-9+/=]{64,}")


def armored(block: re.Match[str]) -> bool:
    """Whether a PEM match has a base64 body. Header lines (Proc-Type:, DEK-Info:, Comment:)
    aside, a real block has one; "MIIEow..." in documentation does not. A block in a string
    may have escaped newlines."""
    body = "".join(ln for ln in block.group(2).splitlines() if ":" not in ln)
    return bool(_BASE64.search(re.sub(r"\s+|\\[rn]", "", body)))


def holds_private_key(text: str) -> bool:
    """Whether `text` holds a private key: a PEM block (RSA, EC, OpenSSH, encrypted PKCS#8,
    PGP private key block) with a real body, or a PuTTY or SSH2 key file. Code that merely
    names a header (`"-----BEGIN RSA PRIVATE KEY-----"` in a parser) is not one."""
    if not ("PRIVATE KEY" in text or "PuTTY-User-Key-File-" in text):
        return False
    if _OTHER_PRIVATE.search(text):
        return True
    return any("PRIVATE KEY" in m.group(1) and armored(m) for m in PEM.finditer(text))


def pem_holds_secret(path: Path) -> bool:
    """Whether a PEM-named file holds a private key (read from its head), or cannot be read to
    tell: then it is kept out as one."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
    except OSError:
        return True
    return holds_private_key(head.decode("utf-8", errors="replace"))
