"""Everyday use: why a hit matched, reading around it, weak hits, the default model, a bundle's
own history, cheap checks first, one name per folder — through the real command, index and
sidecars."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import run_cli, write_tree
from hydra_rag.paths import store_names
from hydra_rag.search.evidence import coverage, grep_lines, matching_lines, query_terms, weak
from hydra_rag.search.excerpt import parse_spec

FAST = ["--max-tokens", "24", "--top-k", "3", "--temperature", "0"]

# A long module: the line about retries stands in the middle of a 30-line chunk.
_FILLER = "".join(f"    step_{i} = prepare(step_{i - 1})  # plumbing\n" for i in range(1, 14))
LONG = ('"""Network client."""\n\n\ndef fetch(url):\n' + _FILLER
        + "    # Retry with exponential backoff when the server answers 503.\n"
        + _FILLER + "    return step_13\n")


@pytest.fixture
def folder(home: Path, corpus: Path) -> Path:
    write_tree(corpus, {
        "src/client.py": LONG,
        "docs/guide.md": ("# Guide\n\n## Install\n\nRun the installer.\n\n### Linux\n\n"
                          "Use the package manager to install it on Linux.\n"),
        ".env": "SECRET_TOKEN=abc123\n",
        "notes/ignored.txt": "ignored notes\n",
        ".gitignore": "notes/\n",
    })
    proc = run_cli("index", str(corpus))
    assert proc.returncode == 0, proc.stderr
    return corpus


# -- pure functions ---------------------------------------------------------------------------


def test_matching_lines_pick_the_lines_with_the_words() -> None:
    got = matching_lines(LONG, 1, "retry backoff on 503")
    assert [line.number for line in got] == [LONG.splitlines().index(
        "    # Retry with exponential backoff when the server answers 503.") + 1]
    text = got[0].text
    assert {text[a:b].lower() for a, b in got[0].spans} == {"retry", "backoff", "503"}
    # camelCase and snake_case parts match the query's words
    got = matching_lines("x = 1\ndef getUserName():\n    pass\n", 10, "user name")
    assert [line.number for line in got] == [11]
    # found by meaning alone: the first lines, nothing highlighted
    got = matching_lines("alpha\n\nbeta\ngamma\ndelta\n", 5, "zzz")
    assert [(line.number, line.spans) for line in got] == [(5, ()), (7, ()), (8, ())]
    # a very long line is cut around its match
    line = "x" * 500 + " needle " + "y" * 500
    got = matching_lines(line, 1, "needle")[0]
    assert len(got.text) <= 162 and "needle" in got.text
    a, b = got.spans[0]
    assert got.text[a:b] == "needle"


CLIP = ("def clip_around(text, at, width):\n"  # 1
        "    return text[at:width]\n"
        "def _clip(line):\n"  # 3: one of the words only
        "    cut = clip_around(line, 0, LINE_CHARS)\n"  # 4
        "LINE_CHARS = 160  # around its first match\n"  # 5: the other word only
        "# Clip the text around a position.\n")  # 6: both words, apart


@pytest.mark.parametrize(("query", "lines"), [
    ("clip_around", [(1, 4), (4, 10)]),  # the name: where it is written
    ("clip around", [(1, 4), (4, 10), (6, 2)]),  # words: lines holding every one of them
    ("CLIP_AROUND", [(1, 4), (4, 10)]),  # case aside, as rg -i
    ("the width", [(1, 26), (2, 19)]),  # a stopword is no word to hold
    ("how does the chunker split lines", []),  # meaning alone: no line matches
])
def test_grep_lines_are_the_lines_that_match(query: str, lines: list[tuple[int, int]]) -> None:
    got = grep_lines(CLIP, 1, query)
    assert [(line.number, line.spans[0][0]) for line in got] == lines
    assert all(line.text == CLIP.splitlines()[line.number - 1] for line in got)  # whole


def test_weighed_line_scores_are_the_same_in_every_process() -> None:
    # A line's weighed words are summed from a set, whose order changes with the process's
    # string hashing: a plain float sum then differed in its last bit (0.1 + 0.2 + 0.3), and
    # a window chosen on a tie moved from one run to the next.
    code = ("from hydra_rag.search.evidence import line_scores\n"
            "w = {'alpha': 0.1, 'beta': 0.2, 'gamma': 0.3, 'delta': 0.7}\n"
            "print(repr(line_scores('delta gamma beta alpha', 'alpha beta gamma delta', w)[0]))")
    got = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
           for seed in range(8)}
    assert got == {"[1.3]\n"}, got


def test_coverage_and_weak() -> None:
    assert query_terms("What is the capital of Mongolia?") == ["capit", "mongoli"]  # stems
    assert coverage("Ulaanbaatar is the capital of Mongolia.", "capital of Mongolia") == 1.0
    assert coverage("the capital was raised", "capital of Mongolia") == 0.5

    def hit(ranks: dict[str, int], similarity: float | None, text: str = "") -> SimpleNamespace:
        return SimpleNamespace(ranks=ranks, similarity=similarity, text=text,
                               min_similarity=0.35)  # MiniLM's, from the catalog

    q = "what is the capital of Mongolia?"
    # the click logo's path data came back with cosine 0.227 and nothing else
    assert weak(hit({"vector:minilm-l6": 1}, 0.227), q)
    assert not weak(hit({"vector:minilm-l6": 1}, 0.52), q)
    assert weak(hit({"bm25": 3}, None, "the capital was raised"), q)  # one word of two
    assert not weak(hit({"bm25": 3}, None, "capital of Mongolia"), q)
    assert not weak(hit({"literal": 1}, 0.05), q)
    assert not weak(hit({"term:get_user": 1}, None), "where is get_user")
    # `search Console.print` showed the method's own definition as "weak: not about this"
    assert not weak(hit({"definition": 1}, None), "Console.print")
    # the definition of a name inside a question ("what does the Segment class represent")
    assert not weak(hit({"name": 1}, None), "what does the Segment class represent")


def test_weak_edge_cases() -> None:
    def hit(text: str) -> SimpleNamespace:
        return SimpleNamespace(ranks={"bm25": 1}, similarity=0.1, text=text,
                               min_similarity=0.35)

    # two of three words is two thirds: enough
    assert not weak(hit("It controls retries."), "controls retries banana")
    # inflections meet as the full-text index's stemmer has them
    assert not weak(hit("## Configure\nIt controls retries."), "configured retry")
    assert coverage("Hauptstädte der Welt", "Hauptstadt") == 1.0
    # lines as the chunker counts them: a form feed ends one
    got = matching_lines("first\fsecond\nthird\nfourth line\n", 1, "fourth line")
    assert [line.number for line in got] == [4]
    # a case change that alters a string's length does not shift the highlight
    got = matching_lines("İstanbul x_needle_y", 1, '"needle"')[0]
    a, b = got.spans[0]
    assert got.text[a:b].lower() == "needle"


def test_parse_spec_and_store_names(tmp_path: Path) -> None:
    assert parse_spec("src/app.py") == ("src/app.py", None, None)
    assert parse_spec("src/app.py:12") == ("src/app.py", 12, None)
    assert parse_spec("src/app.py:12-30") == ("src/app.py", 12, 30)
    odd = tmp_path / "a:1"
    odd.write_text("x\n")
    assert parse_spec(str(odd)) == (str(odd), None, None)  # a real file name with a colon
    assert store_names(["/w/a/docs", "/w/b/docs", "/w/c/notes"]) == {
        "/w/a/docs": "a/docs", "/w/b/docs": "b/docs", "/w/c/notes": "notes"}


# -- through the command --------------------------------------------------------------------


def test_search_shows_the_matching_lines(folder: Path) -> None:
    proc = run_cli("search", "retry with exponential backoff", "--path", str(folder), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    top = out["results"][0]
    assert top["path"] == "src/client.py"
    wanted = LONG.splitlines().index(
        "    # Retry with exponential backoff when the server answers 503.") + 1
    assert top["line_start"] < wanted <= top["line_end"]
    assert top["matches"][0] == wanted and top["weak"] is False
    assert top["store_name"] == folder.name and out["warnings"] == []
    proc = run_cli("search", "retry with exponential backoff", "--path", str(folder), "-k", "1")
    assert f"{wanted}│" in proc.stdout and "Retry with exponential backoff" in proc.stdout
    assert "step_1 = prepare" not in proc.stdout  # not the chunk's first lines


def test_search_marks_weak_hits(folder: Path) -> None:
    proc = run_cli("search", "what is the capital of Mongolia?", "--path", str(folder), "--json")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert results and all(r["weak"] for r in results)
    proc = run_cli("search", "what is the capital of Mongolia?", "--path", str(folder), "-k", "2")
    assert proc.stdout.count("weak: not about this") == 2


def test_get_reads_around_a_hit(folder: Path) -> None:
    proc = run_cli("get", "docs/guide.md:9-9", "--json", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["lines"] == ["Use the package manager to install it on Linux."]
    assert got["section"] == "Guide › Install › Linux" and got["changed"] is False
    proc = run_cli("get", str(folder / "src/client.py") + ":4")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    total = len(LONG.splitlines())  # 32: fewer than the 40 lines START alone asks for
    assert len(lines) == total - 3 and lines[0].split(maxsplit=1) == ["4", "def fetch(url):"]
    assert f"src/client.py:4-{total} of {total}" in proc.stderr
    proc = run_cli("get", "src/client.py:2-5", cwd=folder)
    assert [x.split(maxsplit=1)[0] for x in proc.stdout.splitlines()] == ["2", "3", "4", "5"]
    # what the walker leaves out, the index's own files, other folders: refused
    for spec, why, rc in ((".env", "not in the index", 1),
                          ("notes/ignored.txt", "not in the index", 1),
                          (".hydra-index/files.db", "not in the index", 1),
                          ("/etc/hostname", "not in an indexed folder", 1),
                          ("docs/guide.md:99", "past its end", 1),
                          ("docs/guide.md:5-2", "ends before", 2),  # a usage error
                          ("nothere.md", "no such file", 1)):
        proc = run_cli("get", spec, cwd=folder)
        assert proc.returncode == rc and why in proc.stderr, (spec, proc.stderr)
        assert "SECRET_TOKEN" not in proc.stdout + proc.stderr
    # a link out of the folder is read as what it points to: refused
    os.symlink("/etc/hostname", folder / "docs" / "host.md")
    proc = run_cli("get", "docs/host.md", cwd=folder)
    assert proc.returncode == 1 and "not in an indexed folder" in proc.stderr
    # a file edited since indexing still reads, with a warning
    (folder / "docs/guide.md").write_text("# Guide\n\nchanged\n")
    proc = run_cli("get", "docs/guide.md", cwd=folder)
    assert proc.returncode == 0 and "changed since it was indexed" in proc.stderr


def test_ask_without_a_model_uses_the_default(folder: Path) -> None:
    proc = run_cli("ask", "How often should tomatoes be watered?", "--rag", str(folder),
                   "--json", *FAST)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["sources"][0]["path"] == "docs/gardening.md"
    assert out["sources"][0]["store_name"] == folder.name
    proc = run_cli("ask", "How often?", "--rag", str(folder), *FAST,
                   env={"HYDRA_RAG_DEFAULT_MODEL": "no-such-model"})
    assert proc.returncode == 1 and "no-such-model" in proc.stderr


def test_ask_reads_the_question_from_standard_input(folder: Path) -> None:
    question = "How often should tomatoes be watered?"
    for model in ([], ["-"], ["smollm2-135m", "-"]):  # none given, or `-` in its place
        proc = run_cli("ask", *model, "--rag", str(folder), "--json", *FAST,
                       input=question + "\n")
        assert proc.returncode == 0, (model, proc.stderr)
        out = json.loads(proc.stdout)
        assert out["retrieval"]["query"] == question, (model, out["retrieval"])
        assert out["sources"][0]["path"] == "docs/gardening.md"
    proc = run_cli("ask", "--rag", str(folder), input="  \n")
    assert proc.returncode == 2 and proc.stderr == "error: the question is empty\n"


def test_empty_question_fails_before_any_model_starts(isolated_home: Path, corpus: Path) -> None:
    proc = run_cli("ask", "   ", "--rag", str(corpus))
    assert proc.returncode == 2 and "the question is empty" in proc.stderr
    proc = run_cli("sidecars", "list", "--json")
    assert json.loads(proc.stdout) == []


def test_blank_piped_lines_are_said_once(folder: Path) -> None:
    proc = run_cli("chat", "--rag", str(folder), "--new", "--session", "t-blank", *FAST,
                   input="\n\n   \n/sources\n\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("blank lines are skipped") == 1


def test_a_bundles_history_is_its_own(isolated_home: Path, corpus: Path, tmp_path: Path) -> None:
    assert run_cli("index", str(corpus)).returncode == 0
    persona = tmp_path / "gardener.md"
    persona.write_text("You answer questions about gardening.\n")
    proc = run_cli("create", "smollm2-135m", str(persona), "garden", "--rag-index", str(corpus))
    assert proc.returncode == 0, proc.stderr
    for model in ("garden", "smollm2-135m"):
        proc = run_cli("chat", model, "--rag", str(corpus), *FAST,
                       input="How often should tomatoes be watered?\n")
        assert proc.returncode == 0, proc.stderr
    sessions = {s["name"]: s for s in json.loads(run_cli("sessions", "list", "--json").stdout)}
    assert len(sessions) == 2, sessions
    mine = [name for name in sessions if "garden" in name]
    assert len(mine) == 1 and sessions[mine[0]]["turns"] == 1


def test_one_red_line_for_a_garbled_file(isolated_home: Path, corpus: Path) -> None:
    assert run_cli("index", str(corpus)).returncode == 0
    (corpus / ".hydra-index" / "meta.yaml").write_text("tables: {code: [\n  bad: : :\n")
    proc = run_cli("search", "tomatoes", "--path", str(corpus))
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "line 2" in proc.stderr and f"hydra-rag index {corpus} --full" in proc.stderr
    proc = run_cli("stores", "list")
    assert proc.returncode == 0 and len(proc.stdout.strip().splitlines()) == 1
    assert proc.stdout.rstrip().endswith("--full`")  # the problem last: columns stay put
    assert run_cli("index", str(corpus), "--full").returncode == 0
    assert run_cli("search", "tomatoes", "--path", str(corpus)).returncode == 0
    config = isolated_home / "config" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("fusion: [score\n")
    proc = run_cli("search", "tomatoes", "--path", str(corpus))
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert str(config) in proc.stderr


@pytest.mark.parametrize("command", [[], ["index"], ["search"], ["ask"], ["chat"], ["get"],
                                     ["stores", "tag"], ["models", "add"]])
def test_help_shows_what_a_user_types(command: list[str]) -> None:
    proc = run_cli(*command, "--help", env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    usage = next(line for line in proc.stdout.splitlines() if "Usage:" in line)
    assert "{" not in usage, usage
    for raw in ("<bool>", "<list[", "<path>", "<int>", "<str>", "<float>"):
        assert raw not in proc.stdout, (raw, command)


def test_help_details_and_completion(tmp_path: Path) -> None:
    out = run_cli("index", "--help", env={"COLUMNS": "200"}).stdout
    assert "--include" in out and "GLOB" in out and "SECONDS" in out
    assert "cite [n] sources" in run_cli("--help", env={"COLUMNS": "200"}).stdout
    assert "QUESTION" in run_cli("ask", "--help", env={"COLUMNS": "200"}).stdout
    # completion: `hydra-rag --show-completion`, typed at a bash prompt, prints the script
    # that --install-completion installs (for the shell it runs under: bash here, whatever
    # started the tests), and completing `hydra-rag ind` offers `index`
    hydra = Path(sys.executable).parent / "hydra-rag"  # the installed command
    proc = subprocess.run(["bash", "-c", f"{shlex.quote(str(hydra))} --show-completion; exit $?"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "complete -o default -F _hydra_rag_completion hydra-rag" \
        in proc.stdout, proc
    got = subprocess.run([str(hydra)], capture_output=True, text=True, env={
        **os.environ, "_HYDRA_RAG_COMPLETE": "complete_bash", "COMP_WORDS": "hydra-rag ind",
        "COMP_CWORD": "1"})
    assert got.stdout.split() == ["index"], got


def test_one_name_per_folder_everywhere(home: Path, tmp_path: Path) -> None:
    a = write_tree(tmp_path / "a" / "docs", {"tomatoes.md": (
        "# Tomatoes\n\nWater tomatoes deeply twice a week in summer.\n")})
    b = write_tree(tmp_path / "b" / "docs", {"roses.md": (
        "# Roses\n\nPrune roses in early spring, above an outward-facing bud.\n")})
    for folder in (a, b):
        assert run_cli("index", str(folder)).returncode == 0
    proc = run_cli("search", "when to water tomatoes and prune roses", "--path", str(a),
                   "--path", str(b), "--json")
    names = {r["store"]: r["store_name"] for r in json.loads(proc.stdout)["results"]}
    assert names == {str(a): "a/docs", str(b): "b/docs"}
    proc = run_cli("search", "when to water tomatoes", "--path", str(a), "--path", str(b),
                   "-k", "1")
    assert "a/docs:tomatoes.md:1-3" in proc.stdout
    proc = run_cli("ask", "When should tomatoes be watered?", "--rag", str(a), "--rag", str(b),
                   *FAST)
    assert proc.returncode == 0, proc.stderr
    assert "a/docs:tomatoes.md:1-3" in proc.stdout  # the sources, named as search names them


def test_get_follows_search_and_refuses_what_changed_into_a_secret(folder: Path) -> None:
    # from a subfolder, the path as search prints it (relative to the index root)
    proc = run_cli("get", "docs/guide.md:1-1", cwd=folder / "src")
    assert proc.returncode == 0 and proc.stdout.split() == ["1", "#", "Guide"], proc.stderr
    # with the folder's short name, as a search of several folders prints it
    proc = run_cli("get", f"{folder.name}:docs/guide.md:1-1", cwd=folder.parent)
    assert proc.returncode == 0, proc.stderr
    key = ("-----BEGIN OPENSSH PRIVATE KEY-----\n" + "b3BlbnNzaC1rZXktdjEAAAAA" * 8 + "\n"
           "-----END OPENSSH PRIVATE KEY-----\n")
    (folder / "docs" / "guide.md").write_text(key)
    proc = run_cli("get", "docs/guide.md", cwd=folder)
    assert proc.returncode == 1 and "no longer indexable" in proc.stderr
    assert "b3BlbnNz" not in proc.stdout + proc.stderr


def test_names_typos_and_usage(isolated_home: Path, tmp_path: Path) -> None:
    spaced = write_tree(tmp_path / "My Notes", {"a.md": "# Tomatoes\n\nWater them.\n"})
    assert run_cli("index", str(spaced)).returncode == 0
    proc = run_cli("chat", "--rag", str(spaced), *FAST, input="How are tomatoes watered?\n")
    assert proc.returncode == 0, proc.stderr  # a folder name with a space names a session
    persona = tmp_path / "p.md"
    persona.write_text("Be brief.\n")
    proc = run_cli("create", "smollm2-135m", str(persona), "my helper")
    assert proc.returncode == 2 and "no spaces" in proc.stderr
    assert run_cli("create", "smollm2-135m", str(persona), "helper").returncode == 0
    proc = run_cli("ask", "q?", "--rag", "helper", cwd=spaced)  # an alias given as a folder
    assert proc.returncode == 2 and "that is a bundle" in proc.stderr
    proc = run_cli("search", "x", "--path", str(spaced / "nothere"))
    assert proc.returncode == 1 and "no such file or folder" in proc.stderr
    proc = run_cli("search", "x", "--path", str(spaced), "--all")
    assert proc.returncode == 2 and "--path excludes --all" in proc.stderr
    proc = run_cli("ask", "hello", "world", "--no-rag")
    assert proc.returncode == 1 and 'hydra-rag ask "hello world"' in proc.stderr
    bad = tmp_path / "bad.md"
    bad.write_text("---\ntemperature: 0.2\ntop_p: : 3\n---\nBe brief.\n")
    proc = run_cli("create", "smollm2-135m", str(bad), "bad")
    assert proc.returncode == 1 and "line 3" in proc.stderr, proc.stderr


def test_stems_are_right_from_many_threads() -> None:
    # A server searches from several threads; Snowball's stemmer keeps its word in itself.
    import threading

    from hydra_rag.search.evidence import _stem

    words = [f"tomat{i}oes" for i in range(3000)]
    wrong: list[str] = []

    def run(offset: int) -> None:
        try:
            for w in words[offset:] + words[:offset]:
                if _stem.__wrapped__(w) != _stem.__wrapped__(w):  # type: ignore[attr-defined]
                    wrong.append(w)
        except Exception as exc:  # noqa: BLE001 (what the shared stemmer raised)
            wrong.append(repr(exc))

    threads = [threading.Thread(target=run, args=(i * 150,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_term_weights_favour_the_words_that_tell_lines_apart() -> None:
    from hydra_rag.search.evidence import line_scores, term_weights

    text = "\n".join([f"spdlog line {i} about the spdlog logger" for i in range(20)]
                     + ["constexpr size_t default_async_q_size = 8192;  // queue of spdlog"])
    q = "How many messages can the spdlog async queue hold?"
    w = term_weights([text], q)
    assert w["spdlog"] == 0.25 and w["queue"] > 0.7  # on every line / on one
    plain, _ = line_scores(text, q)
    weighed, _ = line_scores(text, q, w)
    assert plain[-1] == 3 and plain[0] == 1  # spdlog, async, queue / spdlog
    assert weighed[-1] > 5 * weighed[0]  # against 3 times, unweighed
