"""The walker: git's three ignore layers, .hydraignore, the blacklist, secrets, content checks,
symlinks and awkward names — each skip counted under its reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import write_tree
from hydra_rag.read.walk import MAX_BYTES, Walker, read_text


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake_home = tmp_path / "userhome"
    fake_home.mkdir()
    (fake_home / "global-ignore").write_text("*.globalskip\n")
    (fake_home / ".gitconfig").write_text(
        f"[core]\n\texcludesFile = {fake_home / 'global-ignore'}\n"
    )
    monkeypatch.setenv("HOME", str(fake_home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(fake_home / ".config"))
    root = write_tree(tmp_path / "proj", {
        ".git/HEAD": "ref: refs/heads/main\n",
        ".git/info/exclude": "*.localskip\n",
        ".gitignore": "*.log\nbuild-out/\n!keep.log\n",
        "sub/.gitignore": "secret_notes.md\n!important.tmp\n*.tmp\n",
        "sub/.hydraignore": "drafts/\n",
        "main.py": "print('hi')\n",
        "keep.log": "kept by negation\n",
        "debug.log": "ignored\n",
        "x.localskip": "ignored by info/exclude\n",
        "y.globalskip": "ignored by the global excludes file\n",
        "build-out/a.py": "ignored dir\n",
        "sub/secret_notes.md": "ignored by nested gitignore\n",
        "sub/a.tmp": "ignored\n",
        "sub/important.tmp": "not ignored? (last match wins: *.tmp comes after)\n",
        "sub/drafts/d.md": "hydraignored\n",
        "sub/ok.md": "fine\n",
        "node_modules/pkg/index.js": "module.exports = 1\n",
        "node_modules/pkg/README.md": "readme\n",
        ".venv/lib.py": "x = 1\n",
        "dist/app.js": "x\n",
        "package-lock.json": "{}\n",
        "app.min.js": "var a=1\n",
        "model.gguf": b"GGUF....",
        "photo.png": b"\x89PNG....",
        ".env": "API_KEY=hunter2\n",
        ".env.production": "API_KEY=hunter2\n",
        ".env.example": "API_KEY=\n",
        "id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\n",
        "certs/server.pem": "-----BEGIN CERTIFICATE-----\n",
        "certs/server-key.pem": "-----BEGIN PRIVATE KEY-----\n" + "MIIEvQIBADANBgkqhkiG9w0B" * 4
                                + "\n-----END PRIVATE KEY-----\n",
        "empty.txt": "",
        "with space.md": "spaces in the name\n",
        "кириллица.md": "Привет, мир\n",
        "newline\nname.md": "a newline in the name\n",
    })
    (root / "big.txt").write_text("a" * (MAX_BYTES + 1))
    (root / "binary.dat").write_bytes(b"abc\x00def")
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    os.symlink(root / "sub", root / "linked_dir")
    os.symlink(root / "nowhere", root / "broken_link")
    os.symlink(root / "loop_b", root / "loop_a")
    os.symlink(root / "loop_a", root / "loop_b")
    os.symlink(root / "main.py", root / "main_link.py")
    (root / "fifo").unlink(missing_ok=True)
    os.mkfifo(root / "fifo")
    return root


def test_walk_rules(tree: Path) -> None:
    res = Walker(tree).walk()
    kept = {c.rel for c in res.files}
    # A name with a newline is kept in the form the index stores it, escaped (paths.escape_name).
    assert {"main.py", "keep.log", "sub/ok.md", "with space.md", "кириллица.md",
            "newline\\nname.md", ".env.example", "main_link.py", ".gitignore",
            "sub/.gitignore", "sub/.hydraignore"} <= kept
    for gone in ["debug.log", "x.localskip", "y.globalskip", "build-out/a.py",
                 "sub/secret_notes.md", "sub/a.tmp", "sub/drafts/d.md",
                 "node_modules/pkg/index.js", ".venv/lib.py", "dist/app.js",
                 "package-lock.json", "app.min.js", "model.gguf", "photo.png", ".env",
                 ".env.production", "id_rsa", "certs/server.pem", "certs/server-key.pem",
                 "empty.txt", "big.txt",
                 ".git/HEAD"]:
        assert gone not in kept, gone
    # "*.tmp" after "!important.tmp": the last matching pattern wins, as in git.
    assert "sub/important.tmp" not in kept
    paths = res.skipped_paths
    assert "debug.log" in paths["gitignore"]
    assert "x.localskip" in paths["gitignore"] and "y.globalskip" in paths["gitignore"]
    assert "sub/drafts/" in paths["hydraignore"]
    # A .pem is a secret when it holds a private key; a certificate chain is key material.
    assert {".env", ".env.production", "id_rsa", "certs/server-key.pem"} <= set(paths["secret"])
    assert paths["certificate"] == ["certs/server.pem"]
    assert {"node_modules/", ".venv/", "dist/", "model.gguf", "photo.png"} <= set(paths["blacklisted"])
    assert paths["empty"] == ["empty.txt"]
    assert paths["too_large"] == ["big.txt"]
    assert paths["symlink_dir"] == ["linked_dir"]
    assert paths["broken_symlink"] == ["broken_link"]
    assert set(paths["symlink_loop"]) == {"loop_a", "loop_b"}
    assert paths["special"] == ["fifo"]
    assert sum(res.skipped.values()) == sum(len(v) for v in paths.values())


def test_include_brings_back_a_file_under_a_pruned_folder(tree: Path) -> None:
    res = Walker(tree, include=["node_modules/pkg/index.js", "*.localskip"]).walk()
    kept = {c.rel for c in res.files}
    assert "node_modules/pkg/index.js" in kept
    assert "x.localskip" in kept
    assert "node_modules/pkg/README.md" not in kept


def test_no_include_reaches_into_an_index(tmp_path: Path) -> None:
    for rel in (".hydra-index/files.db", "sub/.hydra-index/meta.yaml", "sub/ok.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    res = Walker(tmp_path, include=[".hydra-index/", "*.db", "*.yaml"]).walk()
    assert {c.rel for c in res.files} == {"sub/ok.md"}
    # A nested folder's index is skipped; the folder's own is not one of its files, so that
    # `index --dry-run` before a first index counts the skipped files as the run does.
    assert set(res.skipped_paths["blacklisted"]) == {"sub/.hydra-index/"}


def test_exclude(tree: Path) -> None:
    res = Walker(tree, exclude=["sub/", "*.py"]).walk()
    kept = {c.rel for c in res.files}
    assert "main.py" not in kept and "sub/ok.md" not in kept
    assert "keep.log" in kept
    assert "sub/" in res.skipped_paths["excluded"]


def test_symlinked_file_pointing_outside_is_skipped(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("private\n")
    root = tmp_path / "r"
    root.mkdir()
    os.symlink(outside, root / "link.txt")
    res = Walker(root).walk()
    assert res.files == []
    assert res.skipped_paths["symlink_outside"] == ["link.txt"]


def test_unreadable_folder_is_counted(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads everything")
    root = write_tree(tmp_path / "r", {"locked/a.md": "x\n", "b.md": "y\n"})
    (root / "locked").chmod(0)
    try:
        res = Walker(root).walk()
    finally:
        (root / "locked").chmod(0o755)
    assert res.skipped_paths["unreadable"] == ["locked"]


def test_read_text_content_checks(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"abc\x00")
    assert read_text(f) == (None, "binary")
    f.write_bytes(b"\xff\xfe bad")
    assert read_text(f) == (None, "not_utf8")
    # A valid file whose multi-byte characters straddle any 1 KiB / 8 KiB window boundary.
    text = ("a" + "Ж" * 5000 + "\n") * 20
    f.write_text(text, encoding="utf-8")
    assert read_text(f) == (text, "")
    f.write_bytes("\ufeffwith bom\n".encode())
    assert read_text(f) == ("with bom\n", "")
    assert read_text(tmp_path / "missing") == (None, "vanished")


@pytest.mark.parametrize(
    ("rel", "is_dir", "reason"),
    [
        ("pkg/thing.egg-info", True, "blacklisted"),
        ("ruby/vendor/bundle", True, "blacklisted"),
        ("vendor", True, ""),
        ("a/b/node_modules", True, "blacklisted"),
        ("lib/libfoo.so.1.2", False, "blacklisted"),
        ("static/app.min.js", False, "blacklisted"),
        ("Cargo.lock", False, "blacklisted"),
        ("home/.docker/config.json", False, "secret"),
        ("gcp/my-credentials-prod.json", False, "secret"),
        ("deploy/id_ed25519.pub", False, "certificate"),  # a public key is no secret
        ("config/.env.local", False, "secret"),
        ("config/.env.example", False, ""),
        ("infra/terraform.tfstate.backup", False, "secret"),
        ("docs/env.md", False, ""),
        ("src/keys.py", False, ""),
        ("keys/server.ppk", False, "secret"),
        ("apns/AuthKey_ABC123.p8", False, "secret"),
        ("docs/_static/logo.svg", False, "vector_image"),
        ("art/logo.svgz", False, "vector_image"),
        ("tls/server.crt", False, "certificate"),
        ("tls/server.csr", False, "certificate"),
        ("tls/root.cer", False, "certificate"),
        ("tls/revoked.crl", False, "certificate"),
        ("keys/cosign.pub", False, "certificate"),
        ("tls/server.pem", False, "secret"),
        ("src/svg.py", False, ""),
    ],
)
def test_builtin_rules(tmp_path: Path, rel: str, is_dir: bool, reason: str) -> None:
    assert Walker(tmp_path)._rule([], rel, is_dir) == reason


def test_a_folder_named_is_walked_though_a_file_above_ignores_it(tmp_path: Path) -> None:
    # ripgrep's rule: the folder you name is searched. A rule above it that ignores the folder
    # itself (or one between) does not empty it; the other rules of that file still hold.
    repo = write_tree(tmp_path / "repo", {
        ".git/HEAD": "ref: refs/heads/main\n",
        ".gitignore": "out/\n*.log\n",
        "out/site/page.md": "a page\n",
        "out/site/build.log": "a log\n",
        "src/a.py": "x = 1\n",
    })
    kept = {c.rel for c in Walker(repo / "out" / "site").walk().files}
    assert kept == {"page.md"}
    assert "out/site/page.md" not in {c.rel for c in Walker(repo).walk().files}
