"""The ``hwnas`` console script and ``python -m hwnas``: :func:`hwnas.cli.main`, with a Ctrl-C
that falls while the command line interface is still being imported (its first fraction of a
second) ending as any other Ctrl-C does, in one line with exit status 130, instead of a
KeyboardInterrupt traceback."""

from __future__ import annotations

import sys


def main() -> int:
    """Run the CLI; the exit status (130 after an early Ctrl-C)."""
    try:
        from hwnas.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted before the command started: nothing was done\n")
        return 130
    return cli_main()
