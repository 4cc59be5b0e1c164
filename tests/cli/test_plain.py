"""A command line that behaves like one: text is text, a closed pipe is no error, and output
into a pipe is never cut to a terminal's width."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
