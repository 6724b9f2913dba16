"""Shared by the security tests: files an attacker would hand a user, and a CLI run that
cannot take the machine down when the defence is missing (bounded memory and time)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path


class CodeRunner:
    """An object whose unpickling creates ``marker``: proof that a file ran code. Pickled
    by reference to ``eval``, so it unpickles anywhere (it needs no test module)."""

    def __init__(self, marker: Path, value: str = "{}"):
        self.marker, self.value = marker, value

    def __reduce__(self):
        code = f"__import__('pathlib').Path({str(self.marker)!r}).touch() or {self.value}"
        return (eval, (code,))


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """YAML lines defining ``l<levels-1>``, an alias that expands to ``width ** levels``
    strings (9 ** 9 = 387 million) from under 1 KB of text ("billion laughs")."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def _limits() -> None:  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def bounded_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``hwnas ARGS`` in a child limited to 3 GiB of address space; a child still running
    after ``timeout`` s (a hang) is killed and reported as exit status -9 with stderr
    'timed out'. The bounds only keep a missing defence from hurting the machine: a defended
    hwnas answers in about a second."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "hwnas", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        preexec_fn=_limits,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return subprocess.CompletedProcess(proc.args, -9, "", "timed out")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
