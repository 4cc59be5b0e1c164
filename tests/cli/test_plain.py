"""A command line that behaves like one: text is text, a closed pipe is no error, and output
into a pipe is never cut to a terminal's width."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli, write_tree


def test_what_the_user_typed_is_never_markup_or_emoji(isolated_home: Path, tmp_path: Path) -> None:
    odd = tmp_path / "[red]nope:abc:"
    proc = run_cli("search", "x", "--path", str(odd))
    assert proc.returncode == 1
    assert f"{odd}: no such file or folder" in proc.stderr, proc.stderr
    proc = run_cli("get", "src/[bold]x[/bold].py:abc", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr == "error: src/[bold]x[/bold].py:abc: no such file\n", proc.stderr


def test_a_closed_pipe_ends_quietly(isolated_home: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written (`| head -0`)
    try:
        proc = subprocess.run([sys.executable, "-m", "hydra_rag", "embedders", "list"],
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_output_into_a_pipe_is_not_cut(home: Path, tmp_path: Path) -> None:
    line = ("raise InvalidSchema(f'No connection adapters were found for {url!r}; the scheme "
            "zqxjv_scheme is not registered with this session')")
    root = write_tree(tmp_path / "proj", {"adapters.py": f"def get_adapter(url):\n    {line}\n"})
    assert run_cli("index", str(root)).returncode == 0
    proc = run_cli("search", "zqxjv_scheme", "--path", str(root))
    assert proc.returncode == 0, proc.stderr
    assert line in proc.stdout, proc.stdout  # 130 characters, whole


def test_vimgrep_lines_and_links_on_a_terminal(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "proj", {
        "src/net.py": "import os\n\n\ndef mount(prefix):\n    raise KeyError('zqxjv adapter "
                      "missing for ' + prefix)\n",
    })
    assert run_cli("index", str(root)).returncode == 0
    proc = run_cli("search", "zqxjv adapter", "--vimgrep", "-k", "1", cwd=root / "src")
    assert proc.returncode == 0, proc.stderr
    # path from the working folder, line, byte column of the match, the whole line
    assert proc.stdout == ("net.py:5:21:    raise KeyError('zqxjv adapter missing for ' "
                           "+ prefix)\n"), proc.stdout
    assert "\x1b" not in run_cli("search", "zqxjv", "--path", str(root)).stdout  # a pipe

    def on_terminal(**env: str) -> str:
        import pty

        main, sub = pty.openpty()
        proc = subprocess.Popen([sys.executable, "-m", "hydra_rag", "search", "zqxjv", "-k",
                                 "1", "--path", str(root)], stdout=sub, stderr=subprocess.PIPE,
                                env={**os.environ, "TERM": "xterm-256color", **env})
        os.close(sub)
        chunks = []
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # the other end closed
                break
            if not data:
                break
            chunks.append(data)
        os.close(main)
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
        return b"".join(chunks).decode()

    shown = on_terminal()
    url = f"file://{__import__('socket').gethostname()}{(root / 'src' / 'net.py').resolve()}"
    assert "\x1b]8;id=" in shown and f";{url}\x1b\\" in shown, repr(shown)
    assert "\x1b]8;" not in on_terminal(HYDRA_RAG_HYPERLINKS="off")
    assert "\x1b]8;" not in on_terminal(TERM="linux")


def test_vimgrep_prints_one_line_per_matching_line(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "proj", {
        "text.py": ("def clip_around(text, at, width):\n    return text[at:width]\n\n\n"
                    "def _clip(line):\n    return clip_around(line, 0, LINE_CHARS)\n\n\n"
                    "LINE_CHARS = 160  # around its first match\n"),
        "show.py": "def show(line):\n    print(_clip(line))  # cut to the width\n",
        "notes.md": "# Clipping\n\nLong lines are cut around the first match.\n",
    })
    assert run_cli("index", str(root)).returncode == 0
    # Every file is a hit, but two lines hold the name: two lines, as `rg --vimgrep` prints.
    proc = run_cli("search", "clip_around", "--vimgrep", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ("text.py:1:5:def clip_around(text, at, width):\n"
                           "text.py:6:12:    return clip_around(line, 0, LINE_CHARS)\n"), \
        proc.stdout
    # Found by meaning alone (no line holds every word): each hit's best line, once.
    proc = run_cli("search", "shortening strings", "--vimgrep", "-k", "2", cwd=root)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(lines) == 2 and len(set(lines)) == 2, proc.stdout


# Every command that takes a folder, given one that is not there.
_NAMES_A_FOLDER = [("index", "{}"), ("status", "{}"), ("watch", "{}"), ("doctor", "{}"),
                   ("search", "x", "--path", "{}"), ("def", "x", "--path", "{}"),
                   ("refs", "x", "--path", "{}"), ("ask", "x", "--rag", "{}"),
                   ("serve", "--path", "{}"), ("outline", "{}/x.py")]


@pytest.mark.parametrize("args", _NAMES_A_FOLDER, ids=lambda a: a[0])
def test_a_missing_folder_is_the_same_mistake_in_every_command(
        isolated_home: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    missing = tmp_path / "nope"
    proc = run_cli(*(a.format(missing) for a in args), cwd=tmp_path, timeout=120)
    # Not a mistake of the command's syntax (2): one line, exit 1, naming the path.
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"error: {missing}") and ": no such f" in line, line


def test_serve_on_a_busy_port_is_one_line_before_any_banner(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "proj", {"a.md": "# Kites\n\nKites fly in wind.\n"})
    assert run_cli("index", str(root)).returncode == 0
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        proc = run_cli("serve", "--port", str(port), "--path", str(root), timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr == (f"error: port {port} on 127.0.0.1 is in use — give another --port, "
                           "or stop the process that holds it\n"), proc.stderr


def test_an_unknown_embedder_setting_fails_every_command_alike(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "proj", {"a.md": "# Kites\n\nKites fly in wind.\n"})
    assert run_cli("index", str(root)).returncode == 0
    for args in (("index", str(root)), ("status", str(root)), ("search", "kites", "--path", str(root))):
        proc = run_cli(*args, env={"HYDRA_RAG_EMBEDDER": "nope"})
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert proc.stdout == ""
        assert proc.stderr.startswith("error: unknown embedder 'nope'; known: ")
        assert proc.stderr.endswith(" — change HYDRA_RAG_EMBEDDER=nope\n"), proc.stderr
        assert len(proc.stderr.splitlines()) == 1


def test_path_to_a_file_or_subfolder_searches_only_it(home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "proj", {
        "docs/redirects.md": "# Redirects\n\nToo many redirects end the session.\n",
        "docs/old/redirects.md": "# Old redirects\n\nRedirects were followed forever.\n",
        "src/redirects.py": "def follow_redirects(resp):\n    return resp.next  # redirects\n",
        "notes.txt": "redirects, redirects, redirects\n",
    })
    (root / "blob.bin").write_bytes(b"\x00\x01redirects\x00" * 100)
    assert run_cli("index", str(root)).returncode == 0

    def found(*args: str) -> set[str]:
        proc = run_cli("search", "redirects", "--files", "--json", *args)
        assert proc.returncode == 0, proc.stderr
        return {r["path"] for r in json.loads(proc.stdout)["files"]}

    assert found("--path", str(root)) == {"docs/redirects.md", "docs/old/redirects.md",
                                          "src/redirects.py", "notes.txt"}
    assert found("--path", str(root / "docs" / "redirects.md")) == {"docs/redirects.md"}
    assert found("--path", str(root / "docs")) == {"docs/redirects.md", "docs/old/redirects.md"}
    assert found("--path", str(root / "docs" / "old"), "--path",
                 str(root / "src" / "redirects.py")) == {"docs/old/redirects.md",
                                                          "src/redirects.py"}
    # Not a file or folder of the index: said, not searched around.
    (root / "new.md").write_text("# New\n\nredirects\n")
    for bad, why in ((root / "new.md", "not in the index of"), (root / "blob.bin", "not in the index of"),
                     (root / "docs" / "nope.md", "no such file or folder")):
        proc = run_cli("search", "redirects", "--path", str(bad))
        assert proc.returncode == 1 and proc.stdout == "", proc.stdout
        [line] = proc.stderr.splitlines()
        assert line.startswith("error: ") and why in line, line


def test_nothing_relevant_names_the_switch_of_the_front_end_in_use(home: Path,
                                                                     tmp_path: Path) -> None:
    root = write_tree(tmp_path / "proj", {"a.md": "# Kites\n\nKites fly in steady wind.\n"})
    assert run_cli("index", str(root)).returncode == 0
    question = "What is the boiling point of mercury in kelvin?"
    proc = run_cli("ask", question, "--rag", str(root))
    assert proc.returncode == 0, proc.stderr
    assert "has nothing on this question" in proc.stdout, proc.stdout
    assert "ask again with --no-rag" in proc.stdout and "/rag off" not in proc.stdout
    # The REPL has its own switch.
    proc = run_cli("chat", "--rag", str(root), input=question + "\n")
    assert proc.returncode == 0, proc.stderr
    assert "turn retrieval off with /rag off" in proc.stdout and "--no-rag" not in proc.stdout
