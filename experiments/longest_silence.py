"""Longest silence of each README command: how long a user waits without a new line.

Runs each command as a user would pipe it (``cmd 2>&1 | cat``: stdout and stderr together,
not a terminal), timestamps every line as it arrives, and prints per command the wall time,
the number of lines and the longest gap between two lines (start to first line and last line
to exit included), with the line printed after that gap. Issue 23's goal: no step of the
README's commands is silent for more than 10 s.

    python experiments/longest_silence.py                 # README's main job and tour
    python experiments/longest_silence.py --home /tmp/h   # in a given (fresh) HWNAS_HOME

Each command runs in a fresh ``HWNAS_HOME`` (a temporary folder unless ``--home``) and a
temporary working folder, so ``runs/`` of the tour do not land in the checkout.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: README.md's "Get going" main job, then its 30-second tour, in order (the tour's dashboard
#: command serves until stopped and is left out; `zoo verify` takes the first search's zoo).
COMMANDS = [
    "hwnas search --device pixel3",
    "hwnas devices",
    "hwnas spaces",
    "hwnas search --device pixel3 --max-latency 8",
    "hwnas search --device pi5_onnx --objective energy",
    "hwnas search --device cpu --budget 40",
    "hwnas runs show latest",
    "hwnas zoo verify latest",
]


def timed_lines(
    command: str, env: dict[str, str], cwd: Path
) -> tuple[float, list[tuple[float, str]], int]:
    """Run ``command`` with stdout+stderr on one pipe; return (wall s, [(t s, line)], exit code)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        shlex.split(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd
    )
    lines: list[tuple[float, str]] = []
    assert proc.stdout is not None
    for raw in proc.stdout:
        lines.append((time.monotonic() - start, raw.decode("utf-8", "replace").rstrip()))
    code = proc.wait()
    return time.monotonic() - start, lines, code


def longest_gap(wall: float, lines: list[tuple[float, str]]) -> tuple[float, str]:
    """The longest silence (s) and the line that ended it (``<exit>`` for the end)."""
    marks = [(0.0, "<start>")] + lines + [(wall, "<exit>")]
    best = (0.0, "")
    for (t0, _), (t1, text) in zip(marks, marks[1:]):
        if t1 - t0 > best[0]:
            best = (t1 - t0, text)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, help="HWNAS_HOME to use (default: a fresh one)")
    parser.add_argument("commands", nargs="*", help="commands to time (default: README's)")
    args = parser.parse_args(argv)
    commands = args.commands or COMMANDS
    with tempfile.TemporaryDirectory(prefix="hwnas-silence-") as tmp:
        home = args.home or Path(tmp) / "home"
        env = {**os.environ, "HWNAS_HOME": str(home)}
        env.pop("COLUMNS", None)
        print(f"load average {os.getloadavg()[0]:.1f}; HWNAS_HOME {home}")
        print("| command | exit | wall s | lines | longest silence s | line after it |")
        print("|---|---|---|---|---|---|")
        for command in commands:
            wall, lines, code = timed_lines(command, env, Path(tmp))
            gap, after = longest_gap(wall, lines)
            row = [f"`{command}`", code, f"{wall:.1f}", len(lines), f"{gap:.1f}", after[:60]]
            print("| " + " | ".join(str(c) for c in row) + " |")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
