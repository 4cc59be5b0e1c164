"""Text not worth indexing: vector images, certificates and keys, minified code and data on
enormous lines — each skipped under its own reason, brought back by --include, and a file
indexed anyway while mostly minified or data is named in a warning."""

from __future__ import annotations

import argparse
import base64
import json
import random
from pathlib import Path

import pytest

from conftest import run_cli, write_tree
from hydra_rag.config import load_settings
from hydra_rag.index import dry_run, index_folder
from hydra_rag.read.walk import ENORMOUS_LINE, LONG_LINE, content_skip, mostly_long_lines
from hydra_rag.store.index_dir import Store


def _pem(label: str, nbytes: int = 1190, seed: int = 0) -> str:
    """A PEM block with a random body: the shape of a key or certificate, never a real one."""
    body = base64.b64encode(random.Random(f"{label}{seed}").randbytes(nbytes)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n"


def _minified_js(size: int) -> str:
    """One line of code the way a minifier writes it."""
    parts = (f"function f{i}(a,b){{var c=a[{i}]||b.x{i % 7};return c.length>{i}?c.slice(0,{i}):"
             f"c}}" for i in range(size // 40 + 1))
    return ";".join(parts)[:size] + "\n"


def _prose(size: int) -> str:
    """Sentences of ordinary English, without a line break."""
    words = ["the", "river", "carries", "water", "from", "the", "hills", "to", "the", "town",
             "while", "engineers", "measure", "its", "flow", "every", "morning", "and", "record",
             "how", "much", "rain", "fell", "during", "the", "night"]
    rng = random.Random(size)
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < size:
        out += [*rng.sample(words, 9), "and", *rng.sample(words, 6)]
        out[-1] += "."
    return " ".join(out)


def _svg(path_chars: int) -> str:
    rng = random.Random(path_chars)
    d = ""
    while len(d) < path_chars:
        x, y, r = rng.uniform(0, 512), rng.uniform(0, 512), rng.uniform(0, 9)
        d += f"C{x:.3f},{y:.3f} {y:.2f}-{r:.2f}"
    return ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 512 512">\n'
            f'<path fill="#000" d="M0,0{d[:path_chars]}z"/>\n</svg>\n')


# A generated HTML manual page: the whole body on one line of markup (libxslt's pages are so).
# A generated manual page on one long line, saved as XML (an .html page would be read as a
# document, its text extracted).
_HTML_PAGE = ("<html>\n<head><title>Module xslt</title></head>\n<body>"
              + "".join(f'<tr><td><a href="libxslt-{i}.html"><img src="left.png" width="24" '
                        f'alt="Prev" /></a></td><th align="left">xsltFunction{i}</th></tr>'
                        for i in range(60))
              + "</body>\n</html>\n")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # key material
        ("notes\n" + _pem("OPENSSH PRIVATE KEY", 1600), "secret"),
        ("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\n"
         + _pem("RSA PRIVATE KEY").split("\n", 1)[1], "secret"),
        ('KEY = "' + _pem("PRIVATE KEY").replace("\n", "\\n") + '"\n', "secret"),
        (_pem("PGP PRIVATE KEY BLOCK"), "secret"),
        ("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: me\nPublic-Lines: 2\n", "secret"),
        (_pem("CERTIFICATE") + _pem("CERTIFICATE", seed=1), "certificate"),
        (_pem("PUBLIC KEY", 294), "certificate"),
        (_pem("CERTIFICATE REQUEST", 700), "certificate"),
        # text that only mentions key material
        ('if line.startswith("-----BEGIN CERTIFICATE-----"):\n    certs.append(line)\n', ""),
        ("A key starts like this:\n\n    -----BEGIN RSA PRIVATE KEY-----\n    MIIEowIBAAKCAQEA...\n"
         "    -----END RSA PRIVATE KEY-----\n", ""),
        (_prose(3000) + "\n\n" + _pem("CERTIFICATE") + "\n" + _prose(1000) + "\n", ""),
        # enormous lines
        (_minified_js(200_000), "enormous_line"),
        ("var wasm = '" + base64.b64encode(random.Random(1).randbytes(30_000)).decode() + "';\n",
         "enormous_line"),
        (json.dumps([{"id": i, "x": i * 0.5, "tags": ["a", "b"]} for i in range(2000)]) + "\n",
         "enormous_line"),
        (_minified_js(ENORMOUS_LINE - 500), ""),  # long, but below the limit: indexed, warned of
        (_prose(60_000) + "\n", ""),  # prose on one line is cut between words: kept
        ("日本語のテキストは空白なしで書かれます。" * 700 + "\n", ""),
        (_HTML_PAGE, ""),
        (Path(argparse.__file__).read_text(encoding="utf-8"), ""),
    ],
)
def test_content_skip(text: str, reason: str) -> None:
    assert content_skip(text) == reason


@pytest.mark.parametrize(
    ("text", "warned"),
    [
        (_minified_js(ENORMOUS_LINE - 500), True),
        (_minified_js(200_000), True),
        (_HTML_PAGE, True),
        ("first line\n" + _minified_js(LONG_LINE + 100) + "x = 1\n" * 20, True),
        ("x = 1\n" * 800 + _minified_js(LONG_LINE + 100), False),  # one long line among many
        (_minified_js(LONG_LINE - 100), False),  # whole lines for the chunker
        (_prose(60_000) + "\n", False),
        (Path(argparse.__file__).read_text(encoding="utf-8"), False),
    ],
)
def test_mostly_long_lines(text: str, warned: bool) -> None:
    assert mostly_long_lines(text) is warned


@pytest.fixture
def junk_tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "proj", {
        "art/logo.svg": _svg(3594),
        "art/logo.svgz": _svg(100),
        "tls/server.crt": _pem("CERTIFICATE"),
        "tls/server.csr": _pem("CERTIFICATE REQUEST", 700),
        "tls/ca-bundle.txt": "# roots\n" + _pem("CERTIFICATE") + _pem("CERTIFICATE", seed=1),
        "notes/backup.txt": "old laptop\n" + _pem("OPENSSH PRIVATE KEY", 1600),
        "src/settings.py": 'DEBUG = False\nKEY = "' + _pem("RSA PRIVATE KEY").replace("\n", "\\n")
                           + '"\n',
        "static/app.js": _minified_js(200_000),
        "data/dump.json": json.dumps([{"id": i, "v": [i, i * 2]} for i in range(3000)]) + "\n",
        "docs/tls.md": "# TLS\n\nA private key starts like this:\n\n    -----BEGIN RSA PRIVATE KEY-----\n"
                       "    MIIEowIBAAKCAQEA...\n    -----END RSA PRIVATE KEY-----\n",
        "docs/ca.md": "# Our CA\n\n" + _prose(3000) + "\n\n```\n" + _pem("CERTIFICATE") + "```\n",
        "docs/transcript.txt": _prose(40_000) + "\n",
        "docs/manual.xml": _HTML_PAGE,
        "src/cli.py": Path(argparse.__file__).read_text(encoding="utf-8"),
    })


def test_junk_is_skipped_with_a_reason_each(junk_tree: Path) -> None:
    rep = dry_run(junk_tree)
    skipped = {k: set(v) for k, v in rep.skipped.items()}
    assert skipped == {
        "vector_image": {"art/logo.svg", "art/logo.svgz"},
        "certificate": {"tls/server.crt", "tls/server.csr", "tls/ca-bundle.txt"},
        "secret": {"notes/backup.txt", "src/settings.py"},
        "enormous_line": {"static/app.js", "data/dump.json"},
    }
    assert dict(rep.files) == {"docs/tls.md": "prose", "docs/ca.md": "prose",
                               "docs/transcript.txt": "prose", "docs/manual.xml": "code",
                               "src/cli.py": "code"}
    assert rep.long_lines == ["docs/manual.xml"]


def test_include_brings_junk_back(junk_tree: Path) -> None:
    rep = dry_run(junk_tree, include=["*.svg", "*.crt", "static/app.js"])
    files = dict(rep.files)
    assert files["art/logo.svg"] == "code" and "tls/server.crt" in files
    assert "static/app.js" in files and "static/app.js" in rep.long_lines
    assert set(rep.skipped["certificate"]) == {"tls/server.csr", "tls/ca-bundle.txt"}
    assert rep.skipped["vector_image"] == ["art/logo.svgz"]
    assert rep.skipped["enormous_line"] == ["data/dump.json"]
    # A private key found by its content is a secret like one found by its name (id_rsa):
    # an --include naming it is not enough, it takes --include-secrets too (a file that is
    # mostly the key is key material, which the --include brings back).
    assert set(rep.skipped["secret"]) == {"notes/backup.txt", "src/settings.py"}
    named = dry_run(junk_tree, include=["notes/backup.txt"])
    assert "notes/backup.txt" not in dict(named.files)
    assert "notes/backup.txt" in named.skipped["secret"]
    both = dry_run(junk_tree, include=["notes/backup.txt"], include_secrets=True)
    assert "notes/backup.txt" in dict(both.files) and "secret" not in both.skipped
    alone = dry_run(junk_tree, include_secrets=True)
    assert "secret" not in alone.skipped
    assert set(alone.skipped["certificate"]) == {"notes/backup.txt", "src/settings.py",
                                                 "tls/ca-bundle.txt", "tls/server.csr",
                                                 "tls/server.crt"}


def test_cli_dry_run_shows_the_reasons(junk_tree: Path, tmp_path: Path) -> None:
    env = {"HYDRA_RAG_HOME": str(tmp_path / "home")}
    proc = run_cli("index", str(junk_tree), "--dry-run", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    skipped = json.loads(proc.stdout)["skipped"]
    assert sorted(skipped["enormous_line"]) == ["data/dump.json", "static/app.js"]
    assert sorted(skipped["vector_image"]) == ["art/logo.svg", "art/logo.svgz"]
    assert sorted(skipped["certificate"]) == ["tls/ca-bundle.txt", "tls/server.crt", "tls/server.csr"]
    assert sorted(skipped["secret"]) == ["notes/backup.txt", "src/settings.py"]
    proc = run_cli("index", str(junk_tree), "--dry-run", env=env)
    assert "skipped      2  enormous_line: " in proc.stderr
    assert "skipped      3  certificate: " in proc.stderr


def test_index_warns_of_minified_or_data_files(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "w", {
        "static/app.js": _minified_js(12_000),
        "docs/manual.xml": _HTML_PAGE,
        "README.md": "# Demo\n\nA small project that serves a page.\n",
    })
    rep = index_folder(root, load_settings())
    assert rep.files_skipped["enormous_line"] == 1 and rep.files_indexed == 2
    assert rep.long_lines == ["docs/manual.xml"]
    assert [n for n in rep.notes if "docs/manual.xml" in n] == [
        "1 indexed file is mostly minified code or data on lines over 3,000 characters, cut "
        "mid-line into chunks that search poorly: docs/manual.xml (--exclude or a .hydraignore "
        "leaves them out)"]
    # The skip is remembered for the unchanged file, yet an --include naming it reads it again.
    assert index_folder(root, load_settings()).files_skipped["enormous_line"] == 1
    assert Store(root).read_files()["static/app.js"].skip == "enormous_line"
    rep = index_folder(root, load_settings(), include=["static/app.js"])
    assert rep.files_indexed == 1 and rep.long_lines == ["static/app.js"]
    assert any("static/app.js" in n and "minified code or data" in n for n in rep.notes)
    assert "static/app.js" in set(Store(root).scan("code", ["path"]).column("path").to_pylist())
