"""A searcher interrupted at any moment of a search (Ctrl-C in the chat REPL, which goes on
after one) stays usable: the next search answers, and nothing calls back into a stopped loop."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import run_cli


def test_a_searcher_interrupted_mid_search_answers_the_next(home: Path, corpus: Path) -> None:
    proc = run_cli("index", str(corpus))
    assert proc.returncode == 0, proc.stderr
    code = (
        "import random, signal, time\n"
        "from hydra_rag.config import load_settings\n"
        "from hydra_rag.search.retrieve import Searcher\n"
        f"s = Searcher([__import__('pathlib').Path({str(corpus)!r})], load_settings())\n"
        "def top(q): return s.search(q, k=1)[0].path\n"
        "def on(*_): raise KeyboardInterrupt\n"
        "signal.signal(signal.SIGALRM, on)\n"
        "random.seed(5); assert top('invalid api key') == 'src/auth.py'\n"
        # Interrupts from the start of a search to past its end, as long as a search takes on
        # this machine (a slow or busy one takes longer than a fixed 20 ms: none would finish)
        "took = []\n"
        "for _ in range(5):\n"
        "    t0 = time.perf_counter(); top('monthly invoice total')\n"
        "    took.append(time.perf_counter() - t0)\n"
        "longest = 2 * sorted(took)[2]\n"
        "stopped = right = 0\n"
        "for i in range(150):\n"
        "    try:\n"
        "        signal.setitimer(signal.ITIMER_REAL, random.uniform(0.0005, longest))\n"
        "        try:\n"
        "            right += top('monthly invoice total') == 'src/billing.py'\n"
        "        finally:\n"
        "            signal.setitimer(signal.ITIMER_REAL, 0)\n"
        "    except KeyboardInterrupt:\n"
        "        stopped += 1\n"
        "print('AFTER', top('invalid api key'), top('tomatoes need sun'), stopped > 0, right > 0)\n"
        "s.close()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["AFTER", "src/auth.py", "docs/gardening.md", "True", "True"], \
        out.stdout
    assert "Traceback" not in out.stderr and "Event loop" not in out.stderr, out.stderr[-2000:]
