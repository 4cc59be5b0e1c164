"""Where is NAME defined? Definitions found by search on real projects, against grep, today's
default against an earlier revision in the same run.

    python bench/definitions.py [--names 80] [--before REV] [--projects flask,requests,...]

The projects come from the registries this machine reaches, as published: flask and requests
(PyPI source distributions), express 4 (npm), cobra (Debian's golang-github-spf13-cobra-dev)
and regex (Debian's librust-regex-dev); unpacked into bench/.work/definitions/, each indexed
as a folder of its own, as a user would. Nobody here wrote them.

The names: for each project, the functions, methods, classes and types that a plain regular
expression per language (not the parser under test) finds defined exactly once in the
project, up to --names of them (a fixed shuffle). Each is searched twice, as the bare name and
as "where is NAME defined"; a hit counts when its file is the definition's and its lines hold
the line the definition starts on. Hit@1 and Hit@3 per project and form.

The reference: `grep -rnw NAME` with its lines sorted by path — does its first line show the
definition? (`grep -n 'def NAME'` finds it every time, but needs the language's keyword.)

--before REV indexes the same projects with the code of revision REV (a git worktree, run by
its own `python -m hydra_rag`) and searches them the same way: the earlier default, measured
in the same run on the same machine. Index time and the index's size are reported for both.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORK = HERE / ".work" / "definitions"

# name → (how to fetch it, the language, the file suffix)
PROJECTS = {
    "flask": ("pypi:flask==3.1.0", "python", ".py"),
    "requests": ("pypi:requests==2.32.3", "python", ".py"),
    "express": ("npm:express@4.21.2", "javascript", ".js"),
    "cobra": ("deb:golang-github-spf13-cobra-dev", "go", ".go"),
    "regex": ("deb:librust-regex-dev", "rust", ".rs"),
}
# A definition as a regular expression sees it, by language (group 1: the name).
DEFINED = {
    "python": [r"^\s*(?:async\s+)?def\s+(\w+)\s*\(", r"^\s*class\s+(\w+)\b"],
    "javascript": [r"^\s*(?:export\s+)?(?:async\s+)?function\s*\*?\s*(\w+)\s*\(",
                   r"^\s*(?:export\s+)?class\s+(\w+)\b",
                   r"^\s*(?:[\w$]+\.)+(\w+)\s*=\s*function\b"],
    "go": [r"^func\s+(?:\([^)]*\)\s*)?(\w+)\s*[\[(]", r"^type\s+(\w+)\s"],
    "rust": [r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe)\s+)*fn\s+(\w+)",
             r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:struct|enum|trait|union)\s+(\w+)"],
}
FORMS = {"bare": "{}", "asked": "where is {} defined"}


def fetch(name: str) -> Path:
    """The project's source, unpacked once."""
    spec = PROJECTS[name][0]
    dest = WORK / "src" / name
    if dest.is_dir():
        return dest
    tmp = WORK / "download" / name
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    kind, _, what = spec.partition(":")
    if kind == "pypi":
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", ":all:", "-d", str(tmp), what], check=True)
        (archive,) = tmp.glob("*.tar.gz")
        with tarfile.open(archive) as tar:
            tar.extractall(tmp / "x", filter="data")
        (top,) = (tmp / "x").iterdir()
        src = top / "src" if (top / "src").is_dir() else top
    elif kind == "npm":
        subprocess.run(["npm", "pack", "--silent", what], cwd=tmp, check=True,
                       capture_output=True)
        (archive,) = tmp.glob("*.tgz")
        with tarfile.open(archive) as tar:
            tar.extractall(tmp / "x", filter="data")
        src = tmp / "x" / "package"
    else:
        subprocess.run(["apt-get", "download", what], cwd=tmp, check=True, capture_output=True)
        (deb,) = tmp.glob("*.deb")
        subprocess.run(["dpkg", "-x", str(deb), str(tmp / "x")], check=True)
        src = _root_of(tmp / "x", PROJECTS[name][2])
    shutil.copytree(src, dest)
    return dest


def _root_of(base: Path, suffix: str) -> Path:
    """The deepest folder that holds every source file of the unpacked package."""
    files = list(base.rglob(f"*{suffix}"))
    common = Path(os.path.commonpath([str(p.parent) for p in files]))
    # A crate's sources sit in <crate>/src: take the crate (its tests and examples too).
    return common.parent if common.name == "src" else common


def project(name: str, tag: str) -> Path:
    """A project's own folder, indexed on its own as a user would (its own git repository:
    this checkout ignores .work)."""
    root = WORK / f"projects-{tag}" / name
    if not root.exists():
        shutil.copytree(fetch(name), root)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def definitions(root: Path, lang: str, suffix: str) -> list[tuple[str, str, int]]:
    """(name, path as search reports it, line) of the names the language's expressions find
    defined exactly once in the project `root`."""
    pats = [re.compile(p) for p in DEFINED[lang]]
    seen: dict[str, list[tuple[str, int]]] = {}
    for path in sorted(root.rglob(f"*{suffix}")):
        if ".git" in path.parts or ".hydra-index" in path.parts:
            continue
        rel = path.relative_to(root).as_posix()
        quoted = False  # inside a Python triple-quoted string (a docstring's example code)
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if lang == "python" and (line.count('"""') + line.count("'''")) % 2:
                quoted = not quoted
                continue
            if quoted:
                continue
            for p in pats:
                m = p.match(line)
                if m and len(m[1]) > 2 and not m[1].startswith("test"):
                    seen.setdefault(m[1], []).append((rel, n))
                    break
    return [(name, *places[0]) for name, places in sorted(seen.items()) if len(places) == 1]


def grep_first(root: Path, name: str, suffix: str) -> tuple[str, int] | None:
    proc = subprocess.run(["grep", "-rnw", "--include", f"*{suffix}", name, "."], cwd=root,
                          capture_output=True, text=True)
    lines = sorted(proc.stdout.splitlines(), key=lambda ln: (ln.split(":", 2)[0],
                                                             int(ln.split(":", 2)[1])))
    if not lines:
        return None
    path, n, _ = lines[0].split(":", 2)
    return path.removeprefix("./"), int(n)


def run(tree: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hydra_rag", *args], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(tree), **(env or {})},
                          cwd=tree)


def index(tree: Path, root: Path) -> dict[str, float]:
    t0 = time.perf_counter()
    proc = run(tree, "index", str(root), "--json")
    if proc.returncode:
        sys.exit(f"index {root} failed:\n{proc.stderr[-2000:]}")
    took = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in (root / ".hydra-index").rglob("*") if p.is_file())
    db = sum(p.stat().st_size for p in (root / ".hydra-index").rglob("files.db"))
    return {"seconds": took, "mb": size / 2**20, "files_db_mb": db / 2**20}


def search(tree: Path, root: Path, queries: list[str], env: dict[str, str] | None = None
           ) -> list[list[dict]]:  # type: ignore[type-arg]
    qfile = WORK / "queries.jsonl"
    qfile.write_text("".join(json.dumps({"_id": str(i), "text": q}) + "\n"
                             for i, q in enumerate(queries)))
    proc = run(tree, "search", "--queries", str(qfile), "--path", str(root), "-k", "3",
               env=env)
    if proc.returncode:
        sys.exit(f"search failed:\n{proc.stderr[-2000:]}")
    return [json.loads(ln)["results"] for ln in proc.stdout.splitlines() if ln.strip()]


def hit_rank(results: list[dict], path: str, line: int) -> int | None:  # type: ignore[type-arg]
    for i, r in enumerate(results, 1):
        if r["path"] == path and r["line_start"] <= line <= r["line_end"]:
            return i
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--names", type=int, default=80, help="names per project at most")
    ap.add_argument("--projects", default=",".join(PROJECTS))
    ap.add_argument("--before", metavar="REV", help="also measure the code of this revision")
    args = ap.parse_args()
    os.environ.setdefault("HYDRA_RAG_HOME", str(HERE / ".work" / "home"))
    names = args.projects.split(",")
    subprocess.run([sys.executable, "-m", "hydra_rag", "rag", "setup"], check=True,
                   capture_output=True)
    trees = {"now": REPO}
    if args.before:
        tree = WORK / f"tree-{args.before}"
        if not tree.exists():
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach",
                            str(tree), args.before], check=True)
        trees[f"before ({args.before})"] = tree
    # The cases: each project's names, searched in each form.
    cases: list[tuple[str, str, str, str, int]] = []  # project, form, query, path, line
    for name in names:
        _, lang, suffix = PROJECTS[name]
        found = definitions(project(name, "now"), lang, suffix)
        random.Random(7).shuffle(found)
        for sym, path, line in found[: args.names]:
            for form, text in FORMS.items():
                cases.append((name, form, text.format(sym), path, line))
    print(f"projects: {', '.join(names)} · {len(cases) // len(FORMS)} names · top 3 · "
          "each project indexed on its own")
    print("\n## grep -rnw NAME, lines sorted by path: the first line is the definition")
    for name in names:
        _, lang, suffix = PROJECTS[name]
        mine = [(c[2], c[3], c[4]) for c in cases if c[0] == name and c[1] == "bare"]
        ok = sum(grep_first(project(name, "now"), q, suffix) == (p, n) for q, p, n in mine)
        print(f"{name:9} {ok / len(mine):.2f}")
    table: dict[str, dict[tuple[str, str], list[int | None]]] = {}
    for label, tree in trees.items():
        tag = "now" if tree == REPO else "before"
        total = {"seconds": 0.0, "mb": 0.0, "files_db_mb": 0.0}
        for name in names:
            stats = index(tree, project(name, tag))
            total = {k: total[k] + stats[k] for k in total}
        print(f"\n{label}: indexed in {total['seconds']:.0f} s, indexes {total['mb']:.1f} MB "
              f"(files.db {total['files_db_mb']:.2f} MB)")
        variants = {label: None}
        if tree == REPO:
            variants[f"{label}, definitions off"] = {"HYDRA_RAG_DEFINITIONS": "false"}
        for vlabel, env in variants.items():
            table[vlabel] = {}
            for name in names:
                mine = [c for c in cases if c[0] == name]
                results = search(tree, project(name, tag), [c[2] for c in mine], env)
                for c, res in zip(mine, results, strict=True):
                    table[vlabel].setdefault((c[0], c[1]), []).append(hit_rank(res, c[3], c[4]))
    print("\n## Hit@1 / Hit@3 (the definition's chunk first / in the top 3)")
    print("| project | form | " + " | ".join(table) + " |")
    print("|---|---|" + "---|" * len(table))
    for name in names:
        for form in FORMS:
            cells = []
            for vlabel in table:
                ranks = table[vlabel][(name, form)]
                h1 = sum(r == 1 for r in ranks) / len(ranks)
                h3 = sum(r is not None and r <= 3 for r in ranks) / len(ranks)
                cells.append(f"{h1:.2f} / {h3:.2f}")
            print(f"| {name} | {form} | " + " | ".join(cells) + " |")
    print("\nmisses of the first variant (query → top path:lines):")
    first = next(iter(table))
    misses = 0
    for (name, form), ranks in table[first].items():
        for (c, r) in zip([c for c in cases if (c[0], c[1]) == (name, form)], ranks, strict=True):
            if r != 1 and misses < 25:
                misses += 1
                print(f"  {c[2]!r} → wanted {c[3]}:{c[4]} (rank {r})")


if __name__ == "__main__":
    main()
