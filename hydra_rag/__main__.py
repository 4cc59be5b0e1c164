"""The `hydra-rag` command: a quick command (search, get, def, refs, outline) goes to the warm
process when one is running (hydra_rag.warm); every other command, and a quick one without
it, runs here (hydra_rag.cli). Nothing but the standard library is imported before that is
decided."""

from __future__ import annotations

import os
import sys


def main() -> None:
    from hydra_rag.warm import client

    argv = sys.argv[1:]
    environ = dict(os.environ)  # as the caller set it, for a warm process started below
    quick = client.wanted(argv)
    refused = ""
    if quick:
        try:
            rc, refused = client.forward(argv)
        except KeyboardInterrupt:
            os.write(2, b"interrupted\n")
            sys.exit(130)
        if rc is not None:
            sys.exit(rc)
    from hydra_rag.cli import run

    rc = run(argv)
    # After a quick command that ran here, and after an index (searches follow), a warm
    # process is started for the next ones.
    if (quick and refused != "environment") or (client.starts(argv) and rc == 0):
        client.start_quietly(environ)
    sys.exit(rc)


if __name__ == "__main__":
    main()
