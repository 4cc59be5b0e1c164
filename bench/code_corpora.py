"""The real projects of the code-search set (bench/code_search.py): six projects in six
languages that are not in this repository, fetched from the package registries this machine
reaches (PyPI, npm, Debian) at pinned versions and laid out as their maintainers see them.

    python bench/code_corpora.py [--only NAME,...]

Each lands in bench/.work/code/NAME/ (fetched once; delete the folder to fetch again). The
questions and the files a maintainer would point to are in bench/code_search/NAME.jsonl.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "code"

# name → (language, registry, package spec, {path in the package: path in the project})
PROJECTS: dict[str, tuple[str, str, str, dict[str, str]]] = {
    "httpx": ("python", "pypi", "httpx==0.28.1", {"httpx-0.28.1": ""}),
    "axios": ("javascript", "npm", "axios@1.21.1",
              {"package/lib": "lib", "package/README.md": "README.md",
               "package/MIGRATION_GUIDE.md": "MIGRATION_GUIDE.md",
               "package/index.js": "index.js"}),
    "zod": ("typescript", "npm", "zod@4.6.7",
            {"package/src/v4/core": "src/v4/core", "package/src/v4/classic": "src/v4/classic",
             "package/README.md": "README.md"}),
    "cobra": ("go", "debian", "golang-github-spf13-cobra-dev=1.6.1-1",
              {"usr/share/gocode/src/github.com/spf13/cobra": ""}),
    "serde_json": ("rust", "debian", "librust-serde-json-dev=1.0.87-1",
                   {"usr/share/cargo/registry/serde_json-1.0.87": ""}),
    "spdlog": ("cpp", "debian", "libspdlog-dev=1:1.10.0+ds-0.4",
               {"usr/include/spdlog": "include/spdlog",
                "usr/share/doc/libspdlog-dev/tests": "tests",
                "usr/share/doc/libspdlog-dev/examples/example": "example"}),
}


def _fetch(registry: str, spec: str, into: Path) -> Path:
    """Download one package into `into` and unpack it there; the unpacked root."""
    root = into / "unpacked"
    root.mkdir()
    if registry == "pypi":
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                        ":all:", "-q", "-d", str(into), spec], check=True)
        archive = next(into.glob("*.tar.gz"))
    elif registry == "npm":
        subprocess.run(["npm", "pack", spec, "--silent", "--pack-destination", str(into)],
                       check=True, stdout=subprocess.DEVNULL)
        archive = next(into.glob("*.tgz"))
    else:
        subprocess.run(["apt-get", "download", "-q", spec], check=True, cwd=into,
                       stdout=subprocess.DEVNULL)
        deb = next(into.glob("*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
        return root
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return root


def fetch(name: str) -> Path:
    """The project's folder, fetched and laid out if it is not there yet."""
    dest = WORK / name
    if dest.is_dir():
        return dest
    _, registry, spec, layout = PROJECTS[name]
    with tempfile.TemporaryDirectory() as tmp:
        root = _fetch(registry, spec, Path(tmp))
        part = Path(tmp) / "project"
        for src, rel in layout.items():
            s, d = root / src, part / rel
            d.parent.mkdir(parents=True, exist_ok=True)
            if s.is_dir():
                shutil.copytree(s, d, dirs_exist_ok=True)
            else:
                shutil.copy2(s, d)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(part), dest)
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(PROJECTS))
    args = ap.parse_args()
    for name in args.only.split(","):
        path = fetch(name)
        files = sum(1 for p in path.rglob("*") if p.is_file())
        print(f"{name:11} {PROJECTS[name][0]:11} {files:4} files  {path}")


if __name__ == "__main__":
    main()
